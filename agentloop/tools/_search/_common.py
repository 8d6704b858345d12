"""Shared by the search engines: limits, and the collector that formats matches."""

from __future__ import annotations

import logging
import re

import attrs

from .._listing import (
    display,
)

log = logging.getLogger("agentloop.tools")

#: Bytes the Python engine reads at a time (then up to the end of a line).
BLOCK_BYTES = 1024 * 1024
_BOM = b"\xef\xbb\xbf"
_READ_CHUNK = 64 * 1024
_DROPPED_LINE_LIMIT = 1024 * 1024  # longer rg messages of a skipped file are not kept
_STDERR_LIMIT = 16 * 1024
_REAP_SECONDS = 5.0
# Patterns whose matches may depend on what lies beyond the line: searched line by line.
_PER_LINE = re.compile(r"\(\?<?[=!]|\\[AZ]")
_META = re.compile(r"[.^$*+?{}\[\]\\|()]")


# --------------------------------------------------------------------------- output


@attrs.define
class _Collector:
    """Turns the lines an engine reports into the tool's output, and applies the cap.

    Engines report each match and context line in file order, as ``rg --json``
    does: each match with up to ``context`` lines before and after it (no line
    twice; a context line that matches is a match). With context, ``--``
    separates groups of lines of a file that are not adjacent. After the cap's last
    match, only its own context after it is kept; the match past the cap sets
    ``full``, and nothing after it is kept.
    """

    max_results: int
    context: int
    max_line_chars: int
    lines: list[str] = attrs.field(factory=list)
    matches: int = 0
    files: int = 0
    full: bool = False
    _shown: tuple[str, int] = ("", 0)  # the file and number of the last line shown
    _last_match: tuple[str, int] = ("", 0)

    def add(self, path: str, number: int, text: str, is_match: bool) -> None:
        if self.full:
            return
        if is_match:
            if self.matches >= self.max_results:
                self.full = True
                return
            self.matches += 1
            if path != self._last_match[0]:
                self.files += 1
            self._last_match = (path, number)
        elif self.matches >= self.max_results:
            file, line = self._last_match
            if path != file or number > line + self.context:
                return
        if self.context and path == self._shown[0] and number != self._shown[1] + 1:
            self.lines.append("--")
        self._shown = (path, number)
        if text.endswith("\n"):
            text = text[:-1]
        if text.endswith("\r"):
            text = text[:-1]
        if len(text) > self.max_line_chars:
            text = text[: self.max_line_chars] + "…"
        mark = ":" if is_match else "-"
        self.lines.append(f"{display(path)}{mark}{number}{mark}{text}")
