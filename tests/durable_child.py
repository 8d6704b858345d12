"""A run recorded with a journal, killed (SIGKILL) at a chosen point; or its recovery.

    python durable_child.py SESSION WORKDIR run [KILL_POINT]
    python durable_child.py SESSION WORKDIR resume

``run`` runs the scripted conversation below; with a kill point, the child
prints ``ready`` on stdout when it gets there and blocks until the parent kills
it (``write`` kills itself halfway through writing a journal line). ``resume``
loads the session, recovers it and lets the model go on; it prints ``done``.

The conversation (Sequential): the model calls ``effect`` (not safe to repeat:
it appends a line to WORKDIR/effects.log) and ``read`` (safe: it only appends
to WORKDIR/reads.log, to count its runs), then ``effect`` again, then answers.
Kill points: ``stream`` (the second reply, two pieces in), ``effect`` (inside
the first effect, after its side effect), ``read`` (inside read), ``between``
(after the first effect ended, before read started), ``write`` (the first
effect's ``ToolExecutionEnd`` line torn in half).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import trio

import agentloop as al
from agentloop.providers import ModelRequest, ScriptedProvider, call, reply
from agentloop.serialization import to_dict
from agentloop.session import SessionRecorder, load_session

SESSION, WORK, MODE = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
KILL = sys.argv[4] if len(sys.argv) > 4 else ""
RUNNING = MODE == "run"


def ready() -> None:
    print("ready", flush=True)


def step(request: ModelRequest) -> Any:
    results = sum(isinstance(m, al.ToolResultMessage) for m in request.messages)
    if results == 0:
        return reply(
            "Working.", call("effect", {"note": "one"}, id="e1"), call("read", {}, id="r1")
        )
    if results == 2:
        return reply("Next.", call("effect", {"note": "two"}, id="e2"))
    return reply("Done.")


class Model:
    """The scripted model; at the ``stream`` kill point it stops two pieces into reply 2."""

    def __init__(self) -> None:
        self.inner = ScriptedProvider([step] * 3)
        self.calls = 0

    async def stream(self, request: ModelRequest, emit: Any) -> al.AssistantMessage:
        self.calls += 1
        if RUNNING and KILL == "stream" and self.calls == 2:
            await emit(al.TextDelta(delta="Ne"))
            await emit(al.TextDelta(delta="xt"))
            ready()
            await trio.sleep_forever()
        return await self.inner.stream(request, emit)


@al.tool
async def effect(note: str) -> str:
    """Write a note (not safe to repeat)."""
    with (WORK / "effects.log").open("a") as log:
        log.write(note + "\n")
    if RUNNING and KILL == "effect" and note == "one":
        ready()
        await trio.sleep_forever()
    return f"wrote {note}"


@al.tool(replay_safe=True)
async def read() -> str:
    """Read the notes (safe to repeat)."""
    with (WORK / "reads.log").open("a") as log:
        log.write("read\n")
    if RUNNING and KILL == "read":
        ready()
        await trio.sleep_forever()
    return "read the notes"


async def before_tool(name: str, call_id: str, args: Any) -> None:
    if RUNNING and KILL == "between" and call_id == "r1":
        ready()
        await trio.sleep_forever()


def journal_for(recorder: SessionRecorder) -> Any:
    def journal(event: al.AgentEvent) -> None:
        if (
            RUNNING
            and KILL == "write"
            and isinstance(event, al.ToolExecutionEnd)
            and event.tool_call_id == "e1"
        ):
            line = json.dumps(to_dict(event))
            recorder._file.write(line[: len(line) // 2])  # type: ignore[union-attr]
            recorder._file.flush()  # type: ignore[union-attr]
            os.kill(os.getpid(), signal.SIGKILL)
        recorder.record(event)

    return journal


async def main() -> None:
    with SessionRecorder(SESSION, fsync="call") as recorder:
        agent = al.Agent(
            Model(),
            tools=[effect, read],
            strategy=al.Sequential(),
            before_tool_execution=before_tool,
            journal=journal_for(recorder),
        )
        if RUNNING:
            await agent.run("Take notes.")
        else:
            session = load_session(SESSION)
            for warning in session.warnings:
                print("warning:", warning.split(": ", 1)[1], flush=True)
            await session.recover(agent)
            async with agent.resume() as events:
                async for _event in events:
                    pass
        print("done", flush=True)


trio.run(main)
