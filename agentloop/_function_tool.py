"""The ``@tool`` decorator: an agentloop tool made from an async function.

The function's type hints become the JSON Schema of its arguments, its
docstring becomes the description the model reads, and its return value
becomes the :class:`~agentloop.ToolResult`.
"""

from __future__ import annotations

import enum
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Annotated, Any, Generic, Literal, ParamSpec, TypeAlias, TypeVar, overload

import attrs
import jsonschema

from ._tool import ToolContext, ToolError, ToolResult
from ._types import ImageContent, TextContent

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")

_Convert: TypeAlias = Callable[[Any], Any]


# --------------------------------------------------------------------------- the tool


@attrs.frozen(eq=False)
class FunctionTool(Generic[P, R]):
    """A tool made from an async function by :func:`tool`.

    It is an :class:`~agentloop.AgentTool`, and calling it calls the function,
    so the function can still be tested on its own::

        @tool
        async def add(a: int, b: int) -> int:
            return a + b

        assert await add(2, 3) == 5

    Tools compare by identity. Build them with :func:`tool`.

    Attributes:
        fn: The decorated function.
        name, label, description, parameters_schema, timeout: As in
            :class:`~agentloop.AgentTool`.
    """

    fn: Callable[P, Coroutine[Any, Any, R]]
    name: str
    label: str
    description: str = attrs.field(repr=False)
    parameters_schema: dict[str, Any] = attrs.field(repr=False)
    timeout: float | None = None
    _converters: Mapping[str, _Convert] = attrs.field(factory=dict, repr=False)
    _context_parameter: str | None = attrs.field(default=None, repr=False)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, R]:
        """Call the function, exactly as if it were not decorated."""
        return self.fn(*args, **kwargs)

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call the function with ``params`` as keyword arguments; convert what it returns.

        Enum arguments are turned back into members, and tuple, set and frozenset
        arguments into those types. The function's return value becomes a
        :class:`~agentloop.ToolResult`: a ``ToolResult`` as is, a ``str`` as
        text, ``None`` as empty text, a content block or a list of them as
        those blocks, and any other JSON value as its JSON text, with the value
        itself as ``details``.

        Raises:
            ToolError: the function returned something else.
            Exception: whatever the function raised, unchanged.
        """
        kwargs: dict[str, Any] = {}
        for key, value in params.items():
            convert = self._converters.get(key)
            kwargs[key] = value if convert is None else convert(value)
        if self._context_parameter is not None:
            kwargs[self._context_parameter] = ctx
        fn: Callable[..., Coroutine[Any, Any, object]] = self.fn
        return _to_result(self.name, await fn(**kwargs))


_CONTENT = (TextContent, ImageContent)


def _to_result(name: str, value: object) -> ToolResult:
    if isinstance(value, ToolResult):
        return value
    if isinstance(value, str):
        # str.__str__ gives the plain string of a subclass (a str-based Enum member, say).
        return ToolResult.text(str.__str__(value))
    if value is None:
        return ToolResult.text("")
    if isinstance(value, _CONTENT):
        return ToolResult((value,))
    if (
        isinstance(value, list | tuple)
        and value
        and all(isinstance(block, _CONTENT) for block in value)
    ):
        return ToolResult(value)
    if isinstance(value, dict | list | tuple | int | float):
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise ToolError(
                f"Tool {name!r} returned a {type(value).__name__} that is not "
                f"JSON-serializable: {error}"
            ) from error
        return ToolResult.text(text, details=value)
    raise ToolError(
        f"Tool {name!r} returned {type(value).__name__}, expected a ToolResult, str, None, "
        "content blocks or a JSON value"
    )


# --------------------------------------------------------------------------- the decorator


@overload
def tool(fn: Callable[P, Coroutine[Any, Any, R]], /) -> FunctionTool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], FunctionTool[P, R]]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
) -> FunctionTool[Any, Any] | Callable[[Callable[..., Any]], FunctionTool[Any, Any]]:
    '''Make a tool from an async function; use as ``@tool`` or ``@tool(...)``.

    The tool's name is the function's name, its label the name in words, its
    description the docstring without its ``Args:``, ``Returns:`` and
    ``Raises:`` sections. Each parameter becomes a property of
    ``parameters_schema``, described by its ``Args:`` entry or by an
    ``Annotated[type, "description"]`` hint; parameters with defaults are
    optional. A parameter annotated :class:`~agentloop.ToolContext` receives
    the call's context instead.

    >>> @tool
    ... async def read_file(path: str, limit: int = 100) -> str:
    ...     """Read a text file.
    ...
    ...     Args:
    ...         path: Relative to the project root.
    ...         limit: The most lines to return.
    ...     """
    ...     return "..."
    >>> read_file.name, read_file.label, read_file.description
    ('read_file', 'Read file', 'Read a text file.')
    >>> read_file.parameters_schema["properties"]["limit"]
    {'type': 'integer', 'description': 'The most lines to return.', 'default': 100}
    >>> read_file.parameters_schema["required"]
    ['path']

    Supported types: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``,
    ``Literal``, ``Enum`` subclasses, ``TypedDict``, ``list``, ``Sequence``,
    ``tuple``, ``set``, ``frozenset``, ``dict`` and ``Mapping`` with ``str``
    keys, unions and ``Annotated``. What the function returns becomes the
    result as described in :meth:`FunctionTool.execute`.

    Args:
        name: The tool's name, instead of the function's.
        label: The tool's label, instead of one made from its name.
        description: The tool's description, instead of the docstring's.
        timeout: Seconds a call may take, overriding the loop's ``tool_timeout``.

    Raises:
        TypeError: the function is not ``async def``; it has ``*args``,
            ``**kwargs`` or positional-only parameters; or a parameter's type
            has no JSON Schema.
        ValueError: ``timeout`` is not > 0.
    '''
    if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
        raise ValueError(f"@tool: timeout must be > 0 or None, got {timeout!r}")

    def decorate(fn: Callable[..., Any]) -> FunctionTool[Any, Any]:
        return _make_tool(fn, name=name, label=label, description=description, timeout=timeout)

    if fn is None:
        return decorate
    return decorate(fn)


def _make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    label: str | None,
    description: str | None,
    timeout: float | None,
) -> FunctionTool[Any, Any]:
    if isinstance(fn, str):
        raise TypeError(
            f"tool() takes an async function, got the string {fn!r}; "
            f"to name the tool, write @tool(name={fn!r})"
        )
    if not callable(fn):
        raise TypeError(f"tool() takes an async function, got {type(fn).__name__}")
    fn_name: str = getattr(fn, "__name__", type(fn).__name__)
    where = f"{fn_name}()"
    if inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"@tool: {where} is an async generator; a tool returns one result "
            "(send partial results with 'await ctx.update(...)')"
        )
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(
            f"@tool needs an async function: define {where} with 'async def', and run "
            "blocking work in it with 'await trio.to_thread.run_sync(...)'"
        )
    signature = inspect.signature(fn)
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"@tool: parameter *{parameter.name} of {where} is not supported; "
                "tool arguments are passed by name"
            )
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            raise TypeError(
                f"@tool: parameter **{parameter.name} of {where} is not supported; "
                "tool arguments are passed by name"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(
                f"@tool: parameter {parameter.name!r} of {where} is positional-only; "
                "tool arguments are passed by name"
            )
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as error:
        raise TypeError(f"@tool: cannot resolve the type hints of {where}: {error}") from error

    summary, documented = _parse_docstring(getattr(fn, "__doc__", None))
    properties: dict[str, Any] = {}
    required: list[str] = []
    converters: dict[str, _Convert] = {}
    context_parameter: str | None = None
    for parameter in signature.parameters.values():
        hint = hints.get(parameter.name, Any)
        if _strip_annotated(hint) is ToolContext:
            if context_parameter is not None:
                raise TypeError(
                    f"@tool: parameters {context_parameter!r} and {parameter.name!r} of "
                    f"{where} are both ToolContext; a tool takes at most one"
                )
            context_parameter = parameter.name
            continue
        try:
            schema, convert = _compile(hint, ())
        except _Unsupported as error:
            inner = "" if error.type is hint else f" (in {_type_name(hint)})"
            reason = error.reason or (
                "; use str, int, float, bool, None, Any, Literal, an Enum, a TypedDict, "
                "or a list, tuple, set, dict or union of these"
            )
            raise TypeError(
                f"@tool: parameter {parameter.name!r} of {where} has unsupported type "
                f"{_type_name(error.type)}{inner}{reason}"
            ) from None
        if "description" not in schema and documented.get(parameter.name):
            schema["description"] = documented[parameter.name]
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
        else:
            default = _json_default(parameter.default)
            if default is not _NO_DEFAULT:
                schema["default"] = default
        properties[parameter.name] = schema
        if convert is not None:
            converters[parameter.name] = convert

    parameters_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters_schema["required"] = required
    parameters_schema["additionalProperties"] = False
    tool_name = fn_name if name is None else name
    return FunctionTool(
        fn,
        name=tool_name,
        label=_label(tool_name) if label is None else label,
        description=summary if description is None else description,
        parameters_schema=parameters_schema,
        timeout=timeout,
        converters=converters,
        context_parameter=context_parameter,
    )


def _label(name: str) -> str:
    words = name.replace("_", " ")
    return words[:1].upper() + words[1:]


# --------------------------------------------------------------------------- docstrings

_SECTION = re.compile(r"(Args|Arguments|Parameters|Returns|Raises):\s*")
_ARGS_SECTIONS = frozenset({"Args", "Arguments", "Parameters"})
_ENTRY = re.compile(r"\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:(?P<text>.*)")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {parameter: description})."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    kept: list[str] = []
    documented: dict[str, str] = {}
    after_section = False
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        section = _SECTION.fullmatch(line)
        if section is None:
            if after_section:
                if not line.strip():
                    continue
                if kept:
                    kept.append("")
                after_section = False
            kept.append(line)
            continue
        body: list[str] = []
        while index < len(lines) and (not lines[index].strip() or lines[index][0].isspace()):
            body.append(lines[index])
            index += 1
        if section[1] in _ARGS_SECTIONS:
            documented.update(_parse_args(body))
        while kept and not kept[-1].strip():
            kept.pop()
        after_section = True
    while kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept), documented


def _parse_args(body: list[str]) -> dict[str, str]:
    entries: dict[str, list[str]] = {}
    indent: int | None = None
    current: list[str] | None = None
    for line in body:
        text = line.strip()
        if not text:
            continue
        width = len(line) - len(line.lstrip())
        if indent is None:
            indent = width
        if width > indent:  # a continuation line
            if current is not None:
                current.append(text)
            continue
        entry = _ENTRY.fullmatch(text)
        if entry is None:
            current = None
        else:
            current = entries.setdefault(entry["name"], [])
            current.append(entry["text"].strip())
    return {name: " ".join(part for part in parts if part) for name, parts in entries.items()}


# --------------------------------------------------------------------------- schemas


class _Unsupported(Exception):
    def __init__(self, tp: object, reason: str = "") -> None:
        super().__init__(tp, reason)
        self.type = tp
        self.reason = reason


_NO_DEFAULT = object()
_SCALARS: tuple[tuple[type, str], ...] = (
    (str, "string"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
)
_BARE_ARRAYS: dict[object, _Convert | None] = {
    list: None,
    typing.List: None,  # noqa: UP006
    Sequence: None,
    typing.Sequence: None,
    tuple: tuple,
    typing.Tuple: tuple,  # noqa: UP006
    set: set,
    typing.Set: set,  # noqa: UP006
    frozenset: frozenset,
    typing.FrozenSet: frozenset,  # noqa: UP006
}
_ARRAYS: dict[object, _Convert | None] = {
    list: None,
    Sequence: None,
    set: set,
    frozenset: frozenset,
}
_BARE_OBJECTS = (dict, typing.Dict, Mapping, typing.Mapping)  # noqa: UP006
_UNIONS = (typing.Union, types.UnionType)
_QUALIFIERS = frozenset({"Required", "NotRequired", "ReadOnly"})


def _qualifier(origin: object) -> str | None:
    """The name of a TypedDict qualifier (Required, NotRequired, ReadOnly); else None."""
    # Recognised by name, so typing_extensions' versions (ReadOnly before 3.13) count too.
    if type(origin).__module__ not in ("typing", "typing_extensions"):
        return None
    name = getattr(origin, "_name", None)
    return name if name in _QUALIFIERS else None


def _qualifiers(hint: object) -> set[str]:
    """The TypedDict qualifiers wrapping ``hint``, through any Annotated layers."""
    found: set[str] = set()
    while True:
        origin = typing.get_origin(hint)
        if origin is Annotated:
            hint = typing.get_args(hint)[0]
            continue
        qualifier = _qualifier(origin)
        if qualifier is None:
            return found
        found.add(qualifier)
        hint = typing.get_args(hint)[0]


def _type_name(tp: object) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def _strip_annotated(tp: object) -> object:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _json_scalar_type(value: object) -> str | None:
    """The JSON type of a scalar Literal or Enum value; None for anything else."""
    if isinstance(value, enum.Enum):
        return None
    if value is None:
        return "null"
    for python_type, json_type in _SCALARS:
        if isinstance(value, python_type):
            return json_type
    return None


def _compile(tp: Any, seen: tuple[type, ...]) -> tuple[dict[str, Any], _Convert | None]:
    """The JSON Schema of ``tp``, and a converter from its JSON form (None: keep as is)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        schema, convert = _compile(args[0], seen)
        text = next((item for item in tp.__metadata__ if isinstance(item, str)), None)
        if text is not None:
            schema["description"] = text
        return schema, convert
    if _qualifier(origin) is not None:
        return _compile(args[0], seen)
    try:
        hash(tp)
    except TypeError:
        raise _Unsupported(tp) from None
    if tp is Any:
        return {}, None
    if tp is None or tp is type(None):
        return {"type": "null"}, None
    for python_type, json_type in _SCALARS:
        if tp is python_type:
            return {"type": json_type}, None
    if origin is Literal:
        return _literal(tp, args), None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _enum(tp), tp
    if origin in _UNIONS:
        return _union(args, seen)
    if isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__"):
        return _typed_dict(tp, seen)
    if tp in _BARE_ARRAYS:
        return {"type": "array"}, _BARE_ARRAYS[tp]
    if tp in _BARE_OBJECTS:
        return {"type": "object"}, None
    if origin in _ARRAYS and len(args) == 1:
        items, convert = _compile(args[0], seen)
        return {"type": "array", "items": items}, _array_converter(_ARRAYS[origin], convert)
    if origin is tuple:
        return _tuple(args, seen)
    if origin in (dict, Mapping) and len(args) == 2:
        if args[0] is not str:
            raise _Unsupported(tp, ": JSON object keys are strings, so use dict[str, ...]")
        values, convert = _compile(args[1], seen)
        schema = {"type": "object", "additionalProperties": values}
        if convert is None:
            return schema, None
        return schema, lambda value: {key: convert(item) for key, item in value.items()}
    raise _Unsupported(tp)


def _literal(tp: object, values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {_json_scalar_type(value) for value in values}
    if None in kinds:
        raise _Unsupported(tp, ": Literal values must be str, int, float, bool or None")
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _enum(tp: type[enum.Enum]) -> dict[str, Any]:
    values = [member.value for member in tp]
    if any(_json_scalar_type(value) is None for value in values):
        raise _Unsupported(tp, ": its values must be str, int, float, bool or None")
    return {"enum": values}


def _union(args: tuple[Any, ...], seen: tuple[type, ...]) -> tuple[dict[str, Any], _Convert | None]:
    members = [arg for arg in args if arg is not type(None)]
    branches = [_compile(arg, seen) for arg in members]
    if len(members) < len(args):
        branches.append(({"type": "null"}, None))
    schema = {"anyOf": [branch_schema for branch_schema, _ in branches]}
    if all(convert is None for _, convert in branches):
        return schema, None
    # The loop has validated the value against the whole union; convert it the
    # way the first branch that accepts it says.
    matchers = [
        (jsonschema.Draft202012Validator(branch_schema), convert)
        for branch_schema, convert in branches
    ]

    def convert_union(value: Any) -> Any:
        for validator, branch_convert in matchers:
            if validator.is_valid(value):
                return value if branch_convert is None else branch_convert(value)
        return value

    return schema, convert_union


def _typed_dict(tp: type, seen: tuple[type, ...]) -> tuple[dict[str, Any], _Convert | None]:
    if tp in seen:
        raise _Unsupported(tp, ": recursive types are not supported")
    try:
        hints = typing.get_type_hints(tp, include_extras=True)
    except Exception as error:
        raise _Unsupported(tp, f": cannot resolve its type hints: {error}") from error
    # __required_keys__ misses Required/NotRequired written as strings (PEP 563
    # annotations on Python < 3.14), so the resolved hints have the last word.
    required_keys: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
    properties: dict[str, Any] = {}
    converters: dict[str, _Convert] = {}
    required: list[str] = []
    for key, hint in hints.items():
        properties[key], convert = _compile(hint, (*seen, tp))
        if convert is not None:
            converters[key] = convert
        qualifiers = _qualifiers(hint)
        if "Required" in qualifiers or (key in required_keys and "NotRequired" not in qualifiers):
            required.append(key)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    if not converters:
        return schema, None

    def convert_dict(value: dict[str, Any]) -> dict[str, Any]:
        return {
            key: item if key not in converters else converters[key](item)
            for key, item in value.items()
        }

    return schema, convert_dict


def _tuple(args: tuple[Any, ...], seen: tuple[type, ...]) -> tuple[dict[str, Any], _Convert | None]:
    if len(args) == 2 and args[1] is Ellipsis:
        items, convert = _compile(args[0], seen)
        return {"type": "array", "items": items}, _array_converter(tuple, convert)
    if not args:  # tuple[()]
        return {"type": "array", "maxItems": 0}, tuple
    compiled = [_compile(arg, seen) for arg in args]
    schema = {
        "type": "array",
        "prefixItems": [item_schema for item_schema, _ in compiled],
        "minItems": len(args),
        "maxItems": len(args),
    }
    converters = [convert for _, convert in compiled]

    def convert_tuple(value: list[Any]) -> tuple[Any, ...]:
        return tuple(
            item if item_convert is None else item_convert(item)
            for item, item_convert in zip(value, converters, strict=True)
        )

    return schema, convert_tuple


def _array_converter(container: _Convert | None, item: _Convert | None) -> _Convert | None:
    if item is None:
        return container
    make: _Convert = list if container is None else container
    return lambda value: make(item(element) for element in value)


def _json_default(value: object) -> object:
    """``value`` as JSON (Enum members as their values), or _NO_DEFAULT if it has none."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NO_DEFAULT
    if isinstance(value, list | tuple):
        items = [_json_default(item) for item in value]
        return _NO_DEFAULT if _NO_DEFAULT in items else items
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        converted = {key: _json_default(item) for key, item in value.items()}
        return _NO_DEFAULT if _NO_DEFAULT in converted.values() else converted
    return _NO_DEFAULT
