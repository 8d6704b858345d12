"""What MCP servers ask of the client: elicitation, sampling, roots, and their logs.

Two kinds of real server: an SDK ``MCPServer`` served in-process over the
handshake-era protocol (JSON-RPC between the two sides, so requests, results and
``notifications/cancelled`` travel as they do over a transport), and the official
``server-everything`` (npm) run as a stdio process.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import pydantic
import pytest
import trio
import trio.testing
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ModelHint, SamplingMessage, TextContent
from mcp.types import ModelPreferences as SdkModelPreferences
from node_tools import node_bin, node_env

import agentloop as al
from agentloop.mcp import (
    Elicitation,
    ElicitationAnswer,
    McpConfig,
    McpLogMessage,
    McpRoot,
    McpSampling,
    ModelPreferences,
    SamplingRequest,
    StdioServer,
    open_mcp,
)
from agentloop.mcp._request_values import LOG_LEVELS
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import collect_events

ToolEnd = al.ToolExecutionEnd

# Sampling, roots and logging are deprecated in the 2026-07-28 protocol, current before it:
# the test server's own uses of them warn.
pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


class Person(pydantic.BaseModel):
    name: str
    age: int = pydantic.Field(default=30, ge=0, le=150)
    city: str = "Oslo"


def build_server() -> MCPServer:
    server = MCPServer("asker")

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Ask the user who they are."""
        result = await ctx.elicit("Who are you?", Person)
        if result.action == "accept":
            return f"accept {result.data.model_dump_json()}"
        return result.action

    @server.tool()
    async def capabilities(ctx: Context) -> str:
        """What the client declared."""
        caps = ctx.session.client_params.capabilities  # type: ignore[union-attr]
        return json.dumps(
            {
                "elicitation": caps.elicitation is not None,
                "sampling": caps.sampling is not None,
                "roots": caps.roots is not None,
            }
        )

    @server.tool()
    async def summarize(text: str, ctx: Context) -> str:
        """Ask the client's model for a summary."""
        result = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=text))],
            max_tokens=500,
            system_prompt="Summarize in five words.",
            model_preferences=SdkModelPreferences(
                hints=[ModelHint(name="haiku")], speed_priority=0.9
            ),
        )
        assert result.content.type == "text"
        return f"{result.model}: {result.content.text}"

    @server.tool()
    async def roots(ctx: Context) -> str:
        """The client's roots."""
        listed = await ctx.session.list_roots()
        return json.dumps([[str(root.uri), root.name] for root in listed.roots])

    @server.tool()
    async def chatty(ctx: Context) -> str:
        """Log at four levels, then answer."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for level in ("debug", "info", "warning", "error"):
                await ctx.log(level, f"{level} line", logger_name="worker")
            await ctx.log("critical", {"code": 7})
        return "done"

    return server


async def call_text(connection: Any, tool: str, args: dict[str, Any] | None = None) -> str:
    result = await connection.call_tool(tool, args or {})
    assert not result.is_error, result
    return "\n".join(block.text for block in result.content if block.type == "text")


# --------------------------------------------------------------------------- elicitation


async def test_an_accepted_form_gets_the_schemas_defaults_and_is_checked() -> None:
    asked: list[Elicitation] = []

    def answer(request: Elicitation) -> ElicitationAnswer:
        asked.append(request)
        if len(asked) == 1:
            return ElicitationAnswer.accept({"age": 200})  # no name; age out of range
        return ElicitationAnswer.accept({"name": "Ada"})

    async with open_mcp(build_server(), McpConfig(protocol="legacy", elicitation=answer)) as server:
        text = await call_text(server, "ask")
    assert text == 'accept {"name":"Ada","age":30,"city":"Oslo"}'
    first = asked[0]
    assert (first.server, first.message, first.mode, first.defaults) == (
        "asker",
        "Who are you?",
        "form",
        {"age": 30, "city": "Oslo"},
    )
    assert first.schema is not None
    assert first.schema["required"] == ["name"]
    assert asked[1].problems == (
        "$: 'name' is a required property",
        "$.age: 200 is greater than the maximum of 150",
    )
    assert len(asked) == 2


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_reach_the_server(action: str) -> None:
    async def answer(request: Elicitation) -> ElicitationAnswer:
        await trio.lowlevel.checkpoint()
        return getattr(ElicitationAnswer, action)()

    async with open_mcp(build_server(), McpConfig(protocol="legacy", elicitation=answer)) as server:
        assert await call_text(server, "ask") == action


async def test_answers_that_never_fit_end_in_cancel(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    def answer(request: Elicitation) -> ElicitationAnswer:
        nonlocal calls
        calls += 1
        return ElicitationAnswer.accept({"name": 5})

    async with open_mcp(build_server(), McpConfig(protocol="legacy", elicitation=answer)) as server:
        assert await call_text(server, "ask") == "cancel"
    assert calls == 3
    assert [r.getMessage() for r in caplog.records if r.name == "agentloop.mcp"] == [
        "MCP server 'asker': the answers to its question did not fit its form 3 times; "
        "sent 'cancel' ($.name: 5 is not of type 'string')"
    ]


async def test_a_failing_handler_is_an_error_for_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def answer(request: Elicitation) -> ElicitationAnswer:
        raise RuntimeError("no terminal")

    async with open_mcp(build_server(), McpConfig(protocol="legacy", elicitation=answer)) as server:
        with pytest.raises(al.ToolError) as raised:
            await server.call_tool("ask", {})
    assert str(raised.value) == (
        "MCP server 'asker' refused the call to 'ask': "
        "The client could not ask the user: RuntimeError"
    )
    assert [r.getMessage() for r in caplog.records if r.name == "agentloop.mcp"] == [
        "MCP server 'asker': the elicitation handler failed"
    ]


async def test_without_handlers_nothing_is_declared() -> None:
    async with open_mcp(build_server(), McpConfig(protocol="legacy")) as server:
        declared = json.loads(await call_text(server, "capabilities"))
        with pytest.raises(al.ToolError) as raised:
            await server.call_tool("ask", {})
    assert declared == {"elicitation": False, "sampling": False, "roots": False}
    assert str(raised.value) == (
        "MCP server 'asker' refused the call to 'ask': Elicitation not supported"
    )


async def test_with_handlers_each_is_declared() -> None:
    async with open_mcp(
        build_server(),
        McpConfig(
            protocol="legacy",
            elicitation=lambda request: ElicitationAnswer.cancel(),
            sampling=McpSampling(ScriptedProvider([])),
            roots=["/srv/data"],
        ),
    ) as server:
        declared = json.loads(await call_text(server, "capabilities"))
    assert declared == {"elicitation": True, "sampling": True, "roots": True}


# --------------------------------------------------------------------------- sampling


async def test_sampling_is_counted_in_the_runs_usage() -> None:
    seen: list[SamplingRequest] = []
    helper = ScriptedProvider([reply("Rain all week, mostly.")], model="helper-model")

    def choose(request: SamplingRequest) -> Any:
        seen.append(request)
        return helper

    main = ScriptedProvider(
        [reply(call("asker__summarize", {"text": "A long forecast."})), reply("Done.")],
        model="main-model",
    )
    async with open_mcp(
        build_server(), McpConfig(prefix="asker", protocol="legacy", sampling=McpSampling(choose))
    ) as server:
        agent = al.Agent(main, tools=server.tools)
        events = await collect_events(agent, "Summarize")
        sampling_usage = server.sampling_usage
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    results = [e.result.text_content for e in events if isinstance(e, al.ToolExecutionEnd)]
    assert results == ["helper-model: Rain all week, mostly."]
    request = seen[0]
    assert request.server == "asker"
    assert request.system_prompt == "Summarize in five words."
    assert request.max_tokens == 500
    assert request.preferences == ModelPreferences(hints=("haiku",), speed_priority=0.9)
    assert [m.text for m in request.messages] == ["A long forecast."]  # type: ignore[union-attr]
    sampled = end.usage_by_model["helper-model"]
    assert sampled.input > 0
    assert sampled.output > 0
    assert sampling_usage == sampled
    assert end.usage == end.usage_by_model["main-model"] + sampled


async def test_max_tokens_caps_what_the_server_asks() -> None:
    helper = ScriptedProvider([reply("Short.")])
    sampling = McpSampling(helper, max_tokens=64)
    async with open_mcp(build_server(), McpConfig(protocol="legacy", sampling=sampling)) as server:
        await call_text(server, "summarize", {"text": "x"})
    assert [r.max_tokens for r in helper.requests] == [64]


FLOOD_SERVER = Path(__file__).parent.parent / "mcp_flood_server.py"
LIMIT_TEXT = "Max tokens reached (2100/2000)"


def flood_agent(main: ScriptedProvider, server: Any, **limits: Any) -> al.Agent:
    return al.Agent(main, tools=server.tools, limits=al.ExecutionLimits(**limits))


async def test_a_sampling_flood_stops_at_the_runs_token_limit(tmp_path: Path) -> None:
    """A server asking for reply after reply (each as long as it can be) within one call:
    the model is asked for the capped length, the request made once the run has reached
    its limit is refused, the call ends, and the run stops with that limit."""
    log = tmp_path / "flood.log"
    helper = ScriptedProvider(
        [reply("more", usage=al.Usage(input=20, output=980))] * 40, model="helper-model"
    )
    main = ScriptedProvider(
        [reply(call("flood__flood", {}), usage=al.Usage(input=90, output=10)), reply("no")],
        model="main-model",
    )
    flood = StdioServer(sys.executable, [str(FLOOD_SERVER), str(log)])
    with trio.fail_after(60):
        async with open_mcp(
            flood,
            McpConfig(prefix="flood", protocol="legacy", sampling=McpSampling(helper)),
            name="flood",
        ) as server:
            agent = flood_agent(main, server, max_total_tokens=2000)
            events = await collect_events(agent, "Go")
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.MAX_TOKENS, LIMIT_TEXT)
    assert [(e.result.text_content, e.is_error) for e in events if isinstance(e, ToolEnd)] == [
        (
            "MCP server 'flood' asked for a model reply after the run reached its limit "
            f"({LIMIT_TEXT}); the call was ended",
            True,
        )
    ]
    assert end.usage_by_model == {
        "main-model": al.Usage(input=90, output=10),
        "helper-model": al.Usage(input=40, output=1960),
    }
    assert (end.usage.input, end.usage.output) == (130, 1970)
    assert [r.max_tokens for r in helper.requests] == [4096, 4096]  # not 2**31 - 1
    assert len(main.requests) == 1
    last = end.messages[-1]
    assert isinstance(last, al.UserMessage)
    assert last.text == f"[Agent stopped: {LIMIT_TEXT}]"
    lines = log.read_text().splitlines()
    assert lines[:2] == ["reply 1", "reply 2"]
    # Then the refusal, or the call's cancellation, whichever reached the server first.
    assert lines[2:] in (
        [f"refused The client's run reached its limit: {LIMIT_TEXT}"],
        ["cancelled"],
        [],
    )


async def test_a_burst_of_sampling_requests_is_answered_one_at_a_time(tmp_path: Path) -> None:
    """Ten requests sent at once: each is checked knowing what the one before cost."""

    class Helper(ScriptedProvider):
        async def stream(self, request: Any, emit: Any) -> al.AssistantMessage:
            # Let the other requests in while this one is answered, as a real model would.
            await trio.testing.wait_all_tasks_blocked()
            return await super().stream(request, emit)

    helper = Helper(
        [reply("more", usage=al.Usage(input=20, output=980))] * 10, model="helper-model"
    )
    main = ScriptedProvider(
        [reply(call("flood__burst", {}), usage=al.Usage(input=90, output=10)), reply("no")],
        model="main-model",
    )
    flood = StdioServer(sys.executable, [str(FLOOD_SERVER), str(tmp_path / "log")])
    with trio.fail_after(60):
        async with open_mcp(
            flood,
            McpConfig(prefix="flood", protocol="legacy", sampling=McpSampling(helper)),
            name="flood",
        ) as server:
            events = await collect_events(flood_agent(main, server, max_total_tokens=2000), "Go")
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.MAX_TOKENS, LIMIT_TEXT)
    assert len(helper.requests) == 2


async def test_sampling_requests_count_in_max_requests() -> None:
    helper = ScriptedProvider([reply("Short.")] * 3, model="helper-model")
    main = ScriptedProvider([reply(call("asker__twice", {})), reply("never")])
    server = build_server()

    @server.tool()
    async def twice(ctx: Context) -> str:
        """Ask the client's model twice."""
        for _ in range(2):
            await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text="hi"))],
                max_tokens=10,
            )
        return "asked twice"

    async with open_mcp(
        server, McpConfig(prefix="asker", protocol="legacy", sampling=McpSampling(helper))
    ) as connection:
        events = await collect_events(flood_agent(main, connection, max_requests=2), "Go")
        # A call after that run is not refused for the run's limit.
        after = await call_text(connection, "summarize", {"text": "x"})
    assert after == "helper-model: Short."
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    # The run's request and one sampling request; the second is refused.
    assert end.stop_reason == al.AgentStop(al.StopKind.MAX_REQUESTS, "Max requests reached (2/2)")
    assert len(helper.requests) == 2  # the run's one, and the call's after it
    assert [e.result.text_content for e in events if isinstance(e, ToolEnd)] == [
        "MCP server 'asker' asked for a model reply after the run reached its limit "
        "(Max requests reached (2/2)); the call was ended"
    ]


async def test_without_a_run_sampling_is_capped_but_not_limited() -> None:
    helper = ScriptedProvider([reply("Short.")])
    async with open_mcp(
        build_server(), McpConfig(protocol="legacy", sampling=McpSampling(helper))
    ) as c:
        await call_text(c, "summarize", {"text": "x"})
    assert [r.max_tokens for r in helper.requests] == [500]  # below the cap: as asked
    assert McpSampling(helper).max_tokens == 4096
    assert McpSampling(helper, max_tokens=None).max_tokens is None


async def test_permissions_are_asked_before_sampling() -> None:
    asked: list[al.PermissionRequest] = []

    def approver(request: al.PermissionRequest) -> bool:
        asked.append(request)
        return False

    helper = ScriptedProvider([reply("never")])
    sampling = McpSampling(
        helper, permissions=al.Permissions(ask=["mcp_sampling(asker)"], approver=approver)
    )
    async with open_mcp(build_server(), McpConfig(protocol="legacy", sampling=sampling)) as server:
        with pytest.raises(al.ToolError) as raised:
            await server.call_tool("summarize", {"text": "secret plans"})
    assert str(raised.value) == (
        "MCP server 'asker' refused the call to 'summarize': "
        "The user did not allow this sampling request: mcp_sampling 'asker' was not approved"
    )
    assert helper.requests == []
    assert len(asked) == 1
    assert asked[0].tool_name == "mcp_sampling"
    assert asked[0].subject == ("server", "asker")
    assert asked[0].arguments == {
        "server": "asker",
        "messages": [{"role": "user", "text": "secret plans"}],
        "system_prompt": "Summarize in five words.",
        "max_tokens": 500,
    }


async def test_a_cancelled_sampling_request_cancels_the_model() -> None:
    started = trio.Event()
    cancelled = trio.Event()

    class Slow:
        async def stream(self, request: Any, emit: Any) -> Any:
            started.set()
            try:
                await trio.sleep_forever()
            finally:
                cancelled.set()

    server = MCPServer("asker")

    @server.tool()
    async def impatient(ctx: Context) -> str:
        """Ask the model, then give up once it has started."""
        import anyio

        async with anyio.create_task_group() as group:

            async def ask() -> None:
                await ctx.session.create_message(
                    [SamplingMessage(role="user", content=TextContent(type="text", text="hi"))],
                    max_tokens=10,
                )

            group.start_soon(ask)
            await started.wait()
            group.cancel_scope.cancel()
        return "gave up"

    with trio.fail_after(10):
        async with open_mcp(
            server, McpConfig(protocol="legacy", sampling=McpSampling(Slow()))
        ) as c:
            assert await call_text(c, "impatient") == "gave up"
            await cancelled.wait()


# --------------------------------------------------------------------------- roots


async def test_roots_are_listed_as_file_uris(tmp_path: Any) -> None:
    here = tmp_path / "my project"
    async with open_mcp(
        build_server(), McpConfig(protocol="legacy", roots=[here, McpRoot("file:///srv", "data")])
    ) as server:
        listed = json.loads(await call_text(server, "roots"))
        assert server.roots == (McpRoot.of(here), McpRoot("file:///srv", "data"))
        await server.set_roots(["file:///other/place"])
        again = json.loads(await call_text(server, "roots"))
    assert listed == [
        [f"file://{str(here).replace(' ', '%20')}", "my project"],
        ["file:///srv", "data"],
    ]
    assert again == [["file:///other/place", "place"]]


async def test_set_roots_needs_roots_from_the_start() -> None:
    async with open_mcp(build_server(), McpConfig(protocol="legacy")) as server:
        with pytest.raises(RuntimeError) as raised:
            await server.set_roots(["/x"])
    assert str(raised.value) == (
        "MCP server 'asker' was connected without roots; "
        "pass McpConfig(roots=[...]) to open_mcp to offer them"
    )


# --------------------------------------------------------------------------- logs


async def test_server_logs_are_records_callbacks_and_progress(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentloop.mcp.server")
    received: list[McpLogMessage] = []
    model = ScriptedProvider([reply(call("asker__chatty", {})), reply("ok")])
    async with open_mcp(
        build_server(),
        McpConfig(prefix="asker", protocol="legacy", on_log=received.append, log_level="warning"),
    ) as server:
        agent = al.Agent(model, tools=server.tools)
        events = await collect_events(agent, "go")

    # The SDK hands each notification to a task of its own, so two messages sent back
    # to back may arrive swapped: compare them by level.
    def by_level(items: list[Any], level: Any) -> list[Any]:
        return sorted(items, key=lambda item: LOG_LEVELS.index(level(item)))

    assert by_level(received, lambda m: m.level) == [
        McpLogMessage(server="asker", level="warning", data="warning line", logger="worker"),
        McpLogMessage(server="asker", level="error", data="error line", logger="worker"),
        McpLogMessage(server="asker", level="critical", data={"code": 7}, logger=None),
    ]
    records = [r for r in caplog.records if r.name == "agentloop.mcp.server"]
    assert sorted((r.levelno, r.getMessage()) for r in records) == [
        (logging.WARNING, "MCP server 'asker/worker': warning line"),
        (logging.ERROR, "MCP server 'asker/worker': error line"),
        (logging.CRITICAL, "MCP server 'asker': {\"code\": 7}"),
    ]
    progress = [e.text for e in events if isinstance(e, al.ProgressMessage)]
    assert by_level(progress, lambda text: text[1 : text.index("]")]) == [
        "[warning] warning line",
        "[error] error line",
        '[critical] {"code": 7}',
    ]


def test_log_level_is_checked() -> None:
    with pytest.raises(ValueError, match=r"^log_level must be") as raised:
        McpConfig(log_level="loud")
    assert str(raised.value) == (
        "log_level must be None or one of 'debug', 'info', 'notice', 'warning', 'error', "
        "'critical', 'alert', 'emergency', got 'loud'"
    )


# --------------------------------------------------------------------------- server-everything


def everything() -> StdioServer:
    return StdioServer(
        node_bin("mcp-server-everything"), ["stdio"], env={"PATH": node_env()["PATH"]}
    )


async def test_everything_elicitation_form_and_url_paths() -> None:
    asked: list[Elicitation] = []

    def answer(request: Elicitation) -> ElicitationAnswer:
        asked.append(request)
        if request.mode == "url":
            return ElicitationAnswer.accept()
        return ElicitationAnswer.accept({"name": "Ada", "check": True, "email": "ada@example.com"})

    async with open_mcp(everything(), McpConfig(elicitation=answer), name="everything") as server:
        form = await call_text(server, "trigger-elicitation-request")
        url = await call_text(server, "trigger-url-elicitation", {"url": "https://example.com/pay"})
        retried = await call_text(
            server,
            "trigger-url-elicitation",
            {"url": "https://example.com/pay", "errorPath": True, "elicitationId": "e-1"},
        )
    raw = json.loads(form.split("Raw result: ", 1)[1])
    assert raw == {
        "action": "accept",
        "content": {
            "name": "Ada",
            "check": True,
            "email": "ada@example.com",
            "firstLine": "It was a dark and stormy night.",
            "integer": 42,
            "number": 3.14,
            "untitledSingleSelectEnum": "Monica",
            "untitledMultipleSelectEnum": ["Guitar"],
            "titledSingleSelectEnum": "hero-1",
            "titledMultipleSelectEnum": ["fish-1"],
            "legacyTitledEnum": "pet-1",
        },
    }
    assert url.startswith("✅ User completed the URL elicitation flow.\n")
    assert retried.startswith("✅ User completed the URL elicitation flow.\nElicitation ID: e-1\n")
    assert [(r.mode, r.url) for r in asked] == [
        ("form", None),
        ("url", "https://example.com/pay"),
        ("url", "https://modelcontextprotocol.io"),  # the prerequisite of error -32042
        ("url", "https://example.com/pay"),  # the call made again
    ]


async def test_everything_without_a_handler_offers_no_elicitation_tool() -> None:
    async with open_mcp(everything(), name="everything") as server:
        names = [tool.name for tool in server.tools]
    assert "trigger-elicitation-request" not in names
    assert "trigger-sampling-request" not in names
    assert "get-roots-list" not in names
    assert "echo" in names


async def test_everything_sampling_and_roots(tmp_path: Any) -> None:
    helper = ScriptedProvider([reply("Paris.")], model="helper-model")
    updated = trio.Event()

    def on_log(message: McpLogMessage) -> None:
        if message.text == "Roots updated: 1 root(s) received from client":
            updated.set()

    async with open_mcp(
        everything(),
        McpConfig(sampling=McpSampling(helper), roots=[tmp_path / "a"], on_log=on_log),
        name="everything",
    ) as server:
        sampled = await call_text(
            server, "trigger-sampling-request", {"prompt": "Capital of France?", "maxTokens": 20}
        )
        before = await call_text(server, "get-roots-list")
        with trio.fail_after(10):
            await updated.wait()  # the server asked for the first list
        updated = trio.Event()
        await server.set_roots([tmp_path / "b"])
        with trio.fail_after(10):
            await updated.wait()  # ... and for the new one, after the notification
        after = await call_text(server, "get-roots-list")
    assert json.loads(sampled.split("LLM sampling result: ", 1)[1]) == {
        "model": "helper-model",
        "stopReason": "endTurn",
        "role": "assistant",
        "content": {"type": "text", "text": "Paris."},
    }
    assert [r.max_tokens for r in helper.requests] == [20]
    assert f"1. a\n   URI: file://{tmp_path}/a\n" in before
    assert f"1. b\n   URI: file://{tmp_path}/b\n" in after
