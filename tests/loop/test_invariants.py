"""Property: whatever happens, every tool call ends with exactly one result."""

from __future__ import annotations

from typing import Any

import attrs
import trio
import trio.testing
from helpers import ANY_SCHEMA, Echo, Raiser, Sleeper, Steerer
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.providers import ScriptedProvider, ScriptedTurn, call, reply
from agentloop.testing import EventRecorder, assert_well_formed

KINDS = [
    "ok",
    "tool_error",
    "crash",
    "timeout",
    "slow",
    "unknown",
    "invalid",
    "malformed",
    "steer",
    "veto",
]


def make_call(kind: str) -> Any:
    if kind == "ok":
        return call("echo", {"text": "x"})
    if kind == "tool_error":
        return call("tool_error")
    if kind == "crash":
        return call("crash")
    if kind == "timeout":
        return call("timeout")
    if kind == "slow":
        return call("sleep", {"seconds": 3})
    if kind == "unknown":
        return call("no_such_tool")
    if kind == "invalid":
        return call("echo", {"text": 5})
    if kind == "malformed":
        return call("echo", '{"text": ')
    if kind == "steer":
        return call("steerer")
    return call("vetoed")


@attrs.define
class Vetoed:
    name: str = "vetoed"
    label: str = ""
    description: str = ""
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        raise AssertionError("a vetoed tool must never run")


STRATEGIES = [al.Sequential(), al.Parallel(), al.Batched(1), al.Batched(2), al.Batched(3)]
VOID = "VOIDED-ATTEMPT "


@attrs.define
class Flaky:
    """Before some turns, streams a failed attempt and a StreamRestart, as HTTP providers do."""

    inner: ScriptedProvider
    restarts: list[bool]
    calls: int = 0

    async def stream(self, request: Any, emit: Any) -> al.AssistantMessage:
        restart = self.restarts[self.calls % len(self.restarts)]
        self.calls += 1
        if restart:
            await emit(al.TextDelta(delta=VOID))
            await emit(al.StreamRestart(attempt=2, delay=1.0, error="overloaded"))
            await trio.sleep(1.0)
        return await self.inner.stream(request, emit)


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    turns = draw(st.lists(st.lists(st.sampled_from(KINDS), max_size=4), min_size=1, max_size=4))
    return {
        "turns": turns,
        "strategy": draw(st.sampled_from(STRATEGIES)),
        "delta_delay": draw(st.sampled_from([0.0, 0.5])),
        "interrupt": draw(st.sampled_from(["none", "abort", "break"])),
        "at_event": draw(st.integers(min_value=0, max_value=80)),
        "follow_up": draw(st.booleans()),
        "restarts": draw(st.lists(st.booleans(), min_size=1, max_size=4)),
    }


async def play(scenario: dict[str, Any]) -> None:
    script: list[ScriptedTurn] = [
        reply(f"turn {i}", *(make_call(kind) for kind in kinds))
        for i, kinds in enumerate(scenario["turns"])
    ]
    script += [reply("end")] * 20
    provider = ScriptedProvider(script, delta_delay=scenario["delta_delay"])
    steerer = Steerer()
    agent = al.Agent(
        Flaky(provider, scenario["restarts"]),
        tools=[
            Echo(),
            Raiser(al.ToolError("tool failed"), name="tool_error"),
            Raiser(ValueError("crashed"), name="crash"),
            Sleeper(name="timeout", timeout=1.0),
            Sleeper(),
            steerer,
            Vetoed(),
        ],
        strategy=scenario["strategy"],
        before_tool_execution=lambda name, call_id, args: name != "vetoed",
    )
    steerer.agent = agent
    if scenario["follow_up"]:
        agent.follow_up("and then?")

    recorder = EventRecorder()
    async with agent.prompt("go") as events:
        async for event in events:
            recorder.events.append(event)
            if len(recorder.events) == scenario["at_event"]:
                if scenario["interrupt"] == "abort":
                    agent.abort()
                elif scenario["interrupt"] == "break":
                    break

    assert_well_formed(agent.messages)
    assert not agent.is_running
    # A failed attempt's text never enters the history, except as the partial text
    # of a reply the abort cut short (an abort keeps what streamed).
    for message in agent.messages:
        if VOID in str(message.content):
            assert isinstance(message, al.AssistantMessage)
            assert message.stop_reason is al.StopReason.ABORTED
    starts = [e.tool_call_id for e in recorder.of_type(al.ToolExecutionStart)]
    ends = [e.tool_call_id for e in recorder.of_type(al.ToolExecutionEnd)]
    assert len(set(starts)) == len(starts)
    assert len(set(ends)) == len(ends)
    if recorder.events and isinstance(recorder.events[-1], al.AgentEnd):
        assert sorted(starts) == sorted(ends)
        assert recorder.events[-1].messages == agent.messages
        assert [type(e) for e in recorder.events].count(al.AgentEnd) == 1
        # MessageEnd events describe exactly the history, in order; the one difference
        # allowed is an aborted turn's assistant message, re-marked ABORTED afterwards.
        ended = [e.message for e in recorder.of_type(al.MessageEnd)]
        assert len(ended) == len(agent.messages)
        for sent, kept in zip(ended, agent.messages, strict=True):
            if sent != kept:
                assert isinstance(sent, al.AssistantMessage)
                assert isinstance(kept, al.AssistantMessage)
                assert kept.stop_reason is al.StopReason.ABORTED
                assert (kept.content, kept.timestamp) == (sent.content, sent.timestamp)
                assert kept == recorder.of_type(al.TurnEnd)[-1].message
    else:
        assert scenario["interrupt"] == "break"

    # The agent goes on, and the next request is well formed.
    provider.add(reply("fresh"))
    agent.clear_queues()
    await agent.run("again")
    assert_well_formed(provider.requests[-1].messages)
    last = agent.messages[-1]
    assert isinstance(last, al.AssistantMessage)
    assert last.stop_reason in (al.StopReason.STOP, al.StopReason.TOOL_USE)


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_every_tool_call_gets_exactly_one_result(scenario: dict[str, Any]) -> None:
    """Random tool calls, failures, timeouts, steering, vetoes, aborts: the history stays whole."""
    trio.run(play, scenario, clock=trio.testing.MockClock(autojump_threshold=0))
