"""Messages and tool results that can always be encoded again (see :mod:`._text`).

The loop passes everything that enters the history through these functions:
the model's streamed pieces and final message, each tool result, update and progress text, and
every user message (prompts, steering, follow-ups, a history given to a
context). Each returns its argument itself when nothing needed replacing, so
clean values cost a few ``isascii`` calls and no copies.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from ._events import StreamDelta, StreamRestart, ToolCallDelta
from ._text import needs_scrub, scrub, scrub_json
from ._types import (
    AssistantMessage,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
)

__all__ = ["scrub_delta", "scrub_message", "scrub_result"]

M = TypeVar("M", bound=Message)
D = TypeVar("D", bound=StreamDelta)


def _block(block: Any) -> Any:
    if isinstance(block, TextContent):
        text = scrub(block.text)
        return block if text is block.text else TextContent(text)
    if isinstance(block, ThinkingContent):
        thinking = scrub(block.thinking)
        signature = None if block.signature is None else scrub(block.signature)
        if thinking is block.thinking and signature is block.signature:
            return block
        return attrs.evolve(block, thinking=thinking, signature=signature)
    if isinstance(block, ToolCall):
        call_id, name = scrub(block.id), scrub(block.name)
        arguments = scrub_json(block.arguments)
        raw = None if block.raw_arguments is None else scrub(block.raw_arguments)
        if (
            call_id is block.id
            and name is block.name
            and arguments is block.arguments
            and raw is block.raw_arguments
        ):
            return block
        return ToolCall(call_id, name, arguments, raw)
    return block  # images are base64: ASCII by construction, or refused by the API


def _content(content: tuple[Any, ...]) -> tuple[Any, ...]:
    blocks = [_block(block) for block in content]
    if all(new is old for new, old in zip(blocks, content, strict=True)):
        return content
    return tuple(blocks)


def _strings(message: Any, fields: tuple[str, ...], changes: dict[str, Any]) -> None:
    for field in fields:
        value = getattr(message, field)
        if value is not None:
            clean = scrub(value)
            if clean is not value:
                changes[field] = clean


def scrub_message(message: M) -> M:
    """``message`` with every lone surrogate replaced by U+FFFD; itself if it had none."""
    changes: dict[str, Any] = {}
    content = _content(message.content)
    if content is not message.content:
        changes["content"] = content
    if isinstance(message, AssistantMessage):
        _strings(message, ("error_message", "model", "provider"), changes)
    elif isinstance(message, ToolResultMessage):
        _strings(message, ("tool_call_id", "tool_name"), changes)
    return attrs.evolve(message, **changes) if changes else message


def scrub_result(result: ToolResult) -> ToolResult:
    """``result`` with its text and JSON-like ``details`` scrubbed; itself if clean."""
    content = _content(result.content)
    details = scrub_json(result.details)
    if content is result.content and details is result.details:
        return result
    return ToolResult(content, details=details, child_loop_id=result.child_loop_id)


def scrub_delta(delta: D) -> D:
    """A streamed piece with its strings scrubbed; itself if clean (the common case)."""
    text: str = delta.delta if not isinstance(delta, StreamRestart) else delta.error
    if not needs_scrub(text) and not (
        isinstance(delta, ToolCallDelta)
        and (needs_scrub(delta.tool_call_id) or needs_scrub(delta.name))
    ):
        return delta
    if isinstance(delta, StreamRestart):
        return attrs.evolve(delta, error=scrub(delta.error))
    if isinstance(delta, ToolCallDelta):
        return attrs.evolve(
            delta,
            delta=scrub(delta.delta),
            tool_call_id=scrub(delta.tool_call_id),
            name=scrub(delta.name),
        )
    return attrs.evolve(delta, delta=scrub(delta.delta))
