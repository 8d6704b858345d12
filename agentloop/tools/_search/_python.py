"""The pure-Python search engine: worker threads, re, the same output as ripgrep's."""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import attrs

from ..._tool import InvalidArgs
from .._ignore import BINARY_PROBE, IgnoreTree, walk_files
from .._listing import (
    slice_over,
)
from ._common import (
    _BOM,
    _META,
    _PER_LINE,
    BLOCK_BYTES,
    _Collector,
)

# --------------------------------------------------------------------------- python engine


@attrs.frozen
class _Matcher:
    """The Python engine's pattern: which lines of a block of text match."""

    regex: re.Pattern[str]
    per_line: bool  # the pattern may look beyond a line: try each line on its own
    ascii_literal: str | None  # lower-cased, for an ASCII literal searched ignoring case

    @classmethod
    def compile(cls, pattern: str, case_sensitive: bool) -> _Matcher:
        flags = re.MULTILINE | (0 if case_sensitive else re.IGNORECASE)
        try:
            regex = re.compile(pattern, flags)
        except (re.error, OverflowError, RecursionError) as error:
            raise InvalidArgs(f"invalid regex {pattern!r}: {error}") from None
        literal = None
        if not case_sensitive and pattern.isascii() and not _META.search(pattern):
            literal = pattern.lower()
        return cls(regex, _PER_LINE.search(pattern) is not None, literal)

    def lines(self, text: str) -> list[int]:
        """The 0-based numbers of the lines of ``text`` (split on ``\\n``) that match."""
        # re ignoring case cannot use its fast literal scan. On ASCII text, ignoring the
        # case of an ASCII literal is comparing lower-cased strings: rule blocks out first.
        if (
            self.ascii_literal is not None
            and text.isascii()
            and self.ascii_literal not in text.lower()
        ):
            return []
        return _matching_lines(text, self.regex, self.per_line)


def _matching_lines(text: str, regex: re.Pattern[str], per_line: bool) -> list[int]:
    """The 0-based numbers of the lines of ``text`` (split on ``\\n``) that ``regex`` matches."""
    if per_line:
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        return [index for index, line in enumerate(lines) if regex.search(line)]
    # Search the whole block (fast), then confirm each candidate on its own line:
    # a match of the whole text may span lines, a match within a line is always found.
    found: list[int] = []
    size = len(text)
    line_start = 0
    line_index = 0
    while line_start <= size:
        match = regex.search(text, line_start)
        if match is None:
            break
        at = match.start()
        before = text.rfind("\n", line_start, at)
        if before >= 0:
            line_index += text.count("\n", line_start, before + 1)
            line_start = before + 1
        if line_start == size and (size == 0 or text.endswith("\n")):
            break  # past the last line
        line_end = text.find("\n", at)
        if line_end < 0:
            line_end = size
        if regex.search(text, line_start, line_end):
            found.append(line_index)
        line_start = line_end + 1
        line_index += 1
    return found


def _blocks(file: Any) -> Iterator[bytes]:
    """The content of ``file`` in blocks of about :data:`BLOCK_BYTES`, each ending a line."""
    pending: list[bytes] = []
    while True:
        data = file.read(BLOCK_BYTES)
        if not data:
            if any(pending):
                yield b"".join(pending)
            return
        cut = data.rfind(b"\n")
        if cut < 0:
            pending.append(data)
            continue
        pending.append(data[: cut + 1])
        yield b"".join(pending)
        pending = [data[cut + 1 :]]


@attrs.define
class _FileLines:
    """Which lines of one file to report, block by block: matches and their context."""

    path: str
    context: int
    first: int = 1  # the number of the current block's first line
    tail: list[tuple[int, str]] = attrs.field(factory=list)  # lines before the block
    emitted: int = 0  # the last line reported
    after: int = 0  # lines up to this one are after-context

    def skip(self, text: str) -> None:
        """Pass over a block with no match, when no after-context reaches into it."""
        count = text.count("\n") + (0 if text.endswith("\n") else 1)
        if self.context:
            last = text.removesuffix("\n").rsplit("\n", self.context)[-self.context :]
            start = self.first + count - len(last)
            self.tail = (self.tail + [(start + i, line) for i, line in enumerate(last)])[
                -self.context :
            ]
        self.first += count

    def block(self, lines: list[str], found: list[int]) -> Iterator[tuple[str, int, str, bool]]:
        """The lines to report from a block, given the indexes of its matching lines."""
        first, earlier = self.first, dict(self.tail)

        def line(number: int) -> str:
            return lines[number - first] if number >= first else earlier[number]

        for index in found:
            number = first + index
            for n in range(self.emitted + 1, min(self.after, number - 1) + 1):
                yield (self.path, n, line(n), False)
                self.emitted = n
            for n in range(max(self.emitted + 1, number - self.context, 1), number):
                yield (self.path, n, line(n), False)
            yield (self.path, number, line(number), True)
            self.emitted = number
            self.after = number + self.context
        last = first + len(lines) - 1
        for n in range(self.emitted + 1, min(self.after, last) + 1):
            yield (self.path, n, line(n), False)
            self.emitted = n
        if self.context:
            self.tail = (self.tail + [(first + i, text) for i, text in enumerate(lines)])[
                -self.context :
            ]
        self.first = last + 1


def _search_file(
    root: Path, path: str, matcher: _Matcher, context: int
) -> Iterator[tuple[str, int, str, bool] | None]:
    """(path, line number, text, is match) for each line to show; None after each block."""
    try:
        file = open(root / path, "rb")  # noqa: SIM115 - held open across yields
    except OSError:
        return
    with file:
        try:
            if b"\0" in file.read(BINARY_PROBE):
                return
            file.seek(0)
            state = _FileLines(path, context)
            for index, data in enumerate(_blocks(file)):
                if index == 0 and data.startswith(_BOM):
                    data = data[len(_BOM) :]
                text = data.decode("utf-8", "replace")
                found = matcher.lines(text)
                if found or state.after >= state.first:
                    lines = text.split("\n")
                    if text.endswith("\n"):
                        lines.pop()
                    yield from state.block(lines, found)
                else:
                    state.skip(text)
                yield None
        except OSError:
            return


def _python_lines(
    tree: IgnoreTree,
    start: str,
    is_file: bool,
    matcher: _Matcher,
    context: int,
) -> Generator[tuple[str, int, str, bool] | None, None, None]:
    files: Iterator[str | None] = iter([start]) if is_file else walk_files(tree, start)
    for path in files:
        if path is None:
            yield None
        else:
            yield from _search_file(tree.root, path, matcher, context)


@attrs.define
class _PythonSearch:
    lines: Iterator[tuple[str, int, str, bool] | None]
    collector: _Collector

    def step(self, until: float) -> bool:
        for item in self.lines:
            if item is not None:
                self.collector.add(*item)
                if self.collector.full:
                    return True
            if slice_over(until):
                return False
        return True
