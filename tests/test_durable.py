"""Durable sessions: a run killed with SIGKILL at every step, then recovered in a new process.

Each case runs ``durable_child.py`` (a real process, the session journaled with
``fsync="call"``), kills it where the case says, then recovers the session in
another process and lets the model go on. The history must be well formed, equal
to an uninterrupted run's (but for a call that was running and is not safe to
repeat: it gets the NOT_RUN_AGAIN error), and nothing unsafe may run twice.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import texts

import agentloop as al
from agentloop.session import (
    INTERRUPTED,
    NOT_RUN_AGAIN,
    InterruptedCall,
    SessionLockedError,
    SessionRecorder,
    load_session,
)
from agentloop.testing import assert_well_formed

CHILD = Path(__file__).with_name("durable_child.py")

TORN = "warning: skipped a torn last line"
UNINTERRUPTED = [
    ("user", "Take notes."),
    ("assistant:tool_use", "Working.[effect#e1,read#r1]"),
    ("result:ok", "e1=wrote one"),
    ("result:ok", "r1=read the notes"),
    ("assistant:tool_use", "Next.[effect#e2]"),
    ("result:ok", "e2=wrote two"),
    ("assistant:stop", "Done."),
]
NOT_REPEATED = [
    *UNINTERRUPTED[:2],
    ("result:error", f"e1={NOT_RUN_AGAIN}"),
    *UNINTERRUPTED[3:],
]


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


def finish(process: subprocess.Popen[str]) -> list[str]:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out.splitlines()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize(
    ("kill", "history", "reads", "warnings"),
    [
        ("", UNINTERRUPTED, 1, []),
        ("stream", UNINTERRUPTED, 1, []),
        ("effect", NOT_REPEATED, 1, []),
        ("read", UNINTERRUPTED, 2, []),
        ("between", UNINTERRUPTED, 1, []),
        (
            "write",
            NOT_REPEATED,
            1,
            ["warning: skipped a torn last line: Unterminated string starting at"],
        ),
    ],
)
def test_a_run_killed_anywhere_recovers_without_repeating_what_is_unsafe(
    tmp_path: Path, kill: str, history: list[tuple[str, str]], reads: int, warnings: list[str]
) -> None:
    session, work = tmp_path / "s.jsonl", tmp_path
    run = child(session, work, "run", *([kill] if kill else []))
    if kill in ("", "write"):  # runs to the end, or kills itself mid-write
        run.communicate(timeout=60)
    else:
        assert read_line(run) == "ready"
        run.send_signal(signal.SIGKILL)
        run.communicate(timeout=60)
    assert run.returncode == (0 if not kill else -signal.SIGKILL)
    if kill:
        output = finish(child(session, work, "resume"))
        assert [line.split(": line ")[0] for line in output] == [*warnings, "done"]
    loaded = load_session(session)
    assert texts(loaded.messages) == history
    assert_well_formed(loaded.messages)
    assert loaded.interrupted == ()
    assert lines(work / "effects.log") == ["one", "two"]  # the unsafe effect ran once
    assert lines(work / "reads.log") == ["read"] * reads  # the safe one may run again


def test_the_result_of_an_ended_call_is_kept_when_its_message_was_not(tmp_path: Path) -> None:
    """Killed between a tool's end and its result message: the end's result is used, and
    of the calls with no result only the one that started counts as started."""
    path = tmp_path / "s.jsonl"
    assistant = al.AssistantMessage(
        (
            al.ToolCall("a", "tool_a", {}),
            al.ToolCall("b", "tool_b", {}),
            al.ToolCall("c", "tool_c", {}),
        ),
        al.StopReason.TOOL_USE,
        timestamp=2,
    )
    events: list[Any] = [
        al.AgentStart(loop_id="L"),
        al.MessageEnd(loop_id="L", message=assistant),
        al.ToolExecutionStart(loop_id="L", tool_call_id="a", tool_name="tool_a", args={}),
        al.ToolExecutionStart(loop_id="L", tool_call_id="b", tool_name="tool_b", args={}),
        al.ToolExecutionEnd(
            loop_id="L",
            tool_call_id="a",
            tool_name="tool_a",
            result=al.ToolResult.text("a done"),
            is_error=False,
        ),
    ]
    with SessionRecorder(path) as recorder:
        for event in events:
            recorder.record(event)
    session = load_session(path)
    assert texts(session.messages) == [
        ("assistant:tool_use", "[tool_a#a,tool_b#b,tool_c#c]"),
        ("result:ok", "a=a done"),
        ("result:error", f"b={INTERRUPTED}"),
        ("result:error", f"c={INTERRUPTED}"),
    ]
    assert session.interrupted == (
        InterruptedCall(assistant.tool_calls[1], True, "L"),
        InterruptedCall(assistant.tool_calls[2], False, "L"),
    )
    assert session.finished is False


def test_one_process_at_a_time(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SessionRecorder(path):
        with pytest.raises(SessionLockedError) as caught:
            SessionRecorder(path)
        assert str(caught.value) == (
            f"session {path} is open in another process; close it there first, or wait "
            "for that process to end"
        )
        assert isinstance(caught.value, al.AgentloopError)
    with SessionRecorder(path):  # closed: free again
        pass


def test_a_dead_owners_lock_is_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    code = (
        "import sys, time; from agentloop.session import SessionRecorder; "
        f"r = SessionRecorder({str(path)!r}); print('locked', flush=True); time.sleep(600)"
    )
    owner = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert read_line(owner) == "locked"
        with pytest.raises(SessionLockedError):
            SessionRecorder(path)
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.communicate()
    with SessionRecorder(path) as recorder:
        assert recorder.session_id == "s"


def test_fsync_must_be_one_of_three(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^fsync must be") as caught:
        SessionRecorder(tmp_path / "s.jsonl", fsync="sometimes")  # type: ignore[arg-type]
    assert str(caught.value) == "fsync must be 'call', 'turn' or 'never', got 'sometimes'"
    assert not (tmp_path / "s.jsonl").exists()
