"""OpenTelemetry: the exact span trees, attributes and metrics (the SDK's in-memory exporter)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
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
from sse_server import Reply, serve

import agentloop as al
import agentloop.otel
from agentloop.providers import (
    AnthropicProvider,
    ModelConfig,
    OpenAIProvider,
    OpenAIResponsesProvider,
    ProviderError,
    RetryConfig,
    ScriptedProvider,
    call,
    fail,
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


@al.tool
async def gives_up() -> str:
    """Give up, in words that begin like a cancellation's."""
    raise al.ToolError("Cancelled by the user's choice")


@al.tool
async def impatient() -> str:
    """Give up, in words that begin like a timeout's."""
    raise al.ToolError("Tool exceeded timeout of patience")


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
        (1, "execute_tool", "ERROR", "c3", "error"),  # the model's name for it is content
        (1, "execute_tool add", "ERROR", "c4", "error"),
        (1, "execute_tool add", "UNSET", "c1", "ok"),
        (1, "execute_tool add", "UNSET", "c2", "ok"),
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
    assert (spans["c3"].status.description, spans["c4"].status.description) == ("error", "error")


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
    assert run.status.description == "cancelled"


async def test_a_tool_errors_own_words_do_not_make_it_a_cancellation_or_a_timeout(
    traces: Traces,
) -> None:
    """The outcome is the loop's, not read from the text: a ToolError whose message
    begins "Cancelled" or "Tool exceeded timeout of" is traced as an error."""
    provider = ScriptedProvider(
        [reply(call("gives_up", id="g1"), call("impatient", id="i1")), reply("ok")]
    )
    agent = al.Agent(provider, tools=[gives_up, impatient], agent_id="a")
    async with agent.prompt("go") as events:
        ends = [event async for event in events if isinstance(event, al.ToolExecutionEnd)]
    assert sorted((end.tool_call_id, end.outcome) for end in ends) == [
        ("g1", al.ToolOutcome.ERROR),
        ("i1", al.ToolOutcome.ERROR),
    ]
    tree = traces.tree("gen_ai.tool.call.id", "error.type", "agentloop.tool.outcome")
    assert sorted(tree[2:4]) == [
        (1, "execute_tool gives_up", "ERROR", "g1", "error", "error"),
        (1, "execute_tool impatient", "ERROR", "i1", "error", "error"),
    ]


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
    # The API's error text is recorded only with capture_content.
    assert [(e.name, dict(e.attributes or {})) for e in chat.events] == [
        ("gen_ai.request.retry", {"agentloop.attempt": 2, "agentloop.delay": 2.0})
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


# --------------------------------------------------------------------------- content


CANARY = "canary-7f3a"


@al.tool
async def fails(path: str) -> str:
    """Fail, naming what was asked for."""
    raise al.ToolError(f"cannot read {path}")


@al.tool
async def crashes(path: str) -> str:
    """Crash, naming what was asked for."""
    raise ValueError(f"bad path {path}")


class Retrying(ScriptedProvider):
    """A model whose first attempt failed, saying what it was asked."""

    async def stream(self, request: Any, emit: Any) -> al.AssistantMessage:
        await emit(al.StreamRestart(attempt=2, delay=0.0, error=f"overloaded by {CANARY}"))
        return await super().stream(request, emit)


def span_texts(spans: list[ReadableSpan]) -> str:
    """Everything a span records, as text: names, attributes, events, status, links, resource."""
    parts: list[Any] = []
    for span in spans:
        parts += [span.name, dict(span.attributes or {}), span.status.description]
        parts += [(e.name, dict(e.attributes or {})) for e in span.events]
        parts += [dict(link.attributes or {}) for link in span.links]
        parts += [dict(span.resource.attributes)]
    return json.dumps(parts, default=str)


async def traced_failures(tracing: Traces) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    """A run whose tool calls fail in every way, quoting the canary; then a run that fails."""
    provider = Retrying(
        [
            reply(
                call("fails", {"path": CANARY}, id="t1"),
                call("crashes", {"path": CANARY}, id="t2"),
                call("fails", {"path": {"name": CANARY}}, id="t3"),
                call("fails", f'{{"path": "{CANARY}', id="t4"),
                call(f"{CANARY}_tool", {}, id="t5"),
            ),
            reply("done"),
        ]
    )
    await al.Agent(provider, tools=[fails, crashes]).run(f"Read {CANARY}")
    first = tracing.spans()
    tracing.exporter.clear()

    def veto(name: str, call_id: str, args: dict[str, Any]) -> bool:
        raise RuntimeError(f"hook saw {args['path']}")

    failing = al.Agent(
        ScriptedProvider([reply(call("fails", {"path": CANARY})), fail(ProviderError(CANARY))]),
        tools=[fails],
        before_tool_execution=veto,
        agent_id="hooked",
    )
    with pytest.raises(RuntimeError):
        await failing.run("go")
    broken = al.Agent(
        ScriptedProvider([fail(ProviderError(f"the API quoted {CANARY}"))]), agent_id="broken"
    )
    await broken.run("go")
    return first, tracing.spans()


async def test_no_content_reaches_a_span_by_default() -> None:
    """Tool errors, malformed arguments, a made-up tool's name, the API's and a hook's error
    texts: with capture_content off none of them is in any field of any span."""
    tracing = Traces()
    try:
        first, second = await traced_failures(tracing)
    finally:
        agentloop.otel.uninstrument()
    assert CANARY not in span_texts(first + second)
    calls = {dict(s.attributes or {}).get("gen_ai.tool.call.id"): s for s in first}
    assert [
        (calls[i].name, calls[i].status.description, dict(calls[i].attributes or {})["error.type"])
        for i in ("t1", "t2", "t3", "t4", "t5")
    ] == [
        ("execute_tool fails", "error", "error"),
        ("execute_tool crashes", "error", "error"),
        ("execute_tool fails", "error", "error"),
        ("execute_tool fails", "error", "error"),
        ("execute_tool", "error", "error"),
    ]
    assert [(s.name, s.status.description) for s in second if s.status.description] == [
        ("invoke_agent hooked", "error"),
        ("invoke_agent broken", "error"),
        ("chat scripted", "ProviderError"),
    ]


async def test_error_texts_reach_the_spans_when_content_is_captured() -> None:
    tracing = Traces(capture_content=True)
    try:
        first, second = await traced_failures(tracing)
    finally:
        agentloop.otel.uninstrument()
    calls = {dict(s.attributes or {}).get("gen_ai.tool.call.id"): s for s in first}
    assert [(calls[i].name, calls[i].status.description) for i in ("t1", "t2", "t5")] == [
        ("execute_tool fails", f"cannot read {CANARY}"),
        ("execute_tool crashes", f"ValueError: bad path {CANARY}"),
        (f"execute_tool {CANARY}_tool", f"Tool not found: {CANARY}_tool"),
    ]
    for i in ("t3", "t4"):
        assert CANARY in (calls[i].status.description or "")
    retry = first[1].events[0]
    assert dict(retry.attributes or {})["error.message"] == f"overloaded by {CANARY}"
    assert [(s.name, s.status.description) for s in second if s.status.description] == [
        ("invoke_agent hooked", f"RuntimeError: hook saw {CANARY}"),
        ("invoke_agent broken", f"the API quoted {CANARY}"),
        ("chat scripted", f"the API quoted {CANARY}"),
    ]


# --------------------------------------------------------------------------- after a retry


OVERLOADED = json.dumps({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
# (fixture, provider class, model, the response's id and model in the fixture)
APIS = {
    "anthropic": (
        "text.sse",
        AnthropicProvider,
        ModelConfig.anthropic("claude-sonnet-4-5", api_key="k" * 20),
        "msg_01XFDUDYJgAACzvnptvVoYEL",
        "claude-sonnet-5",
    ),
    "openai": (
        "text_usage.sse",
        OpenAIProvider,
        ModelConfig.openai("gpt-5.4", api_key="k" * 20),
        "chatcmpl-CZq1uYx8Jd3wT0aLhE2nVbKpR7sQm",
        "gpt-5.4-2026-03-05",
    ),
    "responses": (
        "text_usage.sse",
        OpenAIResponsesProvider,
        ModelConfig.openai_responses("gpt-5.4", api_key="k" * 20),
        "resp_1c4ebc2729532c49996698f6ae94301f04059ac0f2ccd200",
        "gpt-5.4-2026-03-05",
    ),
}


MID_STREAM = {  # a first attempt that began a response of another id, then failed
    "anthropic": "overloaded_error.sse",
    "openai": "error_mid_stream.sse",
    "responses": "error_mid_stream.sse",
}


# A stream left at an error event leaves httpcore2's inner generator to the collector,
# which warns (the provider does not drain a failed stream: the retry would wait for it).
@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("retried", ["no", "529", "mid-stream"])
@pytest.mark.parametrize("api", sorted(APIS))
async def test_the_chat_span_names_the_response_after_a_retry(
    traces: Traces, api: str, retried: str
) -> None:
    """A 529 (or a stream that failed midway), then the reply over SSE from a real server:
    the span names the reply's id and model, as it does when nothing was retried."""
    fixture, provider_class, model, response_id, response_model = APIS[api]
    body = (FIXTURES / api / fixture).read_bytes()
    replies = [Reply([body])]
    if retried == "529":
        json_type = {"content-type": "application/json"}
        replies.insert(0, Reply([OVERLOADED.encode()], status=529, headers=json_type))
    elif retried == "mid-stream":
        failed = (FIXTURES / api / MID_STREAM[api]).read_bytes()
        failed = failed.replace(response_id.encode(), b"chatcmpl-failed")
        assert failed.count(b'"id":"') > failed.count(response_id.encode())
        replies.insert(0, Reply([failed]))
    async with serve(*replies) as server:
        base = server.url if api == "anthropic" else f"{server.url}/v1"
        retry = RetryConfig(initial_delay=0.0, jitter=0.0)
        async with provider_class(attrs.evolve(model, base_url=base), retry=retry) as provider:
            await al.Agent(provider, agent_id="a").run("Hi")
    assert len(server.requests) == len(replies)
    _, chat = traces.spans()
    attributes = dict(chat.attributes or {})
    assert (attributes["gen_ai.response.id"], attributes["gen_ai.response.model"]) == (
        response_id,
        response_model,
    )
    assert len(chat.events) == len(replies) - 1
