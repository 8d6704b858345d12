"""Deferred approvals (issue 29): an approver decides now, or later (DEFER); the run
stops awaiting approval and goes on with decisions, with the history an uninterrupted
run gives, every call answered once and run at most once."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from approval_helpers import (
    FileTool,
    compare,
    make_agent,
    record,
    shape,
    three_calls,
    trace,
)

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.serialization import from_json, to_json
from agentloop.testing import assert_well_formed
from agentloop.tools import SubAgentTool

STOPPED_PARALLEL = [
    "AgentStart",
    "TurnStart 0",
    "user go",
    "MessageStart assistant",
    "MessageEnd assistant [c1,c2,c3]",
    "Start c1 {'path': 'a'}",
    "Requested c2 deferred",
    "Start c3 {'path': 'c'}",
    "End c3 ok",
    "End c1 ok",
    "result c1=read a",
    "TurnEnd 0 [c1]",
    "AgentEnd awaiting_approval Awaiting approval: write (c2)",
]
STOPPED_SEQUENTIAL = [
    "AgentStart",
    "TurnStart 0",
    "user go",
    "MessageStart assistant",
    "MessageEnd assistant [c1,c2,c3]",
    "Start c1 {'path': 'a'}",
    "End c1 ok",
    "result c1=read a",
    "Requested c2 deferred",
    "Start c3 {'path': 'c'}",
    "End c3 ok",
    "TurnEnd 0 [c1]",
    "AgentEnd awaiting_approval Awaiting approval: write (c2)",
]
STOPPED_BATCHED = [
    "AgentStart",
    "TurnStart 0",
    "user go",
    "MessageStart assistant",
    "MessageEnd assistant [c1,c2,c3]",
    "Start c1 {'path': 'a'}",
    "Requested c2 deferred",
    "End c1 ok",
    "result c1=read a",
    "Start c3 {'path': 'c'}",
    "End c3 ok",
    "TurnEnd 0 [c1]",
    "AgentEnd awaiting_approval Awaiting approval: write (c2)",
]
RESUMED = [
    "AgentStart",
    "TurnStart 0",
    "Decided c2 approved {'path': 'b'} by decision",
    "Start c2 {'path': 'b'}",
    "End c2 ok",
    "result c2=write b",
    "result c3=read c",
    "TurnEnd 0 [c1,c2,c3]",
    "TurnStart 1",
    "MessageStart assistant",
    "MessageEnd assistant Done.[]",
    "TurnEnd 1 []",
    "AgentEnd completed",
]
FINAL = [
    ("user", "go"),
    (
        "assistant",
        "tool_use",
        "",
        "c1:read:{'path': 'a'};c2:write:{'path': 'b'};c3:read:{'path': 'c'}",
    ),
    ("result", "c1", "read", "ok", "read a"),
    ("result", "c2", "write", "ok", "write b"),
    ("result", "c3", "read", "ok", "read c"),
    ("assistant", "stop", "Done.", ""),
]
PENDING_C2 = al.PendingCall(
    tool_call_id="c2",
    tool_name="write",
    arguments={"path": "b"},
    reason="write on 'b' needs approval (the rule ask(write))",
    rule="write",
    subject=("path", "b"),
)


@pytest.mark.parametrize(
    ("strategy", "stopped"),
    [
        (al.Parallel(), STOPPED_PARALLEL),
        (al.Sequential(), STOPPED_SEQUENTIAL),
        (al.Batched(2), STOPPED_BATCHED),
    ],
    ids=["parallel", "sequential", "batched"],
)
async def test_one_of_three_calls_defers_then_resumes(
    strategy: al.ExecutionStrategy, stopped: list[str], autojump_clock: Any
) -> None:
    """The other calls run, results after the pending call are held back, the run stops;
    resumed, the approved call runs and every result joins in call order."""
    compared = await compare(
        three_calls, lambda request: True, strategy=strategy, delays={"a": 2, "c": 1}
    )
    assert trace(compared.stopped.events) == stopped
    (end,) = compared.stopped.of_type(al.AgentEnd)
    assert end.pending == (PENDING_C2,)
    assert end.suspended is not None
    assert [(r.tool_call_id, r.text) for r in end.suspended.results] == [("c3", "read c")]
    assert (end.suspended.turn_index, end.suspended.turns_done, end.suspended.requests) == (
        0,
        1,
        1,
    )
    assert trace(compared.resumed.events) == RESUMED
    agent = compared.deferred_agent
    assert shape(agent.messages) == FINAL == shape(compared.blocking_agent.messages)
    assert sorted(compared.deferred_ran, key=str) == sorted(compared.blocking_ran, key=str)
    assert sorted(call_id for call_id, _ in compared.deferred_ran[:2]) == ["c1", "c3"]
    assert compared.deferred_ran[2:] == [("c2", {"path": "b"})]
    assert agent.pending == ()
    assert agent.context.suspended is None
    assert_well_formed(agent.messages)


async def test_the_history_at_the_stop_holds_only_results_before_the_pending_call() -> None:
    """At the stop the history ends with the reply and c1's result; c3's is held."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), al.DEFER, ran)
    stopped = await record(agent.prompt("go"))
    assert shape(agent.messages) == FINAL[:3]
    (end,) = stopped.of_type(al.AgentEnd)
    assert end.suspended is agent.context.suspended
    assert_well_formed(agent.messages, suspended=end.suspended)
    with pytest.raises(AssertionError, match=r"^tool calls \['c2', 'c3'\] have no result$"):
        assert_well_formed(agent.messages)


@pytest.mark.parametrize(
    ("decide", "c2"),
    [
        (lambda r: r.approve(), ("result", "c2", "write", "ok", "write b")),
        (
            lambda r: r.approve({"path": "B", "text": "edited"}),
            ("result", "c2", "write", "ok", "write B edited"),
        ),
        (
            lambda r: r.approve({"path": 3}),
            (
                "result",
                "c2",
                "write",
                "invalid_arguments",
                "Invalid arguments: $.path: 3 is not of type 'string'",
            ),
        ),
        (
            lambda r: r.deny("Not today"),
            ("result", "c2", "write", "denied", "Permission denied: Not today"),
        ),
        (
            lambda r: r.deny(),
            ("result", "c2", "write", "denied", "Permission denied: write on 'b' was not approved"),
        ),
        (
            lambda r: False,
            ("result", "c2", "write", "denied", "Permission denied: write on 'b' was not approved"),
        ),
    ],
    ids=["approve", "edit", "invalid-edit", "deny-reason", "deny", "false"],
)
@pytest.mark.parametrize(
    "strategy", [al.Parallel(), al.Sequential(), al.Batched(2)], ids=["par", "seq", "bat"]
)
async def test_a_decision_given_later_gives_the_history_of_a_blocking_approver(
    decide: Any, c2: tuple[str, ...], strategy: al.ExecutionStrategy
) -> None:
    """Same decision, now or later: the same history, the same tool runs."""
    compared = await compare(three_calls, decide, strategy=strategy)
    history = shape(compared.deferred_agent.messages)
    assert history == shape(compared.blocking_agent.messages)
    assert history[3] == c2
    assert sorted(compared.deferred_ran, key=str) == sorted(compared.blocking_ran, key=str)
    assert_well_formed(compared.deferred_agent.messages)


async def test_an_edited_approval_runs_the_edited_arguments_and_keeps_the_models() -> None:
    """The tool and ToolExecutionStart see the edit; the history keeps the model's call."""
    compared = await compare(three_calls, lambda r: r.approve({"path": "B", "text": "x"}))
    assert ("c2", {"path": "B", "text": "x"}) in compared.deferred_ran
    assert trace(compared.resumed.events)[2:4] == [
        "Decided c2 approved {'path': 'B', 'text': 'x'} by decision",
        "Start c2 {'path': 'B', 'text': 'x'}",
    ]
    assistant = compared.deferred_agent.messages[1]
    assert isinstance(assistant, al.AssistantMessage)
    assert assistant.tool_calls[1].arguments == {"path": "b"}


async def test_an_invalid_edit_never_runs_the_tool() -> None:
    """An edit that fails the schema is an Invalid arguments result; the body never runs."""
    compared = await compare(three_calls, lambda r: r.approve({"path": "b", "mode": "x"}))
    assert sorted(call_id for call_id, _ in compared.deferred_ran) == ["c1", "c3"]
    assert trace(compared.resumed.events)[2:6] == [
        "Decided c2 approved {'path': 'b', 'mode': 'x'} by decision",
        "Start c2 {'path': 'b', 'mode': 'x'}",
        "End c2 invalid_arguments",
        "result c2=Invalid arguments: $: Additional properties are not allowed "
        "('mode' was unexpected)",
    ]


async def test_a_denial_is_decided_and_ended_without_running() -> None:
    """A Deny: ToolApprovalDecided with the reason, Start/End, no run."""
    compared = await compare(three_calls, lambda r: r.deny("Not today"))
    assert trace(compared.resumed.events)[2:6] == [
        "Decided c2 denied 'Not today' by decision",
        "Start c2 {'path': 'b'}",
        "End c2 denied",
        "result c2=Permission denied: Not today",
    ]
    assert sorted(call_id for call_id, _ in compared.deferred_ran) == ["c1", "c3"]


@pytest.mark.parametrize(
    ("answer", "result"),
    [
        (al.Approve("c2"), "ok:write b"),
        (al.Approve("c2", {"path": "z"}), "ok:write z"),
        (al.Deny("c2", "No."), "denied:Permission denied: No."),
        (al.Deny("c2"), "denied:Permission denied: write on 'b' was not approved"),
        (True, "ok:write b"),
        (False, "denied:Permission denied: write on 'b' was not approved"),
        (
            al.Approve("c9"),
            "denied:Permission denied: the approver answered for another call ('c9')",
        ),
        (
            al.Deny("c9", "x"),
            "denied:Permission denied: the approver answered for another call ('c9')",
        ),
        (
            "yes",
            "denied:Permission denied: the approver returned str, not True, False, a "
            "decision or DEFER",
        ),
        (
            None,
            "denied:Permission denied: the approver returned NoneType, not True, False, a "
            "decision or DEFER",
        ),
        (
            1,
            "denied:Permission denied: the approver returned int, not True, False, a "
            "decision or DEFER",
        ),
    ],
    ids=[
        "approve",
        "edit",
        "deny-reason",
        "deny",
        "true",
        "false",
        "other-id",
        "other-id-deny",
        "str",
        "none",
        "one",
    ],
)
async def test_what_a_blocking_approver_answers(answer: Any, result: str) -> None:
    """Each answer, plain or async, decides the call at once; the run never stops."""

    async def approver(request: al.PermissionRequest) -> Any:
        await trio.lowlevel.checkpoint()
        return answer

    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), approver, ran)
    recorder = await record(agent.prompt("go"))
    message = agent.messages[3]
    assert isinstance(message, al.ToolResultMessage)
    assert f"{message.outcome.value}:{message.text}" == result
    (end,) = recorder.of_type(al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)
    assert end.suspended is None
    (decided,) = recorder.of_type(al.ToolApprovalDecided)
    assert (decided.tool_call_id, decided.approved, decided.by) == (
        "c2",
        result.startswith("ok"),
        "approver",
    )
    assert_well_formed(agent.messages)


async def test_an_approver_returning_defer_is_asked_then_the_call_waits() -> None:
    """A function answering DEFER: the request says it was asked (deferred=False)."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), lambda request: al.DEFER, ran)
    recorder = await record(agent.prompt("go"))
    assert trace(recorder.events)[6] == "Requested c2"
    assert agent.pending == (PENDING_C2,)


async def test_an_approver_that_raises_denies_with_the_error() -> None:
    """The exception becomes the denial's reason; the run goes on to the end."""

    def approver(request: al.PermissionRequest) -> bool:
        raise RuntimeError("approval service down")

    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), approver, ran)
    recorder = await record(agent.prompt("go"))
    assert shape(agent.messages)[3] == (
        "result",
        "c2",
        "write",
        "denied",
        "Permission denied: the approver failed: RuntimeError: approval service down",
    )
    assert trace(recorder.events)[-1] == "AgentEnd completed"
    assert sorted(call_id for call_id, _ in ran) == ["c1", "c3"]


async def test_an_approver_that_takes_too_long_denies(autojump_clock: Any) -> None:
    """Past approval_timeout the wait is cancelled and the call denied, saying so."""
    waited: list[str] = []

    async def approver(request: al.PermissionRequest) -> bool:
        try:
            await trio.sleep(3600)
        except trio.Cancelled:
            waited.append(request.tool_call_id)
            raise
        return True  # pragma: no cover - the timeout comes first

    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), approver, ran, approval_timeout=30)
    start = trio.current_time()
    await record(agent.prompt("go"))
    assert trio.current_time() - start == 30
    assert waited == ["c2"]
    assert shape(agent.messages)[3] == (
        "result",
        "c2",
        "write",
        "denied",
        "Permission denied: no decision within the approval timeout (30s)",
    )


async def test_an_approver_within_its_timeout_decides(autojump_clock: Any) -> None:
    """An answer before approval_timeout counts."""

    async def approver(request: al.PermissionRequest) -> bool:
        await trio.sleep(29)
        return True

    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), approver, ran, approval_timeout=30)
    await record(agent.prompt("go"))
    assert shape(agent.messages)[3] == ("result", "c2", "write", "ok", "write b")


def test_approval_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="approval_timeout"):
        al.Permissions(approval_timeout=0)


# --------------------------------------------------------------------------- misuse


def two_writes() -> list[Any]:
    return [
        reply(call("write", {"path": "a"}, id="w1"), call("write", {"path": "b"}, id="w2")),
        reply("Done."),
    ]


async def stopped_agent() -> tuple[al.Agent, list[tuple[str, dict[str, Any]]]]:
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(two_writes(), al.DEFER, ran)
    await record(agent.prompt("go"))
    assert [p.tool_call_id for p in agent.pending] == ["w1", "w2"]
    return agent, ran


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        (
            [al.Approve("w1"), al.Approve("w2"), al.Approve("zz")],
            "no pending call has the id 'zz' (pending: 'w1', 'w2'); nothing ran",
        ),
        (
            [al.Approve("w1"), al.Deny("w1"), al.Approve("w2")],
            "'w1' decided more than once; nothing ran",
        ),
        ([al.Approve("w2")], "no decision for 'w1'; nothing ran"),
        ([], "no decision for 'w1', 'w2'; nothing ran"),
        (None, "no decision for 'w1', 'w2'; nothing ran"),
        (
            [al.Deny("x"), al.Approve("w2"), al.Approve("w2")],
            "no pending call has the id 'x' (pending: 'w1', 'w2'); 'w2' decided more than "
            "once; no decision for 'w1'; nothing ran",
        ),
    ],
    ids=["unknown", "twice", "missing", "empty", "none", "all"],
)
async def test_decisions_that_cannot_apply_raise_and_nothing_runs(
    decisions: Any, message: str
) -> None:
    agent, ran = await stopped_agent()
    before = agent.messages
    with pytest.raises(al.ApprovalError) as raised:
        agent.resume(decisions)
    assert str(raised.value) == message
    assert isinstance(raised.value, ValueError)
    assert (agent.messages, ran, len(agent.pending)) == (before, [], 2)
    # Still resumable with good decisions.
    await record(agent.resume([al.Approve("w1"), al.Deny("w2", "no")]))
    assert [call_id for call_id, _ in ran] == ["w1"]


async def test_decisions_where_nothing_is_pending_raise() -> None:
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent([reply("Hi.")], al.DEFER, ran)
    await record(agent.prompt("go"))
    with pytest.raises(al.ApprovalError) as raised:
        agent.resume([al.Approve("c1"), al.Deny("c2")])
    assert str(raised.value) == "no call awaits approval (decisions for 'c1', 'c2'); nothing ran"


async def test_a_decision_that_is_not_one_is_a_type_error() -> None:
    agent, _ = await stopped_agent()
    with pytest.raises(TypeError, match=r"^a decision is an Approve or a Deny, got bool$"):
        agent.resume([True])  # type: ignore[list-item]


async def test_a_new_prompt_while_calls_wait_is_refused() -> None:
    """prompt(), run() and agent_loop refuse; reset() drops the wait."""
    agent, ran = await stopped_agent()
    text = (
        "tool calls 'w1', 'w2' await approval: decide them with resume(decisions) first "
        "(or reset() to drop the conversation)"
    )
    with pytest.raises(RuntimeError) as raised:
        agent.prompt("next")
    assert str(raised.value) == text
    with pytest.raises(RuntimeError) as raised:
        await agent.run("next")
    assert str(raised.value) == text
    send, _receive = trio.open_memory_channel[al.AgentEvent](100)
    with pytest.raises(RuntimeError) as raised:
        await al.agent_loop(["next"], agent.context, agent.config, send)
    assert str(raised.value) == text
    assert ran == []
    agent.reset()
    assert agent.pending == ()
    await agent.run("fresh")


async def test_agent_loop_continue_takes_decisions() -> None:
    """The low-level API resumes a context the same way."""
    agent, ran = await stopped_agent()
    send, _receive = trio.open_memory_channel[al.AgentEvent](1000)
    added = await al.agent_loop_continue(
        agent.context, agent.config, send, decisions=[al.Deny("w2", "no"), al.Approve("w1")]
    )
    assert [shape([m])[0] for m in added] == [
        ("result", "w1", "write", "ok", "write a"),
        ("result", "w2", "write", "denied", "Permission denied: no"),
        ("assistant", "stop", "Done.", ""),
    ]
    assert agent.context.suspended is None
    assert ran == [("w1", {"path": "a"})]


async def test_a_stop_kept_as_json_resumes_in_a_new_agent() -> None:
    """The web flow in one process: keep the history and AgentEnd.suspended as JSON,
    build a new agent from them later, resume: the same history as uninterrupted."""
    ran: list[tuple[str, dict[str, Any]]] = []
    first = make_agent(three_calls(), al.DEFER, ran)
    stopped = await record(first.prompt("go"))
    (end,) = stopped.of_type(al.AgentEnd)
    kept_history = to_json(list(first.messages))
    kept_stop = to_json(end.suspended)

    later = make_agent(
        three_calls()[1:], al.DEFER, ran, messages=from_json(kept_history, list[al.Message])
    )
    later.context.suspended = from_json(kept_stop, al.Suspended)
    await record(later.resume([al.Approve("c2")]))
    assert shape(later.messages) == FINAL
    assert sorted(call_id for call_id, _ in ran[:2]) == ["c1", "c3"]
    assert ran[2:] == [("c2", {"path": "b"})]


# --------------------------------------------------------------------------- interplay


async def test_abort_during_the_resumed_turn_answers_every_call(autojump_clock: Any) -> None:
    """Aborted while the approved call runs: it is cancelled, the held result still
    joins the history, nothing stays pending, and the run says ABORTED."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), al.DEFER, ran)
    await record(agent.prompt("go"))
    slow = agent.tools[1]
    assert isinstance(slow, FileTool)
    slow.seconds = 100
    async with agent.resume([al.Approve("c2")]) as events:
        recorder_events = []
        async for event in events:
            recorder_events.append(event)
            if isinstance(event, al.ToolExecutionStart):
                agent.abort()
    assert trace(recorder_events) == [
        "AgentStart",
        "TurnStart 0",
        "Decided c2 approved {'path': 'b'} by decision",
        "Start c2 {'path': 'b'}",
        "End c2 cancelled",
        "result c2=Cancelled: the run was aborted.",
        "result c3=read c",
        "TurnEnd 0 [c1,c2,c3]",
        "AgentEnd aborted the run was aborted",
    ]
    assert agent.pending == ()
    assert ran[2:] == [("c2", {"path": "b"})]
    assert_well_formed(agent.messages)


async def test_a_vetoed_resume_leaves_the_calls_waiting() -> None:
    """before_loop vetoes the resumed run: nothing is decided, its AgentEnd still says
    where the run waits, and a later resume goes on."""
    ran: list[tuple[str, dict[str, Any]]] = []
    runs: list[int] = []

    def before_loop(messages: Any) -> bool:
        runs.append(len(runs))
        return len(runs) != 2  # the first resume is vetoed

    agent = make_agent(three_calls(), al.DEFER, ran, before_loop=before_loop)
    await record(agent.prompt("go"))
    vetoed = await record(agent.resume([al.Approve("c2")]))
    (end,) = vetoed.of_type(al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.VETOED, "before_loop returned False")
    assert end.suspended is agent.context.suspended
    assert [call.tool_call_id for call in end.pending] == ["c2"]
    await record(agent.resume([al.Approve("c2")]))
    assert agent.pending == ()
    assert sorted(call_id for call_id, _ in ran) == ["c1", "c2", "c3"]


async def test_abort_before_the_stop_answers_the_deferred_call(autojump_clock: Any) -> None:
    """Aborted while c1 runs in the deferred turn: no stop for approval; c2 gets the
    abort's result, like any call that did not run."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), al.DEFER, ran)
    slow = agent.tools[0]
    assert isinstance(slow, FileTool)
    slow.seconds = 100
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolApprovalRequested):
                agent.abort()
            if isinstance(event, al.AgentEnd):
                assert event.stop_reason.kind is al.StopKind.ABORTED
                assert event.suspended is None
    assert agent.pending == ()
    assert [m[1:] for m in shape(agent.messages)[2:5]] == [
        ("c1", "read", "cancelled", "Cancelled: the run was aborted."),
        ("c2", "write", "cancelled", "Cancelled: the run was aborted."),
        ("c3", "read", "cancelled", "Cancelled: the run was aborted."),
    ]
    assert_well_formed(agent.messages)


async def test_steering_during_a_deferred_turn_joins_after_the_results() -> None:
    """A steering message taken during the turn (it skips the calls not started) waits
    with the pending call and joins after the results, as in the uninterrupted run."""
    agents: list[al.Agent] = []

    def steer_then(answer: Any) -> Any:
        def approver(request: al.PermissionRequest) -> Any:
            agents[-1].steer("Stop, use c instead")
            return answer

        return approver

    def turns() -> list[Any]:
        return [*three_calls()[:1], reply("Steered.")]

    histories = []
    stops = []
    for approver in (steer_then(al.DEFER), steer_then(True)):
        ran: list[tuple[str, dict[str, Any]]] = []
        agent = make_agent(turns(), approver, ran, strategy=al.Sequential())
        agents.append(agent)
        await record(agent.prompt("go"))
        if agent.pending:
            stops.append((agent.context.suspended, shape(agent.messages)))
            await record(agent.resume([al.Approve("c2")]))
        histories.append(shape(agent.messages))
    assert histories[0] == histories[1]
    assert histories[0][2:] == [
        ("result", "c1", "read", "ok", "read a"),
        ("result", "c2", "write", "ok", "write b"),
        ("result", "c3", "read", "skipped", "Skipped due to queued user message."),
        ("user", "Stop, use c instead"),
        ("assistant", "stop", "Steered.", ""),
    ]
    ((suspended, at_stop),) = stops
    assert suspended is not None
    assert [m.text for m in suspended.queued] == ["Stop, use c instead"]
    assert at_stop[-1] == ("result", "c1", "read", "ok", "read a")


async def test_the_wait_does_not_count_against_max_duration(autojump_clock: Any) -> None:
    """An hour's wait between stop and resume does not stop a run with a 60 s limit;
    the seconds it ran before the stop carry over."""
    ran: list[tuple[str, dict[str, Any]]] = []
    turns = [
        *three_calls()[:1],
        reply(call("read", {"path": "d"}, id="c4")),
        reply("Never."),
    ]
    agent = make_agent(turns, al.DEFER, ran, limits=al.ExecutionLimits(max_duration=60))
    for tool in agent.tools:
        assert isinstance(tool, FileTool)
        tool.seconds = 25
    stopped = await record(agent.prompt("go"))
    (end,) = stopped.of_type(al.AgentEnd)
    assert end.suspended is not None
    assert end.suspended.elapsed == 25
    await trio.sleep(3600)
    resumed = await record(agent.resume([al.Approve("c2")]))
    # 25 s before the stop, 25 s for c2, 25 s for c4: the limit stops the third turn.
    assert trace(resumed.events)[-3:] == [
        "TurnEnd 1 [c4]",
        "user [Agent stopped: Max duration reached (75s/60s)]",
        "AgentEnd max_duration Max duration reached (75s/60s)",
    ]
    assert sorted(call_id for call_id, _ in ran[:2]) == ["c1", "c3"]
    assert [call_id for call_id, _ in ran[2:]] == ["c2", "c4"]


async def test_the_wait_does_not_count_against_the_run_timeout(autojump_clock: Any) -> None:
    """Schedule.run_timeout counts the time the run ran, before the stop and after it,
    not the hour it waited: the resumed run has 100 - 25 s left."""
    ran: list[tuple[str, dict[str, Any]]] = []
    turns = [
        *three_calls()[:1],
        reply(call("read", {"path": "d"}, id="c4")),
        reply(call("read", {"path": "e"}, id="c5")),
        reply("Never."),
    ]
    agent = make_agent(turns, al.DEFER, ran, schedule=al.Schedule(run_timeout=100))
    for tool in agent.tools:
        assert isinstance(tool, FileTool)
        tool.seconds = 25
    await record(agent.prompt("go"))
    await trio.sleep(3600)
    begun = trio.current_time()
    resumed = await record(agent.resume([al.Approve("c2")]))
    # c2 (25 s) and c4 (25 s) end; c5 is cancelled when 75 s have run since the resume.
    assert trio.current_time() - begun == 75
    assert trace(resumed.events)[-1] == "AgentEnd deadline Deadline reached (100s)"
    assert [call_id for call_id, _ in ran[2:]] == ["c2", "c4", "c5"]


async def test_the_wait_does_not_count_against_the_turn_timeout(autojump_clock: Any) -> None:
    """Schedule.turn_timeout: the deferred turn ran 25 s before the stop; resumed after
    an hour, it has 40 - 25 s left, so c2 (25 s) is cancelled at the turn's deadline."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(three_calls(), al.DEFER, ran, schedule=al.Schedule(turn_timeout=40))
    for tool in agent.tools:
        assert isinstance(tool, FileTool)
        tool.seconds = 25
    stopped = await record(agent.prompt("go"))
    (end,) = stopped.of_type(al.AgentEnd)
    assert end.suspended is not None
    assert end.suspended.turn_elapsed == 25
    await trio.sleep(3600)
    begun = trio.current_time()
    resumed = await record(agent.resume([al.Approve("c2")]))
    assert trio.current_time() - begun == 15
    assert trace(resumed.events)[-1] == "AgentEnd deadline Turn deadline reached (40s)"
    results = [m for m in agent.messages if isinstance(m, al.ToolResultMessage)]
    assert [(m.tool_call_id, m.outcome) for m in results] == [
        ("c1", al.ToolOutcome.OK),
        ("c2", al.ToolOutcome.CANCELLED),
        ("c3", al.ToolOutcome.OK),
    ]


async def test_max_turns_carries_across_the_stop() -> None:
    """The turn that stopped counted; the resumed run goes on counting."""
    ran: list[tuple[str, dict[str, Any]]] = []
    turns = [*three_calls()[:1], reply(call("read", {"path": "d"}, id="c4")), reply("Never.")]
    agent = make_agent(turns, al.DEFER, ran, limits=al.ExecutionLimits(max_turns=2))
    await record(agent.prompt("go"))
    resumed = await record(agent.resume([al.Approve("c2")]))
    assert trace(resumed.events)[-4:] == [
        "result c4=read d",
        "TurnEnd 1 [c4]",
        "user [Agent stopped: Max turns reached (2/2)]",
        "AgentEnd max_turns Max turns reached (2/2)",
    ]


async def test_a_structured_output_agent_resumes_to_its_output() -> None:
    """The typed answer comes once the pending call is decided and the model answers."""
    ran: list[tuple[str, dict[str, Any]]] = []
    turns = [
        reply(call("write", {"path": "a"}, id="w1")),
        reply(call("final_result", {"result": 7}, id="f1")),
    ]
    agent = make_agent(turns, al.DEFER, ran, output_type=int)
    stopped = await record(agent.prompt("go"))
    (end,) = stopped.of_type(al.AgentEnd)
    assert (end.stop_reason.kind, end.output) == (al.StopKind.AWAITING_APPROVAL, None)
    resumed = await record(agent.resume([al.Approve("w1")]))
    (end,) = resumed.of_type(al.AgentEnd)
    assert (end.stop_reason.kind, end.output) == (al.StopKind.COMPLETED, 7)
    assert ran == [("w1", {"path": "a"})]


async def test_a_sub_agent_that_stops_for_approval_is_an_error_result() -> None:
    """A child cannot wait across its parent's tool call: its stop for approval is the
    parent's error result naming the pending call; the child's tool never runs."""
    ran: list[tuple[str, dict[str, Any]]] = []
    child = make_agent([reply(call("write", {"path": "a"}, id="w1"))], al.DEFER, ran)
    helper = SubAgentTool(
        "helper",
        child.config.provider,
        description="Helps.",
        tools=list(child.tools),
        permissions=child.config.permissions,
    )
    parent = al.Agent(
        ScriptedProvider([reply(call("helper", {"task": "write a"}, id="h1")), reply("OK.")]),
        tools=[helper],
    )
    recorder = await record(parent.prompt("go"))
    assert shape(parent.messages)[2] == (
        "result",
        "h1",
        "helper",
        "error",
        "Sub-agent 'helper' failed: Awaiting approval: write (w1)",
    )
    assert trace(recorder.events)[-1] == "AgentEnd completed"
    assert ran == []
    assert parent.pending == ()


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (
            al.Sequential(),
            [
                "Decided w1 approved {'path': 'a'} by decision",
                "Decided w2 approved {'path': 'b'} by decision",
                "Start w1 {'path': 'a'}",
                "End w1 ok",
                "result w1=write a",
                "Start w2 {'path': 'b'}",
                "End w2 ok",
                "result w2=write b",
            ],
        ),
        (
            al.Parallel(),
            [
                "Decided w1 approved {'path': 'a'} by decision",
                "Decided w2 approved {'path': 'b'} by decision",
                "Start w1 {'path': 'a'}",
                "Start w2 {'path': 'b'}",
                "End w2 ok",
                "End w1 ok",
                "result w1=write a",
                "result w2=write b",
            ],
        ),
    ],
    ids=["sequential", "parallel"],
)
async def test_the_resumed_calls_run_by_the_strategy(
    strategy: al.ExecutionStrategy, expected: list[str], autojump_clock: Any
) -> None:
    """Every decision is sent (and journaled) first, in the calls' order; then
    Sequential: each approved call is started and ended before the next;
    Parallel: all are started, then run together."""
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = make_agent(two_writes(), al.DEFER, ran, strategy=strategy, delays={"a": 2, "b": 1})
    await record(agent.prompt("go"))
    resumed = await record(agent.resume([al.Approve("w2"), al.Approve("w1")]))
    assert trace(resumed.events)[2:10] == expected
