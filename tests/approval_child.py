"""A journaled run that stops to await approval, killed (SIGKILL) while it waits; or
its continuation in a new process.

    python approval_child.py SESSION WORKDIR run
    python approval_child.py SESSION WORKDIR resume [KILL_POINT]
    python approval_child.py SESSION WORKDIR recover DECISIONS

``run`` runs the conversation below with ``approver=DEFER``; when the run has
stopped awaiting approval it prints ``waiting`` and the pending call ids, and
blocks until the parent kills it. ``resume`` loads the session, restores it,
approves ``w1`` with edited arguments (text ``edited``), denies ``w2`` ("Not
today") and lets the run go on; it prints ``done``. Kill points (``ready`` is
printed, then the child blocks): ``tool`` (inside the approved write, after its
effect), ``hook`` (in the journal, once ``w1``'s decision is recorded and before
``w2``'s is: the decisions are recorded first, in order, before any call runs).
``recover`` loads, recovers, prints the pending calls' ids, decides them
(DECISIONS: ``approve`` or ``deny``, the same for all: ``w2`` is denied "Not
today" either way when ``deny``) and goes on.

The conversation (Sequential): the model calls ``look`` (a), ``write`` (w1, asks),
``look`` (c), ``write`` (w2, asks), then answers "Done.". Every tool body appends
a line to WORKDIR/calls.log, so the test counts the runs.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import trio

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.session import SessionRecorder, load_session

SESSION, WORK, MODE = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
ARG = sys.argv[4] if len(sys.argv) > 4 else ""


def say(*words: str) -> None:
    print(*words, flush=True)


def logged(line: str) -> None:
    with (WORK / "calls.log").open("a") as log:
        log.write(line + "\n")


@al.tool
async def look(path: str) -> str:
    """Look at a file."""
    logged(f"look {path}")
    return f"looked at {path}"


@al.tool
async def write(path: str, text: str) -> str:
    """Write a file (not safe to repeat)."""
    logged(f"write {path} {text}")
    if MODE == "resume" and ARG == "tool":
        say("ready")
        await trio.sleep_forever()
    return f"wrote {text} to {path}"


def journal_of(recorder: SessionRecorder) -> Any:
    def journal(event: al.AgentEvent) -> None:
        recorder.record(event)
        if (
            MODE == "resume"
            and ARG == "hook"
            and isinstance(event, al.ToolApprovalDecided)
            and event.tool_call_id == "w1"
        ):
            say("ready")
            threading.Event().wait()  # killed here

    return journal


def model() -> ScriptedProvider:
    first = reply(
        "Working.",
        call("look", {"path": "a"}, id="l1"),
        call("write", {"path": "b", "text": "model"}, id="w1"),
        call("look", {"path": "c"}, id="l2"),
        call("write", {"path": "d", "text": "model"}, id="w2"),
    )
    return ScriptedProvider([first, reply("Done.")])


def decide(pending: tuple[al.PendingCall, ...], how: str) -> list[al.Decision]:
    decisions: list[al.Decision] = []
    for waiting in pending:
        if waiting.tool_call_id == "w1" and how == "approve":
            decisions.append(waiting.approve({"path": "b", "text": "edited"}))
        elif how == "approve" and waiting.tool_call_id != "w2":
            decisions.append(waiting.approve())
        else:
            decisions.append(waiting.deny("Not today"))
    return decisions


async def main() -> None:
    with SessionRecorder(SESSION, fsync="call") as recorder:
        agent = al.Agent(
            ScriptedProvider([reply("Done.")]) if MODE != "run" else model(),
            tools=[look, write],
            strategy=al.Sequential(),
            permissions=al.Permissions(ask=["write"], approver=al.DEFER),
            journal=journal_of(recorder),
        )
        if MODE == "run":
            await agent.run("Write the notes.")
            say("waiting", *[waiting.tool_call_id for waiting in agent.pending])
            await trio.sleep_forever()
        session = load_session(SESSION)
        if MODE == "resume":
            session.restore(agent)
            decisions = decide(agent.pending, "approve")
        else:
            await session.recover(agent)
            say("pending", *[waiting.tool_call_id for waiting in agent.pending])
            decisions = decide(agent.pending, ARG)
        async with agent.resume(decisions) as events:
            async for _event in events:
                pass
        say("done")


trio.run(main)
