"""Streaming one assistant message: deltas in, partial messages out.

The message streamed so far is what every ``MessageUpdate`` carries. Building
it eagerly for each delta would copy all the text so far each time: quadratic
in the length of the reply. Instead the deltas go into an append-only log and
each update gets a :class:`Snapshot`: the log and how long it was then (O(1) to
take, one small object). The message is built from the log the first time
someone reads ``MessageUpdate.message``, and kept.
"""

from __future__ import annotations

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

__all__ = ["PartialMessage", "Snapshot"]

_Delta = TextDelta | ThinkingDelta | ToolCallDelta

_KINDS: dict[type, type[AssistantContent]] = {
    TextDelta: TextContent,
    ThinkingDelta: ThinkingContent,
    ToolCallDelta: ToolCall,
}


def _kind(delta: _Delta) -> type[AssistantContent]:
    kind = _KINDS.get(type(delta))
    if kind is not None:
        return kind
    if isinstance(delta, TextDelta):  # a subclass of a delta type
        return TextContent
    return ThinkingContent if isinstance(delta, ThinkingDelta) else ToolCall


class _Block:
    __slots__ = ("call_id", "kind", "name", "pieces")

    def __init__(self, kind: type[AssistantContent]) -> None:
        self.kind = kind
        self.pieces: list[str] = []
        self.call_id = ""
        self.name = ""


def _build(log: list[_Delta], count: int) -> tuple[AssistantContent, ...]:
    """The content blocks of the first ``count`` deltas of ``log``.

    Blocks appear in the order their first delta arrived; a delta of another
    kind at a known index starts a new block in its place.
    """
    order: list[_Block] = []
    at: dict[int, _Block] = {}
    for position in range(count):
        delta = log[position]
        kind = _kind(delta)
        block = at.get(delta.index)
        if block is None or block.kind is not kind:
            fresh = _Block(kind)
            if block is None:
                order.append(fresh)
            else:
                order[order.index(block)] = fresh
            at[delta.index] = block = fresh
        if isinstance(delta, ToolCallDelta):
            block.call_id = delta.tool_call_id or block.call_id
            block.name = delta.name or block.name
        elif delta.delta:
            block.pieces.append(delta.delta)
    content: list[AssistantContent] = []
    for block in order:
        if block.kind is ToolCall:
            content.append(ToolCall(block.call_id, block.name))  # {} until the message ends
        else:
            text = "".join(block.pieces)
            content.append(
                TextContent(text) if block.kind is TextContent else ThinkingContent(text)
            )
    return tuple(content)


class Snapshot:
    """Builds the message as it was after the first ``count`` deltas of a log."""

    __slots__ = ("count", "log", "model", "provider", "timestamp")

    def __init__(
        self, log: list[_Delta], count: int, model: str, provider: str, timestamp: int
    ) -> None:
        self.log = log
        self.count = count
        self.model = model
        self.provider = provider
        self.timestamp = timestamp

    def __call__(self) -> AssistantMessage:
        return AssistantMessage(
            _build(self.log, self.count),
            StopReason.STOP,
            self.model,
            self.provider,
            ZERO_USAGE,
            self.timestamp,
        )


class PartialMessage:
    """Accumulates streamed deltas into the assistant message streamed so far.

    Blocks appear in the order their first delta arrived. Text and thinking
    grow with each delta; a tool call keeps ``{}`` as arguments (its JSON is
    not complete until the message ends). A :class:`StreamRestart` empties it.
    """

    __slots__ = ("_timestamp", "log", "model", "provider")

    def __init__(self, model: str = "", provider: str = "") -> None:
        self.log: list[_Delta] = []  # only ever appended to: snapshots rely on it
        self._timestamp = now_ms()
        self.model = model
        self.provider = provider

    def apply(self, delta: StreamDelta) -> None:
        """Add ``delta``. Raises ``TypeError`` for anything that is not a delta."""
        if isinstance(delta, StreamRestart):  # a retry: what streamed so far is void
            self.log = []  # a new list, never cleared in place: snapshots keep the old
        elif type(delta) in _KINDS or isinstance(delta, TextDelta | ThinkingDelta | ToolCallDelta):
            self.log.append(delta)
        else:
            raise TypeError(f"a provider emitted {delta!r}, which is not a StreamDelta")

    def snapshot(self) -> Snapshot:
        """A function that builds the message as it is now, whenever it is called."""
        log = self.log
        return Snapshot(log, len(log), self.model, self.provider, self._timestamp)

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
