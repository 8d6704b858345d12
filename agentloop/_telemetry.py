"""The seam between the loop and tracing: None (off), or what ``agentloop.otel`` installed.

The trio driver reads :data:`current` once per run; with tracing off it costs
one ``is None`` test at each place a span would start. Nothing here imports
OpenTelemetry. What a reply does not carry (the API's id for it) comes through
:mod:`._trace_context`.
"""

from __future__ import annotations

from typing import Any, Protocol

from ._events import AgentStop
from ._provider import ModelRequest, Provider
from ._tool import ToolResult
from ._trace_context import Response
from ._types import AssistantMessage, ToolCall, ToolOutcome, ToolResultMessage, Usage

__all__ = ["Telemetry", "current"]


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
        outcome: ToolOutcome,
        error: BaseException | None,
    ) -> None: ...

    def tool_not_run(
        self, message: ToolResultMessage, call: ToolCall | None, known: bool = True
    ) -> None: ...


#: The installed tracer, or None: tracing is off.
current: Telemetry | None = None
