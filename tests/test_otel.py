"""OpenTelemetry: the exact span trees, attributes and metrics (the SDK's in-memory exporter)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

import agentloop as al
import agentloop.otel
from agentloop.providers import (
    ModelConfig,
    OpenAIProvider,
    ScriptedProvider,
    call,
    reply,
)
from agentloop.tools import SubAgentTool

FIXTURES = Path(__file__).parent / "fixtures"


class Traces:
    def __init__(self, capture_content: bool = False) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.metrics = InMemoryMetricReader()
        agentloop.otel.instrument(
            tracer_provider=provider,
            meter_provider=MeterProvider(metric_readers=[self.metrics]),
            capture_content=capture_content,
        )

    def spans(self) -> list[ReadableSpan]:
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)

    def tree(self, *keys: str) -> list[tuple[Any, ...]]:
        """(depth, name, status, chosen attributes...) in start order."""
        spans = self.spans()
        by_id = {s.context.span_id: s for s in spans if s.context is not None}

        def depth(span: ReadableSpan) -> int:
            level = 0
            while span.parent is not None and span.parent.span_id in by_id:
                span = by_id[span.parent.span_id]
                level += 1
            return level

        return [
            (
                depth(s),
                s.name,
                s.status.status_code.name,
                *(dict(s.attributes or {}).get(key) for key in keys),
            )
            for s in spans
        ]


@pytest.fixture
def traces() -> Iterator[Traces]:
    tracing = Traces()
    try:
        yield tracing
    finally:
        agentloop.otel.uninstrument()


@al.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    await trio.sleep(1)
    return a + b


@al.tool
async def slow() -> str:
    """Take forever."""
    await trio.sleep(1000)
    return "never"


def test_off_by_default_and_switchable() -> None:
    assert not agentloop.otel.is_instrumented()
    tracing = Traces()
    assert agentloop.otel.is_instrumented()
    agentloop.otel.uninstrument()
    assert not agentloop.otel.is_instrumented()
    assert tracing.spans() == []


async def test_a_text_run(traces: Traces) -> None:
    agent = al.Agent(ScriptedProvider([reply("Hello there.")]), agent_id="greeter")
    await agent.run("Hi")
    (run, chat) = traces.spans()
    assert traces.tree() == [(0, "invoke_agent greeter", "UNSET"), (1, "chat scripted", "UNSET")]
    assert dict(run.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "greeter",
        "gen_ai.agent.id": "greeter.1",
        "agentloop.stop_reason": "completed",
        "gen_ai.usage.input_tokens": 1,
        "gen_ai.usage.output_tokens": 3,
    }
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 1,
        "gen_ai.usage.output_tokens": 3,
    }
    assert "gen_ai.input.messages" not in (chat.attributes or {})  # content is opt-in


async def test_a_parallel_tool_batch_nests_under_the_run(
    traces: Traces, autojump_clock: Any
) -> None:
    provider = ScriptedProvider(
        [
            reply(
                call("add", {"a": 1, "b": 2}, id="c1"),
                call("add", {"a": 3, "b": 4}, id="c2"),
                call("missing", {}, id="c3"),
                call("add", {"a": "x"}, id="c4"),
            ),
            reply("3 and 7."),
        ]
    )
    agent = al.Agent(provider, tools=[add], agent_id="calc")
    await agent.run("Add")
    tree = traces.tree("gen_ai.tool.call.id", "agentloop.tool.outcome")
    assert tree[0] == (0, "invoke_agent calc", "UNSET", None, None)
    assert tree[1] == (1, "chat scripted", "UNSET", None, None)
    # The calls that ran, and the two answered without running (zero-length spans).
    assert sorted(tree[2:6]) == [
        (1, "execute_tool add", "ERROR", "c4", "error"),
        (1, "execute_tool add", "UNSET", "c1", "ok"),
        (1, "execute_tool add", "UNSET", "c2", "ok"),
        (1, "execute_tool missing", "ERROR", "c3", "error"),
    ]
    assert tree[6] == (1, "chat scripted", "UNSET", None, None)
    spans = {dict(s.attributes or {}).get("gen_ai.tool.call.id"): s for s in traces.spans()}
    assert dict(spans["c1"].attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "agentloop.tool.outcome": "ok",
    }
    ran = [spans["c1"], spans["c2"]]
    assert all(s.end_time - s.start_time > 0 for s in ran)  # type: ignore[operator]
    assert spans["c3"].status.description == "Tool not found: missing"


async def test_a_sub_agent_runs_under_the_call_that_runs_it(
    traces: Traces, autojump_clock: Any
) -> None:
    kid = SubAgentTool(
        "kid", ScriptedProvider([reply(call("add", {"a": 1, "b": 2})), reply("3")]), tools=[add]
    )
    provider = ScriptedProvider([reply(call("kid", {"task": "add"}, id="k1")), reply("ok")])
    await al.Agent(provider, tools=[kid], agent_id="boss").run("go")
    assert traces.tree("gen_ai.agent.id") == [
        (0, "invoke_agent boss", "UNSET", "boss.1"),
        (1, "chat scripted", "UNSET", None),
        (1, "execute_tool kid", "UNSET", None),
        (2, "invoke_agent kid", "UNSET", "boss.1.kid.k1"),
        (3, "chat scripted", "UNSET", None),
        (3, "execute_tool add", "UNSET", None),
        (3, "chat scripted", "UNSET", None),
        (1, "chat scripted", "UNSET", None),
    ]


async def test_an_aborted_run_ends_every_open_span_cancelled(
    traces: Traces, autojump_clock: Any
) -> None:
    provider = ScriptedProvider(
        [reply(call("slow", {}, id="s1"), call("slow", {}, id="s2")), reply("never")]
    )
    agent = al.Agent(provider, tools=[slow], agent_id="a")
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionStart) and event.tool_call_id == "s2":
                await trio.sleep(5)
                agent.abort()
    tree = traces.tree("error.type", "agentloop.tool.outcome")
    assert tree[0] == (0, "invoke_agent a", "ERROR", "cancelled", None)
    assert tree[1] == (1, "chat scripted", "UNSET", None, None)
    assert sorted(tree[2:]) == [
        (1, "execute_tool slow", "ERROR", "cancelled", "cancelled"),
        (1, "execute_tool slow", "ERROR", "cancelled", "cancelled"),
    ]
    run = traces.spans()[0]
    assert run.status.description == "the run was aborted"


async def test_a_retried_request_is_one_span_with_a_retry_event(
    traces: Traces, autojump_clock: Any
) -> None:
    body = (FIXTURES / "openai" / "text_usage.sse").read_bytes()
    answers = [
        httpx2.Response(
            429,
            headers={"retry-after": "2", "content-type": "application/json"},
            content=json.dumps(
                {"error": {"message": "Slow down.", "type": "requests", "code": "rate_limit"}}
            ).encode(),
        ),
        httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body),
    ]

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return answers.pop(0)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    model = ModelConfig.openai("gpt-5.4", api_key="sk-secret-key-123")
    agent = al.Agent(OpenAIProvider(model, client=client), agent_id="a")
    await agent.run("Hi")
    _, chat = traces.spans()
    assert chat.name == "chat gpt-5.4"
    assert [(e.name, dict(e.attributes or {})) for e in chat.events] == [
        (
            "gen_ai.request.retry",
            {
                "agentloop.attempt": 2,
                "agentloop.delay": 2.0,
                "error.message": "OpenAI API error 429 (requests): Slow down.",
            },
        )
    ]
    attributes = dict(chat.attributes or {})
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.max_tokens"] == 128_000
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    everything = json.dumps([dict(s.attributes or {}) for s in traces.spans()])
    assert "sk-secret-key-123" not in everything


async def test_content_is_recorded_only_when_asked(autojump_clock: Any) -> None:
    tracing = Traces(capture_content=True)
    try:
        provider = ScriptedProvider([reply(call("add", {"a": 1, "b": 2}, id="c1")), reply("3")])
        await al.Agent(provider, tools=[add], system_prompt="Be exact.").run("1+2?")
    finally:
        agentloop.otel.uninstrument()
    spans = tracing.spans()
    first_chat = dict(spans[1].attributes or {})
    assert json.loads(first_chat["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "1+2?"}]}
    ]
    assert json.loads(first_chat["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be exact."}
    ]
    assert json.loads(first_chat["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "c1", "name": "add", "arguments": {"a": 1, "b": 2}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    tool = dict(spans[2].attributes or {})
    assert (tool["gen_ai.tool.call.arguments"], tool["gen_ai.tool.call.result"]) == (
        '{"a": 1, "b": 2}',
        "3",
    )


async def test_metrics_follow_the_conventions(traces: Traces) -> None:
    await al.Agent(ScriptedProvider([reply("Hello there.")])).run("Hi")
    data = traces.metrics.get_metrics_data()
    assert data is not None
    points: dict[str, list[tuple[dict[str, Any], float]]] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points[metric.name] = [
                    (dict(p.attributes or {}), p.sum)  # type: ignore[union-attr]
                    for p in metric.data.data_points
                ]
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
    }
    assert sorted(points["gen_ai.client.token.usage"], key=lambda p: p[1]) == [
        ({**common, "gen_ai.token.type": "input"}, 1),
        ({**common, "gen_ai.token.type": "output"}, 3),
    ]
    ((attributes, _),) = points["gen_ai.client.operation.duration"]
    assert attributes == common
