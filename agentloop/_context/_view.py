"""MessageView: a constant-time, read-only snapshot of a message list."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

from .._types import Message

__all__ = ["MessageView"]


class MessageView(Sequence[Message]):
    """A read-only, constant-time snapshot of the first ``len(view)`` messages of a list.

    The loop only ever appends to the lists it hands out views of (anything
    that rewrites one builds a new list), so a view stays exactly what it was
    when taken, however long the conversation grows. Compares equal to any
    sequence with the same messages.
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
