"""ToolContext.count_usage: model usage a tool paid for is the run's, and its limits'."""

from __future__ import annotations

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import collect_events

SPENT = al.Usage(input=5_000, output=1_000, total_tokens=6_000, cost=0.25)


@al.tool
async def consult(question: str, ctx: al.ToolContext) -> str:
    """Ask an expensive model."""
    ctx.count_usage(SPENT, "expert-model")
    return "42"


async def test_usage_a_tool_counts_is_in_the_runs_usage() -> None:
    model = ScriptedProvider([reply(call("consult", {"question": "?"})), reply("It is 42.")])
    agent = al.Agent(model, tools=[consult])
    events = await collect_events(agent, "Ask")
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    own = sum((m.usage for m in end.messages if isinstance(m, al.AssistantMessage)), al.Usage())
    assert end.usage == own + SPENT
    assert end.usage_by_model == {"scripted": own, "expert-model": SPENT}
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)


async def test_usage_a_tool_counts_is_held_to_the_runs_limits() -> None:
    model = ScriptedProvider([reply(call("consult", {"question": "?"})), reply("never")])
    agent = al.Agent(model, tools=[consult], limits=al.ExecutionLimits(max_total_tokens=5_500))
    events = await collect_events(agent, "Ask")
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason.kind is al.StopKind.MAX_TOKENS
    assert len(model.requests) == 1  # the second request was never made
    used = SPENT.input + SPENT.output + model_tokens(end)
    assert end.stop_reason.message == f"Max tokens reached ({used}/5500)"


def model_tokens(end: al.AgentEnd) -> int:
    usage = end.usage_by_model["scripted"]
    return usage.input + usage.output
