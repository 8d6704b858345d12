"""The seam between the loop and tracing: None (off), or what ``agentloop.otel`` installed.

The trio driver reads :data:`current` once per run; with tracing off it costs
one ``is None`` test at each place a span would start. Nothing here imports
OpenTelemetry, or anything of agentloop's: the providers report through it too.

What a reply does not carry (the API's id for the response) a provider reports
with :func:`response_read`, to the traced model request in progress in its task
(:func:`reading_response`, which the driver enters around ``provider.stream``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ._events import AgentStop
    from ._tool import ToolResult
    from ._types import AssistantMessage, ToolCall, ToolResultMessage, Usage
    from .providers import ModelRequest, Provider

__all__ = ["Response", "Telemetry", "current", "reading_response", "response_read"]


class Telemetry(Protocol):
    """What the driver tells a tracer. Each ``*_started`` returns a handle for its end."""

    def run_started(self, loop_id: str, agent_name: str, parent_loop_id: str | None) -> Any: ...

    def run_ended(self, handle: Any, stop: AgentStop, usage: Usage) -> None: ...

    def model_started(self, provider: Provider, request: ModelRequest) -> Any: ...

    def model_retried(self, handle: Any, attempt: int, delay: float, error: str) -> None: ...

    def model_ended(
        self,
        handle: Any,
        message: AssistantMessage | None,
        error: BaseException | None,
        response: Response | None = None,
    ) -> None: ...

    def tool_started(self, call: ToolCall) -> Any: ...

    def tool_ended(
        self,
        handle: Any,
        result: ToolResult | None,
        is_error: bool,
        error: BaseException | None,
    ) -> None: ...

    def tool_not_run(
        self, message: ToolResultMessage, call: ToolCall | None, known: bool = True
    ) -> None: ...


#: The installed tracer, or None: tracing is off.
current: Telemetry | None = None


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
