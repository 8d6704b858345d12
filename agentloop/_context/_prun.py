"""Prun requests: what the ``prun`` tools ask of the loop, and the queue between them."""

from __future__ import annotations

from collections import deque

import attrs

from .._check import number_field

__all__ = ["PrunQueue", "PrunRequest"]


_positive_int = number_field(at_least=1, integer=True)


@attrs.frozen
class PrunRequest:
    """A request to free at least ``tokens`` tokens of in-run context before the next turn.

    ``memo``, if given, stands in the working context where the pruned
    messages were, as ``"[Pruned context summary: <memo>]"``. ``tool_call_id``
    names the call that made the request: requests of one turn are applied
    in the order of their calls in the model's message.

    Raises:
        ValueError: ``tokens`` is not a positive integer.
    """

    tokens: int = attrs.field(validator=_positive_int)
    memo: str | None = None
    tool_call_id: str | None = None


class PrunQueue:
    """Prun requests waiting for the loop, in the order they were made.

    The ``prun`` and ``prun_with_memo`` tools put requests here; the loop takes
    them all after the tools of a turn have run and applies them in order.
    Both tools of an agent share one queue, so their order is kept.
    """

    __slots__ = ("_requests",)

    def __init__(self) -> None:
        self._requests: deque[PrunRequest] = deque()

    def __len__(self) -> int:
        return len(self._requests)

    def __repr__(self) -> str:
        return f"PrunQueue({list(self._requests)!r})"

    def put(self, request: PrunRequest) -> None:
        """Add a request at the end."""
        self._requests.append(request)

    def take_all(self) -> list[PrunRequest]:
        """Remove and return every waiting request, oldest first."""
        taken = list(self._requests)
        self._requests.clear()
        return taken
