"""One configuration value that Agent and SubAgentTool share; keyword settings on top."""

from __future__ import annotations

import typing
from typing import Any

import attrs
import pytest
from helpers import Echo

import agentloop as al
from agentloop._loop import LoopSettings, _config
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import SubAgentTool

QUEUES = {"provider", "get_steering_messages", "get_follow_up_messages"}


def annotations(value: Any) -> dict[str, Any]:
    """``value``'s annotations, evaluated (the types themselves, whoever wrote them)."""
    names = {**vars(_config), **{name: getattr(al, name) for name in al.__all__}}
    found = typing.get_type_hints(value, localns=names, include_extras=True)
    return {name: note for name, note in found.items() if name != "return"}


def test_the_settings_are_exactly_the_configs_keywords_but_provider_and_queues() -> None:
    """LoopSettings (Agent's and SubAgentTool's keywords) cannot drift from the config's:
    the same names, each with the same type."""
    keywords = annotations(al.AgentLoopConfig.__init__)
    assert annotations(LoopSettings) == {
        name: note for name, note in keywords.items() if name not in QUEUES
    }


def test_the_configs_keywords_are_its_fields_and_each_hook() -> None:
    """Each field is a keyword, and so is each hook, with the hook's own type; the hooks
    are stored once, in ``hooks``."""
    keywords = annotations(al.AgentLoopConfig.__init__)
    fields = [field.name for field in attrs.fields(al.AgentLoopConfig)]
    hooks = annotations(al.Hooks)
    assert list(keywords) == fields + list(hooks)
    assert {name: keywords[name] for name in hooks} == hooks
    assert len(hooks) == 11


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


# --------------------------------------------------------------------------- hooks as one value


def test_a_hook_given_by_name_is_stored_once_in_hooks_and_read_by_name() -> None:
    def before_turn(messages: Any, turn_index: int) -> None:
        return None

    config = al.AgentLoopConfig(provider=ScriptedProvider([]), before_turn=before_turn)
    assert config.hooks == al.Hooks(before_turn=before_turn)
    assert config.before_turn is before_turn
    assert config.after_turn is None
    assert "before_turn" not in {field.name for field in attrs.fields(al.AgentLoopConfig)}


def test_evolve_sets_and_removes_a_hook_by_name() -> None:
    def first(messages: Any, turn_index: int) -> None:
        return None

    def second(messages: Any, usage: al.Usage) -> None:
        return None

    config = al.AgentLoopConfig(provider=ScriptedProvider([]), hooks=al.Hooks(before_turn=first))
    changed = attrs.evolve(config, after_turn=second, temperature=0.5)
    assert changed.hooks == al.Hooks(before_turn=first, after_turn=second)
    assert changed.temperature == 0.5
    removed = attrs.evolve(changed, before_turn=None)
    assert removed.hooks == al.Hooks(after_turn=second)
    assert attrs.evolve(removed, hooks=al.Hooks()).hooks == al.Hooks()


def test_a_hook_given_by_name_wins_over_the_same_hook_in_hooks() -> None:
    def mine(messages: Any, turn_index: int) -> None:
        return None

    def theirs(messages: Any, turn_index: int) -> None:
        return None

    config = al.AgentLoopConfig(
        provider=ScriptedProvider([]), hooks=al.Hooks(before_turn=theirs), before_turn=mine
    )
    assert config.hooks == al.Hooks(before_turn=mine)


def test_hooks_must_be_a_hooks_value() -> None:
    with pytest.raises(TypeError) as caught:
        al.AgentLoopConfig(provider=ScriptedProvider([]), hooks={"before_turn": print})  # type: ignore[arg-type]
    assert str(caught.value) == "hooks must be a Hooks, got dict"


def test_none_means_the_default_for_a_configs_strategy_and_limits_too() -> None:
    config = al.AgentLoopConfig(provider=ScriptedProvider([]), strategy=None, limits=None)
    assert (config.strategy, config.limits) == (al.Parallel(), al.ExecutionLimits())


async def test_an_agents_hooks_by_name_or_as_one_value_run_alike() -> None:
    """Agent(before_turn=...) and Agent(hooks=Hooks(before_turn=...)) are one setting."""
    seen: list[str] = []

    def before_turn(messages: Any, turn_index: int) -> bool:
        seen.append(f"turn {turn_index}")
        return False  # vetoes: the run ends before its first turn

    by_name = al.Agent(ScriptedProvider([reply("hi")]), before_turn=before_turn)
    as_one = al.Agent(ScriptedProvider([reply("hi")]), hooks=al.Hooks(before_turn=before_turn))
    assert by_name.config.hooks == as_one.config.hooks == al.Hooks(before_turn=before_turn)
    for agent in (by_name, as_one):
        async with agent.prompt("go") as events:
            ends = [event async for event in events if isinstance(event, al.AgentEnd)]
        assert ends[0].stop_reason == al.AgentStop(al.StopKind.VETOED, "before_turn returned False")
    assert seen == ["turn 0", "turn 0"]
