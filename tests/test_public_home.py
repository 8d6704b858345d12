"""Every public class and function says where users import it from: ``__module__`` is
a public module that has it under its own name, as in trio and httpx."""

from __future__ import annotations

import importlib
import inspect
import pickle
import types

import pytest

import agentloop as al

PUBLIC = (
    "agentloop",
    "agentloop.providers",
    "agentloop.tools",
    "agentloop.mcp",
    "agentloop.openapi",
    "agentloop.session",
    "agentloop.serialization",
    "agentloop.temporal",
    "agentloop.testing",
    "agentloop.otel",
    "agentloop.acp",
    "agentloop.web",
)


def _public_values() -> list[tuple[str, str]]:
    found = []
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type | types.FunctionType):
                found.append((module_name, name))
    return found


@pytest.mark.parametrize(("module_name", "name"), _public_values())
def test_a_public_name_lives_at_a_public_home(module_name: str, name: str) -> None:
    value = getattr(importlib.import_module(module_name), name)
    home = value.__module__
    assert not any(part.startswith("_") for part in home.split(".")), f"{name}: {home}"
    assert getattr(importlib.import_module(home), value.__qualname__) is value


def test_a_value_pickles_through_its_public_home() -> None:
    usage = al.Usage(input=3, output=4, total_tokens=7)
    assert pickle.loads(pickle.dumps(usage)) == usage
    assert type(usage).__module__ == "agentloop"
    assert inspect.getmodule(al.Agent) is al
