"""Property (issue 29): random replies whose calls are allowed, asked or denied by
rules; asked calls answered at once (yes, no, an edit) or deferred, then decided in a
random order (approvals, valid and invalid edits, denials), under a random strategy.
Every call gets exactly one result, no tool body runs twice, the history equals the
run where a blocking approver gives the same answers, and the events are well formed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio
import trio.testing
from approval_helpers import make_agent, record, shape
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.providers import call, reply
from agentloop.testing import EventRecorder, assert_well_formed

TOOLS = ("read", "write", "edit")  # allowed, asked, denied (by the rules below)
RULES: dict[str, Any] = {"ask": ["write"], "deny": ["edit(secret*)"]}
ANSWERS = ("yes", "no", "deny-reason", "edit", "edit-invalid")


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    turns: list[list[tuple[str, str, str]]] = []  # per reply: (id, tool, path)
    for turn in range(draw(st.integers(min_value=1, max_value=2))):
        calls = []
        for position in range(draw(st.integers(min_value=1, max_value=4))):
            tool = draw(st.sampled_from(TOOLS))
            path = "secret" if tool == "edit" and draw(st.booleans()) else f"p{turn}{position}"
            calls.append((f"c{turn}{position}", tool, path))
        turns.append(calls)
    asked = [call_id for calls in turns for call_id, tool, _ in calls if tool == "write"]
    answers = {call_id: draw(st.sampled_from(ANSWERS)) for call_id in asked}
    deferred = {call_id for call_id in asked if draw(st.booleans())}
    orders = [draw(st.permutations(range(8))) for _ in turns]
    strategy = draw(st.sampled_from([al.Parallel(), al.Sequential(), al.Batched(1), al.Batched(2)]))
    return {
        "turns": turns,
        "answers": answers,
        "deferred": deferred,
        "orders": orders,
        "strategy": strategy,
    }


def script(scenario: dict[str, Any]) -> list[Any]:
    return [
        *(
            reply(*(call(tool, {"path": path}, id=call_id) for call_id, tool, path in calls))
            for calls in scenario["turns"]
        ),
        reply("Done."),
    ]


def answer(scenario: dict[str, Any], call_id: str) -> al.Decision:
    match scenario["answers"][call_id]:
        case "yes":
            return al.Approve(call_id)
        case "no":
            return al.Deny(call_id)
        case "deny-reason":
            return al.Deny(call_id, f"not {call_id}")
        case "edit":
            return al.Approve(call_id, {"path": f"edited-{call_id}"})
        case _:
            return al.Approve(call_id, {"path": 7})


def check_events(events: list[al.AgentEvent]) -> None:
    """Each ToolExecutionStart has one End in the same run, each TurnStart one TurnEnd,
    in order; the run starts once and ends once."""
    open_calls: Counter[str] = Counter()
    ended: Counter[str] = Counter()
    turn_open: int | None = None
    names = [type(event).__name__ for event in events]
    assert names[0] == "AgentStart"
    assert names[-1] == "AgentEnd"
    assert names.count("AgentStart") == names.count("AgentEnd") == 1
    for event in events:
        if isinstance(event, al.ToolExecutionStart):
            assert open_calls[event.tool_call_id] == 0
            assert ended[event.tool_call_id] == 0
            open_calls[event.tool_call_id] += 1
        elif isinstance(event, al.ToolExecutionEnd):
            assert open_calls[event.tool_call_id] == 1
            open_calls[event.tool_call_id] -= 1
            ended[event.tool_call_id] += 1
        elif isinstance(event, al.TurnStart):
            assert turn_open is None
            turn_open = event.turn_index
        elif isinstance(event, al.TurnEnd):
            assert turn_open == event.turn_index
            turn_open = None
    assert +open_calls == Counter()
    assert turn_open is None


async def play(scenario: dict[str, Any]) -> None:
    options = {**RULES, "strategy": scenario["strategy"]}
    deferred_ids = scenario["deferred"]

    def deferring(request: al.PermissionRequest) -> Any:
        if request.tool_call_id in deferred_ids:
            return al.DEFER
        return answer(scenario, request.tool_call_id)

    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(script(scenario), deferring, ran, **options)
    runs: list[EventRecorder] = [await record(agent.prompt("go"))]
    stops = 0
    while agent.pending:
        stops += 1
        end = runs[-1].events[-1]
        assert isinstance(end, al.AgentEnd)
        assert end.stop_reason.kind is al.StopKind.AWAITING_APPROVAL
        assert_well_formed(agent.messages, suspended=end.suspended)
        pending = [p.tool_call_id for p in agent.pending]
        assert set(pending) <= deferred_ids
        order = [i for i in scenario["orders"][stops - 1] if i < len(pending)]
        decisions = [answer(scenario, pending[i]) for i in order]
        runs.append(await record(agent.resume(decisions)))
    assert stops <= len(scenario["turns"])

    blocking_ran: list[tuple[str, dict[str, Any]]] = []
    blocking = make_agent(
        script(scenario),
        lambda request: answer(scenario, request.tool_call_id),
        blocking_ran,
        **options,
    )
    uninterrupted = await record(blocking.prompt("go"))

    # Every call exactly one result; the history is the uninterrupted run's.
    assert_well_formed(agent.messages)
    results = Counter(m.tool_call_id for m in agent.messages if isinstance(m, al.ToolResultMessage))
    all_ids = [call_id for calls in scenario["turns"] for call_id, _, _ in calls]
    assert results == Counter(all_ids)
    assert shape(agent.messages) == shape(blocking.messages)
    # No tool body ran twice; the same bodies ran with the same arguments.
    ran_ids = [call_id for call_id, _ in ran]
    assert len(ran_ids) == len(set(ran_ids))
    assert sorted(ran, key=repr) == sorted(blocking_ran, key=repr)
    for recorder in [*runs, uninterrupted]:
        check_events(recorder.events)
    assert agent.pending == ()


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_deferred_decisions_give_the_uninterrupted_history(scenario: dict[str, Any]) -> None:
    trio.run(play, scenario, clock=trio.testing.MockClock(autojump_threshold=0))
