"""Structured output: the typed final answer a run must end with.

:class:`Output` compiles a type (an attrs class, a dataclass, a TypedDict, any
type ``@tool`` accepts, or a JSON Schema dict) into what the loop core needs:
the schema the model is shown, a checker that names each problem by its
``$.path``, and a builder (cattrs) for the typed value. :class:`PartialJSON`
reads a JSON text as it streams, for the partial output events.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from .._errors import AgentloopError
from .._provider import OutputFormat, ToolDefinition
from .._text import MAX_JSON_DEPTH, JSONTooDeep, loads
from .._tool import Checker, check_arguments, check_tool_name, validator_for
from .._types import ToolCall

if TYPE_CHECKING:
    import cattrs

__all__ = [
    "OUTPUT_DESCRIPTION",
    "Output",
    "OutputError",
    "OutputMode",
    "PartialJSON",
    "as_output",
]

T = TypeVar("T")
OutputMode = Literal["tool", "native"]

#: The final-result tool's description, unless one is given.
OUTPUT_DESCRIPTION = (
    "Give your final answer. Call this once you have everything you need; "
    "the run ends with the answer you pass."
)
_WRAP_KEY = "result"


@functools.cache
def _converter() -> cattrs.Converter:
    """The converter typed outputs are built with, made on first use (cattrs is slow to import)."""
    import cattrs

    return cattrs.Converter()


class OutputError(AgentloopError):
    """A run that had to give a structured answer ended without one.

    ``stop`` (an :class:`~agentloop.AgentStop`) says why: the answers did not
    match the schema within the retries (``StopKind.OUTPUT_FAILED``), a limit
    was reached, the model's API failed, the run was aborted...
    """

    def __init__(self, stop: Any) -> None:
        super().__init__(stop)
        self.stop = stop

    def __str__(self) -> str:
        return f"the run ended without a valid output: {self.stop.message or self.stop.kind.value}"


def _is_strict(schema: Any) -> bool:
    """Whether every object in ``schema`` closes its properties and requires them all.

    OpenAI's strict structured outputs accept only such schemas.
    """
    if isinstance(schema, list):
        return all(_is_strict(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object":
        properties = schema.get("properties", {})
        if schema.get("additionalProperties") is not False or not isinstance(properties, dict):
            return False
        if sorted(schema.get("required", [])) != sorted(properties):
            return False
    return all(_is_strict(value) for value in schema.values())


class Output(Generic[T]):
    """What a run's final answer must be: a value of ``type``, checked, built, typed.

    Give it to an agent as ``output_type`` (a bare type is ``Output(type)``)::

        @attrs.frozen
        class City:
            name: str
            population: int

        agent = Agent(provider, output_type=City)
        city = await agent.run_output("The largest city in Peru?")  # a City

    ``type`` is an attrs class, a dataclass, a ``TypedDict``, any other type
    :func:`~agentloop.tool` accepts (``list[City]``, a ``Literal``...), or a JSON
    Schema dict (the value is then the JSON itself). A schema that is not an
    object is wrapped as ``{"result": ...}`` on the wire and unwrapped for you.

    With ``mode="tool"`` (the default) the model answers by calling a tool
    named ``name`` whose parameters are the schema; with ``mode="native"`` the
    provider's own JSON-schema mode is asked for (OpenAI ``response_format``,
    the Responses API's ``text.format``, Anthropic ``output_format``) and the
    reply's text is the answer. Either way the answer is checked against the
    schema; when it fails, the model is told each problem (``$.path:
    message``) and tries again, up to ``retries`` times, after which the run
    ends with ``StopKind.OUTPUT_FAILED``.

    Raises:
        TypeError: ``type`` has no JSON Schema, or cattrs cannot build it.
        ValueError: a JSON Schema dict is not valid JSON Schema, ``mode`` is
            unknown, ``name`` is not a valid tool name, or ``retries`` < 0.
    """

    __slots__ = (
        "_build",
        "_checker",
        "_wrapped",
        "definition",
        "description",
        "format",
        "mode",
        "name",
        "retries",
        "schema",
        "strict",
        "type",
        "wire_schema",
    )

    def __init__(
        self,
        type: Any,
        *,
        mode: OutputMode = "tool",
        name: str = "final_result",
        description: str = OUTPUT_DESCRIPTION,
        retries: int = 2,
    ) -> None:
        if mode not in ("tool", "native"):
            raise ValueError(f"Output mode must be 'tool' or 'native', got {mode!r}")
        check_tool_name(name)
        if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:  # type: ignore[redundant-expr]
            raise ValueError(f"Output retries must be an integer >= 0, got {retries!r}")
        build: Callable[[Any], Any]
        if isinstance(type, Mapping):
            schema = dict(type)
            import jsonschema.exceptions
            import jsonschema.validators

            try:
                json.dumps(schema, sort_keys=True, allow_nan=False)
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except (TypeError, ValueError) as error:
                raise ValueError(f"output schema is not JSON: {error}") from error
            except jsonschema.exceptions.SchemaError as error:
                raise ValueError(
                    f"output schema is not valid JSON Schema: {error.message}"
                ) from error

            def build(value: Any) -> Any:
                return value
        else:
            from .._tool import Unsupported, compile_type, type_name

            try:
                schema, _ = compile_type(type, ())
            except Unsupported as error:
                raise TypeError(
                    f"output_type {type_name(type)} has no JSON Schema{error.reason}; use an attrs "
                    "class, a dataclass, a TypedDict, a type @tool accepts, or a JSON Schema dict"
                ) from None
            try:
                hook = _converter().get_structure_hook(type)
            except Exception as error:  # cattrs raises several kinds for types it cannot build
                raise TypeError(f"cattrs cannot build {type_name(type)}: {error}") from error

            def build(value: Any) -> Any:
                return hook(value, type)

        self.type = type
        self.mode: OutputMode = mode
        self.name = name
        self.description = description
        self.retries = retries
        self.schema: dict[str, Any] = schema
        self._wrapped = schema.get("type") != "object"
        self.wire_schema: dict[str, Any] = (
            {
                "type": "object",
                "properties": {_WRAP_KEY: schema},
                "required": [_WRAP_KEY],
                "additionalProperties": False,
            }
            if self._wrapped
            else schema
        )
        self.strict = _is_strict(self.wire_schema)
        self._checker: Checker = validator_for(
            json.dumps(self.wire_schema, sort_keys=True, allow_nan=False)
        )
        self._build = build
        #: The final-result tool, as the model is shown it (``mode="tool"``).
        self.definition = ToolDefinition(name, description, self.wire_schema)
        #: The JSON-schema answer format providers ask for (``mode="native"``).
        self.format = OutputFormat(name, self.wire_schema, strict=self.strict)

    def __repr__(self) -> str:
        from .._tool import type_name

        kind = "schema" if isinstance(self.type, Mapping) else type_name(self.type)
        return f"Output({kind}, mode={self.mode!r}, name={self.name!r}, retries={self.retries})"

    def request_tools(self, definitions: tuple[ToolDefinition, ...]) -> tuple[ToolDefinition, ...]:
        """The tools a request carries: ``definitions``, and the final-result tool in tool mode."""
        return (*definitions, self.definition) if self.mode == "tool" else definitions

    @property
    def request_format(self) -> OutputFormat | None:
        """The answer format a request asks for: in native mode only."""
        return self.format if self.mode == "native" else None

    def check(self, call: ToolCall) -> tuple[T | None, str | None]:
        """The typed value of a final-result call, or what is wrong with it."""
        problem = check_arguments(call, self._checker)
        if problem is not None:
            return None, problem.message
        return self._typed(call.arguments)

    def parse(self, text: str) -> tuple[T | None, str | None]:
        """The typed value of an answer given as JSON text, or what is wrong with it."""
        try:
            value = loads(_strip_fence(text))
        except JSONTooDeep as error:
            return None, f"the answer is {error} (the most agentloop reads)"
        except ValueError as error:
            return None, f"the answer is not valid JSON ({error})"
        errors = sorted(
            self._checker.validator.iter_errors(value),
            key=lambda error: (tuple(str(part) for part in error.absolute_path), error.message),
        )
        if errors:
            return None, "; ".join(f"{error.json_path}: {error.message}" for error in errors)
        return self._typed(value)

    def _typed(self, value: Any) -> tuple[T | None, str | None]:
        if self._wrapped:
            value = value[_WRAP_KEY]
        try:
            return self._build(value), None
        except Exception as error:  # a value the schema allows but the type refuses
            return None, "; ".join(_cattrs_messages(error))

    def dump(self, value: T) -> Any:
        """``value`` as JSON-able data (what a sub-agent returns to its parent)."""
        if isinstance(self.type, Mapping):
            return value
        return _converter().unstructure(value, self.type)

    def load(self, data: Any) -> T:
        """The typed value of ``data`` as :meth:`dump` made it.

        Raises:
            ValueError: ``data`` does not match the type.
        """
        if isinstance(self.type, Mapping):
            return data  # type: ignore[no-any-return]
        try:
            return self._build(data)  # type: ignore[no-any-return]
        except Exception as error:
            raise ValueError("; ".join(_cattrs_messages(error))) from error

    def partial(self, data: Any) -> Any:
        """The partial JSON of the answer so far, unwrapped."""
        if self._wrapped and isinstance(data, dict):
            return data.get(_WRAP_KEY)
        return data


def _strip_fence(text: str) -> str:
    """The JSON inside a Markdown code fence, which models add now and then."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and "\n" in stripped:
        return stripped[stripped.index("\n") + 1 : -3]
    return stripped


def _cattrs_messages(error: Exception) -> list[str]:
    import cattrs

    if isinstance(error, cattrs.BaseValidationError):
        return [
            message.replace(" @ ", " at ") for message in cattrs.transform_error(error, path="$")
        ]
    return [f"$: {error}"]


def as_output(value: Any) -> Output[Any] | None:
    """``output_type`` as given (a type, a schema dict, an :class:`Output` or None)."""
    if value is None or isinstance(value, Output):
        return value
    return Output(value)


# --------------------------------------------------------------------------- partial JSON

# The rest of a string a piece began inside: up to its closing quote, or to a
# backslash that ends the piece.
_STRING_REST = re.compile(r'[^"\\]*+(?:\\.[^"\\]*+)*+', re.DOTALL)
# The rest of a number or a literal a piece began inside: up to a comma, a closing
# bracket or whitespace.
_SCALAR_REST = re.compile(r"[^,\]} \t\r\n]*+")
# One token: a string (group 1: its closing quote; group 2: a backslash that ends the
# piece), a bracket, a comma, or a number or literal. Whitespace and colons between
# tokens change nothing: the search skips them.
_TOKEN = re.compile(
    r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:(")|(\\))?|[\[\]{},]|[^,:\[\]{}" \t\r\n][^,\]} \t\r\n]*+',
    re.DOTALL,
)


class PartialJSON:
    """A JSON text read as it streams: :meth:`value` is the most of it that parses.

    Each :meth:`feed` reads only the new piece (skipping through strings,
    numbers and whitespace in C), remembering the last point up to which the
    text, with its open brackets closed, is valid JSON (and, inside a string
    value, the text so far). :meth:`value` then parses that much once.

    Calling :meth:`value` after every piece would parse the whole text each
    time: quadratic in its length. :meth:`due` says when a new value is worth
    parsing: it may have changed since the last :meth:`value`, and the pieces
    read since paid for it. A parse costs the text's length past its first
    :attr:`FREE` characters; each character read earns :attr:`WORK_FACTOR`. So
    a short text is parsed after every piece, a long one each time it has grown
    by about a quarter, and a reader asking only when due parses about
    :attr:`WORK_FACTOR` times the text's length in all. A text nested deeper than
    :data:`~agentloop._text.MAX_JSON_DEPTH` is read no further.

    >>> reader = PartialJSON()
    >>> reader.feed('{"name": "Li')
    >>> reader.value()
    {'name': 'Li'}
    >>> reader.feed('ma", "tags": [1, 2')
    >>> reader.value()
    {'name': 'Lima', 'tags': [1]}
    """

    #: What each character read earns towards parsing the text again (see :meth:`due`).
    WORK_FACTOR = 4
    #: How many characters at the start of the text cost nothing to parse again.
    FREE = 4096

    __slots__ = (
        "_changed",
        "_closers",
        "_credit",
        "_escape",
        "_good",
        "_in_string",
        "_key",
        "_parts",
        "_scalar",
        "_size",
        "_stopped",
        "_string_is_key",
        "_text",
    )

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._text = ""
        self._size = 0
        # The open containers' closing brackets, innermost last. They change only where
        # _good moves, so closing text[:good] takes exactly these.
        self._closers: list[str] = []
        self._key: list[bool] = []  # per open container: whether a key comes next (objects)
        self._in_string = False
        self._string_is_key = False
        self._escape = False
        self._scalar = False  # inside a number or a literal
        self._stopped = False  # nested deeper than MAX_JSON_DEPTH: read no further
        self._good = 0  # text[:good] + closers parses
        self._changed = False  # the value may differ from the last value()
        self._credit = 0

    def feed(self, piece: str) -> None:
        """Read the next piece of the text."""
        start = self._size
        end = len(piece)
        self._parts.append(piece)
        self._size += end
        self._credit += self.WORK_FACTOR * end
        if self._stopped or not end:
            return
        closers = self._closers
        keys = self._key
        good = self._good
        changed = self._changed
        index = 0
        if self._in_string:  # the piece goes on with a string
            if not self._string_is_key:
                changed = True  # the string value grows (the cut may drop an escape)
            if self._escape:
                self._escape = False
                index = 1
            index = _STRING_REST.match(piece, index).end()  # type: ignore[union-attr]
            if index < end:
                if piece[index] == "\\":  # a backslash ends the piece
                    self._escape = True
                    index = end
                else:
                    index += 1  # the closing quote
                    self._in_string = False
                    if self._string_is_key:
                        keys[-1] = False
                    else:
                        good = start + index
        elif self._scalar:  # the piece goes on with a number or a literal
            index = _SCALAR_REST.match(piece, index).end()  # type: ignore[union-attr]
            if index < end:
                self._scalar = False
                good = start + index
                changed = True
            elif not closers:
                changed = True  # a bare number: whole if it parses
        for token in _TOKEN.finditer(piece, index):
            char = token.group()[0]
            if char == '"':
                is_key = bool(keys) and keys[-1]
                if token.group(1) is not None:  # a whole string
                    if is_key:
                        keys[-1] = False
                    else:
                        good = start + token.end()
                        changed = True
                else:  # a string the next piece goes on with
                    self._in_string = True
                    self._string_is_key = is_key
                    self._escape = token.group(2) is not None
                    changed = changed or not is_key
            elif char == "{" or char == "[":
                if len(closers) == MAX_JSON_DEPTH:
                    self._stopped = True  # the answer will be refused whole
                    break
                closers.append("}" if char == "{" else "]")
                keys.append(char == "{")
                good = start + token.end()
                changed = True
            elif char == "}" or char == "]":
                if closers:
                    closers.pop()
                    keys.pop()
                good = start + token.end()
                changed = True
            elif char == ",":
                if keys and closers[-1] == "}":
                    keys[-1] = True
            elif token.end() < end:  # a whole number or literal
                good = start + token.end()
                changed = True
            else:  # a number or a literal the next piece may go on with
                self._scalar = True
                if not closers:
                    changed = True
        self._good = good
        self._changed = changed

    def due(self) -> bool:
        """Whether :meth:`value` may have changed and the text read since paid for it."""
        return self._changed and self._credit >= self._size - self.FREE

    @property
    def changed(self) -> bool:
        """Whether :meth:`value` may differ from what it last returned."""
        return self._changed

    def text(self) -> str:
        """All the text read so far."""
        if len(self._parts) > 1:
            self._text = "".join(self._parts)
            self._parts = [self._text]
        elif self._parts:
            self._text = self._parts[0]
        return self._text

    def value(self) -> Any:
        """The value so far: complete values, open containers closed, a string value cut
        where the text ends. ``None`` before anything parses. Costs the text's length."""
        self._changed = False
        self._credit = max(0, self._credit - max(0, self._size - self.FREE))
        text = self.text()
        closers = "".join(reversed(self._closers))
        if self._stopped:
            candidate = text[: self._good] + closers
        elif self._in_string and not self._string_is_key:
            cut = text[: len(text) - 1] if self._escape else text
            # A cut \\uXXXX escape would not parse: drop it.
            tail = cut.rfind("\\u", max(0, len(cut) - 5))
            if tail != -1 and not _escaped(cut, tail):
                cut = cut[:tail]
            candidate = cut + '"' + closers
        elif self._scalar and not self._closers:
            candidate = text  # a bare number or literal: whole if it parses
        else:
            candidate = text[: self._good] + closers
        # No depth check: the reader stops before the limit.
        try:
            return loads(candidate, max_depth=None)
        except ValueError:
            try:
                return loads(text[: self._good] + closers, max_depth=None)
            except ValueError:
                return None


def _escaped(text: str, index: int) -> bool:
    """Whether the backslash at ``index`` is itself escaped."""
    count = 0
    while index > 0 and text[index - 1] == "\\":
        count += 1
        index -= 1
    return count % 2 == 1
