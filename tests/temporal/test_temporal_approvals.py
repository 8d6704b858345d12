"""Deferred approvals on Temporal: a run whose calls need approval waits for decisions.

Real dev server, real worker processes (``temporal_server.py``); the agents are in
``temporal_agents.py`` (``approving``: look runs, each of three notes waits for a
decision). What a run does on Temporal is compared with the same agent run in
process with ``Agent.prompt`` then ``Agent.resume(decisions)``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import temporal_agents
import trio
from helpers import texts
from temporal_server import Workers, lines, run, until

import agentloop as al

temporal = pytest.importorskip("agentloop.temporal")

INVALID = "n2=Invalid arguments: $.text: 5 is not of type 'string'"
DECIDED = [
    ("user", "Go."),
    ("assistant:tool_use", "Working.[look#l1,note#n1,note#n2,note#n3]"),
    ("result:ok", "l1=looked"),
    ("result:ok", "n1=noted A"),
    ("result:error", INVALID),
    ("result:error", "n3=Permission denied: not now"),
    ("assistant:stop", "Done after 4 results."),
]
DECISIONS = [
    al.Approve("n1", {"text": "A"}),
    al.Approve("n2", {"text": 5}),
    al.Deny("n3", "not now"),
]


def shape(event: al.AgentEvent) -> tuple[Any, ...] | None:
    """What must be equal in process and on Temporal (not the timestamps, nor the
    stream's deltas: an activity does not stream)."""
    if isinstance(event, al.ToolApprovalRequested):
        return ("requested", event.tool_call_id, event.args, event.reason, event.rule)
    if isinstance(event, al.ToolApprovalDecided):
        return (
            "decided",
            event.tool_call_id,
            event.approved,
            event.arguments,
            event.reason,
            event.by,
        )
    if isinstance(event, al.ToolExecutionStart):
        return ("start", event.tool_call_id, event.args)
    if isinstance(event, al.ToolExecutionEnd):
        return ("end", event.tool_call_id, event.result.text, event.outcome)
    if isinstance(event, al.TurnStart | al.TurnEnd):
        return (type(event).__name__, event.turn_index)
    if isinstance(event, al.AgentStart):
        return ("AgentStart",)
    if isinstance(event, al.AgentEnd):
        pending = None if event.suspended is None else event.suspended.call_ids
        return ("AgentEnd", event.stop_reason, pending)
    return None


def shapes(events: list[al.AgentEvent]) -> list[tuple[Any, ...]]:
    return [s for s in map(shape, events) if s is not None]


def in_process(
    monkeypatch: pytest.MonkeyPatch, directory: Path, name: str, decisions: list[al.Decision]
) -> tuple[list[al.Message], list[al.AgentEvent], tuple[al.PendingCall, ...], al.Usage]:
    """The agent ``name`` run in this process: prompt "Go.", then resume with ``decisions``."""
    directory.mkdir()
    monkeypatch.setattr(temporal_agents, "DIR", directory)
    agent = temporal_agents.AGENTS[name]()
    events: list[al.AgentEvent] = []

    async def main() -> tuple[al.PendingCall, ...]:
        async with agent.prompt("Go.") as stream:
            events.extend([event async for event in stream])
        waiting = agent.pending
        async with agent.resume(decisions) as stream:
            events.extend([event async for event in stream])
        return waiting

    waiting = trio.run(main)
    usage = al.Usage()
    for event in events:
        if isinstance(event, al.AgentEnd):
            usage = usage + event.usage
    return list(agent.messages), events, waiting, usage


async def until_pending(handle: Any, limit: float = 60) -> tuple[al.PendingCall, ...]:
    """Poll (asyncio) until the run waits for decisions; the calls it waits for."""
    deadline = time.monotonic() + limit
    while not (found := await temporal.pending(handle)):
        assert time.monotonic() < deadline, "the run did not stop for approval"
        await asyncio.sleep(0.05)
    return found


@pytest.mark.parametrize("continue_after", [None, 5])
def test_a_run_waits_for_decisions_and_goes_on_as_in_process(
    workers: Workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, continue_after: int | None
) -> None:
    """The run stops as in process (AgentEnd awaiting approval, look's result in the
    history), waits; pending lists the undecided calls; an edit, an invalid edit and a
    denial give the in-process run's history, events and usage. With a tiny
    continue_after the run continues as new after the resumed turn, never at the stop."""
    messages, expected, waiting_in_process, usage = in_process(
        monkeypatch, tmp_path / "in-process", "approving", DECISIONS
    )
    assert texts(messages) == DECIDED
    workers.start()

    async def main(client: Any) -> Any:
        handle = await temporal.start_run(
            client,
            "approving",
            "Go.",
            id=f"approve-{uuid.uuid4()}",
            task_queue=workers.queue,
            continue_after=continue_after,
        )
        waiting = await until_pending(handle)
        stopped = await temporal.events(handle)
        await temporal.approve(handle, "n1", {"text": "A"})
        left = await temporal.pending(handle)
        await temporal.approve(handle, "n2", {"text": 5})
        await temporal.deny(handle, "n3", "not now")
        result = await temporal.run_result(handle)
        return waiting, left, stopped, result, await temporal.events(handle)

    waiting, left, stopped, result, events = run(main, workers.address)
    assert waiting == waiting_in_process
    assert [call.tool_call_id for call in waiting] == ["n1", "n2", "n3"]
    assert waiting[0] == al.PendingCall(
        tool_call_id="n1",
        tool_name="note",
        arguments={"text": "a"},
        reason="calling note needs approval (the rule ask(note))",
        rule="note",
    )
    assert left == waiting[1:]
    assert shapes(stopped) == shapes(expected[: _first_end(expected)])
    assert texts(result.messages) == DECIDED
    assert result.stop == al.AgentStop(al.StopKind.COMPLETED, "")
    assert result.usage == usage
    if continue_after is None:
        assert shapes(events) == shapes(expected)
    assert lines(workers.directory / "notes.log") == ["A"]
    assert lines(workers.directory / "looks.log") == ["look"]


def _first_end(events: list[al.AgentEvent]) -> int:
    """The length of the first run's events (up to its AgentEnd)."""
    return next(i for i, event in enumerate(events) if isinstance(event, al.AgentEnd)) + 1


def test_a_run_that_stops_again_after_resuming_waits_again(
    workers: Workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each stop is its own wait: t0 approved, the next turn's t1 waits and is denied;
    history, events and usage as in process (three loops: prompt, two resumes)."""
    workers.start()

    async def main(client: Any) -> Any:
        handle = await temporal.start_run(
            client, "approving_twice", "Go.", id=f"twice-{uuid.uuid4()}", task_queue=workers.queue
        )
        first = await until_pending(handle)
        await temporal.approve(handle, "t0")
        second = await until_pending(handle)
        await temporal.deny(handle, "t1", "enough")
        return first, second, await temporal.run_result(handle), await temporal.events(handle)

    first, second, result, events = run(main, workers.address)
    assert [call.tool_call_id for call in first + second] == ["t0", "t1"]
    directory = tmp_path / "in-process"
    directory.mkdir()
    monkeypatch.setattr(temporal_agents, "DIR", directory)
    agent = temporal_agents.approving_twice()
    expected: list[al.AgentEvent] = []

    async def in_process() -> None:
        async with agent.prompt("Go.") as stream:
            expected.extend([event async for event in stream])
        for decision in (al.Approve("t0"), al.Deny("t1", "enough")):
            async with agent.resume([decision]) as stream:
                expected.extend([event async for event in stream])

    trio.run(in_process)
    assert (
        texts(result.messages)
        == texts(agent.messages)
        == [
            ("user", "Go."),
            ("assistant:tool_use", "Note 0.[note#t0]"),
            ("result:ok", "t0=noted t0"),
            ("assistant:tool_use", "Note 1.[note#t1]"),
            ("result:error", "t1=Permission denied: enough"),
            ("assistant:stop", "Done after 2 results."),
        ]
    )
    assert shapes(events) == shapes(expected)
    ends = [event.usage for event in expected if isinstance(event, al.AgentEnd)]
    assert len(ends) == 3
    assert result.usage == ends[0] + ends[1] + ends[2]
    assert lines(workers.directory / "notes.log") == ["t0"]


def test_a_decision_after_the_worker_was_replaced(
    workers: Workers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker is SIGKILLed while the run waits; another one replays it, takes the
    decisions and finishes the run as in process. Nothing ran twice."""
    decisions: list[al.Decision] = [al.Approve("n1"), al.Deny("n2"), al.Approve("n3")]
    messages, _, _, usage = in_process(monkeypatch, tmp_path / "in-process", "approving", decisions)
    first = workers.start()

    async def main(client: Any) -> Any:
        handle = await temporal.start_run(
            client, "approving", "Go.", id=f"restart-{uuid.uuid4()}", task_queue=workers.queue
        )
        await until_pending(handle)
        workers.kill(first)
        workers.start()
        await temporal.approve(handle, "n1")
        await temporal.deny(handle, "n2")
        await temporal.approve(handle, "n3")
        return await temporal.run_result(handle)

    result = run(main, workers.address)
    assert (
        texts(result.messages)
        == texts(messages)
        == [
            ("user", "Go."),
            ("assistant:tool_use", "Working.[look#l1,note#n1,note#n2,note#n3]"),
            ("result:ok", "l1=looked"),
            ("result:ok", "n1=noted a"),
            ("result:error", "n2=Permission denied: calling note was not approved"),
            ("result:ok", "n3=noted c"),
            ("assistant:stop", "Done after 4 results."),
        ]
    )
    assert result.usage == usage
    assert lines(workers.directory / "notes.log") == ["a", "c"]
    assert lines(workers.directory / "looks.log") == ["look"]


def test_decisions_that_name_no_waiting_call_are_rejected(workers: Workers) -> None:
    """An unknown id, a second decision on a call, arguments that are not an object,
    and a decision while the run is not waiting: each rejected with its text; the
    first decision stands."""
    workers.start()
    started = workers.directory / "wait.started"

    async def rejected(decide: Any) -> str:
        with pytest.raises(al.ApprovalError) as caught:
            await decide
        return str(caught.value)

    async def main(client: Any) -> Any:
        running = await temporal.start_run(
            client, "waiting", "Wait.", id=f"busy-{uuid.uuid4()}", task_queue=workers.queue
        )
        await until(started.exists)
        texts_ = [await rejected(temporal.approve(running, "w1"))]
        assert await temporal.pending(running) == ()
        (workers.directory / "release").write_text("")
        await temporal.run_result(running)
        handle = await temporal.start_run(
            client, "approving", "Go.", id=f"reject-{uuid.uuid4()}", task_queue=workers.queue
        )
        await until_pending(handle)
        texts_.append(await rejected(temporal.approve(handle, "zz")))
        await temporal.deny(handle, "n1", "no")
        texts_.append(await rejected(temporal.approve(handle, "n1")))
        texts_.append(await rejected(temporal.deny(handle, "n1", "again")))
        texts_.append(await rejected(temporal.approve(handle, "n2", ["x"])))  # type: ignore[arg-type]
        texts_.append(await rejected(temporal.deny(handle, "zz")))
        await temporal.deny(handle, "n2")
        await temporal.approve(handle, "n3")
        return texts_, await temporal.run_result(handle)

    rejections, result = run(main, workers.address)
    assert rejections == [
        "no call awaits approval (a decision for 'w1')",
        "no pending call has the id 'zz' (pending: 'n1', 'n2', 'n3')",
        "'n1' decided more than once (the first decision stands)",
        "'n1' decided more than once (the first decision stands)",
        "arguments must be an object or null, got list",
        "no pending call has the id 'zz' (pending: 'n2', 'n3')",
    ]
    assert texts(result.messages)[3:6] == [
        ("result:error", "n1=Permission denied: no"),
        ("result:error", "n2=Permission denied: calling note was not approved"),
        ("result:ok", "n3=noted c"),
    ]
    assert lines(workers.directory / "notes.log") == ["c"]


def test_calls_undecided_when_the_approval_timeout_passes_are_denied(workers: Workers) -> None:
    """approval_timeout (5 s, on the server's timer: the dev server cannot skip time)
    denies n2 and n3; n1, approved before, runs. The wait does not count against the
    agent's max_duration (4 s): the run completes."""
    workers.start()

    async def main(client: Any) -> Any:
        handle = await temporal.start_run(
            client,
            "approving_timed",
            "Go.",
            id=f"timeout-{uuid.uuid4()}",
            task_queue=workers.queue,
            approval_timeout=timedelta(seconds=5),
        )
        await until_pending(handle)
        await temporal.approve(handle, "n1")
        return await temporal.run_result(handle), await temporal.events(handle)

    result, events = run(main, workers.address)
    timed_out = "no decision within the approval timeout (5s)"
    assert texts(result.messages) == [
        ("user", "Go."),
        ("assistant:tool_use", "Working.[look#l1,note#n1,note#n2,note#n3]"),
        ("result:ok", "l1=looked"),
        ("result:ok", "n1=noted a"),
        ("result:error", f"n2=Permission denied: {timed_out}"),
        ("result:error", f"n3=Permission denied: {timed_out}"),
        ("assistant:stop", "Done after 4 results."),
    ]
    assert result.stop == al.AgentStop(al.StopKind.COMPLETED, "")
    assert [s for s in shapes(events) if s[0] == "decided"] == [
        ("decided", "n1", True, {"text": "a"}, None, "decision"),
        ("decided", "n2", False, {"text": "b"}, timed_out, "decision"),
        ("decided", "n3", False, {"text": "c"}, timed_out, "decision"),
    ]
    assert lines(workers.directory / "notes.log") == ["a"]


def test_cancelling_a_waiting_run_denies_its_calls_and_ends_it_aborted(workers: Workers) -> None:
    """Cancelled while it waits (n1 approved already): no call runs, each gets its
    denial, the model is not asked again, the run ends aborted."""
    workers.start()

    async def main(client: Any) -> Any:
        handle = await temporal.start_run(
            client, "approving", "Go.", id=f"cancel-{uuid.uuid4()}", task_queue=workers.queue
        )
        await until_pending(handle)
        await temporal.approve(handle, "n1")
        await handle.cancel()
        return await temporal.run_result(handle)

    result = run(main, workers.address)
    aborted = "Permission denied: the run was aborted while awaiting approval"
    assert texts(result.messages) == [
        ("user", "Go."),
        ("assistant:tool_use", "Working.[look#l1,note#n1,note#n2,note#n3]"),
        ("result:ok", "l1=looked"),
        ("result:error", f"n1={aborted}"),
        ("result:error", f"n2={aborted}"),
        ("result:error", f"n3={aborted}"),
    ]
    assert result.stop == al.AgentStop(al.StopKind.ABORTED, "the run was aborted")
    assert lines(workers.directory / "notes.log") == []
