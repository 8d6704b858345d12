"""The run's events as ACP ``session/update`` payloads (what a surface renders)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import _events as ev
from .._types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "STOP_REASONS",
    "replay",
    "tool_call_start",
    "tool_call_title",
    "tool_content",
    "tool_kind",
    "tool_locations",
]

#: ACP's stop reason for each way a run ends (errors are JSON-RPC errors instead).
STOP_REASONS: dict[ev.StopKind, str] = {
    ev.StopKind.COMPLETED: "end_turn",
    ev.StopKind.VETOED: "end_turn",
    ev.StopKind.OUTPUT_FAILED: "end_turn",
    ev.StopKind.ABORTED: "cancelled",
    ev.StopKind.MAX_TOKENS: "max_tokens",
    ev.StopKind.MAX_TURNS: "max_turn_requests",
    ev.StopKind.MAX_REQUESTS: "max_turn_requests",
    ev.StopKind.MAX_DURATION: "max_turn_requests",
    ev.StopKind.MAX_COST: "max_turn_requests",
    ev.StopKind.DEADLINE: "max_turn_requests",
}

_KINDS = {
    "read_file": "read",
    "write_file": "edit",
    "edit_file": "edit",
    "list_files": "search",
    "search": "search",
    "bash": "execute",
    "prun": "think",
    "prun_with_memo": "think",
}


def tool_kind(name: str) -> str:
    """The ACP tool kind of a tool (``read``, ``edit``, ``search``, ``execute``...)."""
    return _KINDS.get(name, "other")


def tool_call_title(name: str, args: dict[str, Any]) -> str:
    """A short title: ``bash: ls -la``, ``edit_file: src/app.py``, ``tool {"a": 1}``."""
    for key in ("command", "path", "pattern"):
        value = args.get(key)
        if isinstance(value, str) and value:
            return f"{name}: {value if len(value) <= 80 else value[:79] + '…'}"
    text = json.dumps(args, ensure_ascii=False)
    return name if args == {} else f"{name} {text if len(text) <= 80 else text[:79] + '…'}"


def tool_locations(root: Path, args: dict[str, Any]) -> list[dict[str, Any]]:
    """The files a call touches, as ACP locations (absolute paths)."""
    path = args.get("path")
    if not isinstance(path, str) or not path:
        return []
    location: dict[str, Any] = {"path": str(root / path) if not Path(path).is_absolute() else path}
    offset = args.get("offset")
    if isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0:
        location["line"] = offset
    return [location]


def tool_call_start(root: Path, call_id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The ``tool_call`` update announcing a call (status ``pending``)."""
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": tool_call_title(name, args),
        "kind": tool_kind(name),
        "status": "pending",
        "locations": tool_locations(root, args),
        "rawInput": args,
    }


def tool_content(result: ToolResult, diff: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """A result's blocks as ACP tool call content, after the file's ``diff`` if given."""
    content: list[dict[str, Any]] = []
    if diff is not None:
        content.append({"type": "diff", **diff})
    for block in result.content:
        if isinstance(block, TextContent):
            content.append({"type": "content", "content": {"type": "text", "text": block.text}})
        elif isinstance(block, ImageContent):
            content.append(
                {
                    "type": "content",
                    "content": {"type": "image", "data": block.data, "mimeType": block.mime_type},
                }
            )
    return content


def replay(root: Path, messages: tuple[Any, ...]) -> list[dict[str, Any]]:
    """A saved conversation as the updates that show it again (``session/load``)."""
    updates: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, UserMessage):
            for block in message.content:
                if isinstance(block, TextContent):
                    updates.append(
                        {
                            "sessionUpdate": "user_message_chunk",
                            "content": {"type": "text", "text": block.text},
                        }
                    )
        elif isinstance(message, AssistantMessage):
            for part in message.content:
                if isinstance(part, TextContent):
                    updates.append(
                        {
                            "sessionUpdate": "agent_message_chunk",
                            "content": {"type": "text", "text": part.text},
                        }
                    )
                elif isinstance(part, ThinkingContent):
                    updates.append(
                        {
                            "sessionUpdate": "agent_thought_chunk",
                            "content": {"type": "text", "text": part.thinking},
                        }
                    )
                elif isinstance(part, ToolCall):
                    updates.append(tool_call_start(root, part.id, part.name, part.arguments))
        elif isinstance(message, ToolResultMessage):
            result = ToolResult(message.content)
            updates.append(
                {
                    "sessionUpdate": "tool_call_update",
                    "toolCallId": message.tool_call_id,
                    "status": "failed" if message.is_error else "completed",
                    "content": tool_content(result),
                }
            )
    return updates
