"""AgentEnd.stop_reason: why each run ended, as data, for every way a run can end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import Echo, Sleeper

import agentloop as al
from agentloop.providers import ScriptedProvider, call, fail, reply
from agentloop.providers._errors import OverloadedError
from agentloop.session import SessionRecorder, load_session
from agentloop.tools import SubAgentTool


def unlimited(**changes: Any) -> al.ExecutionLimits:
    values: dict[str, Any] = {"max_turns": None, "max_total_tokens": None, "max_duration": None}
    return al.ExecutionLimits(**{**values, **changes})


async def end_of(agent: al.Agent, prompt: str = "go") -> al.AgentEnd:
    ends: list[al.AgentEnd] = []
    async with agent.prompt(prompt) as events:
        async for event in events:
            if isinstance(event, al.AgentEnd):
                ends.append(event)
    (end,) = ends
    return end


async def test_a_run_that_finishes_is_completed() -> None:
    end = await end_of(al.Agent(ScriptedProvider([reply("done")])))
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)
    assert end.stop_reason.completed


@pytest.mark.parametrize(
    ("limits", "kind", "message"),
    [
        ({"max_turns": 1}, al.StopKind.MAX_TURNS, "Max turns reached (1/1)"),
        ({"max_total_tokens": 5}, al.StopKind.MAX_TOKENS, "Max tokens reached (20/5)"),
        ({"max_cost": 0.01}, al.StopKind.MAX_COST, "Max cost reached ($0.0200/$0.0100)"),
        ({"max_requests": 1}, al.StopKind.MAX_REQUESTS, "Max requests reached (1/1)"),
    ],
)
async def test_each_limit_says_which(
    limits: dict[str, Any], kind: al.StopKind, message: str
) -> None:
    usage = al.Usage(input=10, output=10, total_tokens=20, cost=0.02)
    model = ScriptedProvider([reply(call("echo", {"text": "x"}), usage=usage), reply("never")])
    agent = al.Agent(model, tools=[Echo()], limits=unlimited(**limits))
    end = await end_of(agent)
    assert end.stop_reason == al.AgentStop(kind, message)
    assert agent.messages[-1].text == f"[Agent stopped: {message}]"


async def test_max_duration(autojump_clock: Any) -> None:
    model = ScriptedProvider([reply(call("sleep", {"seconds": 20})), reply("never")])
    agent = al.Agent(model, tools=[Sleeper()], limits=unlimited(max_duration=10))
    end = await end_of(agent)
    assert end.stop_reason == al.AgentStop(
        al.StopKind.MAX_DURATION, "Max duration reached (20s/10s)"
    )


async def test_a_failed_model_call_is_an_error_with_its_message() -> None:
    model = ScriptedProvider([fail(OverloadedError("busy"))])
    end = await end_of(al.Agent(model))
    assert end.stop_reason == al.AgentStop(al.StopKind.ERROR, "busy", error="busy")


async def test_abort_is_aborted(autojump_clock: Any) -> None:
    model = ScriptedProvider([reply(call("sleep", {"seconds": 60})), reply("never")])
    agent = al.Agent(model, tools=[Sleeper()])
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionStart):
                agent.abort()
            if isinstance(event, al.AgentEnd):
                end = event
    assert end.stop_reason == al.AgentStop(al.StopKind.ABORTED, "the run was aborted")


@pytest.mark.parametrize("hook", ["before_loop", "before_turn"])
async def test_a_vetoing_hook_says_which(hook: str) -> None:
    agent = al.Agent(ScriptedProvider([reply("never")]), **{hook: lambda *args: False})
    end = await end_of(agent)
    assert end.stop_reason == al.AgentStop(al.StopKind.VETOED, f"{hook} returned False")


async def test_a_sub_agent_reports_its_childs_limit_from_the_stop_reason() -> None:
    child = ScriptedProvider([reply("step", call("echo", {"text": "a"}))] * 3)
    helper = SubAgentTool("helper", child, tools=[Echo()], max_turns=2)
    parent = ScriptedProvider([reply(call("helper", {"task": "work"})), reply("ok")])
    agent = al.Agent(parent, tools=[helper])
    await agent.run("go")
    result = agent.messages[2]
    assert isinstance(result, al.ToolResultMessage)
    assert result.text == (
        "Sub-agent 'helper' failed: Max turns reached (2/2)\n\nIts last output:\nstep"
    )


async def test_a_session_keeps_each_runs_stop_reason(tmp_path: Path) -> None:
    model = ScriptedProvider([reply("one"), reply(call("echo", {"text": "x"})), reply("never")])
    agent = al.Agent(model, tools=[Echo()], limits=unlimited(max_turns=1))
    with SessionRecorder(tmp_path / "s.jsonl") as recorder:
        for prompt in ("first", "second"):
            async with agent.prompt(prompt) as events:
                async for event in events:
                    recorder.record(event)
    session = load_session(tmp_path / "s.jsonl")
    assert session.stops == (
        al.AgentStop(al.StopKind.COMPLETED),
        al.AgentStop(al.StopKind.MAX_TURNS, "Max turns reached (1/1)"),
    )
    assert session.finished


async def test_a_session_cut_mid_run_is_not_finished(tmp_path: Path) -> None:
    model = ScriptedProvider([reply("one")])
    with SessionRecorder(tmp_path / "s.jsonl") as recorder:
        async with al.Agent(model).prompt("go") as events:
            async for event in events:
                if not isinstance(event, al.AgentEnd):
                    recorder.record(event)
    session = load_session(tmp_path / "s.jsonl")
    assert (session.stops, session.finished) == ((), False)


def test_hard_cancel_is_aborted_too() -> None:
    """Cancelling the caller's scope ends the run at once (no AgentEnd); the turn says ABORTED."""

    async def main() -> None:
        model = ScriptedProvider([reply(call("sleep", {"seconds": 60})), reply("never")])
        agent = al.Agent(model, tools=[Sleeper()])
        with trio.move_on_after(1):
            await agent.run("go")
        last = agent.messages[1]
        assert isinstance(last, al.AssistantMessage)
        assert last.stop_reason is al.StopReason.ABORTED

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_usage_is_split_by_the_model_that_answered() -> None:
    """With a FallbackProvider the second turn is answered by the backup: each model's
    usage is its own, and they add up to the run's."""
    first, second = (
        al.Usage(input=10, output=5, total_tokens=15),
        al.Usage(input=20, output=7, total_tokens=27),
    )
    primary = ScriptedProvider(
        [reply(call("echo", {"text": "x"}), usage=first), fail(OverloadedError("busy"))],
        model="primary",
    )
    backup = ScriptedProvider([reply("done", usage=second)], model="backup")
    agent = al.Agent(al.providers.FallbackProvider(primary, backup), tools=[Echo()])
    end = await end_of(agent)
    assert end.usage_by_model == {"primary": first, "backup": second}
    assert end.usage == first + second
