"""AgentContext: the system prompt, the tools and the message history of one conversation."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar, overload

import attrs

from ._tool import AgentTool
from ._types import Message, ToolCall, now_ms

__all__ = ["AgentContext", "MessageView"]

M = TypeVar("M", bound=Message)


class MessageView(Sequence[Message]):
    """A read-only, constant-time snapshot of the first ``len(view)`` history messages.

    The loop only ever appends to a history list (anything that rewrites
    history builds a new list), so a view stays exactly what it was when taken,
    however long the conversation grows. Compares equal to any sequence with
    the same messages.
    """

    __slots__ = ("_items", "_length")

    def __init__(self, items: list[Message], length: int | None = None) -> None:
        self._items = items
        self._length = len(items) if length is None else length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            return tuple(self._items[: self._length][index])
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError("MessageView index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._length):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"MessageView({list(self)!r})"


def _message_list(value: Iterable[Message]) -> list[Message]:
    return list(value)


def _tool_tuple(value: Iterable[AgentTool]) -> tuple[AgentTool, ...]:
    return tuple(value)


@attrs.define(eq=False)
class AgentContext:
    """The state one conversation carries from turn to turn.

    ``messages`` is the history, oldest first; the loop appends to it as the
    run goes. Timestamps in it are strictly increasing: :meth:`stamp` moves a
    message's timestamp forward when it would not be.
    """

    system_prompt: str = ""
    messages: list[Message] = attrs.field(factory=list, converter=_message_list)
    tools: tuple[AgentTool, ...] = attrs.field(factory=tuple, converter=_tool_tuple)
    _last_timestamp: int = attrs.field(init=False, default=0)

    def __attrs_post_init__(self) -> None:
        last = 0
        for message in self.messages:
            last = max(last, message.timestamp)
        self._last_timestamp = last

    def next_timestamp(self) -> int:
        """Return now in Unix ms, or one more than the last timestamp if that is later."""
        stamp = max(now_ms(), self._last_timestamp + 1)
        self._last_timestamp = stamp
        return stamp

    def stamp(self, message: M) -> M:
        """Return ``message`` with a timestamp later than any in the history so far."""
        if message.timestamp > self._last_timestamp:
            self._last_timestamp = message.timestamp
            return message
        return attrs.evolve(message, timestamp=self.next_timestamp())

    def append(self, message: Message) -> None:
        """Append a message already passed through :meth:`stamp`."""
        self.messages.append(message)

    def view(self) -> MessageView:
        """A constant-time snapshot of the history as it is now."""
        return MessageView(self.messages)

    def open_tool_calls(self) -> list[ToolCall]:
        """Tool calls of the last assistant message that have no result yet, in order."""
        from ._types import AssistantMessage, ToolResultMessage

        answered: set[str] = set()
        for message in reversed(self.messages):
            if isinstance(message, ToolResultMessage):
                answered.add(message.tool_call_id)
            elif isinstance(message, AssistantMessage):
                return [call for call in message.tool_calls if call.id not in answered]
            else:
                break
        return []
