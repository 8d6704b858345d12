"""Sessions and deferred approvals: a run stopped to await approval is on file, and a
new process (also one started after a kill -9) continues it with decisions.

The subprocess cases run ``approval_child.py`` (a real process, journaled with
``fsync="call"``): the model calls look (l1), write (w1, asks), look (l2), write (w2,
asks); w1 is approved with edited arguments, w2 denied. Every tool body appends to
``calls.log``: no call may run twice, none without approval.
"""

from __future__ import annotations

import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.session import (
    INTERRUPTED,
    NOT_RUN_AGAIN,
    InterruptedCall,
    SessionRecorder,
    load_session,
)
from agentloop.testing import assert_well_formed

CHILD = Path(__file__).with_name("approval_child.py")

UNINTERRUPTED = [
    ("user", "Write the notes."),
    ("assistant:tool_use", "Working.[look#l1,write#w1,look#l2,write#w2]"),
    ("result:ok", "l1=looked at a"),
    ("result:ok", "w1=wrote edited to b"),
    ("result:ok", "l2=looked at c"),
    ("result:error", "w2=Permission denied: Not today"),
    ("assistant:stop", "Done."),
]
STOPPED = UNINTERRUPTED[:3]  # up to the results before the first pending call
REASON = "calling write needs approval (the rule ask(write))"


def child(session: Path, work: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(session), str(work), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_line(process: subprocess.Popen[str], limit: float = 60) -> str:
    """The child's next line on stdout, waiting at most ``limit`` seconds for it."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], limit)
    assert ready, "the child said nothing"
    return process.stdout.readline().strip()


def kill(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL


def finish(process: subprocess.Popen[str]) -> list[str]:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out.splitlines()


def calls_log(work: Path) -> list[str]:
    path = work / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


def stopped_and_killed(session: Path, work: Path) -> None:
    """The first process runs until the run awaits approval, and is killed there."""
    run = child(session, work, "run")
    assert read_line(run) == "waiting w1 w2"
    kill(run)


def test_killed_while_waiting_then_approved_from_a_new_process(tmp_path: Path) -> None:
    session, work = tmp_path / "s.jsonl", tmp_path
    stopped_and_killed(session, work)
    loaded = load_session(session)
    assert texts(loaded.messages) == STOPPED
    assert [(p.tool_call_id, p.arguments, p.reason) for p in loaded.pending] == [
        ("w1", {"path": "b", "text": "model"}, REASON),
        ("w2", {"path": "d", "text": "model"}, REASON),
    ]
    assert loaded.suspended is not None
    assert texts(loaded.suspended.results) == [("result:ok", "l2=looked at c")]  # held
    assert loaded.interrupted == ()
    assert loaded.finished is True
    assert loaded.stops[-1] == al.AgentStop(
        al.StopKind.AWAITING_APPROVAL, "Awaiting approval: write (w1), write (w2)"
    )
    assert calls_log(work) == ["look a", "look c"]

    assert finish(child(session, work, "resume")) == ["done"]
    final = load_session(session)
    assert texts(final.messages) == UNINTERRUPTED
    assert_well_formed(final.messages)
    assert (final.suspended, final.interrupted, final.finished) == (None, (), True)
    assert calls_log(work) == ["look a", "look c", "write b edited"]  # each ran once


def test_killed_while_an_approved_call_ran_it_is_not_run_again(tmp_path: Path) -> None:
    session, work = tmp_path / "s.jsonl", tmp_path
    stopped_and_killed(session, work)
    resumed = child(session, work, "resume", "tool")
    assert read_line(resumed) == "ready"
    kill(resumed)
    loaded = load_session(session)
    assert loaded.suspended is None  # every pending call's decision is on file
    assert loaded.finished is False
    assert loaded.interrupted == (
        InterruptedCall(
            al.ToolCall("w1", "write", {"path": "b", "text": "model"}),
            True,
            loaded.interrupted[0].loop_id,
            al.Approve("w1", {"path": "b", "text": "edited"}),
        ),
    )
    assert texts(loaded.messages) == [
        *STOPPED,
        ("result:error", f"w1={INTERRUPTED}"),
        ("result:ok", "l2=looked at c"),  # the held result is not lost
        ("result:error", "w2=Permission denied: Not today"),
    ]
    assert finish(child(session, work, "recover", "approve")) == ["pending", "done"]
    final = load_session(session)
    assert texts(final.messages) == [
        *UNINTERRUPTED[:3],
        ("result:error", f"w1={NOT_RUN_AGAIN}"),
        *UNINTERRUPTED[4:],
    ]
    assert_well_formed(final.messages)
    assert calls_log(work) == ["look a", "look c", "write b edited"]


def test_a_call_whose_decision_was_not_recorded_stays_pending(tmp_path: Path) -> None:
    """Killed between w1's decision and w2's: w1 (approved, not started) runs on
    recovery with its edited arguments; w2 waits for a decision and never runs."""
    session, work = tmp_path / "s.jsonl", tmp_path
    stopped_and_killed(session, work)
    resumed = child(session, work, "resume", "hook")
    assert read_line(resumed) == "ready"
    kill(resumed)
    loaded = load_session(session)
    assert [p.tool_call_id for p in loaded.pending] == ["w2"]
    assert loaded.suspended is not None
    assert texts(loaded.suspended.results) == [("result:ok", "l2=looked at c")]
    assert [(i.call.id, i.started, i.decision) for i in loaded.interrupted] == [
        ("w1", False, al.Approve("w1", {"path": "b", "text": "edited"}))
    ]
    assert texts(loaded.messages) == STOPPED
    assert calls_log(work) == ["look a", "look c"]

    assert finish(child(session, work, "recover", "deny")) == ["pending w2", "done"]
    final = load_session(session)
    assert texts(final.messages) == UNINTERRUPTED
    assert_well_formed(final.messages)
    assert calls_log(work) == ["look a", "look c", "write b edited"]


# --------------------------------------------------------------------------- in process

ran: list[str] = []


@al.tool
async def look(path: str) -> str:
    """Look at a file."""
    ran.append(f"look {path}")
    return f"looked at {path}"


@al.tool
async def write(path: str, text: str) -> str:
    """Write a file."""
    ran.append(f"write {path} {text}")
    return f"wrote {text} to {path}"


def conversation() -> ScriptedProvider:
    first = reply(
        "Working.",
        call("look", {"path": "a"}, id="l1"),
        call("write", {"path": "b", "text": "model"}, id="w1"),
        call("look", {"path": "c"}, id="l2"),
        call("write", {"path": "d", "text": "model"}, id="w2"),
    )
    return ScriptedProvider([first, reply("Done.")])


DECISIONS = [al.Approve("w1", {"path": "b", "text": "edited"}), al.Deny("w2", "Not today")]


async def test_a_stop_for_approval_loads_and_resumes_as_an_uninterrupted_run(
    tmp_path: Path,
) -> None:
    async def blocking(request: al.PermissionRequest) -> al.Decision:
        return next(d for d in DECISIONS if d.tool_call_id == request.tool_call_id)

    straight = al.Agent(
        conversation(),
        tools=[look, write],
        permissions=al.Permissions(ask=["write"], approver=blocking),
    )
    await straight.run("Write the notes.")
    assert texts(straight.messages) == UNINTERRUPTED

    path = tmp_path / "s.jsonl"
    with SessionRecorder(path) as recorder:
        agent = al.Agent(
            conversation(),
            tools=[look, write],
            permissions=al.Permissions(ask=["write"], approver=al.DEFER),
            journal=recorder.record,
        )
        await agent.run("Write the notes.")
    loaded = load_session(path)
    assert loaded.suspended == agent.context.suspended  # held results, counts and all
    assert loaded.pending == agent.pending
    assert loaded.messages == tuple(agent.messages)

    with SessionRecorder(path) as recorder:
        later = al.Agent(
            ScriptedProvider([reply("Done.")]),
            tools=[look, write],
            permissions=al.Permissions(ask=["write"], approver=al.DEFER),
            journal=recorder.record,
        )
        loaded.restore(later)
        assert later.pending == loaded.pending
        async with later.resume(DECISIONS) as events:
            async for _event in events:
                pass
    final = load_session(path)
    assert texts(final.messages) == texts(later.messages) == texts(straight.messages)
    assert [m.tool_call_id for m in final.messages if isinstance(m, al.ToolResultMessage)] == [
        "l1",
        "w1",
        "l2",
        "w2",
    ]
    assert final.suspended is None


def recorded(path: Path, *events: Any) -> None:
    with SessionRecorder(path) as recorder:
        for event in events:
            recorder.record(event)


REPLY = al.AssistantMessage(
    (
        al.ToolCall("a", "look", {"path": "x"}),
        al.ToolCall("w", "write", {"path": "y", "text": "t"}),
    ),
    al.StopReason.TOOL_USE,
    timestamp=2,
)
ASK_W = al.ToolApprovalRequested(
    loop_id="L",
    tool_call_id="w",
    tool_name="write",
    args=REPLY.tool_calls[1].arguments,
    reason=REASON,
    rule="write",
)


async def test_a_recorded_denial_is_given_on_recovery_and_the_call_never_runs(
    tmp_path: Path,
) -> None:
    """Killed after w's denial was recorded, before its result: recover denies it."""
    path = tmp_path / "s.jsonl"
    recorded(
        path,
        al.AgentStart(loop_id="L"),
        al.MessageEnd(loop_id="L", message=al.UserMessage((al.TextContent("Go"),), timestamp=1)),
        al.MessageEnd(loop_id="L", message=REPLY),
        al.ToolExecutionStart(loop_id="L", tool_call_id="a", tool_name="look", args={"path": "x"}),
        al.ToolExecutionEnd(
            loop_id="L",
            tool_call_id="a",
            tool_name="look",
            result=al.ToolResult.text("seen"),
            is_error=False,
        ),
        ASK_W,
        al.ToolApprovalDecided(
            loop_id="L",
            tool_call_id="w",
            tool_name="write",
            approved=False,
            arguments={},
            reason="No.",
        ),
    )
    loaded = load_session(path)
    assert loaded.pending == ()
    assert [(i.call.id, i.started, i.decision) for i in loaded.interrupted] == [
        ("w", False, al.Deny("w", "No."))
    ]
    ran.clear()
    agent = al.Agent(ScriptedProvider([]), tools=[look, write])
    results = await loaded.recover(agent)
    assert texts(results) == [("result:error", "w=Permission denied: No.")]
    assert results[0].outcome is al.ToolOutcome.DENIED
    assert ran == []
    assert texts(agent.messages) == [
        ("user", "Go"),
        ("assistant:tool_use", "[look#a,write#w]"),
        ("result:ok", "a=seen"),
        ("result:error", "w=Permission denied: No."),
    ]


async def test_a_call_asked_when_the_process_died_waits_for_a_decision(tmp_path: Path) -> None:
    """Killed while a blocking approver was asked (the run never stopped): the call is
    pending on loading, recovery does not run it, and a decision does."""
    path = tmp_path / "s.jsonl"
    recorded(
        path,
        al.AgentStart(loop_id="L"),
        al.MessageEnd(loop_id="L", message=al.UserMessage((al.TextContent("Go"),), timestamp=1)),
        al.MessageEnd(loop_id="L", message=REPLY),
        al.ToolExecutionStart(loop_id="L", tool_call_id="a", tool_name="look", args={"path": "x"}),
        al.ToolExecutionEnd(
            loop_id="L",
            tool_call_id="a",
            tool_name="look",
            result=al.ToolResult.text("seen"),
            is_error=False,
        ),
        ASK_W,
    )
    loaded = load_session(path)
    assert loaded.finished is False
    assert loaded.pending == (
        al.PendingCall(
            tool_call_id="w",
            tool_name="write",
            arguments={"path": "y", "text": "t"},
            reason=REASON,
            rule="write",
        ),
    )
    assert loaded.suspended is not None
    assert texts(loaded.suspended.results) == [("result:ok", "a=seen")]
    assert loaded.interrupted == ()
    assert texts(loaded.messages) == [("user", "Go"), ("assistant:tool_use", "[look#a,write#w]")]
    ran.clear()
    agent = al.Agent(ScriptedProvider([reply("Written.")]), tools=[look, write])
    assert await loaded.recover(agent) == ()
    assert [p.tool_call_id for p in agent.pending] == ["w"]
    assert ran == []
    await agent_resumed(agent, [agent.pending[0].approve()])
    assert ran == ["write y t"]
    assert texts(agent.messages) == [
        ("user", "Go"),
        ("assistant:tool_use", "[look#a,write#w]"),
        ("result:ok", "a=seen"),
        ("result:ok", "w=wrote t to y"),
        ("assistant:stop", "Written."),
    ]


async def agent_resumed(agent: al.Agent, decisions: list[al.Decision]) -> None:
    async with agent.resume(decisions) as events:
        async for _event in events:
            pass


@pytest.mark.parametrize("ask", [True, False])
async def test_recovery_asks_the_permissions_before_running_a_call_that_had_not_started(
    tmp_path: Path, ask: bool
) -> None:
    """Killed before w was looked at (its turn had not reached it): recovery runs it only
    if the agent's permissions allow it; one they ask for waits, one they deny is denied."""
    path = tmp_path / "s.jsonl"
    recorded(
        path,
        al.AgentStart(loop_id="L"),
        al.MessageEnd(loop_id="L", message=al.UserMessage((al.TextContent("Go"),), timestamp=1)),
        al.MessageEnd(loop_id="L", message=REPLY),
        al.ToolExecutionStart(loop_id="L", tool_call_id="a", tool_name="look", args={"path": "x"}),
    )
    loaded = load_session(path)
    assert [(i.call.id, i.started) for i in loaded.interrupted] == [("a", True), ("w", False)]
    ran.clear()
    permissions = (
        al.Permissions(ask=["write"], approver=al.DEFER) if ask else al.Permissions(deny=["write"])
    )
    with SessionRecorder(path) as recorder:
        agent = al.Agent(
            ScriptedProvider([reply("Ok.")]),
            tools=[look, write],
            permissions=permissions,
            journal=recorder.record,
        )
        results = await loaded.recover(agent)
        assert ran == []  # the look had started and is not safe to repeat
        if ask:
            assert texts(results) == [("result:error", f"a={NOT_RUN_AGAIN}")]
            assert [(p.tool_call_id, p.reason) for p in agent.pending] == [("w", REASON)]
            assert texts(agent.messages) == [
                ("user", "Go"),
                ("assistant:tool_use", "[look#a,write#w]"),
                ("result:error", f"a={NOT_RUN_AGAIN}"),
            ]
            again = load_session(path)  # the question is on file too
            assert again.pending == agent.pending
            assert (again.messages, again.interrupted) == (tuple(agent.messages), ())
            await agent_resumed(agent, [agent.pending[0].approve()])
            assert ran == ["write y t"]
        else:
            assert texts(results) == [
                ("result:error", f"a={NOT_RUN_AGAIN}"),
                (
                    "result:error",
                    "w=Permission denied: calling write is refused by the rule deny(write)",
                ),
            ]
            assert agent.pending == ()
            await agent_resumed(agent, [])
            assert ran == []
    final = load_session(path)
    assert_well_formed(final.messages)
    assert texts(final.messages)[-1] == ("assistant:stop", "Ok.")
