"""Every error agentloop raises is an ``AgentloopError``, and the tree in its
docstring draws every public one; the methods the docs name exist."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import agentloop
from agentloop import AgentloopError
from agentloop._tool._schema import Unsupported, compile_type

ROOT = Path(__file__).resolve().parent.parent

#: Exceptions of the package outside the tree, and why none reaches a user.
OUTSIDE_THE_TREE = {
    # A BaseException on purpose: it carries a user's hook error through the
    # loop's except clauses, and is unwrapped to that error at the boundary.
    "agentloop._util.HookFailure",
    # Control flow inside the OAuth flow; caught there and raised as McpAuthError.
    "agentloop.mcp._oauth._flow._Failed",
    # Caught inside the converter and raised as DeserializationError.
    "agentloop.serialization._BadValue",
    # Control flow of the Temporal workflow (ends in continue-as-new).
    "agentloop.temporal._workflow._ContinueAsNew",
    # Control flow of the Temporal workflow: a run cancelled while it awaits approval
    # ends aborted once its calls are denied; caught in the workflow.
    "agentloop.temporal._workflow._Abort",
}

PUBLIC_MODULES = (
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


def _package_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(agentloop.__path__, "agentloop."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("agentloop")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return found


def test_every_exception_of_the_package_is_an_agentloop_error() -> None:
    outside = {
        name
        for name, error in _package_exceptions().items()
        if not issubclass(error, AgentloopError)
    }
    assert outside == OUTSIDE_THE_TREE


def _public_errors() -> set[str]:
    names: set[str] = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, AgentloopError):
                names.add(value.__name__)
    return names


def test_the_drawn_tree_names_every_public_error_under_its_base() -> None:
    doc = inspect.getdoc(AgentloopError) or ""
    drawing = doc.split("The tree::", 1)[1].split("\n\n", 2)[1]
    depth_of: dict[str, int] = {}
    parent_of: dict[str, str] = {}
    stack: list[str] = []
    lines = drawing.splitlines()
    base = len(lines[0]) - len(lines[0].lstrip())
    for line in lines:
        match = re.match(r"^(?P<indent>[ │├└─]*)(?P<name>\w+)", line)
        assert match, line
        depth = (len(match["indent"]) - base) // 4
        name = match["name"]
        del stack[depth:]
        if stack:
            parent_of[name] = stack[-1]
        depth_of[name] = depth
        stack.append(name)
    assert set(depth_of) == _public_errors()
    for name, parent in parent_of.items():
        error = next(
            getattr(importlib.import_module(m), name)
            for m in PUBLIC_MODULES
            if name in importlib.import_module(m).__all__
        )
        assert error.__bases__[0].__name__ == parent, name


def test_a_type_without_a_schema_is_an_agentloop_error_and_a_type_error() -> None:
    with pytest.raises(Unsupported) as caught:
        compile_type(dict[int, str], ())
    assert isinstance(caught.value, AgentloopError)
    assert isinstance(caught.value, TypeError)
    assert str(caught.value) == (
        "dict[int, str] has no JSON Schema: JSON object keys are strings, so use dict[str, ...]"
    )


# ``agent.name(`` and the like in the docs and docstrings: the class such a variable
# holds there (one of these) has the method.
_RECEIVERS = {
    "agent": ("agentloop.Agent",),
    "session": ("agentloop.session.Session", "mcp.server.session.ServerSession"),
    "recorder": ("agentloop.session.SessionRecorder", "agentloop.testing.EventRecorder"),
    "bash": ("agentloop.tools.BashTool",),
    "connection": ("agentloop.mcp.McpConnection",),
    "servers": ("agentloop.mcp.McpServers",),
    "policy": ("agentloop.Permissions",),
}


def _docstrings(path: Path) -> str:
    """The docstrings of a module, its classes and functions, one after another."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found.append(doc)
    return "\n".join(found)


def _texts() -> list[tuple[str, str]]:
    texts = [(str(path.relative_to(ROOT)), path.read_text()) for path in ROOT.glob("docs/**/*.md")]
    texts.append(("README.md", (ROOT / "README.md").read_text()))
    texts += [
        (str(path.relative_to(ROOT)), _docstrings(path))
        for path in (ROOT / "agentloop").rglob("*.py")
    ]
    return texts


def test_every_method_the_docs_call_exists() -> None:
    classes = {}
    for receiver, dotted_names in _RECEIVERS.items():
        classes[receiver] = []
        for dotted in dotted_names:
            module, _, name = dotted.rpartition(".")
            classes[receiver].append(getattr(importlib.import_module(module), name))
    pattern = re.compile(r"\b(" + "|".join(_RECEIVERS) + r")\.([a-z_][a-z0-9_]*)\(")
    missing = []
    for where, text in _texts():
        for match in pattern.finditer(text):
            receiver, method = match.groups()
            if not any(hasattr(cls, method) for cls in classes[receiver]):
                line = text.count("\n", 0, match.start()) + 1
                at = f"{where} (a docstring)" if where.endswith(".py") else f"{where}:{line}"
                missing.append(f"{at}: {receiver}.{method}()")
    assert not missing, "\n".join(missing)
