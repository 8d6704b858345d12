"""The examples in agentloop's docstrings run and print what they show."""

from __future__ import annotations

import doctest
import importlib
import inspect
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
#: A public name's ``__module__`` is its public home (``agentloop``), so the finder
#: finds its examples there; they run in the module that defines it, as written.
_BY_FILE = {getattr(module, "__file__", None): module for module in MODULES}


def _defining_module(module: ModuleType, name: str) -> ModuleType | None:
    """The module whose source holds the object a doctest named ``name`` is about."""
    value: object = module
    for part in name.split(".")[len(module.__name__.split(".")) :]:
        value = getattr(value, part, None)
    functions = [value] if inspect.isfunction(value) else []
    if inspect.isclass(value):
        functions = [f for f in vars(value).values() if inspect.isfunction(f)]
    for function in functions:
        found = _BY_FILE.get(function.__code__.co_filename)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("module", MODULES, ids=lambda module: module.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    """Every ``>>>`` example of the module gives the output written under it."""
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in FINDER.find(module, module.__name__):
        home = _defining_module(module, test.name)
        if home is not None and home is not module:
            test.globs = vars(home).copy()
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


def test_the_examples_are_found() -> None:
    """The finder sees the docstring examples (a broken finder would pass everything)."""
    examples = sum(len(test.examples) for module in MODULES for test in FINDER.find(module))
    assert examples >= 40
