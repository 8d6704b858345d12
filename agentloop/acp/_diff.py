"""File edits as diffs: the text of a file before and after ``edit_file``/``write_file``.

:class:`Diffing` wraps a file-writing tool: it reads the file before the call
and after it, and keeps ``{path, oldText, newText}`` by call id in a dict the
server reads when the call ends (kept out of the result, so the session's
file does not hold the file twice). Everything else is the wrapped tool's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from .._tool import ToolContext, ToolError
from .._types import ToolResult
from ..tools import Workspace

__all__ = ["Diffing"]

#: Files bigger than this get no diff (the editor reads the file itself).
MAX_DIFF_BYTES = 1024 * 1024


async def _text(path: trio.Path) -> str | None:
    try:
        if (await path.stat()).st_size > MAX_DIFF_BYTES:
            return None
        return await path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class Diffing:
    """``tool`` (working in ``workspace``), keeping each successful call's diff in ``diffs``."""

    def __init__(self, tool: Any, workspace: Workspace, diffs: dict[str, dict[str, Any]]) -> None:
        self._tool = tool
        self._workspace = workspace
        self._diffs = diffs

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tool, name)

    async def _read(self, path: trio.Path) -> str | None:
        files = self._workspace.files
        if files is None:
            return await _text(path)
        try:
            return await files.read_text(Path(path))  # the editor's buffer
        except ToolError:
            return None  # a new file

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the wrapped tool; on success, keep the file's old and new text."""
        path = params.get("path")
        try:
            target = trio.Path(self._workspace.resolve(path)) if isinstance(path, str) else None
        except ToolError:
            target = None  # the tool says why
        before = None if target is None else await self._read(target)
        result: ToolResult = await self._tool.execute(params, ctx)
        if target is not None:
            after = await self._read(target)
            if after is not None:
                self._diffs[ctx.tool_call_id] = {
                    "path": str(target),
                    "oldText": before,
                    "newText": after,
                }
        return result
