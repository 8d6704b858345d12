"""The agents a worker can run, by name: factories that build an ``Agent``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping

from .._agent import Agent

__all__ = ["AgentFactory", "factory", "load_agents", "register"]

AgentFactory = Callable[[], Agent]
"""Builds the agent of a name: its provider, tools, system prompt and settings."""

_FACTORIES: dict[str, AgentFactory] = {}
_BUILT: dict[str, Agent] = {}


def register(agents: Mapping[str, AgentFactory]) -> None:
    """Make ``agents`` known to this process's workflows and activities."""
    for name, make in agents.items():
        if not callable(make):
            raise TypeError(f"the agent factory for {name!r} is not callable: {make!r}")
        _FACTORIES[name] = make
        _BUILT.pop(name, None)


def factory(name: str) -> Agent:
    """The agent ``name``, built once per process (its tools and provider are reused).

    Raises:
        LookupError: no factory has that name in this worker.
    """
    agent = _BUILT.get(name)
    if agent is None:
        make = _FACTORIES.get(name)
        if make is None:
            known = ", ".join(sorted(_FACTORIES)) or "none"
            raise LookupError(f"no agent named {name!r} in this worker (known: {known})")
        built: object = make()
        if not isinstance(built, Agent):
            raise TypeError(f"the factory for {name!r} returned {built!r}, not an Agent")
        agent = _BUILT[name] = built
    return agent


def load_agents(spec: str) -> Mapping[str, AgentFactory]:
    """The mapping named by ``"module:attribute"`` (e.g. ``"myapp.agents:AGENTS"``).

    Raises:
        ValueError: ``spec`` is not ``module:attribute``, or names no mapping.
        ImportError: the module cannot be imported.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"--agents takes module:attribute, got {spec!r}")
    value = getattr(importlib.import_module(module_name), attribute, None)
    if not isinstance(value, Mapping):
        raise ValueError(f"{spec} is not a mapping of names to agent factories: {value!r}")
    return value
