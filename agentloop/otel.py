"""OpenTelemetry traces and metrics, by the GenAI semantic conventions (``agentloop[otel]``).

Off until :func:`instrument` is called; then every run in the process reports::

    invoke_agent <agent>            a run (INTERNAL)
    ├── chat <model>                each model request (CLIENT), retries as span events
    ├── execute_tool <tool>         each tool call (INTERNAL), its outcome
    │   └── invoke_agent <child>    a sub-agent's run, under the call that runs it
    │       └── ...
    └── ...

The spans carry the conventions' ``gen_ai.*`` attributes (operation, provider,
request and response model, finish reasons, token usage with cache reads and
writes, tool name and call id, agent name and id), and ``error.type`` with an
ERROR status where something failed, was cancelled or timed out. Calls that never
ran (refused, skipped, vetoed) get a span of no length with their outcome. The
metrics are the conventions' histograms ``gen_ai.client.token.usage`` and
``gen_ai.client.operation.duration``.

Content (prompts, completions, tool arguments and results, and every text that
may quote them: error texts, the model's name for a tool that does not exist) is
recorded only with ``capture_content=True``. Without it a failed span's status
description is its ``error.type`` (``error``, ``timeout``, ``cancelled``,
``vetoed``, ``RateLimitError``...), never the error's text. Credentials are
never recorded: API keys travel in headers, which are never recorded, and the
tools that hold credentials (MCP, OpenAPI) redact them from the results the
model (and so the trace) sees.

Example::

    from opentelemetry.sdk.trace import TracerProvider
    import agentloop.otel

    agentloop.otel.instrument(tracer_provider=TracerProvider())
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from . import _telemetry
from ._events import AgentStop, StopKind
from ._provider import ModelRequest, Provider
from ._tool import ToolResult
from ._trace_context import Response
from ._types import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolOutcome,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = ["instrument", "is_instrumented", "uninstrument"]

_SCOPE = "agentloop"
_METRIC_KEYS: tuple[str, ...] = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
)
_FAILED_STOPS = {
    StopKind.ERROR: "error",
    StopKind.ABORTED: "cancelled",
    StopKind.DEADLINE: "deadline",
    StopKind.OUTPUT_FAILED: "output_failed",
}
#: A tool call's ``agentloop.tool.outcome`` (and ``error.type``, but for ``ok``), by its
#: outcome: the attribute's values are ``ok``, ``error``, ``timeout``, ``cancelled``,
#: ``vetoed`` and ``skipped``.
_TRACED_OUTCOMES = {
    ToolOutcome.OK: "ok",
    ToolOutcome.OUTPUT_ACCEPTED: "ok",
    ToolOutcome.ERROR: "error",
    ToolOutcome.INVALID_ARGUMENTS: "error",
    ToolOutcome.NOT_FOUND: "error",
    ToolOutcome.DENIED: "error",
    ToolOutcome.NOT_RUN_AGAIN: "error",
    ToolOutcome.INTERRUPTED: "error",
    ToolOutcome.TIMED_OUT: "timeout",
    ToolOutcome.CANCELLED: "cancelled",
    ToolOutcome.VETOED: "vetoed",
    ToolOutcome.SKIPPED: "skipped",
    ToolOutcome.NOT_RUN: "skipped",
    ToolOutcome.OUTPUT_GIVEN: "skipped",
}
_FINISH = {
    "stop": "stop",
    "tool_use": "tool_calls",
    "length": "length",
    "refusal": "content_filter",
    "error": "error",
    "aborted": "cancelled",
    "paused": "paused",
}


def instrument(
    *,
    tracer_provider: Any = None,
    meter_provider: Any = None,
    capture_content: bool = False,
) -> None:
    """Turn tracing and metrics on for every run that starts from now on.

    ``tracer_provider`` and ``meter_provider`` default to OpenTelemetry's global
    ones. ``capture_content`` records prompts, completions, tool arguments and
    results on the spans (``gen_ai.input.messages``, ``gen_ai.output.messages``,
    ``gen_ai.tool.call.arguments``, ``gen_ai.tool.call.result``), and error texts
    in status descriptions and retry events; off by default (a failed span then
    says only its ``error.type``). Calling it again replaces the settings.

    Raises:
        ModuleNotFoundError: ``opentelemetry-api`` is not installed (install
            ``agentloop[otel]``).
    """
    from opentelemetry import metrics, trace

    tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer(_SCOPE)
    meter = (meter_provider or metrics.get_meter_provider()).get_meter(_SCOPE)
    _telemetry.current = _OtelTelemetry(tracer, meter, capture_content)


def uninstrument() -> None:
    """Turn tracing off for runs that start from now on."""
    _telemetry.current = None


def is_instrumented() -> bool:
    """Whether runs are traced."""
    return _telemetry.current is not None


class _Span:
    """An open span, the context token that made it current, and when it began."""

    __slots__ = ("attributes", "span", "started", "token")

    def __init__(self, span: Any, token: Any, attributes: dict[str, Any]) -> None:
        self.span = span
        self.token = token
        self.started = time.monotonic()
        self.attributes = attributes


class _OtelTelemetry:
    """The :class:`agentloop._telemetry.Telemetry` that speaks OpenTelemetry."""

    def __init__(self, tracer: Any, meter: Any, capture_content: bool) -> None:
        from opentelemetry import context, trace

        self._trace = trace
        self._context = context
        self.tracer = tracer
        self.capture_content = capture_content
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
        )
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
        )

    # ----------------------------------------------------------------- spans

    def _open(self, name: str, kind: Any, attributes: dict[str, Any]) -> _Span:
        span = self.tracer.start_span(name, kind=kind, attributes=attributes)
        token = self._context.attach(self._trace.set_span_in_context(span))
        return _Span(span, token, attributes)

    def _close(self, handle: _Span, error_type: str | None, text: str = "") -> None:
        span = handle.span
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            span.set_status(
                self._trace.Status(self._trace.StatusCode.ERROR, self._why(error_type, text))
            )
        span.end()
        try:
            self._context.detach(handle.token)
        except ValueError:  # pragma: no cover - detached in another context
            pass

    def _why(self, error_type: str, text: str) -> str:
        """A failed span's status description: the error's text only if content is
        captured (it may quote what the model, a tool or a server wrote), else its type."""
        return (text or error_type) if self.capture_content else error_type

    # ----------------------------------------------------------------- runs

    def run_started(self, loop_id: str, agent_name: str, parent_loop_id: str | None) -> _Span:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": agent_name,
            "gen_ai.agent.id": loop_id,
        }
        if parent_loop_id is not None:
            attributes["agentloop.parent_loop_id"] = parent_loop_id
        return self._open(f"invoke_agent {agent_name}", self._trace.SpanKind.INTERNAL, attributes)

    def run_ended(self, handle: _Span, stop: AgentStop, usage: Usage) -> None:
        span = handle.span
        span.set_attribute("agentloop.stop_reason", stop.kind.value)
        _set_usage(span, usage)
        failed = _FAILED_STOPS.get(stop.kind)
        self._close(handle, failed, stop.message if failed else "")

    # ----------------------------------------------------------------- model requests

    def model_started(self, provider: Provider, request: ModelRequest) -> _Span:
        model = getattr(provider, "model", None)  # a ModelConfig, or a name (ScriptedProvider)
        model_id = model if isinstance(model, str) else getattr(model, "id", None)
        provider_name = (
            getattr(model, "provider", None)
            or getattr(provider, "provider_name", None)
            or _provider_name(provider)
        )
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name,
        }
        if model_id:
            attributes["gen_ai.request.model"] = model_id
        max_tokens = request.max_tokens or getattr(model, "max_tokens", None)
        if max_tokens:
            attributes["gen_ai.request.max_tokens"] = max_tokens
        if request.temperature is not None:
            attributes["gen_ai.request.temperature"] = request.temperature
        if self.capture_content:
            attributes["gen_ai.input.messages"] = json.dumps(
                [_message(m) for m in request.messages], ensure_ascii=False
            )
            if request.system_prompt:
                attributes["gen_ai.system_instructions"] = json.dumps(
                    [{"type": "text", "content": request.system_prompt}], ensure_ascii=False
                )
        name = f"chat {model_id}" if model_id else "chat"
        return self._open(name, self._trace.SpanKind.CLIENT, attributes)

    def model_retried(self, handle: _Span, attempt: int, delay: float, error: str) -> None:
        if handle is not None:
            attributes: dict[str, Any] = {"agentloop.attempt": attempt, "agentloop.delay": delay}
            if self.capture_content:
                attributes["error.message"] = error
            handle.span.add_event("gen_ai.request.retry", attributes)

    def model_ended(
        self,
        handle: _Span,
        message: AssistantMessage | None,
        error: BaseException | None,
        response: Response | None = None,
    ) -> None:
        span = handle.span
        metric: dict[str, Any] = {
            key: handle.attributes[key] for key in _METRIC_KEYS if key in handle.attributes
        }
        error_type: str | None = None
        if message is not None:
            if response is not None and response.id:
                span.set_attribute("gen_ai.response.id", response.id)
            if message.model:
                span.set_attribute("gen_ai.response.model", message.model)
                metric["gen_ai.response.model"] = message.model
            span.set_attribute(
                "gen_ai.response.finish_reasons",
                [_FINISH.get(message.stop_reason.value, message.stop_reason.value)],
            )
            _set_usage(span, message.usage)
            usage = message.usage
            prompt = usage.input + usage.cache_read + usage.cache_write
            self.tokens.record(prompt, {**metric, "gen_ai.token.type": "input"})
            self.tokens.record(usage.output, {**metric, "gen_ai.token.type": "output"})
            if self.capture_content:
                span.set_attribute(
                    "gen_ai.output.messages",
                    json.dumps([_message(message)], ensure_ascii=False),
                )
            if message.stop_reason.value == "error":
                error_type = "error"
        elif error is not None:
            error_type = _error_type(error)
        if error_type is not None:
            metric["error.type"] = error_type
        self.duration.record(time.monotonic() - handle.started, metric)
        text = "" if error is None else str(error)
        if message is not None and message.error_message:
            text = message.error_message
        self._close(handle, error_type, text)

    # ----------------------------------------------------------------- tool calls

    def _tool_attributes(self, name: str | None, call_id: str) -> dict[str, Any]:
        attributes = {"gen_ai.operation.name": "execute_tool"}
        if name is not None:
            attributes["gen_ai.tool.name"] = name
        attributes["gen_ai.tool.call.id"] = call_id
        attributes["gen_ai.tool.type"] = "function"
        return attributes

    def tool_started(self, call: ToolCall) -> _Span:
        attributes = self._tool_attributes(call.name, call.id)
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(
                call.arguments, ensure_ascii=False
            )
        return self._open(f"execute_tool {call.name}", self._trace.SpanKind.INTERNAL, attributes)

    def tool_ended(
        self,
        handle: _Span,
        result: ToolResult | None,
        outcome: ToolOutcome,
        error: BaseException | None,
    ) -> None:
        span = handle.span
        if result is None:
            traced = "cancelled" if _is_cancelled(error) else "error"
            text = "" if error is None else str(error) or type(error).__name__
        else:
            traced = _TRACED_OUTCOMES[outcome]
            text = result.text_content[:500] if outcome.is_error else ""
            if self.capture_content:
                span.set_attribute("gen_ai.tool.call.result", result.text_content)
        span.set_attribute("agentloop.tool.outcome", traced)
        self._close(handle, None if traced == "ok" else traced, text)

    def tool_not_run(
        self, message: ToolResultMessage, call: ToolCall | None, known: bool = True
    ) -> None:
        # A name the model made up (no such tool) is the model's text: content.
        name = message.tool_name if known or self.capture_content else None
        attributes = self._tool_attributes(name, message.tool_call_id)
        text = "".join(b.text for b in message.content if isinstance(b, TextContent))
        outcome = _TRACED_OUTCOMES[message.outcome]
        attributes["agentloop.tool.outcome"] = outcome
        if self.capture_content:
            if call is not None:
                attributes["gen_ai.tool.call.arguments"] = json.dumps(
                    call.arguments, ensure_ascii=False
                )
            attributes["gen_ai.tool.call.result"] = text
        span = self.tracer.start_span(
            "execute_tool" if name is None else f"execute_tool {name}",
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes,
        )
        if outcome != "ok":
            span.set_attribute("error.type", outcome)
            span.set_status(
                self._trace.Status(self._trace.StatusCode.ERROR, self._why(outcome, text[:500]))
            )
        span.end()


def _provider_name(provider: Provider) -> str:
    """``ScriptedProvider`` is ``scripted``, ``FallbackProvider`` ``fallback``..."""
    name = type(provider).__name__.removesuffix("Provider")
    return name.lower() or type(provider).__name__


def _set_usage(span: Any, usage: Usage) -> None:
    """The conventions count cached prompt tokens in ``input_tokens``, and also apart."""
    span.set_attribute(
        "gen_ai.usage.input_tokens", usage.input + usage.cache_read + usage.cache_write
    )
    span.set_attribute("gen_ai.usage.output_tokens", usage.output)
    if usage.cache_read:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read)
    if usage.cache_write:
        span.set_attribute("gen_ai.usage.cache_creation.input_tokens", usage.cache_write)
    if usage.reasoning:
        span.set_attribute("gen_ai.usage.reasoning.output_tokens", usage.reasoning)


def _is_cancelled(error: BaseException | None) -> bool:
    import trio

    return isinstance(error, trio.Cancelled)


def _error_type(error: BaseException) -> str:
    return "cancelled" if _is_cancelled(error) else type(error).__name__


def _parts(content: Sequence[Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            parts.append({"type": "text", "content": block.text})
        elif isinstance(block, ThinkingContent):
            parts.append({"type": "reasoning", "content": block.thinking})
        elif isinstance(block, ToolCall):
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.id,
                    "name": block.name,
                    "arguments": block.arguments,
                }
            )
        elif isinstance(block, ImageContent):
            parts.append({"type": "blob", "modality": "image", "mime_type": block.mime_type})
    return parts


def _message(message: Message) -> dict[str, Any]:
    """A message in the conventions' JSON shape (images by type only, never their data)."""
    if isinstance(message, UserMessage):
        return {"role": "user", "parts": _parts(message.content)}
    if isinstance(message, AssistantMessage):
        out: dict[str, Any] = {"role": "assistant", "parts": _parts(message.content)}
        out["finish_reason"] = _FINISH.get(message.stop_reason.value, message.stop_reason.value)
        return out
    assert isinstance(message, ToolResultMessage)
    text = "".join(b.text for b in message.content if isinstance(b, TextContent))
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": message.tool_call_id, "response": text}],
    }
