"""The ripgrep engine: rg --json, read as it streams, checked against the ignore rules."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from ..._tool import InvalidArgs
from .._ignore import IgnoreTree, is_binary
from .._workspace import SKIP_DIRS
from ._common import (
    _DROPPED_LINE_LIMIT,
    _READ_CHUNK,
    _STDERR_LIMIT,
    _Collector,
    log,
)

# --------------------------------------------------------------------------- ripgrep engine


def _json_text(value: Mapping[str, Any]) -> bytes:
    text = value.get("text")
    if isinstance(text, str):
        return text.encode("utf-8", "surrogateescape")
    return base64.b64decode(value.get("bytes", ""))


@attrs.define
class _RgReader:
    """Reads ``rg --json`` output; passes the lines of the files the tools see to a collector."""

    tree: IgnoreTree
    start: str
    collector: _Collector
    saw_summary: bool = False
    _parts: list[bytes] = attrs.field(factory=list)  # an incomplete message
    _size: int = 0
    _skipping: bool = False  # inside an over-long message of a skipped file
    _current: str | None = None  # the file being reported, if it is kept

    def feed(self, chunk: bytes) -> None:
        """Take the next chunk of rg's standard output (blocking: runs in a worker thread)."""
        start = 0
        if self._skipping:
            start = chunk.find(b"\n") + 1
            if not start:
                return
            self._skipping = False
        end = chunk.rfind(b"\n")
        if end < start:  # no message ends in this chunk
            self._parts.append(chunk[start:])
            self._size += len(chunk) - start
            if self._current is None and self._size > _DROPPED_LINE_LIMIT:
                self._parts, self._size, self._skipping = [], 0, True
            return
        self._parts.append(chunk[start:end])
        messages = b"".join(self._parts).split(b"\n")
        self._parts, self._size = [chunk[end + 1 :]], len(chunk) - end - 1
        for message in messages:
            if self.collector.full:
                return
            self._message(message)

    def _message(self, raw: bytes) -> None:
        is_match = raw.startswith(b'{"type":"match"')
        if is_match or raw.startswith(b'{"type":"context"'):
            if self._current is None:
                return
            data = json.loads(raw)["data"]
            text = _json_text(data["lines"]).decode("utf-8", "replace")
            self.collector.add(self._current, data["line_number"], text, is_match)
            return
        if not raw.strip():
            return
        message = json.loads(raw)
        kind = message.get("type")
        if kind == "begin":
            path = os.fsdecode(_json_text(message["data"]["path"])).removeprefix("./")
            keep = self.tree.visible(self.start, path) and not is_binary(self.tree.root / path)
            self._current = path if keep else None
        elif kind == "end":
            self._current = None
        elif kind == "summary":
            self.saw_summary = True


def _glob_escape(name: str) -> str:
    return re.sub(r"([\\*?\[\]{}!,])", r"\\\1", name)


def _rg_argv(
    rg: str,
    pattern: str,
    target: str,
    *,
    case_sensitive: bool,
    context: int,
    include: str | None,
    venvs: list[str],
) -> list[str]:
    """The ripgrep command line the tool runs (relative to the workspace root)."""
    argv = [
        rg,
        "--json",
        "--no-config",
        "--sort",
        "path",
        "--no-require-git",
        "--hidden",
        "--text",
        "--no-ignore-parent",
        "--no-ignore-global",
        "--no-ignore-exclude",
        "--no-ignore-dot",
        "--case-sensitive" if case_sensitive else "--ignore-case",
        "--context",
        str(context),
    ]
    if include is not None:
        argv += ["--glob", include]
    argv += ["--glob", "!{" + ",".join(sorted(SKIP_DIRS)) + "}/"]
    for venv in venvs:
        argv += ["--glob", f"!/{_glob_escape(venv)}/"]
    argv += ["-e", pattern, "--", target]
    return argv


def _top_venvs(root: Path, start: str) -> list[str]:
    """Virtualenvs directly in ``start``: excluded up front, so that rg does not search them."""
    found = []
    try:
        with os.scandir(root / start) as entries:
            for entry in entries:
                if entry.name in SKIP_DIRS or not entry.is_dir(follow_symlinks=False):
                    continue
                if os.path.isfile(os.path.join(entry.path, "pyvenv.cfg")):
                    found.append(f"{start}/{entry.name}" if start else entry.name)
    except OSError:
        pass
    return sorted(found)


async def _drain(stream: trio.abc.ReceiveStream | None, into: bytearray) -> None:
    if stream is None:
        return
    while chunk := await stream.receive_some(_READ_CHUNK):
        if len(into) < _STDERR_LIMIT:
            into += chunk[: _STDERR_LIMIT - len(into)]


def _rg_failure(pattern: str, stderr: str) -> None:
    """Raise InvalidArgs for rg's complaint about the regex; log anything else."""
    message = stderr.strip().removeprefix("rg: ")  # ripgrep 14 names itself first
    # rg's advice ("Consider enabling PCRE2 with the --pcre2 flag...") names flags the
    # model cannot pass; keep the first paragraph.
    message = message.split("\n\nConsider ", 1)[0].strip()
    if "regex" in message:
        raise InvalidArgs(f"invalid regex {pattern!r} (ripgrep): {message}")
    # rg's message may quote the call's arguments (a glob, a path): DEBUG only.
    log.warning("search: rg failed, using the Python engine instead")
    log.debug("search: rg said: %s", message)
