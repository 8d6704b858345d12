"""The tools of a run: their names, compiled schemas and traits; checking arguments."""

from __future__ import annotations

import functools
import json
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._check import check_number
from .._provider import ToolDefinition
from .._text import JSONTooDeep, loads
from .._types import ToolCall
from .._words import plural
from ._protocol import AgentTool, InvalidArgs, tool_traits
from ._schedule import Claim, claim_of

__all__ = [
    "Checker",
    "ToolEntry",
    "ToolRegistry",
    "check_arguments",
    "tool_traits",
    "validator_for",
]

_QUOTE_LIMIT = 2000


class ToolEntry:
    """One tool of a run: the tool, its compiled validator, its own timeout, its claims."""

    __slots__ = ("resources", "timeout", "tool", "validator")

    def __init__(
        self,
        tool: AgentTool,
        validator: Any,
        timeout: float | None,
        resources: Callable[[dict[str, Any]], Claim] | None = None,
    ) -> None:
        self.tool = tool
        self.validator = validator
        self.timeout = timeout
        self.resources = resources

    def claim(self, arguments: dict[str, Any]) -> Claim:
        """What a call with ``arguments`` needs while it runs (``resources`` must not
        change them).

        Raises:
            TypeError: ``resources`` did not return a :class:`~agentloop.Claim`.
        """
        return claim_of(self.resources, arguments)


# Compiling a schema (check_schema above all) takes about a millisecond. Validators are
# cached by the schema's canonical JSON, so fresh tool instances with the same schema
# (a new Agent per request, say) reuse them; a weak per-tool entry skips even the dumps.
_by_tool: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()


def _is_integer(value: object) -> bool:
    if isinstance(value, int):
        return not isinstance(value, bool)
    return isinstance(value, float) and value.is_integer()


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


# JSON Schema's types as the draft validators check them.
_TYPE_CHECKS: dict[str, Callable[[object], bool]] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "array": lambda value: isinstance(value, list),
    "object": lambda value: isinstance(value, dict),
}
_NOTES = frozenset({"description", "title", "$schema", "$comment", "examples"})


def _quick_check(schema: Mapping[str, Any]) -> Callable[[Any], bool] | None:
    """A fast exact test for the common flat schema, or None where it does not apply.

    The schema must be an object whose properties each have a plain ``type``
    (annotations aside), with ``required`` and ``additionalProperties`` (a
    bool). For such a schema the test accepts exactly what the validator
    accepts; where it says no, the validator runs to say why.
    """
    if schema.get("type") != "object" or not set(schema) <= _NOTES | {
        "type",
        "properties",
        "required",
        "additionalProperties",
    }:
        return None
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    closed = schema.get("additionalProperties", True) is False
    if not isinstance(properties, dict) or not isinstance(
        schema.get("additionalProperties", True), bool
    ):
        return None
    checks: dict[str, Callable[[object], bool]] = {}
    for name, subschema in properties.items():
        if not isinstance(subschema, dict) or not set(subschema) <= _NOTES | {"type"}:
            return None
        kind = subschema.get("type")
        check = _TYPE_CHECKS.get(kind) if isinstance(kind, str) else None
        if check is None:
            return None
        checks[name] = check
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        return None
    needed = tuple(required)

    def quick(instance: Any) -> bool:
        if not isinstance(instance, dict):
            return False
        for name in needed:
            if name not in instance:
                return False
        for name, value in instance.items():
            check = checks.get(name)
            if check is None:
                if closed:
                    return False
            elif not check(value):
                return False
        return True

    return quick


class Checker:
    """A tool's compiled schema: a quick exact test where one applies, and the validator."""

    __slots__ = ("quick", "validator")

    def __init__(self, validator: Any, quick: Callable[[Any], bool] | None) -> None:
        self.validator = validator
        self.quick = quick


_SIMPLE_TYPES = frozenset(_TYPE_CHECKS)
_TEXT_KEYWORDS = frozenset({"title", "description", "$comment"})
_ANY_KEYWORDS = frozenset({"default", "const"})
_FLAG_KEYWORDS = frozenset({"uniqueItems", "readOnly", "writeOnly", "deprecated"})
_COUNT_KEYWORDS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
_BOUND_KEYWORDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_SCHEMA_LISTS = frozenset({"anyOf", "oneOf", "allOf"})


def _plain(schema: object, depth: int = 0) -> bool:
    """Whether ``schema`` is valid JSON Schema (2020-12) for certain: built of common
    keywords with well-formed values, and nothing else.

    Checking a schema against the meta-schema takes about a millisecond, so a
    server listing 5,000 tools would hold its Agent's construction for
    seconds; most tools' schemas are plain, and this test takes microseconds.
    False means only: the meta-schema decides.
    """
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > 32:
        return False
    for key, value in schema.items():
        if key == "type":
            if isinstance(value, str):
                if value not in _SIMPLE_TYPES:
                    return False
            elif not (
                isinstance(value, list)
                and value
                and all(isinstance(kind, str) and kind in _SIMPLE_TYPES for kind in value)
                and len(set(value)) == len(value)
            ):
                return False
        elif key == "properties":
            if not isinstance(value, dict) or not all(
                _plain(item, depth + 1) for item in value.values()
            ):
                return False
        elif key == "items" or key == "additionalProperties" or key == "not":
            if not _plain(value, depth + 1):
                return False
        elif key == "required":
            if not (
                isinstance(value, list)
                and all(isinstance(name, str) for name in value)
                and len(set(value)) == len(value)
            ):
                return False
        elif key in _TEXT_KEYWORDS:
            if not isinstance(value, str):
                return False
        elif key == "enum" or key == "examples":
            if not isinstance(value, list):
                return False
        elif key in _FLAG_KEYWORDS:
            if not isinstance(value, bool):
                return False
        elif key in _COUNT_KEYWORDS:
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
                return False
        elif key in _BOUND_KEYWORDS:
            if not _is_number(value):
                return False
        elif key in _SCHEMA_LISTS:
            if not (
                isinstance(value, list) and value and all(_plain(item, depth + 1) for item in value)
            ):
                return False
        elif key not in _ANY_KEYWORDS:
            return False  # $ref, $schema, pattern, format...: the meta-schema checks them
    return True


@functools.lru_cache(maxsize=1024)
def validator_for(schema_json: str) -> Checker:
    import jsonschema.validators  # on first use: it costs ~20 ms at import

    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    if not _plain(schema):
        cls.check_schema(schema)
    return Checker(cls(schema), _quick_check(schema))


def compile_schema(tool: AgentTool) -> Any:
    """The validator of ``tool``'s arguments, compiled once (cached per tool and schema).

    Raises:
        TypeError: the schema is not a dict.
        ValueError: the schema is not JSON, or not valid JSON Schema.
    """
    schema = tool.parameters_schema
    try:
        cached = _by_tool.get(tool)
    except TypeError:  # not weak-referenceable
        cached = None
    if cached is not None and cached[0] is schema:
        return cached[1]
    if not isinstance(schema, Mapping):
        raise TypeError(f"tool {tool.name!r}: parameters_schema must be a dict, got {schema!r}")
    try:
        schema_json = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"tool {tool.name!r}: parameters_schema is not JSON: {error}") from error
    import jsonschema.exceptions

    try:
        validator = validator_for(schema_json)
    except jsonschema.exceptions.SchemaError as error:
        raise ValueError(
            f"tool {tool.name!r} has an invalid parameters_schema: {error.message}"
        ) from error
    try:
        _by_tool[tool] = (schema, validator)
    except TypeError:
        pass
    return validator


class ToolRegistry:
    """The tools of one run, by name, with their schemas compiled once.

    Raises:
        ValueError: two tools share a name, a schema is not valid JSON Schema,
            or a tool's ``timeout`` is not positive.
        TypeError: an object is not a tool.
    """

    __slots__ = ("_entries", "definitions")

    def __init__(self, tools: Iterable[AgentTool]) -> None:
        self._entries: dict[str, ToolEntry] = {}
        for tool in tools:
            for attribute in ("name", "label", "description", "parameters_schema", "execute"):
                if not hasattr(tool, attribute):
                    raise TypeError(f"{tool!r} is not a tool: it has no {attribute!r}")
            if tool.name in self._entries:
                raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
            traits = tool_traits(tool)
            timeout = traits.timeout
            check_number(timeout, f"tool {tool.name!r}: timeout", above=0, optional=True)
            self._entries[tool.name] = ToolEntry(
                tool, compile_schema(tool), timeout, traits.resources
            )
        self.definitions = tuple(
            ToolDefinition(e.tool.name, e.tool.description, e.tool.parameters_schema)
            for e in self._entries.values()
        )

    def get(self, name: str) -> ToolEntry | None:
        return self._entries.get(name)


def _quote(text: str) -> str:
    if len(text) <= _QUOTE_LIMIT:
        return text
    return f"{text[:_QUOTE_LIMIT]}... ({plural(len(text) - _QUOTE_LIMIT, 'more character')})"


def _json_error(text: str) -> str:
    try:
        value = loads(text)
    except JSONTooDeep as error:
        return f"{error} (the most agentloop reads)"
    except ValueError as error:
        return f"not valid JSON ({error})"
    kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
    return f"not a JSON object (got {kind})"


def check_arguments(
    call: ToolCall, validator: Checker, *, cut_off: bool = False
) -> InvalidArgs | None:
    """The arguments' problems as one InvalidArgs, or None if they are valid.

    ``cut_off``: the reply stopped at its max_tokens limit, so unusable arguments
    were most likely cut short, and the model is told so.
    """
    if call.raw_arguments is not None and cut_off:
        return InvalidArgs(
            "the reply reached its max_tokens limit before this tool call's arguments were "
            f"complete, so it was not run. Received: {_quote(call.raw_arguments)}"
        )
    if call.raw_arguments is not None:
        return InvalidArgs(
            f"the arguments are {_json_error(call.raw_arguments)}. "
            f"Received: {_quote(call.raw_arguments)}"
        )
    quick = validator.quick
    if quick is not None and quick(call.arguments):
        return None
    errors = list(validator.validator.iter_errors(call.arguments))
    if not errors:
        return None
    errors.sort(key=lambda error: (tuple(str(part) for part in error.absolute_path), error.message))
    return InvalidArgs("; ".join(f"{error.json_path}: {error.message}" for error in errors))
