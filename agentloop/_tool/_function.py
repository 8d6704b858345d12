"""The ``@tool`` decorator: an agentloop tool made from an async function.

The function's type hints become the JSON Schema of its arguments, its
docstring becomes the description the model reads, and its return value
becomes the :class:`~agentloop.ToolResult`.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, overload

import attrs

from .._check import check_number
from .._types import ImageContent, TextContent
from ._protocol import ToolContext, ToolError, ToolResult
from ._schema import (
    NO_DEFAULT,
    Convert,
    Unsupported,
    compile_type,
    json_default,
    strip_annotated,
    type_name,
)

__all__ = ["FunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")


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
        name, label, description, parameters_schema, timeout, replay_safe: As
            in :class:`~agentloop.AgentTool`.
    """

    fn: Callable[P, Coroutine[Any, Any, R]]
    name: str
    label: str
    description: str = attrs.field(repr=False)
    parameters_schema: dict[str, Any] = attrs.field(repr=False)
    timeout: float | None = None
    replay_safe: bool = attrs.field(default=False, repr=False)
    _converters: Mapping[str, Convert] = attrs.field(factory=dict, repr=False)
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
    replay_safe: bool = False,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], FunctionTool[P, R]]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    label: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    replay_safe: bool = False,
) -> FunctionTool[Any, Any] | Callable[[Callable[..., Any]], FunctionTool[Any, Any]]:
    '''Make a tool from an async function; use as ``@tool`` or ``@tool(...)``.

    The tool's name is the function's name, its label the name in words, its
    description the docstring without its ``Args:``, ``Returns:`` and
    ``Raises:`` sections. Each parameter becomes a property of
    ``parameters_schema``, described by its ``Args:`` entry or by an
    ``Annotated[type, "description"]`` hint; parameters with defaults are
    optional. A parameter annotated :class:`~agentloop.ToolContext` receives
    the call's context instead.

    Supported types: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``,
    ``Literal``, ``Enum`` subclasses, ``TypedDict``, attrs classes and
    dataclasses (built from their ``__init__`` fields), ``list``, ``Sequence``,
    ``tuple``, ``set``, ``frozenset``, ``dict`` and ``Mapping`` with ``str``
    keys, unions and ``Annotated``. What the function returns becomes the
    result as described in :meth:`FunctionTool.execute`.

    Args:
        name: The tool's name, instead of the function's.
        label: The tool's label, instead of one made from its name.
        description: The tool's description, instead of the docstring's.
        timeout: Seconds a call may take, overriding the loop's ``tool_timeout``.
        replay_safe: Running a call again has no effect beyond the first run
            (read-only or idempotent): a session recovered after a crash may
            run it again.

    Raises:
        TypeError: the function is not ``async def``; it has ``*args``,
            ``**kwargs`` or positional-only parameters; or a parameter's type
            has no JSON Schema.
        ValueError: ``timeout`` is not > 0.

    Examples:
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
    '''
    check_number(timeout, "@tool: timeout", above=0, optional=True)

    def decorate(fn: Callable[..., Any]) -> FunctionTool[Any, Any]:
        return _make_tool(
            fn,
            name=name,
            label=label,
            description=description,
            timeout=timeout,
            replay_safe=replay_safe,
        )

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
    replay_safe: bool = False,
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
    converters: dict[str, Convert] = {}
    context_parameter: str | None = None
    for parameter in signature.parameters.values():
        hint = hints.get(parameter.name, Any)
        if strip_annotated(hint) is ToolContext:
            if context_parameter is not None:
                raise TypeError(
                    f"@tool: parameters {context_parameter!r} and {parameter.name!r} of "
                    f"{where} are both ToolContext; a tool takes at most one"
                )
            context_parameter = parameter.name
            continue
        try:
            schema, convert = compile_type(hint, ())
        except Unsupported as error:
            inner = "" if error.type is hint else f" (in {type_name(hint)})"
            reason = error.reason or (
                "; use str, int, float, bool, None, Any, Literal, an Enum, a TypedDict, "
                "an attrs class, a dataclass, or a list, tuple, set, dict or union of these"
            )
            raise TypeError(
                f"@tool: parameter {parameter.name!r} of {where} has unsupported type "
                f"{type_name(error.type)}{inner}{reason}"
            ) from None
        if "description" not in schema and documented.get(parameter.name):
            schema["description"] = documented[parameter.name]
        if parameter.default is inspect.Parameter.empty:
            required.append(parameter.name)
        else:
            default = json_default(parameter.default)
            if default is not NO_DEFAULT:
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
        replay_safe=replay_safe,
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
