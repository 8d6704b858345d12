"""The offline demo: two small real tools and a scripted model that uses them.

The model follows a fixed plan (list the directory, count lines in a few text
files, summarise), but each step reads what the tools actually returned.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
import trio

from ._tool import InvalidArgs, ToolContext, ToolError, ToolResult
from ._types import TextContent, ToolResultMessage, UserMessage
from .providers import ModelRequest, ScriptedProvider, ScriptedTurn, call, reply

__all__ = ["CountLines", "ListDirectory", "demo_provider"]

_SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".nox", ".tox"}
_TEXT_SUFFIXES = {".py", ".md", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml", ".rst"}
_MAX_LISTED = 200


def _inside(root: Path, relative: str) -> Path:
    path = (root / relative).resolve()
    if path != root and root not in path.parents:
        raise InvalidArgs(f"{relative!r} is outside the directory {str(root)!r}")
    return path


def _walk(root: Path, max_depth: int) -> list[str]:
    found: list[str] = []
    for directory, subdirs, files in os.walk(root):
        depth = len(Path(directory).relative_to(root).parts)
        subdirs[:] = sorted(d for d in subdirs if d not in _SKIP_DIRS and not d.startswith("."))
        if depth >= max_depth:
            subdirs.clear()
        for name in sorted(files):
            found.append(str((Path(directory) / name).relative_to(root)))
    return sorted(found)


@attrs.frozen
class ListDirectory:
    """Lists the files under the demo's root directory."""

    root: Path
    name: str = "list_directory"
    label: str = "List directory"
    description: str = "List the files in the working directory, two levels deep."
    parameters_schema: dict[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}, "additionalProperties": False}
    )

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await ctx.progress(f"scanning {self.root}")
        files = await trio.to_thread.run_sync(_walk, self.root, 2)
        shown = files[:_MAX_LISTED]
        more = f"\n... and {len(files) - len(shown)} more" if len(files) > len(shown) else ""
        text = "\n".join(shown) + more if files else "(no files)"
        return ToolResult.text(text, details={"files": len(files)})


def _count(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


@attrs.frozen
class CountLines:
    """Counts the lines of the given files, reporting each as it goes."""

    root: Path
    name: str = "count_lines"
    label: str = "Count lines"
    description: str = "Count the lines of some files in the working directory."
    parameters_schema: dict[str, Any] = attrs.field(
        factory=lambda: {
            "type": "object",
            "properties": {"paths": {"type": "array", "items": {"type": "string"}, "minItems": 1}},
            "required": ["paths"],
            "additionalProperties": False,
        }
    )

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        lines: list[str] = []
        total = 0
        for position, relative in enumerate(params["paths"], 1):
            path = _inside(self.root, relative)
            try:
                count = await trio.to_thread.run_sync(_count, path)
            except OSError as error:
                raise ToolError(f"cannot read {relative}: {error.strerror}") from error
            total += count
            lines.append(f"{relative}: {count} lines")
            await ctx.update(
                ToolResult.text(lines[-1], details={"done": position, "of": len(params["paths"])})
            )
        lines.append(f"total: {total} lines")
        return ToolResult.text("\n".join(lines), details={"total": total})


def _last_result(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, ToolResultMessage):
            return message.text
    return ""


def _last_prompt(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if isinstance(message, UserMessage):
            return "".join(b.text for b in message.content if isinstance(b, TextContent))
    return ""


def _pick_files(request: ModelRequest) -> ScriptedTurn:
    listing = _last_result(request).splitlines()
    candidates = [line for line in listing if Path(line).suffix in _TEXT_SUFFIXES]
    if not candidates:
        return reply("I found no text files to look into, so I will stop here.")
    chosen = candidates[:3]
    return reply(
        f"I see {len(listing)} entries. Let me count the lines of "
        f"{len(chosen)} that look like text.",
        call("count_lines", {"paths": chosen}),
    )


def _summarise(request: ModelRequest) -> ScriptedTurn:
    counts = _last_result(request)
    prompt = _last_prompt(request)
    return reply(
        f"Here is what I found:\n{counts}\n\n"
        f"You asked: {json.dumps(prompt)}. I am agentloop's offline demo model, so I follow "
        "a fixed plan rather than answer freely, but every number above came from the tools."
    )


def demo_provider(*, paced: bool = True) -> ScriptedProvider:
    """The scripted model of the offline demo; ``paced`` makes it stream like a real one."""
    return ScriptedProvider(
        [
            reply("I'll look at what is in this directory first.", call("list_directory")),
            _pick_files,
            _summarise,
        ],
        delay=0.3 if paced else 0.0,
        delta_delay=0.02 if paced else 0.0,
        model="offline-demo",
    )
