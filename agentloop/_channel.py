"""The receiving end of a run's events: a memory channel that drains without a trip per event."""

from __future__ import annotations

from types import TracebackType
from typing import Generic, TypeVar

import trio

__all__ = ["EventReceiver"]

T = TypeVar("T")


class EventReceiver(trio.abc.ReceiveChannel[T], Generic[T]):
    """A :class:`trio.MemoryReceiveChannel` whose ``receive`` takes a queued event at once.

    ``receive()`` (and ``async for``) return an event already in the buffer
    without passing through trio's scheduler: a consumer takes a burst of
    events in one go instead of one per scheduler pass. It is still a cancel
    point, and it waits (a full checkpoint) when the buffer is empty, so a
    consumer runs at most the buffer's size of events without letting other
    tasks run. Everything else is the memory channel's.

    Raises what :meth:`trio.MemoryReceiveChannel.receive` raises:
    :class:`trio.EndOfChannel` once the run is over and every event was taken,
    :class:`trio.ClosedResourceError` after ``close()``.
    """

    __slots__ = ("_inner",)

    def __init__(self, inner: trio.MemoryReceiveChannel[T]) -> None:
        self._inner = inner

    async def receive(self) -> T:
        """The next event; waits only when none is queued."""
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            return self._inner.receive_nowait()
        except trio.WouldBlock:
            return await self._inner.receive()

    def receive_nowait(self) -> T:
        """The next event if one is queued, else raise :class:`trio.WouldBlock`."""
        return self._inner.receive_nowait()

    def clone(self) -> EventReceiver[T]:
        """Another receiver of the same events (each event goes to one of them)."""
        return EventReceiver(self._inner.clone())

    def statistics(self) -> trio.MemoryChannelStatistics:
        """The underlying memory channel's statistics."""
        return self._inner.statistics()

    def close(self) -> None:
        """Close this receiver synchronously; the run then goes on without sending."""
        self._inner.close()

    async def aclose(self) -> None:
        """Close this receiver (a checkpoint)."""
        await self._inner.aclose()

    def __enter__(self) -> EventReceiver[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
