"""Streaming one assistant message: deltas in, partial messages out."""

from __future__ import annotations

from typing import Any

from .._events import StreamDelta, StreamRestart, TextDelta, ThinkingDelta, ToolCallDelta
from .._types import (
    ZERO_USAGE,
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    now_ms,
)

__all__ = ["PartialMessage"]


class PartialMessage:
    """Accumulates streamed deltas into the assistant message streamed so far.

    Blocks appear in the order their first delta arrived. Text and thinking
    grow with each delta; a tool call keeps ``{}`` as arguments (its JSON is
    not complete until the message ends) while its raw text accumulates.
    """

    __slots__ = ("_content", "_positions", "_raw", "_snapshot", "_timestamp", "model", "provider")

    def __init__(self, model: str = "", provider: str = "") -> None:
        self._content: list[AssistantContent] = []
        self._positions: dict[int, int] = {}
        self._raw: dict[int, str] = {}
        self._snapshot: AssistantMessage | None = None
        self._timestamp = now_ms()
        self.model = model
        self.provider = provider

    def message(self) -> AssistantMessage:
        """The message so far (``stop_reason`` is meaningless until the end)."""
        if self._snapshot is None:
            self._snapshot = AssistantMessage(
                tuple(self._content),
                StopReason.STOP,
                self.model,
                self.provider,
                ZERO_USAGE,
                self._timestamp,
            )
        return self._snapshot

    def apply(self, delta: StreamDelta) -> AssistantMessage:
        """Add ``delta`` and return the message so far."""
        if isinstance(delta, StreamRestart):  # a retry: what streamed so far is void
            self._content.clear()
            self._positions.clear()
            self._raw.clear()
            self._snapshot = None
            return self.message()
        index = delta.index
        position = self._positions.get(index)
        block: Any = None if position is None else self._content[position]
        if isinstance(delta, TextDelta):
            new: AssistantContent = TextContent(
                block.text + delta.delta if isinstance(block, TextContent) else delta.delta
            )
        elif isinstance(delta, ThinkingDelta):
            new = ThinkingContent(
                block.thinking + delta.delta if isinstance(block, ThinkingContent) else delta.delta
            )
        elif isinstance(delta, ToolCallDelta):
            self._raw[index] = self._raw.get(index, "") + delta.delta
            call_id = delta.tool_call_id or (block.id if isinstance(block, ToolCall) else "")
            name = delta.name or (block.name if isinstance(block, ToolCall) else "")
            if isinstance(block, ToolCall) and (block.id, block.name) == (call_id, name):
                # Only the arguments text grew; the visible message is unchanged.
                return self.message()
            new = ToolCall(call_id, name)
        else:
            raise TypeError(f"a provider emitted {delta!r}, which is not a StreamDelta")
        if position is None:
            self._positions[index] = len(self._content)
            self._content.append(new)
        else:
            self._content[position] = new
        self._snapshot = None
        return self.message()

    def interrupted(self, stop_reason: StopReason, error_message: str) -> AssistantMessage:
        """The message cut short: text and thinking kept, unfinished tool calls dropped."""
        kept = tuple(block for block in self._content if not isinstance(block, ToolCall))
        return AssistantMessage(
            kept,
            stop_reason,
            model=self.model,
            provider=self.provider,
            error_message=error_message,
        )
