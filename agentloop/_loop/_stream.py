"""Streaming one assistant message: deltas in, partial messages out."""

from __future__ import annotations

from typing import Any

from .._events import StreamDelta, TextDelta, ThinkingDelta, ToolCallDelta
from .._types import (
    AssistantContent,
    AssistantMessage,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
)

__all__ = ["PartialMessage"]


class PartialMessage:
    """Accumulates streamed deltas into the assistant message streamed so far.

    Blocks appear in the order their first delta arrived. Text and thinking
    grow with each delta; a tool call keeps ``{}`` as arguments (its JSON is
    not complete until the message ends) while its raw text accumulates.
    """

    __slots__ = ("_content", "_positions", "_raw", "model", "provider")

    def __init__(self, model: str = "", provider: str = "") -> None:
        self._content: list[AssistantContent] = []
        self._positions: dict[int, int] = {}
        self._raw: dict[int, str] = {}
        self.model = model
        self.provider = provider

    def message(self) -> AssistantMessage:
        """The message so far (``stop_reason`` is meaningless until the end)."""
        return AssistantMessage(
            tuple(self._content), StopReason.STOP, model=self.model, provider=self.provider
        )

    def apply(self, delta: StreamDelta) -> AssistantMessage:
        """Add ``delta`` and return the message so far."""
        position = self._positions.get(delta.index)
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
            self._raw[delta.index] = self._raw.get(delta.index, "") + delta.delta
            if isinstance(block, ToolCall):
                new = ToolCall(delta.tool_call_id or block.id, delta.name or block.name)
            else:
                new = ToolCall(delta.tool_call_id, delta.name)
        else:
            raise TypeError(f"a provider emitted {delta!r}, which is not a StreamDelta")
        if position is None:
            self._positions[delta.index] = len(self._content)
            self._content.append(new)
        else:
            self._content[position] = new
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
