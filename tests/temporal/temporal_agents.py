"""Agents for the Temporal tests, served by workers (``--agents temporal_agents:AGENTS``).

The models are scripted from the request alone (each request may reach another
worker). Tools leave traces in ``$AGENTLOOP_TEST_DIR`` so the tests can see what
ran where: ``note`` (not safe to repeat) appends to notes.log, ``look`` (safe)
to looks.log; ``wait`` (safe) and ``hold`` (not safe) write a ``<name>.started``
marker and wait for ``release`` to appear; ``wait`` writes ``wait.cancelled``
when its cancel scope fires.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import trio

import agentloop as al
from agentloop.providers import ModelRequest, ScriptedProvider, call, reply

DIR = Path(os.environ.get("AGENTLOOP_TEST_DIR", "."))


def _append(name: str, text: str) -> None:
    with (DIR / name).open("a") as log:
        log.write(text + "\n")


@al.tool
async def note(text: str) -> str:
    """Write a note (not safe to repeat)."""
    _append("notes.log", text)
    return f"noted {text}"


@al.tool(replay_safe=True)
async def look() -> str:
    """Look at the notes (safe to repeat)."""
    _append("looks.log", "look")
    return "looked"


async def _until_released(name: str) -> None:
    (DIR / f"{name}.started").write_text(str(os.getpid()))
    while not (DIR / "release").exists():  # noqa: ASYNC110 - another process writes it
        await trio.sleep(0.05)


@al.tool(replay_safe=True)
async def wait() -> str:
    """Wait until released (safe to repeat)."""
    try:
        await _until_released("wait")
    except trio.Cancelled:
        (DIR / "wait.cancelled").write_text("yes")
        raise
    return "released"


@al.tool
async def hold(text: str) -> str:
    """Write a note, then wait until released (not safe to repeat)."""
    _append("notes.log", text)
    await _until_released("hold")
    return f"held {text}"


def _results(request: ModelRequest) -> int:
    return sum(isinstance(m, al.ToolResultMessage) for m in request.messages)


def _last_user(request: ModelRequest) -> str:
    users = [m for m in request.messages if isinstance(m, al.UserMessage)]
    return users[-1].text if users else ""


def notes_step(request: ModelRequest) -> Any:
    done = _results(request)
    if done == 0:
        return reply("Noting.", call("note", {"text": "a"}, id="n1"), call("look", id="l1"))
    if done == 2:
        return reply("More.", call("note", {"text": "b"}, id="n2"))
    return reply(f"Done after {done} results.")


def waiting_step(request: ModelRequest) -> Any:
    if _results(request) == 0:
        return reply("Waiting.", call("wait", id="w1"), call("look", id="l1"))
    return reply(f"Finished; the user said: {_last_user(request)}")


def holding_step(request: ModelRequest) -> Any:
    done = _results(request)
    if done == 0:
        return reply("Holding.", call("look", id="l1"), call("hold", {"text": "h"}, id="h1"))
    if done == 2:
        return reply("Then.", call("note", {"text": "after"}, id="n1"))
    return reply("All done.")


def notes() -> al.Agent:
    return al.Agent(
        ScriptedProvider([notes_step] * 1000), tools=[note, look], strategy=al.Sequential()
    )


def waiting() -> al.Agent:
    return al.Agent(
        ScriptedProvider([waiting_step] * 1000), tools=[wait, look], strategy=al.Sequential()
    )


def holding() -> al.Agent:
    return al.Agent(ScriptedProvider([holding_step] * 1000), tools=[look, hold, note])


def guarded() -> al.Agent:
    return al.Agent(
        ScriptedProvider([notes_step] * 1000),
        tools=[note, look],
        strategy=al.Sequential(),
        permissions=al.Permissions(deny=["note"]),
    )


def hooked() -> al.Agent:
    return al.Agent(
        ScriptedProvider([notes_step] * 1000),
        tools=[note, look],
        before_turn=lambda messages, index: True,
        permissions=al.Permissions(default="ask", approver=lambda request: True),
    )


@attrs.frozen
class Verdict:
    """What the notes say."""

    summary: str
    count: int


def typed_step(request: ModelRequest) -> Any:
    if _results(request) == 0:
        return reply(call("final_result", {"summary": "two notes", "count": "two"}, id="f1"))
    return reply(call("final_result", {"summary": "two notes", "count": 2}, id="f2"))


def typed() -> al.Agent:
    return al.Agent(ScriptedProvider([typed_step] * 1000), output_type=Verdict)


@al.tool(replay_safe=True)
async def consult(ctx: al.ToolContext) -> str:
    """Ask another model (paid for by the run, as an MCP server's sampling is)."""
    await trio.lowlevel.checkpoint()
    ctx.count_usage(al.Usage(input=300, output=700), "consultant")
    return "consulted"


def consult_step(request: ModelRequest) -> Any:
    if _results(request) == 0:
        return reply(call("consult", id="c1"), usage=al.Usage(input=10, output=5))
    return reply("Consulted.", usage=al.Usage(input=10, output=5))


def consulting() -> al.Agent:
    return al.Agent(
        ScriptedProvider([consult_step] * 1000),
        tools=[consult],
        limits=al.ExecutionLimits(max_total_tokens=1000),
    )


def approving_step(request: ModelRequest) -> Any:
    if _results(request) == 0:
        return reply(
            "Working.",
            call("look", id="l1"),
            call("note", {"text": "a"}, id="n1"),
            call("note", {"text": "b"}, id="n2"),
            call("note", {"text": "c"}, id="n3"),
        )
    return reply(f"Done after {_results(request)} results.")


def approving() -> al.Agent:
    """look runs; each note asks, and waits for a decision (DEFER)."""
    return al.Agent(
        ScriptedProvider([approving_step] * 1000),
        tools=[look, note],
        strategy=al.Sequential(),
        permissions=al.Permissions(ask=["note"], approver=al.DEFER),
    )


def approving_timed() -> al.Agent:
    """approving, with a max_duration shorter than the tests' approval timeout."""
    return al.Agent(
        ScriptedProvider([approving_step] * 1000),
        tools=[look, note],
        strategy=al.Sequential(),
        permissions=al.Permissions(ask=["note"], approver=al.DEFER),
        limits=al.ExecutionLimits(max_duration=4),
    )


def twice_step(request: ModelRequest) -> Any:
    done = _results(request)
    if done < 2:
        return reply(f"Note {done}.", call("note", {"text": f"t{done}"}, id=f"t{done}"))
    return reply(f"Done after {done} results.")


def approving_twice() -> al.Agent:
    """A note per turn for two turns, each waiting for a decision."""
    return al.Agent(
        ScriptedProvider([twice_step] * 1000),
        tools=[note],
        permissions=al.Permissions(ask=["note"], approver=al.DEFER),
    )


AGENTS = {
    "approving": approving,
    "approving_twice": approving_twice,
    "approving_timed": approving_timed,
    "consulting": consulting,
    "typed": typed,
    "notes": notes,
    "waiting": waiting,
    "holding": holding,
    "guarded": guarded,
    "hooked": hooked,
}
