"""docs/api.md against the code: every public name is there, and every signature it
writes out is the real one (parameter names, order, kinds, and literal defaults)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest

API = Path(__file__).resolve().parent.parent / "docs" / "api.md"
_SECTION = re.compile(r"^## `(?P<module>agentloop[\w.]*)`\s*$", re.M)
_SPAN = re.compile(r"`(?P<kind>async def|def|class) (?P<name>\w+)\((?P<rest>[^`]*)`")


def _parameters(rest: str) -> str:
    """What stands between the parentheses that ``rest`` closes."""
    depth = 1
    for position, char in enumerate(rest):
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(char, 0)
        if depth == 0:
            return rest[:position]
    raise AssertionError(f"unbalanced: {rest!r}")


def _sections() -> dict[str, str]:
    text = API.read_text()
    found = list(_SECTION.finditer(text))
    return {
        match["module"]: text[match.end() : found[i + 1].start() if i + 1 < len(found) else None]
        for i, match in enumerate(found)
    }


def _written(params: str) -> list[tuple[str, str, str | None]]:
    """The parameters as written: (name, kind, default text or None)."""
    parsed = ast.parse(f"def f({' '.join(params.split())}): pass").body[0]
    assert isinstance(parsed, ast.FunctionDef)
    args = parsed.args
    out: list[tuple[str, str, str | None]] = []
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    for arg, default in zip(positional, defaults, strict=True):
        kind = "positional-only" if arg in args.posonlyargs else "positional"
        out.append((arg.arg, kind, None if default is None else ast.unparse(default)))
    if args.vararg is not None:
        out.append((args.vararg.arg, "*args", None))
    for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        out.append((arg.arg, "keyword", None if default is None else ast.unparse(default)))
    if args.kwarg is not None:
        out.append((args.kwarg.arg, "**kwargs", None))
    return out


_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "positional-only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
    inspect.Parameter.VAR_POSITIONAL: "*args",
    inspect.Parameter.KEYWORD_ONLY: "keyword",
    inspect.Parameter.VAR_KEYWORD: "**kwargs",
}


_UNITS = {"KiB": 1024, "MiB": 1024 * 1024}


def _literal(text: str) -> Any:
    """A default as written: a Python literal, or a product with ``KiB``/``MiB``."""
    tree = ast.parse(text, mode="eval").body
    if (
        isinstance(tree, ast.BinOp)
        and isinstance(tree.op, ast.Mult)
        and isinstance(tree.right, ast.Name)
        and tree.right.id in _UNITS
    ):
        return ast.literal_eval(tree.left) * _UNITS[tree.right.id]
    return ast.literal_eval(tree)


_UNKNOWN = object()  # a default the code computes elsewhere: not compared


def _real(value: Any, written: set[str]) -> list[tuple[str, str, Any, Any]]:
    """The parameters: (name, kind, default, converter). An attrs field's factory is
    called for its default; ``**options: Unpack[SomeTypedDict]`` stands for its keys,
    unless the page writes ``**options`` itself (a name in ``written``)."""
    fields = {f.alias: f for f in attrs.fields(value)} if attrs.has(value) else {}
    function = value.__init__ if inspect.isclass(value) else value
    parameters = inspect.signature(value).parameters.values()
    hints: dict[str, Any] = {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        hints = typing.get_type_hints(function, include_extras=True)
    out: list[tuple[str, str, Any, Any]] = []
    for p in parameters:
        hint = hints.get(p.name)
        if (
            p.kind is inspect.Parameter.VAR_KEYWORD
            and typing.get_origin(hint) is typing.Unpack
            and p.name not in written
        ):
            (options,) = typing.get_args(hint)
            out += [(key, "keyword", _UNKNOWN, None) for key in options.__annotations__]
            continue
        default, converter = p.default, None
        field = fields.get(p.name)
        if field is not None:
            converter = field.converter
            if isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
                factory = field.default.factory  # type: ignore[union-attr]
                default = _UNKNOWN if field.default.takes_self else factory()  # type: ignore[union-attr]
        out.append((p.name, _KINDS[p.kind], default, converter))
    return out


def _entries() -> list[Any]:
    found = []
    for module, text in _sections().items():
        for match in _SPAN.finditer(text):
            value = getattr(importlib.import_module(module), match["name"], None)
            if inspect.isclass(value) and issubclass(value, BaseException):
                continue  # ``class ToolError(AgentloopError)``: its base, not a signature
            params = " ".join(_parameters(match["rest"]).split())
            if params.startswith("self"):
                continue  # a protocol's method, shown for what to write
            found.append(
                pytest.param(module, match["name"], params, id=f"{module}.{match['name']}")
            )
    return found


@pytest.mark.parametrize(("module", "name", "params"), _entries())
def test_a_written_signature_is_the_real_one(module: str, name: str, params: str) -> None:
    value = getattr(importlib.import_module(module), name, None)
    assert value is not None, f"{module} has no {name}"
    written = _written(params)
    real = _real(value, {name for name, _, _ in written})
    assert [(n, k) for n, k, _ in written] == [(n, k) for n, k, _, _ in real]
    for (param, _, text), (_, _, default, converter) in zip(written, real, strict=True):
        if default is _UNKNOWN:
            continue
        assert (text is None) == (default is inspect.Parameter.empty), param
        if text is None:
            continue
        try:
            literal = _literal(text)
        except ValueError:
            continue  # a call or a name (Parallel(), estimate_tokens): not compared
        if literal is Ellipsis:
            continue  # "instructions=...": too long to write out
        converted = literal if converter is None else converter(literal)
        assert literal == default or repr(converted) == repr(default), param


@pytest.mark.parametrize("module", sorted(_sections()))
def test_every_public_name_is_in_its_section(module: str) -> None:
    text = _sections()[module]
    names = importlib.import_module(module).__all__
    missing = [name for name in names if not re.search(rf"\b{re.escape(name)}\b", text)]
    assert missing == []
