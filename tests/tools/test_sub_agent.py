"""SubAgentTool: a child loop inside a tool call; results, failures, nesting, cancellation."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from helpers import ANY_SCHEMA, Echo, Sleeper, run_recorded, texts

import agentloop as al
from agentloop.providers import ProviderError, ScriptedProvider, call, fail, reply
from agentloop.serialization import to_dict
from agentloop.testing import EventRecorder, assert_well_formed
from agentloop.tools import BashTool, SubAgentTool

ABORTED = "Cancelled: the run was aborted."

# --------------------------------------------------------------------------- doubles


@attrs.define(eq=False)
class Counter:
    """Reports an update and a progress line, then returns "3"."""

    name: str = "count"
    label: str = "Count"
    description: str = "Count the files."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        await ctx.update(al.ToolResult.text("counting..."))  # the child's; not forwarded
        await ctx.progress("counted 3")
        return al.ToolResult.text("3")


@attrs.define(eq=False)
class Stubborn:
    """Sleeps 100 s; when cancelled, first sleeps ``cleanup`` s shielded, then gives in."""

    cleanup: float
    name: str = "stubborn"
    label: str = "Stubborn"
    description: str = "Ignores cancellation for a while."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)
    cancelled_at: list[float] = attrs.field(factory=list)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        try:
            await trio.sleep(100)
        except trio.Cancelled:
            self.cancelled_at.append(trio.current_time())
            with trio.CancelScope(shield=True):
                await trio.sleep(self.cleanup)
            raise
        return al.ToolResult.text("slept")


def sub_agent(
    name: str, script: list[Any], *, tools: Any = (), **options: Any
) -> tuple[SubAgentTool, list[al.AgentEvent]]:
    """A sub-agent with its own scripted model, and the list its on_event fills."""
    events: list[al.AgentEvent] = []
    options.setdefault("on_event", events.append)
    return SubAgentTool(name, ScriptedProvider(script), tools=tools, **options), events


def call_events(events: list[al.AgentEvent], call_id: str) -> list[tuple[str, str]]:
    """The events of one tool call, as (kind, text)."""
    out: list[tuple[str, str]] = []
    for event in events:
        match event:
            case al.ToolExecutionStart(tool_call_id=i) if i == call_id:
                out.append(("start", event.tool_name))
            case al.ToolExecutionUpdate(tool_call_id=i) if i == call_id:
                out.append(("update", event.partial_result.text_content))
            case al.ProgressMessage(tool_call_id=i) if i == call_id:
                out.append(("progress", event.text))
            case al.ToolExecutionEnd(tool_call_id=i) if i == call_id:
                out.append(("error" if event.is_error else "end", event.result.text_content))
    return out


def context(call_id: str = "id1", loop_id: str | None = None) -> al.ToolContext:
    return al.ToolContext(call_id, "helper", trio.CancelScope(), None, None, loop_id)


def exactly(message: str) -> str:
    """A ``match`` pattern for exactly ``message``."""
    return f"^{re.escape(message)}\\Z"


def forwardable(event: al.AgentEvent) -> bool:
    """Whether SubAgentTool forwards ``event`` to the parent."""
    return isinstance(event, al.ToolExecutionStart | al.ProgressMessage) or (
        isinstance(event, al.MessageUpdate) and isinstance(event.delta, al.TextDelta)
    )


# --------------------------------------------------------------------------- construction


def test_attributes_and_defaults() -> None:
    """Name, label, description, schema, timeout and the child's config."""
    tool = SubAgentTool("helper", ScriptedProvider())
    assert (tool.name, tool.label, tool.description, tool.timeout, tool.abort_grace) == (
        "helper",
        "Sub-agent helper",
        "Delegate a task to the 'helper' sub-agent",
        None,
        10.0,
    )
    schema = tool.parameters_schema
    assert schema["required"] == ["task"]
    assert schema["additionalProperties"] is False
    task = schema["properties"]["task"]
    assert (task["type"], task["minLength"]) == ("string", 1)
    assert "sees nothing of this conversation" in task["description"]
    assert tool.config.limits == al.ExecutionLimits(
        max_turns=10, max_total_tokens=1_000_000, max_duration=300.0
    )
    assert (tool.config.strategy, tool.config.get_steering_messages) == (al.Parallel(), None)
    assert tool.tools == ()
    assert isinstance(tool, al.AgentTool)


def test_options_reach_the_child_config() -> None:
    """Every child option lands in the child's AgentLoopConfig; limits beat max_turns."""
    limits = al.ExecutionLimits(max_turns=3)
    tool = SubAgentTool(
        "h",
        ScriptedProvider(),
        description="Ask h.",
        label="H",
        max_turns=7,
        limits=limits,
        strategy=al.Sequential(),
        max_tokens=100,
        temperature=0.5,
        tool_timeout=9,
        thinking_level=al.ThinkingLevel.HIGH,
        permissions=al.Permissions(deny=["bash"]),
        timeout=30,
    )
    config = tool.config
    assert (tool.description, tool.label, tool.timeout) == ("Ask h.", "H", 30)
    assert (config.limits, config.strategy, config.max_tokens, config.temperature) == (
        limits,
        al.Sequential(),
        100,
        0.5,
    )
    assert (config.tool_timeout, config.thinking_level) == (9, al.ThinkingLevel.HIGH)
    assert config.permissions == al.Permissions(deny=["bash"])
    assert SubAgentTool("h", ScriptedProvider(), max_turns=7).config.limits.max_turns == 7


def test_a_sub_agent_cannot_have_sub_agents() -> None:
    """A SubAgentTool among the tools is refused at construction."""
    inner = SubAgentTool("inner", ScriptedProvider())
    message = "SubAgentTool 'outer': a sub-agent cannot have sub-agents (got 'inner')"
    with pytest.raises(ValueError, match=exactly(message)):
        SubAgentTool("outer", ScriptedProvider(), tools=[Echo(), inner])


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, "trailing\n", "naïve", "a.b", 5])
def test_bad_names_are_refused(name: Any) -> None:
    """Names must be what the model APIs accept: 1-64 of a-z A-Z 0-9 _ -."""
    message = (
        f"SubAgentTool name must be 1-64 characters from a-z, A-Z, 0-9, '_' and '-', got {name!r}"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        SubAgentTool(name, ScriptedProvider())


def test_longest_name_is_accepted() -> None:
    assert SubAgentTool("a-Z_9" * 12 + "abcd", ScriptedProvider()).name == "a-Z_9" * 12 + "abcd"


def test_child_tools_are_validated() -> None:
    """The child's tools go through the registry at construction: duplicates are refused."""
    message = "two tools are named 'echo'; tool names must be unique"
    with pytest.raises(ValueError, match=exactly(message)):
        SubAgentTool("helper", ScriptedProvider(), tools=[Echo(), Echo()])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_turns": 0}, "SubAgentTool 'h': max_turns must be an integer >= 1, got 0"),
        ({"max_turns": True}, "SubAgentTool 'h': max_turns must be an integer >= 1, got True"),
        ({"max_turns": 2.0}, "SubAgentTool 'h': max_turns must be an integer >= 1, got 2.0"),
        ({"timeout": 0}, "SubAgentTool 'h': timeout must be > 0 or None, got 0"),
        ({"abort_grace": -1}, "SubAgentTool 'h': abort_grace must be >= 0, got -1"),
        (
            {"abort_grace": float("inf")},
            "SubAgentTool 'h': abort_grace must be >= 0, got inf",
        ),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=exactly(message)):
        SubAgentTool("h", ScriptedProvider(), **options)


# --------------------------------------------------------------------------- running


async def test_happy_path_through_a_parent_agent() -> None:
    """The call streams the child's text, tool calls and progress; the result links to it."""
    child_events: list[al.AgentEvent] = []
    child = ScriptedProvider([reply("Let me count.", call("count")), reply("There are 3 files.")])
    helper = SubAgentTool(
        "helper",
        child,
        tools=[Counter()],
        system_prompt="You count files.",
        on_event=child_events.append,
    )
    parent = ScriptedProvider(
        [reply(call("helper", {"task": "Count the files"}, id="sub1")), reply("Done.")]
    )
    agent = al.Agent(parent, tools=[helper], agent_id="p")
    recorder = await run_recorded(agent, "go")
    child_id = "p.1.helper.sub1"

    # The parent's events for the call, in order, and nothing else in between.
    assert call_events(recorder.events, "sub1") == [
        ("start", "helper"),
        ("update", "Let "),
        ("update", "me "),
        ("update", "count."),
        ("update", "[sub-agent calling tool: count]"),
        ("progress", "counted 3"),
        ("update", "There "),
        ("update", "are "),
        ("update", "3 "),
        ("update", "files."),
        ("end", "There are 3 files."),
    ]
    names = recorder.names()
    first = names.index("ToolExecutionStart")
    assert names[first : first + 11] == [
        "ToolExecutionStart",
        *["ToolExecutionUpdate"] * 4,
        "ProgressMessage",
        *["ToolExecutionUpdate"] * 4,
        "ToolExecutionEnd",
    ]

    # The child: its own loop id, the parent as its parent, every event to on_event.
    start, end = child_events[0], child_events[-1]
    assert isinstance(start, al.AgentStart)
    assert (start.loop_id, start.parent_loop_id) == (child_id, "p.1")
    assert isinstance(end, al.AgentEnd)
    assert {event.loop_id for event in child_events} == {child_id}
    assert [type(event).__name__ for event in child_events] == [
        "AgentStart",
        "TurnStart",
        "MessageStart",
        "MessageEnd",
        "MessageStart",
        *["MessageUpdate"] * 4,  # three words, one tool-call chunk
        "MessageEnd",
        "ToolExecutionStart",
        "ToolExecutionUpdate",  # the child tool's own update: not forwarded
        "ProgressMessage",
        "ToolExecutionEnd",
        "MessageStart",
        "MessageEnd",
        "TurnEnd",
        "TurnStart",
        "MessageStart",
        *["MessageUpdate"] * 4,
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert texts(end.messages) == [
        ("user", "Count the files"),
        ("assistant:tool_use", "Let me count.[count#call_1]"),
        ("result:ok", "call_1=3"),
        ("assistant:stop", "There are 3 files."),
    ]
    assert_well_formed(end.messages)
    # The child saw only its system prompt and the task.
    request = child.requests[0]
    assert request.system_prompt == "You count files."
    assert texts(request.messages) == [("user", "Count the files")]

    # Each forwarded update carries the child's event itself.
    updates = recorder.of_type(al.ToolExecutionUpdate)
    forwarded = [event for event in child_events if forwardable(event)]
    assert [update.partial_result.details["event"] for update in updates] == [
        event for event in forwarded if not isinstance(event, al.ProgressMessage)
    ]
    assert all(
        any(update.partial_result.details["event"] is event for event in child_events)
        for update in updates
    )
    first_update = updates[0].partial_result
    assert first_update == al.ToolResult(
        (al.TextContent("Let "),),
        details={"sub_agent": "helper", "child_loop_id": child_id, "event": child_events[5]},
    )
    serialized = to_dict(updates[0])["partial_result"]["details"]["event"]
    assert (serialized["type"], serialized["loop_id"]) == ("MessageUpdate", child_id)

    # The result: text, details and the link to the child, on the end event and in history.
    (tool_end,) = recorder.of_type(al.ToolExecutionEnd)
    details = {
        "sub_agent": "helper",
        "child_loop_id": child_id,
        "turns": 2,
        "usage": to_dict(end.usage),
    }
    assert tool_end.result == al.ToolResult(
        (al.TextContent("There are 3 files."),), details=details, child_loop_id=child_id
    )
    assert (tool_end.is_error, tool_end.child_loop_id) == (False, child_id)
    result = agent.messages[2]
    assert isinstance(result, al.ToolResultMessage)
    assert (result.text, result.is_error, result.child_loop_id) == (
        "There are 3 files.",
        False,
        child_id,
    )
    assert texts(agent.messages)[-1] == ("assistant:stop", "Done.")
    assert_well_formed(agent.messages)


async def test_the_last_text_wins_and_blocks_join_with_newlines() -> None:
    """The result is the last assistant message with text, its text blocks joined by "\\n"."""
    helper, _ = sub_agent(
        "helper",
        [reply("First.", "Second.", call("count")), reply(call("count")), reply()],
        tools=[Counter()],
    )
    result = await helper.execute({"task": "go"}, context())
    assert result.text_content == "First.\nSecond."
    assert result.details["turns"] == 3


async def test_no_text_output() -> None:
    """A child that never writes text: a fixed placeholder."""
    helper, _ = sub_agent("helper", [reply(call("count")), reply()], tools=[Counter()])
    result = await helper.execute({"task": "go"}, context())
    assert result == al.ToolResult(
        (al.TextContent("(sub-agent produced no text output)"),),
        details={
            "sub_agent": "helper",
            "child_loop_id": "helper.id1",
            "turns": 2,
            "usage": result.details["usage"],
        },
        child_loop_id="helper.id1",
    )


async def test_outside_a_loop_the_child_id_has_no_parent() -> None:
    """Without ctx.loop_id the child is "<name>.<call id>" and has no parent loop."""
    helper, events = sub_agent("helper", [reply("hi")])
    result = await helper.execute({"task": "go"}, context("c9"))
    assert (result.text_content, result.child_loop_id) == ("hi", "helper.c9")
    start = events[0]
    assert isinstance(start, al.AgentStart)
    assert (start.loop_id, start.parent_loop_id) == ("helper.c9", None)


async def test_async_on_event_and_parallel_calls_of_one_tool() -> None:
    """One tool, two concurrent calls: separate contexts, ids and results."""
    seen: list[str] = []

    async def on_event(event: al.AgentEvent) -> None:
        seen.append(type(event).__name__)
        await trio.lowlevel.checkpoint()

    provider = ScriptedProvider([lambda request: reply(f"done: {request.messages[0].text}")] * 2)
    helper = SubAgentTool("helper", provider, on_event=on_event)
    parent = ScriptedProvider(
        [
            reply(call("helper", {"task": "A"}, id="a"), call("helper", {"task": "B"}, id="b")),
            reply("ok"),
        ]
    )
    agent = al.Agent(parent, tools=[helper], agent_id="p")
    await agent.run("go")
    assert texts(agent.messages)[2:4] == [("result:ok", "a=done: A"), ("result:ok", "b=done: B")]
    ids = [m.child_loop_id for m in agent.messages if isinstance(m, al.ToolResultMessage)]
    assert ids == ["p.1.helper.a", "p.1.helper.b"]
    assert seen.count("AgentStart") == seen.count("AgentEnd") == 2


async def test_updates_keep_the_child_order_under_backpressure(autojump_clock: Any) -> None:
    """A slow consumer: updates arrive in the child's order, and the child waits for it."""
    child_events: list[al.AgentEvent] = []
    helper = SubAgentTool(
        "helper",
        ScriptedProvider(
            [
                reply("one two three four", call("count"), call("count")),
                reply("five six seven"),
            ]
        ),
        tools=[Counter()],
        on_event=child_events.append,
    )
    parent = ScriptedProvider([reply(call("helper", {"task": "go"}, id="h")), reply("ok")])
    agent = al.Agent(parent, tools=[helper], event_buffer_size=0)
    received: list[al.AgentEvent] = []
    parent_events: list[al.AgentEvent] = []
    async with agent.prompt("go") as events:
        async for event in events:
            parent_events.append(event)
            if isinstance(event, al.ToolExecutionUpdate | al.ProgressMessage):
                if isinstance(event, al.ToolExecutionUpdate):
                    child_event = event.partial_result.details["event"]
                else:  # a progress line carries no event: the first one not yet received
                    child_event = next(
                        e
                        for e in child_events
                        if isinstance(e, al.ProgressMessage) and not any(e is r for r in received)
                    )
                position = next(i for i, e in enumerate(child_events) if e is child_event)
                # The child is at most one forwarded event ahead of the consumer.
                assert sum(map(forwardable, child_events[position + 1 :])) <= 1
                received.append(child_event)
            await trio.sleep(1)
    assert received == [event for event in child_events if forwardable(event)]
    texts_in_order = [
        getattr(e.delta, "delta", "") if isinstance(e, al.MessageUpdate) else type(e).__name__
        for e in received
    ]
    assert texts_in_order == [
        "one ",
        "two ",
        "three ",
        "four",
        "ToolExecutionStart",
        "ToolExecutionStart",
        "ProgressMessage",
        "ProgressMessage",
        "five ",
        "six ",
        "seven",
    ]
    assert call_events(parent_events, "h") == [
        ("start", "helper"),
        ("update", "one "),
        ("update", "two "),
        ("update", "three "),
        ("update", "four"),
        ("update", "[sub-agent calling tool: count]"),
        ("update", "[sub-agent calling tool: count]"),
        ("progress", "counted 3"),
        ("progress", "counted 3"),
        ("update", "five "),
        ("update", "six "),
        ("update", "seven"),
        ("end", "five six seven"),
    ]


# --------------------------------------------------------------------------- failures


async def run_failing(helper: SubAgentTool) -> al.ToolExecutionEnd:
    """Run a parent that calls ``helper`` once (id "h"); return the call's end event."""
    parent = ScriptedProvider([reply(call(helper.name, {"task": "do it"}, id="h")), reply("ok")])
    agent = al.Agent(parent, tools=[helper], agent_id="p")
    recorder = await run_recorded(agent, "go")
    (end,) = recorder.of_type(al.ToolExecutionEnd)
    assert end.is_error
    assert end.child_loop_id == end.result.child_loop_id == "p.1.helper.h"
    result = agent.messages[2]
    assert isinstance(result, al.ToolResultMessage)
    assert (result.text, result.is_error, result.child_loop_id) == (
        end.result.text_content,
        True,
        "p.1.helper.h",
    )
    assert texts(agent.messages)[-1] == ("assistant:stop", "ok")  # the parent went on
    return end


async def test_child_model_error() -> None:
    """The child's model call fails: its error message."""
    helper, events = sub_agent(
        "helper", [reply("Looking.", call("count")), fail(ProviderError("overloaded"), "Hm")],
        tools=[Counter()],
    )  # fmt: skip
    end = await run_failing(helper)
    assert end.result.text_content == "Sub-agent 'helper' failed: overloaded"
    agent_end = events[-1]
    assert isinstance(agent_end, al.AgentEnd)
    assert end.result.details == {
        "sub_agent": "helper",
        "child_loop_id": "p.1.helper.h",
        "turns": 2,
        "usage": to_dict(agent_end.usage),
    }


async def test_child_reaches_max_turns() -> None:
    """The child hits its turn limit: the reason and its last output."""
    helper, events = sub_agent(
        "helper",
        [reply("Step one.", call("count")), reply("Step two.", call("count")), reply("never")],
        tools=[Counter()],
        max_turns=2,
    )
    end = await run_failing(helper)
    assert end.result.text_content == (
        "Sub-agent 'helper' failed: Max turns reached (2/2)\n\nIts last output:\nStep two."
    )
    assert end.result.details["turns"] == 2
    agent_end = events[-1]
    assert isinstance(agent_end, al.AgentEnd)
    assert texts(agent_end.messages)[-1] == ("user", "[Agent stopped: Max turns reached (2/2)]")


async def test_child_reaches_a_limit_without_text() -> None:
    """No text: the reason alone."""
    helper, _ = sub_agent(
        "helper",
        [reply(call("count")), reply("never")],
        tools=[Counter()],
        limits=al.ExecutionLimits(max_turns=1),
    )
    end = await run_failing(helper)
    assert end.result.text_content == "Sub-agent 'helper' failed: Max turns reached (1/1)"


async def test_child_aborted_on_its_own() -> None:
    """A child run that ends ABORTED while the call was not cancelled is a failure."""
    helper, _ = sub_agent("helper", [reply("partial", stop_reason=al.StopReason.ABORTED)])
    end = await run_failing(helper)
    assert end.result.text_content == "Sub-agent 'helper' failed: the run was aborted"


async def test_child_loop_raises() -> None:
    """An exception out of the child loop (here its model's) is an error result, chained."""
    helper, _ = sub_agent("helper", [fail(RuntimeError("boom"))])
    end = await run_failing(helper)
    assert end.result.text_content == "Sub-agent 'helper' failed: RuntimeError: boom"
    assert end.result.details["turns"] == 1

    helper, _ = sub_agent("helper", [fail(RuntimeError("boom"))])
    with pytest.raises(al.ToolError) as caught:
        await helper.execute({"task": "go"}, context())
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert caught.value.child_loop_id == "helper.id1"


async def test_blank_task_through_the_loop() -> None:
    """The schema's minLength: the loop refuses an empty task before execute."""
    helper, events = sub_agent("helper", [])
    parent = ScriptedProvider([reply(call("helper", {"task": ""}, id="h")), reply("ok")])
    agent = al.Agent(parent, tools=[helper])
    await agent.run("go")
    assert texts(agent.messages)[2] == (
        "result:error",
        "h=Invalid arguments: $.task: '' should be non-empty",
    )
    assert events == []


@pytest.mark.parametrize("params", [{"task": "  \n"}, {}, {"task": 3}])
async def test_blank_task_when_called_directly(params: dict[str, Any]) -> None:
    helper, events = sub_agent("helper", [])
    with pytest.raises(al.InvalidArgs) as caught:
        await helper.execute(params, context())
    assert str(caught.value) == "Invalid arguments: Missing required 'task' parameter"
    assert events == []


async def test_on_event_errors_end_the_parent_run() -> None:
    """An exception from on_event is the application's bug: it ends the run as itself."""

    def on_event(event: al.AgentEvent) -> None:
        if isinstance(event, al.TurnStart):
            raise LookupError("observer bug")

    helper = SubAgentTool("helper", ScriptedProvider([reply("hi")]), on_event=on_event)
    parent = ScriptedProvider([reply(call("helper", {"task": "go"})), reply("ok")])
    agent = al.Agent(parent, tools=[helper])
    with pytest.raises(LookupError, match="observer bug"):
        await agent.run("go")
    assert_well_formed(agent.messages)


async def test_parent_update_hooks_see_forwarded_updates_and_their_errors_end_the_run() -> None:
    """Forwarded updates pass the parent's update hooks; a hook's exception ends the run."""
    seen: list[str] = []

    def before_update(name: str, call_id: str, text: str) -> bool:
        seen.append(text)
        if text == "there":
            raise KeyError("hook bug")
        return True

    helper, _ = sub_agent("helper", [reply("hi there"), reply("never")])
    parent = ScriptedProvider([reply(call("helper", {"task": "go"})), reply("never")])
    agent = al.Agent(parent, tools=[helper], before_tool_execution_update=before_update)
    with pytest.raises(KeyError, match="hook bug"):
        await agent.run("go")
    assert seen == ["hi ", "there"]
    assert_well_formed(agent.messages)


# --------------------------------------------------------------------------- nesting


@attrs.define(eq=False)
class Nester:
    """A tool that runs another SubAgentTool's execute itself."""

    inner: SubAgentTool
    name: str = "nester"
    label: str = "Nester"
    description: str = "Starts a sub-agent."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        return await self.inner.execute({"task": "nested"}, ctx)


async def test_a_sub_agent_cannot_start_a_sub_agent_at_run_time() -> None:
    """The static check cannot see a tool that runs a sub-agent; the depth guard does."""
    inner, inner_events = sub_agent("inner", [reply("inner ran")])
    outer, outer_events = sub_agent(
        "outer", [reply(call("nester")), reply("gave up")], tools=[Nester(inner)]
    )
    result = await outer.execute({"task": "go"}, context())
    assert result.text_content == "gave up"
    agent_end = outer_events[-1]
    assert isinstance(agent_end, al.AgentEnd)
    assert texts(agent_end.messages)[2] == (
        "result:error",
        "call_1=Sub-agent 'inner' failed: a sub-agent cannot start another sub-agent",
    )
    assert inner_events == []
    # Outside the child's run the guard is lifted again.
    assert (await inner.execute({"task": "go"}, context())).text_content == "inner ran"


# --------------------------------------------------------------------------- cancellation


async def test_abort_stops_two_parallel_children_softly(autojump_clock: Any) -> None:
    """Abort the parent: both children abort, cancel their tools and still end properly."""
    names = ("alpha", "beta")
    sleepers = {name: Sleeper(seconds=100) for name in names}
    child_events: dict[str, list[al.AgentEvent]] = {name: [] for name in names}
    both_started = trio.Event()

    def recorder_for(name: str) -> Any:
        def on_event(event: al.AgentEvent) -> None:
            child_events[name].append(event)
            if all(
                any(isinstance(e, al.ToolExecutionStart) for e in child_events[n]) for n in names
            ):
                both_started.set()

        return on_event

    tools = [
        SubAgentTool(
            name,
            ScriptedProvider([reply(f"{name} works.", call("sleep")), reply("never")]),
            tools=[sleepers[name]],
            on_event=recorder_for(name),
        )
        for name in names
    ]
    parent = ScriptedProvider(
        [
            reply(call("alpha", {"task": "A"}, id="a"), call("beta", {"task": "B"}, id="b")),
            reply("never"),
        ]
    )
    agent = al.Agent(parent, tools=tools, agent_id="p")
    recorder = EventRecorder()
    aborted_at: list[float] = []

    async def abort_when_both_started() -> None:
        await both_started.wait()
        await trio.sleep(1)
        assert all(sleeper.started == ["call_1"] for sleeper in sleepers.values())
        aborted_at.append(trio.current_time())
        agent.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort_when_both_started)
        async with agent.prompt("go") as events:
            await recorder.consume(events)

    assert trio.current_time() == aborted_at[0]  # no grace was needed
    for name, sleeper in sleepers.items():
        assert sleeper.outcomes == [("call_1", "cancelled")], name
    # The parent: AgentEnd, the turn aborted, both calls answered with the abort text.
    assert recorder.names()[-1] == "AgentEnd"
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant:aborted", "[alpha#a,beta#b]"),
        ("result:error", f"a={ABORTED}"),
        ("result:error", f"b={ABORTED}"),
    ]
    assert_well_formed(agent.messages)
    ends = recorder.of_type(al.ToolExecutionEnd)
    assert [(e.tool_call_id, e.result.text_content, e.is_error) for e in ends] == [
        ("a", ABORTED, True),
        ("b", ABORTED, True),
    ]
    # Each child: AgentStart ... AgentEnd on on_event, its history whole and aborted.
    for name, task, call_id in (("alpha", "A", "a"), ("beta", "B", "b")):
        events = child_events[name]
        start, end = events[0], events[-1]
        assert isinstance(start, al.AgentStart)
        assert (start.loop_id, start.parent_loop_id) == (f"p.1.{name}.{call_id}", "p.1")
        assert isinstance(end, al.AgentEnd)
        assert [type(e).__name__ for e in events].count("AgentEnd") == 1
        assert_well_formed(end.messages)
        assert texts(end.messages) == [
            ("user", task),
            ("assistant:aborted", f"{name} works.[sleep#call_1]"),
            ("result:error", f"call_1={ABORTED}"),
        ]
        last = end.messages[1]
        assert isinstance(last, al.AssistantMessage)
        assert last.stop_reason is al.StopReason.ABORTED


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_abort_kills_a_child_subprocess(tmp_path: Path) -> None:
    """A real process under a child's bash tool is killed when the parent aborts."""
    pids: list[int] = []
    started = trio.Event()
    child_events: list[al.AgentEvent] = []

    def on_event(event: al.AgentEvent) -> None:
        child_events.append(event)
        if isinstance(event, al.ToolExecutionUpdate) and not pids:
            pids.append(int(event.partial_result.text_content.split()[0]))
            started.set()

    shell = SubAgentTool(
        "shell",
        ScriptedProvider(
            [reply(call("bash", {"command": "echo $$; exec sleep 300"})), reply("never")]
        ),
        tools=[BashTool(tmp_path, grace=1)],
        on_event=on_event,
    )
    parent = ScriptedProvider([reply(call("shell", {"task": "wait"}, id="s")), reply("never")])
    agent = al.Agent(parent, tools=[shell])
    recorder = EventRecorder()

    async def abort_when_started() -> None:
        await started.wait()
        assert not process_gone(pids[0])
        agent.abort()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(abort_when_started)
            async with agent.prompt("go") as events:
                await recorder.consume(events)
        while not process_gone(pids[0]):  # noqa: ASYNC110 (the OS sends no event)
            await trio.sleep(0.01)

    assert texts(agent.messages)[2] == ("result:error", f"s={ABORTED}")
    assert recorder.names()[-1] == "AgentEnd"
    end = child_events[-1]
    assert isinstance(end, al.AgentEnd)
    assert texts(end.messages)[1:] == [
        ("assistant:aborted", "[bash#call_1]"),
        ("result:error", f"call_1={ABORTED}"),
    ]


async def test_timeout_aborts_the_child(autojump_clock: Any) -> None:
    """The sub-agent call's own timeout: the loop's timeout result; the child still ends."""
    sleeper = Sleeper(seconds=100)
    helper, events = sub_agent(
        "helper", [reply("Waiting.", call("sleep")), reply("never")], tools=[sleeper], timeout=5
    )
    parent = ScriptedProvider([reply(call("helper", {"task": "wait"}, id="h")), reply("after")])
    agent = al.Agent(parent, tools=[helper])
    started = trio.current_time()
    await agent.run("go")
    assert trio.current_time() - started == 5
    assert texts(agent.messages)[2:] == [
        ("result:error", "h=Tool exceeded timeout of 5s"),
        ("assistant:stop", "after"),
    ]
    assert sleeper.outcomes == [("call_1", "cancelled")]
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert texts(end.messages) == [
        ("user", "wait"),
        ("assistant:aborted", "Waiting.[sleep#call_1]"),
        ("result:error", f"call_1={ABORTED}"),
    ]


async def test_a_cancelled_call_reraises_after_the_child_ends(autojump_clock: Any) -> None:
    """Called directly in a cancelled scope: the child runs its abort, then Cancelled goes on."""
    helper, events = sub_agent("helper", [reply("never")])
    with trio.CancelScope() as scope:
        scope.cancel()
        await helper.execute({"task": "go"}, context())
    assert scope.cancelled_caught
    assert [type(e).__name__ for e in events] == [
        "AgentStart",
        "MessageStart",
        "MessageEnd",
        "AgentEnd",
    ]
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert texts(end.messages) == [("user", "go")]


async def test_a_stalled_parent_consumer_does_not_hold_up_the_abort(autojump_clock: Any) -> None:
    """Relaying to the parent stops at the abort: a consumer not reading cannot stall the child."""
    sleeper = Sleeper(seconds=100)
    events: list[al.AgentEvent] = []
    ended: list[float] = []

    def on_event(event: al.AgentEvent) -> None:
        events.append(event)
        if isinstance(event, al.AgentEnd):
            ended.append(trio.current_time())

    helper = SubAgentTool(
        "helper",
        ScriptedProvider([reply("one two three four", call("sleep")), reply("never")]),
        tools=[sleeper],
        on_event=on_event,
    )
    parent = ScriptedProvider([reply(call("helper", {"task": "go"}, id="h")), reply("never")])
    agent = al.Agent(parent, tools=[helper], event_buffer_size=0)
    recorder = EventRecorder()
    aborted_at = 0.0
    async with agent.prompt("go") as stream:
        async for event in stream:
            recorder.events.append(event)
            if isinstance(event, al.ToolExecutionUpdate) and not aborted_at:
                # Abort, then stop reading for a while: the next update is waiting to be sent.
                aborted_at = trio.current_time()
                agent.abort()
                await trio.sleep(100)
    assert ended == [aborted_at]  # the child's abort finished at once, not at the grace
    assert call_events(recorder.events, "h") == [
        ("start", "helper"),
        ("update", "one "),
        ("error", ABORTED),
    ]
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    # At the abort the forwarder was still handing "one " to the parent (waiting for the
    # parent's consumer to take it), and the child had streamed "two " and was waiting
    # for the forwarder: "two " is in the child's history and never reached the parent.
    assert texts(end.messages)[1:] == [("assistant:aborted", "one two ")]
    assert sleeper.started == []


async def abort_at(agent: al.Agent, when: Any, at: list[float]) -> EventRecorder:
    """Run ``agent``; abort it once ``when()`` is true (polled each trio second)."""
    recorder = EventRecorder()

    async def abort() -> None:
        while not when():  # noqa: ASYNC110 (a mock clock: polling is free)
            await trio.sleep(1)
        at.append(trio.current_time())
        agent.abort()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(abort)
        async with agent.prompt("go") as events:
            await recorder.consume(events)
    return recorder


async def test_a_stuck_on_event_is_cut_off_at_the_grace(autojump_clock: Any) -> None:
    """The child's abort waits on a stuck on_event: at abort_grace it is cancelled hard."""
    sleeper = Sleeper(seconds=100)
    seen: list[str] = []
    on_event_cancelled: list[float] = []

    async def on_event(event: al.AgentEvent) -> None:
        seen.append(type(event).__name__)
        if isinstance(event, al.ToolExecutionEnd):  # only after the abort
            try:
                await trio.sleep(1000)
            except trio.Cancelled:
                on_event_cancelled.append(trio.current_time())
                raise
        await trio.lowlevel.checkpoint()

    helper = SubAgentTool(
        "helper",
        ScriptedProvider([reply(call("sleep")), reply("never")]),
        tools=[sleeper],
        on_event=on_event,
        abort_grace=10,
    )
    parent = ScriptedProvider([reply(call("helper", {"task": "wait"}, id="h")), reply("never")])
    agent = al.Agent(parent, tools=[helper])
    at: list[float] = []
    recorder = await abort_at(agent, lambda: bool(sleeper.started), at)
    (end,) = recorder.of_type(al.ToolExecutionEnd)
    assert end.result.text_content == ABORTED
    assert on_event_cancelled == [at[0] + 10]
    assert trio.current_time() == at[0] + 10
    assert seen[-1] == "ToolExecutionEnd"
    assert "AgentEnd" not in seen  # cancelled hard: the child sent nothing more
    assert sleeper.outcomes == [("call_1", "cancelled")]
    assert_well_formed(agent.messages)


@pytest.mark.parametrize(("cleanup", "soft"), [(5, True), (30, False)])
async def test_a_tool_that_ignores_cancellation(
    autojump_clock: Any, cleanup: float, soft: bool
) -> None:
    """A child tool shields itself for ``cleanup`` s after the abort (abort_grace is 10 s).

    Within the grace the child aborts softly and sends AgentEnd. Past it, the
    child is cancelled hard at the grace, but trio cannot cut a shield short:
    the call ends when the tool's shield does, with no AgentEnd from the child.
    """
    stubborn = Stubborn(cleanup)
    helper, events = sub_agent(
        "helper", [reply(call("stubborn")), reply("never")], tools=[stubborn], abort_grace=10
    )
    parent = ScriptedProvider([reply(call("helper", {"task": "wait"}, id="h")), reply("never")])
    agent = al.Agent(parent, tools=[helper])
    at: list[float] = []
    recorder = await abort_at(
        agent, lambda: any(isinstance(e, al.ToolExecutionStart) for e in events), at
    )
    assert stubborn.cancelled_at == at
    assert trio.current_time() == at[0] + cleanup
    (end,) = recorder.of_type(al.ToolExecutionEnd)
    assert end.result.text_content == ABORTED
    assert recorder.names()[-1] == "AgentEnd"
    assert_well_formed(agent.messages)
    names = [type(e).__name__ for e in events]
    if soft:
        assert names[-6:] == [
            "ToolExecutionStart",
            "ToolExecutionEnd",
            "MessageStart",
            "MessageEnd",
            "TurnEnd",
            "AgentEnd",
        ]
        agent_end = events[-1]
        assert isinstance(agent_end, al.AgentEnd)
        assert_well_formed(agent_end.messages)
        assert texts(agent_end.messages)[1:] == [
            ("assistant:aborted", "[stubborn#call_1]"),
            ("result:error", f"call_1={ABORTED}"),
        ]
    else:
        assert names[-1] == "ToolExecutionStart"


# --------------------------------------------------------------------------- context


def test_prun_tools_among_the_child_tools_are_refused() -> None:
    """Concurrent calls would share their queue: the prun option gives each call its own."""
    from agentloop.tools import prun_tools

    message = (
        "SubAgentTool 'h': calls running at once would share the queue of 'prun'; use "
        "SubAgentTool(..., prun=True), which gives each call its own prun tools"
    )
    with pytest.raises(ValueError, match=exactly(message)):
        SubAgentTool("h", ScriptedProvider(), tools=prun_tools())


async def test_parallel_children_prun_their_own_context() -> None:
    """With prun=True, two calls running at once each prune their own child's context."""

    @al.tool
    async def look(what: str) -> str:
        """Look."""
        return what * 200

    def script(word: str) -> list[Any]:
        return [
            reply(call("look", {"what": word}, id="l1")),
            reply(call("prun_with_memo", {"tokens": 1, "memo": f"{word} seen"}, id="p1")),
            reply(f"{word} done"),
        ]

    ends: dict[str, al.AgentEnd] = {}
    models = {word: ScriptedProvider(script(word)) for word in ("alpha", "beta")}
    tools = [
        SubAgentTool(
            word,
            models[word],
            tools=[look],
            prun=True,
            on_event=lambda e, w=word: (
                ends.__setitem__(w, e) if isinstance(e, al.AgentEnd) else None
            ),
        )
        for word in ("alpha", "beta")
    ]
    parent = ScriptedProvider(
        [
            reply(call("alpha", {"task": "a"}, id="a"), call("beta", {"task": "b"}, id="b")),
            reply("ok"),
        ]
    )
    agent = al.Agent(parent, tools=tools)
    await agent.run("go")
    for word, model in models.items():
        assert [m.text for m in model.requests[-1].messages] == [
            word[0],
            f"[Pruned context summary: {word} seen]",
            "",
            "Prun request recorded: 1 token will be removed before next turn.",
        ]
        assert texts(ends[word].messages)[-1] == ("assistant:stop", f"{word} done")


def test_compaction_reaches_the_child_config() -> None:
    """compaction goes to the child's config, checked at construction."""
    config = al.CompactionConfig(context_window=5000)
    assert SubAgentTool("h", ScriptedProvider(), compaction=config).config.compaction == config
    with pytest.raises(ValueError, match=r"^compaction needs the model's context window"):
        SubAgentTool("h", ScriptedProvider(), compaction=al.CompactionConfig())


# --------------------------------------------------------------------------- one budget


def _usage(tokens: int) -> al.Usage:
    return al.Usage(input=tokens - 100, output=100, total_tokens=tokens)


def _busy_child(turns: int, tokens: int = 0) -> ScriptedProvider:
    """A child's model that calls echo ``turns`` times before it answers."""
    usage = _usage(tokens) if tokens else None
    script = [reply(call("echo", {"text": f"step {n}"}), usage=usage) for n in range(turns)]
    return ScriptedProvider([*script, reply("Done.", usage=usage)], model="child-model")


def _child_ends(recorder: EventRecorder) -> Any:
    """An ``on_event`` that records the child's ``AgentEnd`` where it arrives."""

    async def child_end(event: al.AgentEvent) -> None:
        if isinstance(event, al.AgentEnd):
            recorder.events.append(event)

    return child_end


async def _run_parent(parent: al.Agent, recorder: EventRecorder) -> EventRecorder:
    async with parent.prompt("Go.") as events:
        await recorder.consume(events)
    return recorder


async def test_a_sub_agents_spending_counts_in_the_parents_usage_and_limits() -> None:
    """A child that would take 11 turns of 600 tokens stops at the parent's 2,000-token
    limit, inside the parent's one tool call; the parent's usage includes the child's."""
    child_model = _busy_child(10, tokens=600)
    recorder = EventRecorder()
    helper = SubAgentTool(
        "helper", child_model, tools=[Echo()], max_turns=20, on_event=_child_ends(recorder)
    )
    parent = al.Agent(
        ScriptedProvider(
            [reply(call("helper", {"task": "work"}), usage=_usage(300)), reply("Never.")],
            model="parent-model",
        ),
        tools=[helper],
        limits=al.ExecutionLimits(max_total_tokens=2000),
    )
    await _run_parent(parent, recorder)
    limit = al.AgentStop(al.StopKind.MAX_TOKENS, "Max tokens reached (2100/2000)")
    child_end, parent_end = recorder.of_type(al.AgentEnd)
    # The parent's 300, then three child turns of 600: a fourth is never asked for.
    assert len(child_model.requests) == 3
    assert child_end.stop_reason == limit
    assert child_end.usage == _usage(600) + _usage(600) + _usage(600)
    assert parent_end.stop_reason == limit
    assert parent_end.usage == _usage(300) + child_end.usage
    assert parent_end.usage_by_model == {
        "parent-model": _usage(300),
        "child-model": child_end.usage,
    }
    result = recorder.of_type(al.ToolExecutionEnd)[-1]
    assert (result.tool_name, result.is_error) == ("helper", True)
    assert result.result.text_content.split("\n")[0] == (
        "Sub-agent 'helper' failed: Max tokens reached (2100/2000)"
    )


async def test_a_sub_agents_requests_count_in_the_parents_max_requests() -> None:
    child_model = _busy_child(10)
    recorder = EventRecorder()
    helper = SubAgentTool(
        "helper", child_model, tools=[Echo()], max_turns=20, on_event=_child_ends(recorder)
    )
    parent = al.Agent(
        ScriptedProvider([reply(call("helper", {"task": "work"})), reply("Never.")]),
        tools=[helper],
        limits=al.ExecutionLimits(max_requests=4),
    )
    await _run_parent(parent, recorder)
    # The parent's request, then three of the child's.
    assert len(child_model.requests) == 3
    limit = al.AgentStop(al.StopKind.MAX_REQUESTS, "Max requests reached (4/4)")
    assert [end.stop_reason for end in recorder.of_type(al.AgentEnd)] == [limit, limit]
