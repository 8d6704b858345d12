"""The tool gate: errors as results, argument checks, hooks, updates, timeouts."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
from helpers import ANY_SCHEMA, Echo, LoggingChannel, Raiser, Sleeper, run_recorded, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply


async def result_texts(
    tools: list[Any], *calls: Any, **agent_options: Any
) -> list[tuple[str, str]]:
    """Run one turn with ``calls`` then a closing reply; return the results as (flag, text)."""
    agent = al.Agent(
        ScriptedProvider([reply(*calls), reply("after")]), tools=tools, **agent_options
    )
    await agent.run("go")
    assert texts(agent.messages)[-1] == ("assistant:stop", "after")  # the run went on
    return [
        ("error" if m.is_error else "ok", m.text)
        for m in agent.messages
        if isinstance(m, al.ToolResultMessage)
    ]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (al.ToolError("disk full"), "disk full"),
        (al.InvalidArgs("missing city"), "Invalid arguments: missing city"),
        (al.ToolNotFound("ghost"), "Tool not found: ghost"),
        (al.ToolCancelled(), "Cancelled"),
        (al.ToolTimeout(0.25), "Tool exceeded timeout of 250ms"),
        (ValueError("bad value"), "ValueError: bad value"),
        (RuntimeError(), "RuntimeError"),
        (ExceptionGroup("many", [KeyError("k")]), "KeyError: 'k'"),
    ],
)
async def test_tool_exceptions_become_error_results(error: Exception, text: str) -> None:
    """Whatever Exception a tool raises, the model gets an error result and the run goes on."""
    assert await result_texts([Raiser(error)], call("raiser")) == [("error", text)]


async def test_a_tool_error_carries_details_and_child_loop_id() -> None:
    """ToolError(details=..., child_loop_id=...) reaches the end event and the history."""
    error = al.ToolError("child failed", details={"turns": 3}, child_loop_id="kid.1")
    agent = al.Agent(ScriptedProvider([reply(call("raiser")), reply("ok")]), tools=[Raiser(error)])
    recorder = await run_recorded(agent, "go")
    (end,) = recorder.of_type(al.ToolExecutionEnd)
    expected = al.ToolResult(
        (al.TextContent("child failed"),), details={"turns": 3}, child_loop_id="kid.1"
    )
    assert (end.result, end.is_error, end.child_loop_id) == (expected, True, "kid.1")
    (result,) = [m for m in agent.messages if isinstance(m, al.ToolResultMessage)]
    assert (result.text, result.is_error, result.child_loop_id) == ("child failed", True, "kid.1")


async def test_the_context_names_the_running_loop() -> None:
    """ToolContext.loop_id is the id of the loop that runs the call."""
    seen: list[str | None] = []

    class Where:
        name, label, description = "where", "Where", "Where am I?"
        parameters_schema = ANY_SCHEMA

        async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
            seen.append(ctx.loop_id)
            await trio.lowlevel.checkpoint()
            return al.ToolResult.text("here")

    agent = al.Agent(
        ScriptedProvider([reply(call("where")), reply("ok")]), tools=[Where()], agent_id="a"
    )
    await agent.run("go")
    assert seen == ["a.1"]


async def test_unknown_tool_is_an_error_result_with_events() -> None:
    """Calling a tool that does not exist: Start, End with the error, and the run goes on."""
    agent = al.Agent(ScriptedProvider([reply(call("ghost", {"a": 1})), reply("ok")]))
    recorder = await run_recorded(agent, "go")
    start, end = (
        recorder.of_type(al.ToolExecutionStart)[0],
        recorder.of_type(al.ToolExecutionEnd)[0],
    )
    assert (start.tool_name, start.args) == ("ghost", {"a": 1})
    assert (end.result, end.is_error) == (al.ToolResult.text("Tool not found: ghost"), True)
    assert texts(agent.messages)[2] == ("result:error", "call_1=Tool not found: ghost")


async def test_base_exception_from_tool_propagates() -> None:
    """A BaseException that is not an Exception (here KeyboardInterrupt) leaves the run."""
    agent = al.Agent(
        ScriptedProvider([reply(call("raiser")), reply("x")]), tools=[Raiser(KeyboardInterrupt())]
    )
    with pytest.raises(KeyboardInterrupt):
        await agent.run("go")


async def test_tool_returning_wrong_type_is_an_error_result() -> None:
    """A tool that returns something other than a ToolResult gets an error result."""

    @attrs.define
    class Wrong:
        name: str = "wrong"
        label: str = "Wrong"
        description: str = ""
        parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

        async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> Any:
            return "just a string"

    assert await result_texts([Wrong()], call("wrong")) == [
        ("error", "Tool 'wrong' returned str, expected a ToolResult")
    ]


# --------------------------------------------------------------------------- arguments


NESTED_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1},
        "options": {
            "type": "object",
            "properties": {"mode": {"enum": ["fast", "slow"]}},
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}


async def test_schema_failures_name_each_path() -> None:
    """Every failing $.path is listed, sorted, and the tool is not run."""
    echo = Echo(parameters_schema=NESTED_SCHEMA)
    results = await result_texts(
        [echo], call("echo", {"limit": 0, "options": {"mode": "turbo"}, "extra": True})
    )
    assert results == [
        (
            "error",
            "Invalid arguments: "
            "$: 'path' is a required property; "
            "$: Additional properties are not allowed ('extra' was unexpected); "
            "$.limit: 0 is less than the minimum of 1; "
            "$.options.mode: 'turbo' is not one of ['fast', 'slow']",
        )
    ]
    assert echo.calls == []


async def test_malformed_json_arguments_are_quoted() -> None:
    """Arguments that are not valid JSON give InvalidArgs quoting what the model sent."""
    echo = Echo()
    results = await result_texts([echo], call("echo", '{"text": "unterminated'))
    assert results == [
        (
            "error",
            "Invalid arguments: the arguments are not valid JSON (Unterminated string starting "
            'at: line 1 column 10 (char 9)). Received: {"text": "unterminated',
        )
    ]
    assert echo.calls == []


async def test_non_object_json_arguments_are_refused() -> None:
    """Valid JSON that is not an object is refused, saying what it was."""
    results = await result_texts([Echo()], call("echo", "[1, 2]"))
    assert results == [
        (
            "error",
            "Invalid arguments: the arguments are not a JSON object (got an array). "
            "Received: [1, 2]",
        )
    ]


async def test_huge_malformed_arguments_are_quoted_in_part() -> None:
    """A huge malformed argument text is quoted up to 2000 characters."""
    raw = '{"text": "' + "x" * 5000
    [(flag, text)] = await result_texts([Echo()], call("echo", raw))
    assert flag == "error"
    assert text.endswith(raw[:2000] + "... (3010 more characters)")


async def test_empty_arguments_mean_no_arguments() -> None:
    """An empty arguments text is an empty object, validated like any other."""
    results = await result_texts([Echo()], call("echo", ""))
    assert results == [("error", "Invalid arguments: $: 'text' is a required property")]


async def test_tool_with_invalid_schema_is_refused_at_construction() -> None:
    """A tool whose schema is not valid JSON Schema is refused when the agent is built."""
    with pytest.raises(ValueError, match=r"^tool 'echo' has an invalid parameters_schema: "):
        al.Agent(ScriptedProvider(), tools=[Echo(parameters_schema={"type": "nonsense"})])


async def test_duplicate_tool_names_are_refused() -> None:
    """Two tools with one name are refused: the model could not tell them apart."""
    with pytest.raises(
        ValueError, match=r"^two tools are named 'echo'; tool names must be unique$"
    ):
        al.Agent(ScriptedProvider(), tools=[Echo(), Echo()])


async def test_non_tool_is_refused() -> None:
    """An object without the tool attributes is refused with the missing attribute named."""
    with pytest.raises(TypeError, match=r"it has no 'name'"):
        al.Agent(ScriptedProvider(), tools=[object()])  # type: ignore[list-item]


# --------------------------------------------------------------------------- hooks


async def test_vetoed_call_gets_no_events_and_a_skip_result() -> None:
    """A before_tool_execution veto: no start/end events, no after hook, a result the model sees."""
    after: list[Any] = []
    echo = Echo()
    provider = ScriptedProvider(
        [reply(call("echo", {"text": "a"}), call("echo", {"text": "b"})), reply("ok")]
    )
    agent = al.Agent(
        provider,
        tools=[echo],
        before_tool_execution=lambda name, call_id, args: args["text"] != "a",
        after_tool_execution=lambda *a: after.append(a),
    )
    recorder = await run_recorded(agent, "go")
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionStart)] == ["call_2"]
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionEnd)] == ["call_2"]
    assert after == [("echo", "call_2", False)]
    assert echo.calls == [{"text": "b"}]
    assert texts(provider.requests[1].messages)[2:] == [
        ("result:error", "call_1=Tool execution skipped by before_tool_execution hook."),
        ("result:ok", "call_2=B"),
    ]


async def test_hooks_may_be_async() -> None:
    """Async hooks are awaited, and their False vetoes too."""

    async def veto(name: str, call_id: str, args: dict[str, Any]) -> bool:
        await trio.lowlevel.checkpoint()
        return False

    results = await result_texts([Echo()], call("echo", {"text": "a"}), before_tool_execution=veto)
    assert results == [("error", "Tool execution skipped by before_tool_execution hook.")]


async def test_hook_returning_none_does_not_veto() -> None:
    """Only False vetoes: a hook that returns None lets the call run."""
    results = await result_texts(
        [Echo()], call("echo", {"text": "a"}), before_tool_execution=lambda *a: None
    )
    assert results == [("ok", "A")]


async def test_tool_hooks_fire_around_their_events() -> None:
    """before hook, Start, End, after hook: in this order, per call (checked on the loop side)."""
    log: list[str] = []

    config = al.AgentLoopConfig(
        provider=ScriptedProvider([reply(call("echo", {"text": "a"})), reply("ok")]),
        before_tool_execution=lambda name, call_id, args: log.append(f"before {call_id}"),
        after_tool_execution=lambda name, call_id, is_error: log.append(f"after {call_id}"),
    )
    send, receive = trio.open_memory_channel[al.AgentEvent](1000)
    await al.agent_loop(
        ["go"],
        al.AgentContext(tools=[Echo()]),
        config,
        LoggingChannel(send, log),  # type: ignore[arg-type]
    )
    receive.close()
    start = log.index("before call_1")
    assert log[start : start + 4] == [
        "before call_1",
        "ToolExecutionStart",
        "ToolExecutionEnd",
        "after call_1",
    ]


async def test_hook_exception_leaves_the_run_as_itself() -> None:
    """An exception raised by a hook comes out of the async with as itself, not a group."""

    def boom(*args: Any) -> bool:
        raise LookupError("hook failed")

    agent = al.Agent(
        ScriptedProvider([reply(call("echo", {"text": "a"})), reply("x")]),
        tools=[Echo()],
        before_tool_execution=boom,
    )
    with pytest.raises(LookupError, match=r"^hook failed$"):
        async with agent.prompt("go") as events:
            async for _ in events:
                pass
    assert not agent.is_running


# --------------------------------------------------------------------------- updates


@attrs.define
class Reporter:
    """Reports progress and partial results, then returns."""

    steps: list[tuple[str, str]]
    name: str = "report"
    label: str = "Report"
    description: str = ""
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)
    times: list[float] = attrs.field(factory=list)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        for kind, text in self.steps:
            if kind == "progress":
                await ctx.progress(text)
            else:
                await ctx.update(al.ToolResult.text(text, details={"step": text}))
            self.times.append(trio.current_time())
        return al.ToolResult.text("finished")


async def test_updates_and_progress_become_events_in_order() -> None:
    """on_progress and on_update give ProgressMessage and ToolExecutionUpdate, in call order."""
    tool = Reporter([("progress", "a"), ("update", "b"), ("progress", "c")])
    agent = al.Agent(
        ScriptedProvider([reply(call("report")), reply("ok")]), tools=[tool], agent_id="r"
    )
    recorder = await run_recorded(agent, "go")
    names = recorder.names()
    between = recorder.events[
        names.index("ToolExecutionStart") + 1 : names.index("ToolExecutionEnd")
    ]
    assert between == [
        al.ProgressMessage(loop_id="r.1", tool_call_id="call_1", tool_name="report", text="a"),
        al.ToolExecutionUpdate(
            loop_id="r.1",
            tool_call_id="call_1",
            tool_name="report",
            partial_result=al.ToolResult.text("b", details={"step": "b"}),
        ),
        al.ProgressMessage(loop_id="r.1", tool_call_id="call_1", tool_name="report", text="c"),
    ]


async def test_vetoing_update_hook_suppresses_only_the_event() -> None:
    """An update hook returning False drops that update event; the tool carries on."""
    after: list[str] = []
    tool = Reporter([("update", "keep"), ("update", "drop"), ("update", "keep too")])
    agent = al.Agent(
        ScriptedProvider([reply(call("report")), reply("ok")]),
        tools=[tool],
        before_tool_execution_update=lambda name, call_id, text: text != "drop",
        after_tool_execution_update=lambda name, call_id, text: after.append(text),
    )
    recorder = await run_recorded(agent, "go")
    updates = recorder.of_type(al.ToolExecutionUpdate)
    assert [u.partial_result.text_content for u in updates] == ["keep", "keep too"]
    assert after == ["keep", "keep too"]
    assert texts(agent.messages)[2] == ("result:ok", "call_1=finished")


async def test_update_hook_exception_leaves_the_run_not_the_tool() -> None:
    """An update hook's exception is not turned into a tool error: it ends the run as itself."""

    def boom(name: str, call_id: str, text: str) -> bool:
        raise OSError("update hook broke")

    agent = al.Agent(
        ScriptedProvider([reply(call("report")), reply("ok")]),
        tools=[Reporter([("update", "x")])],
        before_tool_execution_update=boom,
    )
    with pytest.raises(OSError, match=r"^update hook broke$"):
        await agent.run("go")


async def test_slow_consumer_slows_the_tool_and_loses_nothing(autojump_clock: Any) -> None:
    """With a rendezvous channel, each update waits for the consumer; every update arrives."""
    tool = Reporter([("update", str(i)) for i in range(5)])
    agent = al.Agent(
        ScriptedProvider([reply(call("report")), reply("ok")]), tools=[tool], event_buffer_size=0
    )
    received: list[str] = []
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionUpdate):
                received.append(event.partial_result.text_content)
                await trio.sleep(1)
    assert received == ["0", "1", "2", "3", "4"]
    assert tool.times == [0.0, 1.0, 2.0, 3.0, 4.0]


async def test_many_updates_through_a_buffer_are_all_delivered() -> None:
    """A thousand updates through the default buffer all arrive, in order."""
    tool = Reporter([("update", str(i)) for i in range(1000)])
    agent = al.Agent(ScriptedProvider([reply(call("report")), reply("ok")]), tools=[tool])
    recorder = await run_recorded(agent, "go")
    updates = recorder.of_type(al.ToolExecutionUpdate)
    assert [u.partial_result.text_content for u in updates] == [str(i) for i in range(1000)]


# --------------------------------------------------------------------------- timeouts


async def test_tool_timeout_cancels_the_work_and_the_loop_goes_on(autojump_clock: Any) -> None:
    """Past its timeout a tool is cancelled (it sees Cancelled) and gets an error result."""
    sleeper = Sleeper(timeout=1.5)
    start = trio.current_time()
    results = await result_texts([sleeper], call("sleep", id="s1"))
    assert results == [("error", "Tool exceeded timeout of 1.5s")]
    assert sleeper.outcomes == [("s1", "cancelled")]
    assert trio.current_time() - start == pytest.approx(1.5)


async def test_config_tool_timeout_applies_when_the_tool_sets_none(autojump_clock: Any) -> None:
    """The loop's tool_timeout bounds tools that have no timeout of their own."""
    sleeper = Sleeper()
    results = await result_texts([sleeper], call("sleep"), tool_timeout=0.1)
    assert results == [("error", "Tool exceeded timeout of 100ms")]
    assert sleeper.outcomes == [("call_1", "cancelled")]


async def test_tool_timeout_overrides_config_timeout(autojump_clock: Any) -> None:
    """A tool's own timeout wins over the loop's tool_timeout, even when longer."""
    sleeper = Sleeper(timeout=20.0)
    results = await result_texts([sleeper], call("sleep"), tool_timeout=1.0)
    assert results == [("ok", "slept 10.0")]


async def test_tool_within_timeout_succeeds(autojump_clock: Any) -> None:
    """A tool that finishes in time is unaffected by its timeout."""
    results = await result_texts([Sleeper(timeout=11.0)], call("sleep"))
    assert results == [("ok", "slept 10.0")]


async def test_tool_cancelling_its_own_scope_gets_cancelled_result() -> None:
    """A tool that cancels ctx.cancel_scope ends with a "Cancelled" error result."""

    @attrs.define
    class GiveUp:
        name: str = "give_up"
        label: str = ""
        description: str = ""
        parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

        async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
            ctx.cancel_scope.cancel()
            await trio.sleep(1)
            return al.ToolResult.text("unreachable")

    assert await result_texts([GiveUp()], call("give_up")) == [("error", "Cancelled")]


async def test_invalid_tool_timeout_is_refused() -> None:
    """A tool timeout that is not a positive number is refused at construction."""
    with pytest.raises(ValueError, match=r"^tool 'sleep': timeout must be > 0 or None, got 0$"):
        al.Agent(ScriptedProvider(), tools=[Sleeper(timeout=0)])


def test_hook_exception_survives_every_scheduling_order() -> None:
    """Regression: the run's exception is never lost, whichever task trio runs first.

    Closing the event channel with an awaiting close inside the cancelled nursery
    used to raise Cancelled over the hook's exception, which then vanished.
    """

    def boom(*args: Any) -> bool:
        raise LookupError("hook failed")

    async def once() -> str:
        agent = al.Agent(
            ScriptedProvider([reply(call("echo", {"text": "a"})), reply("x")]),
            tools=[Echo()],
            before_tool_execution=boom,
        )
        try:
            async with agent.prompt("go") as events:
                async for _ in events:
                    pass
        except LookupError as error:
            return str(error)
        return "not raised"

    assert {trio.run(once) for _ in range(30)} == {"hook failed"}


def test_schema_that_is_not_json_is_refused() -> None:
    """A schema holding something JSON cannot express is refused, naming the tool."""
    with pytest.raises(ValueError, match=r"^tool 'echo': parameters_schema is not JSON: "):
        al.Agent(
            ScriptedProvider(), tools=[Echo(parameters_schema={"type": "object", "x": {1, 2}})]
        )


def test_equal_schemas_share_one_compiled_validator() -> None:
    """Fresh tool instances with an equal schema reuse the compiled validator."""
    from agentloop._tool._registry import compile_schema as _compile

    first = Echo(parameters_schema={"type": "object", "properties": {"q": {"type": "string"}}})
    second = Echo(parameters_schema={"properties": {"q": {"type": "string"}}, "type": "object"})
    assert _compile(first) is _compile(second)


async def test_a_tool_changing_its_arguments_does_not_change_the_history() -> None:
    """The tool and the hooks get copies; the call in the history keeps what the model sent."""

    @attrs.define
    class Greedy:
        name: str = "greedy"
        label: str = ""
        description: str = ""
        parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

        async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
            params["items"].append("added by the tool")
            params.pop("keep")
            return al.ToolResult.text("ok")

    def hook(name: str, call_id: str, args: dict[str, Any]) -> None:
        args.clear()

    sent = {"keep": 1, "items": ["a"]}
    provider = ScriptedProvider([reply(call("greedy", sent)), reply("done")])
    agent = al.Agent(provider, tools=[Greedy()], before_tool_execution=hook)
    recorder = await run_recorded(agent, "go")
    assert agent.messages[1].content[0] == al.ToolCall("call_1", "greedy", sent)
    assert recorder.of_type(al.ToolExecutionStart)[0].args == sent
    assert provider.requests[1].messages[1].content[0].arguments == sent  # type: ignore[union-attr]


async def test_a_call_cut_off_by_max_tokens_is_not_run_and_the_model_is_told() -> None:
    """A LENGTH reply whose tool call's JSON is incomplete: not run; the result says why."""
    echo = Echo()
    provider = ScriptedProvider(
        [
            reply(call("echo", '{"text": "a long'), stop_reason=al.StopReason.LENGTH),
            reply("ok"),
        ]
    )
    agent = al.Agent(provider, tools=[echo])
    await agent.run("go")
    assert echo.calls == []
    assert texts(agent.messages)[2] == (
        "result:error",
        "call_1=Invalid arguments: the reply reached its max_tokens limit before this tool "
        'call\'s arguments were complete, so it was not run. Received: {"text": "a long',
    )
