"""The prun tools through the loop: queueing, application between turns, events, errors."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers import Sleeper, run_recorded, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import EventRecorder, assert_well_formed
from agentloop.tools import PrunTool, prun_tools


@al.tool
async def look(what: str) -> str:
    """Look at something."""
    return f"{what}: " + "x" * 80


def explore_then(*turns: Any) -> ScriptedProvider:
    """A model that looks at a and b, then plays ``turns``."""
    return ScriptedProvider(
        [
            reply("Looking at a.", call("look", {"what": "a"}, id="c1")),
            reply(call("look", {"what": "b"}, id="c2")),
            *turns,
        ]
    )


def working(messages: Any) -> list[tuple[str, str]]:
    return texts(messages)


X80 = "x" * 80


async def test_prun_with_memo_trims_the_next_request() -> None:
    """The request after the prun holds the memo where the pruned exchanges were."""
    model = explore_then(
        reply("Enough.", call("prun_with_memo", {"tokens": 30, "memo": "b is empty"}, id="p1")),
        reply("Final."),
    )
    agent = al.Agent(model, tools=[look], prun=True)
    recorder = await run_recorded(agent, "explore")

    assert working(model.requests[-1].messages) == [
        ("user", "explore"),
        ("assistant:tool_use", "Looking at a.[look#c1]"),
        ("result:ok", f"c1=a: {X80}"),
        ("user", "[Pruned context summary: b is empty]"),
        ("assistant:tool_use", "Enough.[prun_with_memo#p1]"),
        ("result:ok", "p1=Prun request recorded: 30 tokens will be removed before next turn."),
    ]
    (applied,) = recorder.of_type(al.PrunApplied)
    assert applied.record == al.PrunRecord(
        pruned_timestamps=(agent.messages[3].timestamp, agent.messages[4].timestamp),
        tokens_removed=al.estimate_tokens(agent.messages[3])
        + al.estimate_tokens(agent.messages[4]),
        memo="b is empty",
    )
    assert applied.messages_removed == 2
    assert len(agent.messages) == 8  # the log keeps both exchanges
    assert (
        agent.messages[6].text
        == "Prun request recorded: 30 tokens will be removed before next turn."
    )


async def test_prun_applies_after_the_tools_and_before_turn_end() -> None:
    """Order: the prun call's end and result, then PrunApplied, then TurnEnd."""
    model = explore_then(reply(call("prun", {"tokens": 1}, id="p1")), reply("Final."))
    agent = al.Agent(model, tools=[look], prun=True)
    recorder = await run_recorded(agent, "explore")
    names = [type(event).__name__ for event in recorder.events]
    at = names.index("PrunApplied")
    assert names[at - 4 : at + 2] == [
        "ToolExecutionStart",
        "ToolExecutionEnd",
        "MessageStart",
        "MessageEnd",
        "PrunApplied",
        "TurnEnd",
    ]
    assert recorder.of_type(al.PrunApplied)[0].record.memo is None
    # Silent: the pruned exchange just vanishes from the next request.
    assert [kind for kind, _ in working(model.requests[-1].messages)] == [
        "user",
        "assistant:tool_use",
        "result:ok",
        "assistant:tool_use",
        "result:ok",
    ]


async def test_requests_of_one_turn_apply_in_order() -> None:
    """Two prun calls in one message: applied first to last, the second after the first."""
    model = explore_then(
        reply(
            call("prun_with_memo", {"tokens": 1, "memo": "first"}, id="p1"),
            call("prun_with_memo", {"tokens": 1, "memo": "second"}, id="p2"),
        ),
        reply("Final."),
    )
    agent = al.Agent(model, tools=[look], prun=True)
    recorder = await run_recorded(agent, "explore")
    first, second = recorder.of_type(al.PrunApplied)
    assert (first.record.memo, first.record.pruned_timestamps) == (
        "first",
        (agent.messages[3].timestamp, agent.messages[4].timestamp),
    )
    assert (second.record.memo, second.record.pruned_timestamps) == (
        "second",
        (agent.messages[1].timestamp, agent.messages[2].timestamp),
    )
    assert working(model.requests[-1].messages) == [
        ("user", "explore"),
        ("user", "[Pruned context summary: second]"),
        ("user", "[Pruned context summary: first]"),
        ("assistant:tool_use", "[prun_with_memo#p1,prun_with_memo#p2]"),
        ("result:ok", "p1=Prun request recorded: 1 token will be removed before next turn."),
        ("result:ok", "p2=Prun request recorded: 1 token will be removed before next turn."),
    ]
    assert_well_formed(model.requests[-1].messages)


async def test_a_prun_that_finds_nothing_still_reports() -> None:
    """Only the prun's own exchange exists: PrunApplied says nothing was removed."""
    model = ScriptedProvider([reply(call("prun", {"tokens": 500}, id="p1")), reply("ok")])
    agent = al.Agent(model, prun=True)
    recorder = await run_recorded(agent, "go")
    (applied,) = recorder.of_type(al.PrunApplied)
    assert (applied.record.pruned_timestamps, applied.record.tokens_removed) == ((), 0)
    assert applied.messages_removed == 0


@pytest.mark.parametrize(
    ("tool", "arguments", "text"),
    [
        ("prun", {"tokens": 0}, "Invalid arguments: $.tokens: 0 is less than the minimum of 1"),
        ("prun", {"tokens": 2.5}, "Invalid arguments: $.tokens: 2.5 is not of type 'integer'"),
        ("prun", {"tokens": "9"}, "Invalid arguments: $.tokens: '9' is not of type 'integer'"),
        ("prun", {}, "Invalid arguments: $: 'tokens' is a required property"),
        (
            "prun_with_memo",
            {"tokens": 5},
            "Invalid arguments: $: 'memo' is a required property",
        ),
        (
            "prun_with_memo",
            {"tokens": 5, "memo": ""},
            "Invalid arguments: $.memo: '' should be non-empty",
        ),
    ],
)
async def test_bad_arguments_are_refused_by_the_schema(
    tool: str, arguments: dict[str, Any], text: str
) -> None:
    """The loop's own validation refuses bad prun arguments; nothing is queued."""
    model = ScriptedProvider([reply(call(tool, arguments, id="p1")), reply("ok")])
    agent = al.Agent(model, prun=True)
    recorder = await run_recorded(agent, "go")
    assert texts(agent.messages)[2] == ("result:error", f"p1={text}")
    assert recorder.of_type(al.PrunApplied) == []


@pytest.mark.parametrize(
    ("with_memo", "params", "text"),
    [
        (False, {"tokens": 0}, "Invalid arguments: tokens must be a positive integer, got 0"),
        (False, {"tokens": True}, "Invalid arguments: tokens must be a positive integer, got True"),
        (
            True,
            {"tokens": 3, "memo": "  "},
            "Invalid arguments: prun_with_memo needs a memo: a non-empty string",
        ),
    ],
)
async def test_execute_checks_its_arguments_itself(
    with_memo: bool, params: dict[str, Any], text: str
) -> None:
    """Called directly (no schema check), execute still refuses bad arguments."""
    tool = PrunTool(with_memo=with_memo)
    ctx = al.ToolContext("p1", tool.name, trio.CancelScope())
    with pytest.raises(al.InvalidArgs) as info:
        await tool.execute(params, ctx)
    assert (str(info.value), len(tool.prun_queue)) == (text, 0)


async def test_execute_queues_a_request() -> None:
    """execute() only queues; the result says what will happen."""
    memo, plain = PrunTool(with_memo=True), PrunTool()
    result = await memo.execute(
        {"tokens": 7, "memo": "m"}, al.ToolContext("p", "x", trio.CancelScope())
    )
    assert result == al.ToolResult.text(
        "Prun request recorded: 7 tokens will be removed before next turn.",
        details={"tokens": 7, "memo": "m"},
    )
    await plain.execute(
        {"tokens": 3, "memo": "ignored"}, al.ToolContext("p", "x", trio.CancelScope())
    )
    assert memo.prun_queue.take_all() == [al.PrunRequest(7, "m", "p")]
    assert plain.prun_queue.take_all() == [al.PrunRequest(3, None, "p")]


def test_the_pair_shares_one_queue() -> None:
    """prun_tools() gives prun and prun_with_memo on one queue."""
    queue = al.PrunQueue()
    prun, with_memo = prun_tools(queue)
    assert (prun.name, with_memo.name) == ("prun", "prun_with_memo")
    assert (prun.label, with_memo.label) == ("Prun", "Prun with memo")
    assert prun.prun_queue is with_memo.prun_queue is queue
    assert prun.parameters_schema["required"] == ["tokens"]
    assert with_memo.parameters_schema["required"] == ["tokens", "memo"]


def test_prun_tools_on_two_queues_are_refused() -> None:
    """Separately built prun tools would lose their order: refused when the agent is built."""
    with pytest.raises(ValueError, match=r"^the prun tools must share one PrunQueue \(build them"):
        al.Agent(ScriptedProvider([]), tools=[PrunTool(), PrunTool(with_memo=True)])
    with pytest.raises(
        ValueError, match=r"^two tools are named 'prun'; tool names must be unique$"
    ):
        al.Agent(ScriptedProvider([]), tools=[PrunTool()], prun=True)


def test_prun_requests_are_validated() -> None:
    """PrunRequest(tokens) needs a positive integer."""
    with pytest.raises(ValueError, match=r"^tokens must be an integer >= 1, got 0$"):
        al.PrunRequest(0)


async def test_agent_loop_finds_the_queue_in_the_tools() -> None:
    """With agent_loop, prun tools work without any wiring: the loop finds their queue."""
    model = explore_then(reply(call("prun", {"tokens": 1}, id="p1")), reply("Final."))
    context = al.AgentContext(tools=[look, *prun_tools()])
    send, receive = trio.open_memory_channel[al.AgentEvent](100)
    await al.agent_loop(["explore"], context, al.AgentLoopConfig(provider=model), send)
    events = [event async for event in receive]
    assert [type(e).__name__ for e in events].count("PrunApplied") == 1
    assert len(context.working_context()) == len(context.messages) - 2


async def test_an_abort_after_a_prun_call_still_applies_it(autojump_clock: Any) -> None:
    """The run is aborted while a sibling of the prun call runs: the request is applied
    before the turn ends, and PrunApplied comes before TurnEnd."""
    sleeper = Sleeper(seconds=60)
    model = explore_then(
        reply(call("prun", {"tokens": 1}, id="p1"), call("sleep", {}, id="s1")), reply("never")
    )
    agent = al.Agent(model, tools=[look, sleeper], prun=True)

    recorder = EventRecorder()
    async with agent.prompt("explore") as events:
        async for event in events:
            recorder.events.append(event)
            if isinstance(event, al.ToolExecutionEnd) and event.tool_name == "prun":
                agent.abort()  # the sleep is still running
    names = [type(event).__name__ for event in recorder.events]
    assert names[-3:] == ["PrunApplied", "TurnEnd", "AgentEnd"]
    assert sleeper.outcomes == [("s1", "cancelled")]
    assert len(agent.context.working_context()) == len(agent.messages) - 2
    assert_well_formed(agent.context.working_context())
