"""The loop core on its own: no trio, no I/O, driven by a plain synchronous driver.

A second driver (a workflow engine) runs the same core; these tests prove the
core's rules without trio: the exactly-one-result ledger and the event order
hold whatever the model replies, however the tools end, whatever steering,
follow-ups, aborts and hard stops interleave, wherever they fall.
"""

from __future__ import annotations

import ast
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop._loop._core import LoopCore
from agentloop._loop._protocol import (
    CHECKPOINT,
    AskModel,
    CallHook,
    Compact,
    ModelFailed,
    RunCalls,
)
from agentloop.testing import assert_well_formed

LOOP = Path(__file__).resolve().parent.parent.parent / "agentloop" / "_loop"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Tool:
    """A tool the synchronous driver never awaits: outcomes come from the scenario."""

    label = description = "t"
    parameters_schema = SCHEMA

    def __init__(self, name: str) -> None:
        self.name = name

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        raise AssertionError("the core never runs tools itself")


class Stop(Exception):
    """Where the scenario interrupts the run."""


@pytest.mark.parametrize("module", ["_core.py", "_protocol.py"])
def test_the_core_does_not_import_trio(module: str) -> None:
    """Its own imports, and the contract's: no trio, no anyio, no asyncio (the modules
    they import: tests/test_architecture.py)."""
    tree = ast.parse((LOOP / module).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 0
    }
    assert imported.isdisjoint({"trio", "anyio", "asyncio", "sniffio"}), imported


KINDS = ["ok", "error", "unknown", "invalid", "veto", "deny"]
Outcome = al.ToolOutcome
#: The outcomes of a call of each kind, if it runs (or is refused); NOT_RUN: if it is not.
OUTCOMES = {
    "ok": {Outcome.OK, Outcome.ERROR},  # the scenario's tools end either way, at random
    "error": {Outcome.OK, Outcome.ERROR},
    "unknown": {Outcome.NOT_FOUND},
    "invalid": {Outcome.INVALID_ARGUMENTS},
    "veto": {Outcome.VETOED},
    "deny": {Outcome.DENIED},
}
NOT_RUN = {Outcome.SKIPPED, Outcome.CANCELLED, Outcome.NOT_RUN}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    turns = draw(st.lists(st.lists(st.sampled_from(KINDS), max_size=4), min_size=1, max_size=4))
    return {
        "turns": turns,
        "fail_model_at": draw(st.none() | st.integers(0, 5)),
        "strategy": draw(
            st.sampled_from([al.Sequential(), al.Parallel(), al.Batched(1), al.Batched(2)])
        ),
        "steer_at_poll": draw(st.none() | st.integers(0, 8)),
        "follow_ups": draw(st.integers(0, 2)),
        "interrupt": draw(st.sampled_from(["none", "abort", "cancel", "hook_error"])),
        "at_action": draw(st.integers(0, 120)),
        "max_turns": draw(st.none() | st.integers(1, 5)),
        "seed": draw(st.integers(0, 2**16)),
        "deltas": draw(st.integers(0, 3)),
    }


def reply_for(kinds: list[str], turn: int) -> al.AssistantMessage:
    calls = []
    for position, kind in enumerate(kinds):
        name = {"unknown": "nope", "veto": "vetoed", "deny": "denied"}.get(kind, "t")
        arguments = {"n": "x"} if kind == "invalid" else {"n": position}
        calls.append(al.ToolCall(f"c{turn}-{position}", name, arguments))
    stop = al.StopReason.TOOL_USE if calls else al.StopReason.STOP
    return al.AssistantMessage((al.TextContent(f"turn {turn}"), *calls), stop, usage=al.Usage(1, 1))


class Denying:
    """A permissions stand-in: the core only calls ``assess``."""

    def assess(self, tool: Any, name: str, call_id: str, args: Any) -> str | None:
        return "no" if name == "denied" else None


def play(scenario: dict[str, Any]) -> None:
    rng = random.Random(scenario["seed"])
    replies = [reply_for(kinds, i) for i, kinds in enumerate(scenario["turns"])]
    steering: list[al.UserMessage] = []
    follow_ups = [al.UserMessage.text(f"follow-up {i}") for i in range(scenario["follow_ups"])]
    polls = 0

    def take_steering() -> list[al.UserMessage]:
        nonlocal polls
        polls += 1
        if polls == scenario["steer_at_poll"]:
            steering.append(al.UserMessage.text("steer"))
        taken = list(steering)
        steering.clear()
        return taken

    def take_follow_up() -> list[al.UserMessage]:
        return [follow_ups.pop(0)] if follow_ups else []

    limits = al.ExecutionLimits(
        max_turns=scenario["max_turns"], max_total_tokens=None, max_duration=None
    )
    config = al.AgentLoopConfig(
        provider=object(),  # type: ignore[arg-type]  # never called by the core
        strategy=scenario["strategy"],
        limits=limits,
        permissions=Denying(),  # type: ignore[arg-type]
        get_steering_messages=take_steering,
        get_follow_up_messages=take_follow_up,
        before_tool_execution=lambda name, call_id, args: name != "vetoed",
        after_tool_execution=lambda name, call_id, is_error: None,
    )
    context = al.AgentContext(tools=[Tool("t"), Tool("vetoed"), Tool("denied")])
    core = LoopCore(context, config, loop_id="L", now=lambda: 0.0)
    events: list[al.AgentEvent] = []
    actions = 0
    model_calls = 0

    def perform(action: Any) -> Any:
        nonlocal actions, model_calls
        actions += 1
        if actions == scenario["at_action"] and scenario["interrupt"] != "none":
            raise Stop
        if isinstance(action, al.AgentEvent):
            events.append(action)
            return None
        if isinstance(action, CallHook):
            return action.hook(*action.args)
        if action is CHECKPOINT:
            return None
        if isinstance(action, AskModel):
            model_calls += 1
            if model_calls - 1 == scenario["fail_model_at"]:
                return ModelFailed("overloaded")
            for piece in range(scenario["deltas"]):
                events.append(core.delta(al.TextDelta(delta=f"p{piece} ")))
            return (
                replies.pop(0)
                if replies
                else al.AssistantMessage((al.TextContent("done"),), al.StopReason.STOP)
            )
        if isinstance(action, RunCalls):
            calls = list(action.calls)
            rng.shuffle(calls)  # they finish in any order
            for state, _entry, _timeout in calls:
                if rng.random() < 0.3:
                    events.append(core.progress(state, "working"))
                ok = rng.random() < 0.7
                result = al.ToolResult.text("ok" if ok else "failed")
                outcome = al.ToolOutcome.OK if ok else al.ToolOutcome.ERROR
                drive(core.call_ended(state, result, outcome))
            return None
        assert not isinstance(action, Compact)
        raise AssertionError(action)

    def drive(phase: Any) -> Any:
        outcome = None
        while True:
            try:
                action = phase.send(outcome)
            except StopIteration as stop:
                return stop.value
            outcome = perform(action)

    prompts = [al.UserMessage.text("go")]
    interrupt = scenario["interrupt"]
    hard_stopped = False
    try:
        if drive(core.start(prompts)):
            aborted = False
            try:
                drive(core.turns())
            except Stop:
                if interrupt != "abort":
                    raise
                aborted = True
            drive(core.finish(aborted))
    except Stop:
        hard_stopped = True
        core.interrupted(interrupt == "cancel", "RuntimeError: a hook failed")

    messages = list(context.messages)
    assert_well_formed(messages)
    # The ledger: every call of every reply has exactly one result in the history.
    calls = [c.id for m in messages if isinstance(m, al.AssistantMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in messages if isinstance(m, al.ToolResultMessage)]
    assert sorted(calls) == sorted(results)
    # Each result's outcome is one its call can have, and its end event's, if it had one.
    kinds = {
        f"c{turn}-{position}": kind
        for turn, turn_kinds in enumerate(scenario["turns"])
        for position, kind in enumerate(turn_kinds)
    }
    ended = {e.tool_call_id: e.outcome for e in events if isinstance(e, al.ToolExecutionEnd)}
    for message in messages:
        if isinstance(message, al.ToolResultMessage):
            assert message.outcome in OUTCOMES[kinds[message.tool_call_id]] | NOT_RUN
            assert ended.get(message.tool_call_id, message.outcome) is message.outcome
    # Event order.
    starts = [e.tool_call_id for e in events if isinstance(e, al.ToolExecutionStart)]
    ends = [e.tool_call_id for e in events if isinstance(e, al.ToolExecutionEnd)]
    assert len(set(starts)) == len(starts)
    assert len(set(ends)) == len(ends)
    order = [(type(e), getattr(e, "tool_call_id", None)) for e in events]
    for call_id in ends:  # an end comes after its start
        assert order.index((al.ToolExecutionStart, call_id)) < order.index(
            (al.ToolExecutionEnd, call_id)
        )
    if hard_stopped:
        assert not any(isinstance(e, al.AgentEnd) for e in events)
        return
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert [type(e) for e in events].count(al.AgentEnd) == 1
    assert end.messages == tuple(messages)
    # Every call has one start and one end, but a call the hook vetoed (neither).
    assert set(starts) == set(ends)
    assert set(ends) <= set(calls)
    named = {
        c.id: c.name for m in messages if isinstance(m, al.AssistantMessage) for c in m.tool_calls
    }
    assert all(named[call_id] == "vetoed" for call_id in set(calls) - set(ends))
    if events[0] is not end:
        assert isinstance(events[0], al.AgentStart)
    turn_starts = [e.turn_index for e in events if isinstance(e, al.TurnStart)]
    turn_ends = [e.turn_index for e in events if isinstance(e, al.TurnEnd)]
    assert turn_starts == turn_ends == list(range(len(turn_starts)))
    kind = end.stop_reason.kind
    if kind is al.StopKind.MAX_TURNS:
        assert scenario["max_turns"] is not None
        assert len(turn_starts) == scenario["max_turns"]
    if kind is al.StopKind.ERROR:
        assert end.stop_reason.error == "overloaded"


@settings(max_examples=500, deadline=None)
@given(scenarios())
def test_the_ledger_and_the_event_order_hold_for_any_interleaving(scenario: dict[str, Any]) -> None:
    play(scenario)


def test_a_hand_picked_run_gives_exactly_these_events() -> None:
    """One tool call, one steering message polled after it: the exact sequence of actions."""
    steered: list[list[al.UserMessage]] = [[], [], [al.UserMessage.text("wait")], []]
    config = al.AgentLoopConfig(
        provider=object(),  # type: ignore[arg-type]
        get_steering_messages=lambda: steered.pop(0) if steered else [],
    )
    context = al.AgentContext(tools=[Tool("t")])
    core = LoopCore(context, config, loop_id="L", now=lambda: 0.0)
    replies = [
        al.AssistantMessage((al.ToolCall("c1", "t", {"n": 1}),), al.StopReason.TOOL_USE),
        al.AssistantMessage((al.TextContent("ok"),), al.StopReason.STOP),
    ]
    seen: list[str] = []

    def drive(phase: Any) -> Any:
        outcome = None
        while True:
            try:
                action = phase.send(outcome)
            except StopIteration as stop:
                return stop.value
            seen.append(type(action).__name__.lstrip("_"))
            outcome = None
            if isinstance(action, CallHook):
                outcome = action.hook(*action.args)
            elif isinstance(action, AskModel):
                outcome = replies.pop(0)
            elif isinstance(action, RunCalls):
                ((state, _, _),) = action.calls
                drive(core.call_ended(state, al.ToolResult.text("one"), al.ToolOutcome.OK))

    assert drive(core.start([al.UserMessage.text("go")])) is True
    drive(core.turns())
    new = drive(core.finish(False))
    assert seen == [
        "AgentStart",
        "CallHook",  # steering, before the first turn
        "TurnStart",
        "MessageStart",  # the prompt
        "MessageEnd",
        "MessageStart",  # the reply
        "AskModel",
        "MessageEnd",
        "ToolExecutionStart",
        "RunCalls",
        "ToolExecutionEnd",
        "MessageStart",  # the result
        "MessageEnd",
        "CallHook",  # steering after the unit: empty
        "TurnEnd",
        "CallHook",  # steering after the turn: "wait"
        "TurnStart",
        "MessageStart",  # "wait"
        "MessageEnd",
        "MessageStart",
        "AskModel",
        "MessageEnd",
        "TurnEnd",
        "CallHook",  # steering after the turn: nothing
        "Checkpoint",  # no follow-up source: a checkpoint instead of the poll
        "AgentEnd",
    ]
    assert [m.text for m in new] == ["go", "", "one", "wait", "ok"]
    assert_well_formed(new)
