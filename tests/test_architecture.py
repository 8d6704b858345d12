"""The shape of the package: no modules that import each other, no reaching into
another package's private modules. Read from the source (every import, lazy and
``TYPE_CHECKING`` ones included), so a new violation fails here first."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentloop"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in PACKAGE.rglob("*.py")}


def package_of(module: str) -> str:
    """The package a module belongs to (a package's face belongs to itself)."""
    path = MODULES[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imports(module: str) -> set[str]:
    """The agentloop modules ``module`` imports, anywhere in it."""
    tree = ast.parse(MODULES[module].read_text())
    base = package_of(module)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in MODULES}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target not in MODULES:
                continue
            for alias in node.names:  # "from . import x": the submodule x
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in MODULES else target)
    found.discard(module)
    return found


GRAPH = {module: imports(module) for module in MODULES}


def test_no_modules_import_each_other() -> None:
    """No circle: Tarjan's strongly connected components are all single modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in GRAPH[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(GRAPH):
        if node not in index:
            visit(node)
    assert circles == []


def test_no_module_imports_another_packages_private_module() -> None:
    """A private module (``_x``) is imported from its own package (or one nested in it),
    or is a top-level one (``agentloop._types``: the shared kernel); other packages go
    through the package's face (its ``__init__``)."""
    violations = []
    for module, targets in GRAPH.items():
        own = package_of(module)
        for target in targets:
            name = target.rpartition(".")[2]
            parent = target.rpartition(".")[0]
            is_private_module = name.startswith("_") and MODULES[target].name != "__init__.py"
            inside = own == parent or own.startswith(f"{parent}.")  # its package or a nested one
            if is_private_module and not inside and parent != "agentloop":
                violations.append(f"{module} -> {target}")
    assert sorted(violations) == []


def test_the_loop_core_imports_neither_the_driver_nor_trio_modules_of_its_package() -> None:
    assert GRAPH["agentloop._loop._core"].isdisjoint({"agentloop._loop._driver"})


def imported_names(module: str, source: str) -> set[str]:
    """The names ``module`` imports from the module ``source`` (``from source import x``)."""
    tree = ast.parse(MODULES[module].read_text())
    base = package_of(module)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                target = ".".join([*anchor, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target == source:
                names |= {alias.name for alias in node.names}
    return names


def test_the_loop_package_exports_only_what_other_modules_import() -> None:
    """Each name ``agentloop._loop`` exports is imported from it by a module outside it."""
    import agentloop._loop

    used: set[str] = set()
    for module in MODULES:
        if module != "agentloop._loop" and not module.startswith("agentloop._loop."):
            used |= imported_names(module, "agentloop._loop")
    assert sorted(set(agentloop._loop.__all__) - used) == []
    assert sorted(used - set(agentloop._loop.__all__)) == []


def test_the_core_and_both_drivers_share_the_contract_module() -> None:
    """The trio driver and the core import the contract itself; the Temporal workflow and
    its model activity take its actions, counts and request builder through the package."""
    protocol = "agentloop._loop._protocol"
    assert protocol in GRAPH["agentloop._loop._core"]
    assert protocol in GRAPH["agentloop._loop._driver"]
    workflow = imported_names("agentloop.temporal._workflow", "agentloop._loop")
    assert {"AskModel", "CallHook", "CHECKPOINT", "RunCalls", "RunCounts", "LoopCore"} <= workflow
    assert "model_request" in imported_names("agentloop.temporal._activities", "agentloop._loop")


def test_a_model_request_is_built_in_one_place_of_the_loop_and_its_drivers() -> None:
    """``ModelRequest(...)`` is called by ``_protocol.model_request`` alone, of the loop's
    and the Temporal driver's modules (compaction's summaries ask another question)."""
    builders = set()
    for module, path in MODULES.items():
        if module.startswith(("agentloop._loop", "agentloop.temporal")):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "ModelRequest"
                ):
                    builders.add(module)
    assert builders == {"agentloop._loop._protocol"}


def test_the_loop_cores_import_closure_loads_no_trio() -> None:
    """Sans-I/O holds for all the core imports, not only its own file: in a fresh
    interpreter, the core and its contract load no trio (nor sniffio, anyio, asyncio).
    The packages around them are stubbed, so only what the core imports is run: the
    face of ``agentloop`` loads the trio driver, as it must."""
    code = textwrap.dedent(
        f"""
        import importlib, sys, types
        for name in ("agentloop", "agentloop._loop"):
            package = types.ModuleType(name)
            package.__path__ = [{str(PACKAGE)!r} + name[len("agentloop"):].replace(".", "/")]
            sys.modules[name] = package
        importlib.import_module("agentloop._loop._core")
        importlib.import_module("agentloop._loop._protocol")
        heavy = ("trio", "sniffio", "anyio", "asyncio")
        print(sorted(m for m in sys.modules if m.split(".")[0] in heavy))
        print("agentloop._loop._driver" in sys.modules, "agentloop.providers" in sys.modules)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == ["[]", "False False"]
