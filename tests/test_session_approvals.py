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
import trio
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
