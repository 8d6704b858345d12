"""One configuration value that Agent and SubAgentTool share; keyword settings on top."""

from __future__ import annotations

import attrs
import pytest
from helpers import Echo

import agentloop as al
from agentloop._loop import LoopSettings
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import SubAgentTool


def test_the_settings_are_exactly_the_configs_fields_but_provider_and_queues() -> None:
    fields = {field.name for field in attrs.fields(al.AgentLoopConfig)}
    queues = {"provider", "get_steering_messages", "get_follow_up_messages"}
    assert set(LoopSettings.__annotations__) == fields - queues


def test_the_simple_call_stays_simple() -> None:
    model = ScriptedProvider([reply("hi")])
    agent = al.Agent(model, system_prompt="Be brief.", tools=[Echo()])
    assert agent.config.provider is model
    assert agent.config.strategy == al.Parallel()
    assert agent.config.limits == al.ExecutionLimits()


async def test_a_config_is_shared_and_keywords_override_it() -> None:
    seen: list[str] = []
    model = ScriptedProvider(
        [reply(call("helper", {"task": "t"})), reply("child done"), reply("parent done")]
    )
    config = al.AgentLoopConfig(
        provider=model,
        limits=al.ExecutionLimits(max_turns=7),
        before_turn=lambda messages, index: seen.append(f"turn {index}") is None,
    )
    helper = SubAgentTool("helper", config)
    agent = al.Agent(config, tools=[helper], temperature=0.5)
    assert (agent.config.limits.max_turns, agent.config.temperature) == (7, 0.5)
    assert agent.config.get_steering_messages is not None  # the agent's own queues
    assert (helper.config.limits.max_turns, helper.config.temperature) == (7, None)
    assert helper.config.get_steering_messages is None  # the child has none
    await agent.run("go")
    # The hook is shared: it saw the parent's two turns and the child's one.
    assert seen == ["turn 0", "turn 0", "turn 1"]
    assert agent.messages[-1].text == "parent done"


def test_none_means_the_default_for_strategy_and_limits() -> None:
    agent = al.Agent(ScriptedProvider([]), strategy=None, limits=None)
    assert (agent.config.strategy, agent.config.limits) == (al.Parallel(), al.ExecutionLimits())


def test_an_unknown_setting_is_refused_by_name() -> None:
    with pytest.raises(TypeError) as caught:
        al.Agent(ScriptedProvider([]), max_turn=3)  # type: ignore[call-arg]
    assert str(caught.value) == "Agent() got an unexpected keyword argument 'max_turn'"
    with pytest.raises(TypeError) as caught:
        SubAgentTool("h", ScriptedProvider([]), tool_timeout=1, colour="red")  # type: ignore[call-arg]
    assert str(caught.value) == "SubAgentTool 'h' got an unexpected keyword argument 'colour'"


def test_a_sub_agent_keeps_its_turn_limit_default() -> None:
    helper = SubAgentTool("h", ScriptedProvider([]), max_turns=3)
    assert helper.config.limits == al.ExecutionLimits(
        max_turns=3, max_total_tokens=1_000_000, max_duration=300.0
    )
