"""Streaming one assistant message: deltas in, partial messages out.

The message streamed so far is what every ``MessageUpdate`` carries. Building
it eagerly for each delta would copy all the text so far each time: quadratic
in the length of the reply. Instead each update gets a *snapshot*: a function
over the blocks' append-only lists of pieces and how many pieces each had then
(O(number of blocks) to take). The message is built the first time someone
reads ``MessageUpdate.message``, and kept.
"""

from __future__ import annotations

from collections.abc import Callable

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


class _Block:
    """One content block as it streams: text or thinking pieces, or a tool call."""

    __slots__ = ("call_id", "kind", "name", "pieces")

    def __init__(self, kind: type[AssistantContent]) -> None:
        self.kind = kind
        self.pieces: list[str] = []  # only ever appended to: snapshots rely on it
        self.call_id = ""
        self.name = ""


_State = tuple[tuple[type[AssistantContent], list[str], int, str, str], ...]


def _build(state: _State) -> tuple[AssistantContent, ...]:
    content: list[AssistantContent] = []
    for kind, pieces, count, call_id, name in state:
        if kind is ToolCall:
            content.append(ToolCall(call_id, name))  # {} until the message ends
        else:
            text = "".join(pieces if count == len(pieces) else pieces[:count])
            content.append(TextContent(text) if kind is TextContent else ThinkingContent(text))
    return tuple(content)


class PartialMessage:
    """Accumulates streamed deltas into the assistant message streamed so far.

    Blocks appear in the order their first delta arrived. Text and thinking
    grow with each delta; a tool call keeps ``{}`` as arguments (its JSON is
    not complete until the message ends). A :class:`StreamRestart` empties it.
    """

    __slots__ = ("_blocks", "_positions", "_timestamp", "model", "provider")

    def __init__(self, model: str = "", provider: str = "") -> None:
        self._blocks: list[_Block] = []
        self._positions: dict[int, _Block] = {}
        self._timestamp = now_ms()
        self.model = model
        self.provider = provider

    def apply(self, delta: StreamDelta) -> None:
        """Add ``delta``."""
        if isinstance(delta, StreamRestart):  # a retry: what streamed so far is void
            # New containers, never cleared in place: snapshots still refer to the old.
            self._blocks = []
            self._positions = {}
            return
        if isinstance(delta, TextDelta):
            kind: type[AssistantContent] = TextContent
        elif isinstance(delta, ThinkingDelta):
            kind = ThinkingContent
        elif isinstance(delta, ToolCallDelta):
            kind = ToolCall
        else:
            raise TypeError(f"a provider emitted {delta!r}, which is not a StreamDelta")
        block = self._positions.get(delta.index)
        if block is None or block.kind is not kind:
            block = _Block(kind)
            if delta.index in self._positions:  # a new kind at a known index: replace it
                self._blocks[self._blocks.index(self._positions[delta.index])] = block
            else:
                self._blocks.append(block)
            self._positions[delta.index] = block
        if kind is ToolCall:
            assert isinstance(delta, ToolCallDelta)
            block.call_id = delta.tool_call_id or block.call_id
            block.name = delta.name or block.name
        elif delta.delta:
            block.pieces.append(delta.delta)

    def snapshot(self) -> Callable[[], AssistantMessage]:
        """A function that builds the message as it is now, whenever it is called."""
        state: _State = tuple(
            (b.kind, b.pieces, len(b.pieces), b.call_id, b.name) for b in self._blocks
        )
        model, provider, timestamp = self.model, self.provider, self._timestamp

        def build() -> AssistantMessage:
            return AssistantMessage(
                _build(state), StopReason.STOP, model, provider, ZERO_USAGE, timestamp
            )

        return build

    def message(self) -> AssistantMessage:
        """The message so far (``stop_reason`` is meaningless until the end)."""
        return self.snapshot()()

    def interrupted(self, stop_reason: StopReason, error_message: str) -> AssistantMessage:
        """The message cut short: text and thinking kept, unfinished tool calls dropped."""
        kept = tuple(block for block in self.message().content if not isinstance(block, ToolCall))
        return AssistantMessage(
            kept,
            stop_reason,
            model=self.model,
            provider=self.provider,
            error_message=error_message,
        )
