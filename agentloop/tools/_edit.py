"""edit_file: exact-text replacements in an existing file, written atomically."""

from __future__ import annotations

import difflib
import heapq
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from .._tool import InvalidArgs, ToolContext, ToolError, ToolResult
from ._files import (
    SNIFF_BYTES,
    MiB,
    atomic_write,
    line_endings,
    numbered,
    os_error,
    path_param,
    plural,
    resolve,
    split_lines,
    stat_file,
)
from ._workspace import PathTool, Workspace, as_workspace, path_lock

__all__ = ["EditFileTool"]

_TEXT = {"type": "string"}
_NONE: dict[str, Any] = {"not": {}}  # "this property must be absent"

_EDIT_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "old_text": {**_TEXT, "description": "The exact text to replace."},
        "new_text": {**_TEXT, "description": "The text to put in its place."},
        "replace_all": {
            "type": "boolean",
            "default": False,
            "description": "Replace every occurrence instead of requiring exactly one.",
        },
    },
    "required": ["old_text", "new_text"],
    "additionalProperties": False,
}

_EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "The file to edit, relative to the working directory.",
        },
        "old_text": {
            **_TEXT,
            "description": (
                "The exact text to replace, including whitespace and indentation; it must "
                "occur exactly once unless replace_all is true."
            ),
        },
        "new_text": {**_TEXT, "description": "The text to put in place of old_text."},
        "replace_all": {
            "type": "boolean",
            "default": False,
            "description": "Replace every occurrence of old_text.",
        },
        "edits": {
            "type": "array",
            "minItems": 1,
            "items": _EDIT_ITEM,
            "description": (
                "Several edits to apply in order, instead of old_text/new_text. "
                "All or nothing: if one fails, the file is not changed."
            ),
        },
    },
    "required": ["path"],
    "additionalProperties": False,
    # Exactly one of the two forms. Spelled with if/then/else rather than oneOf:
    # Anthropic's API refuses oneOf/anyOf/allOf at the top level of a tool's schema.
    "if": {"required": ["edits"]},
    "then": {"properties": {"old_text": _NONE, "new_text": _NONE, "replace_all": _NONE}},
    "else": {"required": ["old_text", "new_text"]},
}

_FORMS = (
    "give old_text and new_text (one edit, with optional replace_all), or edits "
    "(a list of {old_text, new_text, replace_all})"
)
_MISSING_HINT = ". edit_file only changes existing files; use write_file to create one."
_DIRECTORY_HINT = "edit_file changes files; use list_files to see what the directory contains."

#: Hint search: the closest regions shown, and how similar (difflib ratio) they must be.
_HINT_REGIONS = 3
_HINT_THRESHOLD = 0.6
_HINT_CANDIDATES = 25
_HINT_MAX_LINES = 30
_HINT_LINE_CHARS = 500
_SNIPPET_CONTEXT = 2
_SNIPPET_MAX_LINES = 15


@attrs.frozen
class _Edit:
    old: str
    new: str
    replace_all: bool


@attrs.frozen
class _Outcome:
    data: bytes
    counts: list[int]
    text: str  # the new text, without its BOM
    first: tuple[int, int]  # the first change's span in ``text``


def _parse_edit(item: Mapping[str, Any], where: str) -> _Edit:
    old, new = item.get("old_text"), item.get("new_text")
    replace_all = item.get("replace_all", False)
    if not isinstance(old, str):
        raise InvalidArgs(f"{where}old_text must be a string")
    if not isinstance(new, str):
        raise InvalidArgs(f"{where}new_text must be a string")
    if not isinstance(replace_all, bool):
        raise InvalidArgs(f"{where}replace_all must be true or false")
    if not old:
        raise InvalidArgs(
            f"{where}old_text is empty. edit_file replaces text that is already in the file; "
            "to create a file or rewrite all of it, use write_file."
        )
    if old == new:
        raise InvalidArgs(
            f"{where}old_text and new_text are identical, so the edit would change nothing"
        )
    return _Edit(old, new, replace_all)


def parse_edits(params: Mapping[str, Any]) -> tuple[list[_Edit], bool]:
    """The edits the arguments ask for, and whether they came as an ``edits`` list."""
    single = [key for key in ("old_text", "new_text", "replace_all") if key in params]
    if "edits" in params:
        if single:
            raise InvalidArgs(f"{_FORMS}, not both (got edits and {', '.join(single)})")
        items = params["edits"]
        if not isinstance(items, list) or not items:
            raise InvalidArgs("edits must be a non-empty list of {old_text, new_text} objects")
        edits = []
        for number, item in enumerate(items, 1):
            if not isinstance(item, Mapping):
                raise InvalidArgs(f"edit {number}: must be an object with old_text and new_text")
            edits.append(_parse_edit(item, f"edit {number}: "))
        return edits, True
    if "old_text" not in params or "new_text" not in params:
        raise InvalidArgs(_FORMS)
    return [_parse_edit(params, "")], False


def _to_crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def _variants(edit: _Edit, endings: str) -> list[tuple[str, str]]:
    """The (old, new) pairs to try, in order, for a file with these line endings.

    The model writes ``\\n``; in a CRLF file its text is matched and written with
    ``\\r\\n``. A file with mixed endings tries both.
    """
    old, new = edit.old, edit.new
    new_crlf = new if "\r" in new else _to_crlf(new)
    if endings != "lf" and "\n" in old and "\r" not in old:
        return [(_to_crlf(old), new_crlf), (old, new)]
    if endings == "crlf":
        return [(old, new_crlf)]
    return [(old, new)]


def _map_position(position: int, hits: Sequence[int], old_len: int, new_len: int, end: bool) -> int:
    """Where ``position`` lands after replacing ``old_len`` chars at each of ``hits``."""
    shift = 0
    for hit in hits:
        if hit + old_len <= position:
            shift += new_len - old_len
        elif hit < position:  # inside a replaced stretch: snap to its edge
            return hit + shift + (new_len if end else 0)
        else:
            break
    return position + shift


_TOKEN = re.compile(r"\w+|[^\w\s]")


def _closest_regions(lines: list[str], target_lines: list[str]) -> list[tuple[int, int]]:
    """Up to three (start, stop) line ranges of ``lines`` most like ``target_lines``.

    Every window of as many lines as the target is scored by how many tokens
    (words and punctuation, whitespace ignored) it shares with the target,
    kept up to date as the window slides, so long files stay cheap. The best
    candidates are then rated by difflib's ``ratio`` on the exact text, and the
    best that clear the threshold and do not overlap are kept, best first.
    """
    if not lines or not target_lines:
        return []
    size = min(len(target_lines), len(lines))
    target = "\n".join(target_lines)
    wanted = Counter(_TOKEN.findall(target))
    wanted_total = sum(wanted.values())
    have: Counter[str] = Counter()
    overlap = 0  # sum over tokens of min(have, wanted)
    count = 0
    tokens = [Counter(_TOKEN.findall(line)) for line in lines]

    def change(line: Counter[str], sign: int) -> None:
        nonlocal overlap, count
        for token, n in line.items():
            before = have[token]
            have[token] = before + sign * n
            want = wanted[token]
            if want:
                overlap += min(before + sign * n, want) - min(before, want)
            count += sign * n

    def score() -> float:
        return 2 * overlap / (count + wanted_total) if count + wanted_total else 1.0

    for line in tokens[:size]:
        change(line, 1)
    scores = [(score(), 0)]
    for start in range(1, len(lines) - size + 1):
        change(tokens[start - 1], -1)
        change(tokens[start + size - 1], 1)
        scores.append((score(), start))
    candidates = heapq.nlargest(_HINT_CANDIDATES, scores, key=lambda s: (s[0], -s[1]))
    matcher = difflib.SequenceMatcher(None, autojunk=False)
    matcher.set_seq2(target)
    rated = []
    for _, start in candidates:
        matcher.set_seq1("\n".join(lines[start : start + size]))
        if matcher.real_quick_ratio() < _HINT_THRESHOLD or matcher.quick_ratio() < _HINT_THRESHOLD:
            continue
        ratio = matcher.ratio() if len(target) <= 20_000 else matcher.quick_ratio()
        if ratio >= _HINT_THRESHOLD:
            rated.append((ratio, start))
    rated.sort(key=lambda s: (-s[0], s[1]))
    chosen: list[tuple[int, int]] = []
    for _, start in rated:
        if all(start + size <= a or b <= start for a, b in chosen):
            chosen.append((start, start + size))
        if len(chosen) == _HINT_REGIONS:
            break
    return chosen


def _show_lines(lines: list[str], start: int, stop: int, max_chars: int) -> list[str]:
    """Lines ``start``..``stop`` (0-based, exclusive) numbered like read_file."""
    return [numbered(i + 1, lines[i], max_chars) for i in range(start, stop)]


def _line_range(start: int, stop: int) -> str:
    return f"line {start}" if stop == start else f"lines {start}-{stop}"


def _not_found(text: str, old: str, shown: str) -> ToolError:
    lines = split_lines(text)
    regions = _closest_regions(lines, split_lines(old) or [""])
    reminder = "Whitespace and indentation must match exactly"
    if not regions:
        return ToolError(
            f"old_text not found in {shown}. No similar text either; read the file again "
            f"with read_file to see its current content. {reminder}."
        )
    parts = [f"old_text not found in {shown}. Did you mean:"]
    for start, stop in regions:
        shown_stop = min(stop, start + _HINT_MAX_LINES)
        block = [f"{_line_range(start + 1, stop)}:"]
        block += _show_lines(lines, start, shown_stop, _HINT_LINE_CHARS)
        if shown_stop < stop:
            block.append(f"… ({plural(stop - shown_stop, 'more line')})")
        parts.append("\n".join(block))
    parts.append(
        f"{reminder}: copy old_text from the file's own lines, without the line numbers "
        "and the tab after them."
    )
    return ToolError("\n\n".join(parts))


def apply_edits(text: str, edits: Sequence[_Edit], shown: str) -> tuple[str, list[int], int, int]:
    """Apply ``edits`` in order to ``text``; all of them, or ToolError for the first that fails.

    Returns the new text, the replacements made by each edit, and the span of
    the first change (the earliest in the new text).
    """
    endings = line_endings(text)
    counts: list[int] = []
    first: tuple[int, int] | None = None
    for number, edit in enumerate(edits, 1):
        found = None
        for old, new in _variants(edit, endings):
            count = text.count(old)
            if count:
                found = (old, new, count)
                break
        try:
            if found is None:
                raise _not_found(text, edit.old, shown)
            old, new, count = found
            if count > 1 and not edit.replace_all:
                raise ToolError(
                    f"old_text matches {count} places in {shown}; add surrounding lines to "
                    "make it unique, or set replace_all"
                )
        except ToolError as error:
            if len(edits) == 1:
                raise
            raise ToolError(
                f"Edit {number} of {len(edits)} failed, so the file was not changed: {error}"
            ) from None
        hits: list[int] = []
        position = text.find(old)
        while position >= 0 and (edit.replace_all or not hits):
            hits.append(position)
            position = text.find(old, position + len(old))
        text = text.replace(old, new, len(hits))
        counts.append(len(hits))
        change = (hits[0], hits[0] + len(new))
        if first is not None:
            first = (
                _map_position(first[0], hits, len(old), len(new), end=False),
                _map_position(first[1], hits, len(old), len(new), end=True),
            )
            if first[0] <= change[1] and change[0] <= first[1]:
                change = (min(first[0], change[0]), max(first[1], change[1]))
            elif first[0] < change[0]:
                change = first
        first = change
    assert first is not None
    return text, counts, first[0], first[1]


def _snippet(text: str, start: int, stop: int, max_chars: int) -> str:
    """A few numbered lines of ``text`` around the change at ``start``..``stop``."""
    lines = split_lines(text)
    if not lines:
        return "[the file is now empty]"
    first_line = text.count("\n", 0, start) + 1
    last_line = text.count("\n", 0, max(start, stop - 1)) + 1
    low = max(1, first_line - _SNIPPET_CONTEXT)
    high = min(len(lines), last_line + _SNIPPET_CONTEXT, low + _SNIPPET_MAX_LINES - 1)
    low = min(low, high)
    body = _show_lines(lines, low - 1, high, max_chars)
    return "\n".join([f"[{_line_range(low, high)} after the edit]", *body])


@attrs.frozen(eq=False)
class EditFileTool(PathTool):
    """The ``edit_file`` tool: replace exact text in an existing file.

    One edit (``old_text``, ``new_text``, ``replace_all``) or a list of them
    (``edits``), applied in order, all or nothing. ``old_text`` must match the
    file exactly and, unless ``replace_all``, exactly once; when it does not
    match, the error shows the closest regions of the file. In a file with
    ``\\r\\n`` line endings, ``\\n`` in the model's text stands for ``\\r\\n``.
    A UTF-8 BOM, undecodable bytes and the file's mode are kept. The write is
    atomic (:func:`~agentloop.tools.atomic_write`).

    Args:
        workspace: The root every path is confined to (a :class:`Workspace` or a path).
        max_bytes: Larger files are refused.
        max_line_chars: Longer lines are cut in the snippet of the result.
        timeout: Seconds, or None to use the loop's ``tool_timeout``.
    """

    workspace: Workspace = attrs.field(factory=Workspace, converter=as_workspace)
    max_bytes: int = attrs.field(default=50 * MiB, kw_only=True)
    max_line_chars: int = attrs.field(default=2000, kw_only=True)
    timeout: float | None = attrs.field(default=None, kw_only=True)

    name = "edit_file"
    label = "Edit file"
    description = (
        "Replace exact text in an existing file. old_text must match the file exactly, "
        "whitespace and indentation included (copy it from read_file's output without the "
        "line numbers), and must occur exactly once unless replace_all is true; include a "
        "few surrounding lines to make it unique. For several changes to one file, pass "
        "edits: a list of {old_text, new_text, replace_all}, applied in order, all or "
        "nothing. To create a file or rewrite it entirely, use write_file."
    )
    parameters_schema = _EDIT_SCHEMA

    writes = True

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Apply the edits; see the class docstring."""
        raw = path_param(params)
        edits, listed = parse_edits(params)
        path, shown = await resolve(self.workspace, raw)
        # Read, edit and write under the file's lock: a parallel edit of the same file
        # waits, and then edits what this one wrote instead of overwriting it.
        files = self.workspace.files
        async with path_lock(path):
            if files is not None:  # an editor's buffers
                outcome = self._edit_text(await files.read_text(path), shown, edits)
                await files.write_text(path, outcome.data.decode("utf-8", "surrogateescape"))
            else:
                outcome = await trio.to_thread.run_sync(self._edit, path, shown, edits)
                try:
                    await atomic_write(path, outcome.data)
                except OSError as error:
                    raise os_error("write", shown, error) from None
        total = sum(outcome.counts)
        replaced = f"replaced {plural(total, 'occurrence')}"
        if listed:
            each = ", ".join(f"edit {i}: {n}" for i, n in enumerate(outcome.counts, 1))
            summary = f"Edited {shown}: {plural(len(edits), 'edit')}, {replaced} ({each})"
            details: dict[str, Any] = {"replacements": total, "per_edit": outcome.counts}
        else:
            summary = f"Edited {shown}: {replaced}"
            details = {"replacements": total}
        snippet = _snippet(outcome.text, *outcome.first, self.max_line_chars)
        return ToolResult.text(f"{summary}\n{snippet}", details=details)

    def _edit(self, path: Path, shown: str, edits: list[_Edit]) -> _Outcome:
        """Read, edit and encode the file (blocking: runs in a worker thread)."""
        info = stat_file(
            path, shown, action="read", directory_hint=_DIRECTORY_HINT, missing_hint=_MISSING_HINT
        )
        self.workspace.check_file(path, info, shown)
        if info.st_size > self.max_bytes:
            raise ToolError(
                f"{shown} is too large to edit ({info.st_size} bytes); use bash (sed) instead"
            )
        try:
            data = path.read_bytes()
        except OSError as error:
            raise os_error("read", shown, error, missing_hint=_MISSING_HINT) from None
        if b"\x00" in data[:SNIFF_BYTES]:
            raise ToolError(
                f"{shown} is a binary file ({plural(len(data), 'byte')}); "
                "edit_file changes text files only"
            )
        # surrogateescape: bytes that are not UTF-8 survive the round trip unchanged.
        return self._edit_text(data.decode("utf-8", errors="surrogateescape"), shown, edits)

    def _edit_text(self, text: str, shown: str, edits: list[_Edit]) -> _Outcome:
        """Edit and encode the file's ``text``."""
        bom = text.startswith("\ufeff")
        text, counts, start, stop = apply_edits(text.removeprefix("\ufeff"), edits, shown)
        try:
            encoded = (("\ufeff" if bom else "") + text).encode("utf-8", errors="surrogateescape")
        except UnicodeEncodeError:
            raise InvalidArgs(
                "new_text contains a lone surrogate (an invalid \\ud800-\\udfff escape); "
                "send valid Unicode text"
            ) from None
        return _Outcome(encoded, counts, text, (start, stop))
