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
from pathlib import Path
from typing import Any

import pytest
import temporal_agents
import trio
from helpers import texts
from temporal_server import Workers, lines, run

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
