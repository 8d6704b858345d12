"""The examples in agentloop's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

import agentloop


def _modules() -> list[ModuleType]:
    found = [agentloop]
    for info in pkgutil.walk_packages(agentloop.__path__, "agentloop."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            found.append(importlib.import_module(info.name))
        except ModuleNotFoundError as error:  # an optional extra that is not installed
            if (error.name or "agentloop").split(".")[0] == "agentloop":
                raise
    return found


MODULES = _modules()
FINDER = doctest.DocTestFinder(exclude_empty=True)


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    """Every ``>>>`` example of the module gives the output written under it."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in FINDER.find(module, module.__name__):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_the_examples_are_found() -> None:
    """The finder sees the docstring examples (a broken finder would pass everything)."""
    examples = sum(len(test.examples) for module in MODULES for test in FINDER.find(module))
    assert examples >= 40
