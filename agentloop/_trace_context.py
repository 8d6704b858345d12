"""What a provider read of the response that became its message, for tracing.

A reply does not carry everything tracing records (the API's id for the
response): a provider reports it with :func:`response_read`, to the traced
model request in progress in its task, which the driver opens around
``provider.stream`` with :func:`reading_response`. Outside one, nothing
happens. This module imports nothing of agentloop's, so providers can use it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["Response", "reading_response", "response_read"]


class Response:
    """What a provider read of the reply that became the request's message."""

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id: str | None = None  # the API's id for the response


_reading: contextvars.ContextVar[Response | None] = contextvars.ContextVar(
    "agentloop_response", default=None
)


@contextlib.contextmanager
def reading_response() -> Iterator[Response]:
    """While a traced model request is in progress in this task: what its provider reads."""
    response = Response()
    token = _reading.set(response)
    try:
        yield response
    finally:
        _reading.reset(token)


def response_read(response_id: str | None) -> None:
    """A provider made its message from the response ``response_id`` (None: it has none).

    Called once per message returned, after any retry: the last call is the
    message's. Nothing happens unless a traced request is in progress in this task.
    """
    response = _reading.get()
    if response is not None:
        response.id = response_id or None
