"""Python type hints as JSON Schema, with converters back from the JSON values.

Used by :func:`agentloop.tool` to build a tool's ``parameters_schema`` from its
function's signature.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, TypeAlias

import attrs

from .._errors import AgentloopError

__all__ = [
    "NO_DEFAULT",
    "Convert",
    "Unsupported",
    "compile_type",
    "json_default",
    "strip_annotated",
    "type_name",
]

Convert: TypeAlias = Callable[[Any], Any]


class Unsupported(AgentloopError, TypeError):
    """A Python type has no JSON Schema here; ``reason`` (empty, or ``": why"``) says why."""

    def __init__(self, tp: object, reason: str = "") -> None:
        super().__init__(f"{type_name(tp)} has no JSON Schema{reason}")
        self.type = tp
        self.reason = reason


NO_DEFAULT = object()
_SCALARS: tuple[tuple[type, str], ...] = (
    (str, "string"),
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
)
_BARE_ARRAYS: dict[object, Convert | None] = {
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
_ARRAYS: dict[object, Convert | None] = {
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


def type_name(tp: object) -> str:
    if isinstance(tp, type):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def strip_annotated(tp: object) -> object:
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


def compile_type(tp: Any, seen: tuple[type, ...]) -> tuple[dict[str, Any], Convert | None]:
    """The JSON Schema of ``tp``, and a converter from its JSON form (None: keep as is)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        schema, convert = compile_type(args[0], seen)
        text = next((item for item in tp.__metadata__ if isinstance(item, str)), None)
        if text is not None:
            schema["description"] = text
        return schema, convert
    if _qualifier(origin) is not None:
        return compile_type(args[0], seen)
    try:
        hash(tp)
    except TypeError:
        raise Unsupported(tp) from None
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
    if isinstance(tp, type) and (attrs.has(tp) or dataclasses.is_dataclass(tp)):
        return _record(tp, seen)
    if tp in _BARE_ARRAYS:
        return {"type": "array"}, _BARE_ARRAYS[tp]
    if tp in _BARE_OBJECTS:
        return {"type": "object"}, None
    if origin in _ARRAYS and len(args) == 1:
        items, convert = compile_type(args[0], seen)
        return {"type": "array", "items": items}, _array_converter(_ARRAYS[origin], convert)
    if origin is tuple:
        return _tuple(args, seen)
    if origin in (dict, Mapping) and len(args) == 2:
        if args[0] is not str:
            raise Unsupported(tp, ": JSON object keys are strings, so use dict[str, ...]")
        values, convert = compile_type(args[1], seen)
        schema = {"type": "object", "additionalProperties": values}
        if convert is None:
            return schema, None
        return schema, lambda value: {key: convert(item) for key, item in value.items()}
    raise Unsupported(tp)


def _literal(tp: object, values: tuple[Any, ...]) -> dict[str, Any]:
    kinds = {_json_scalar_type(value) for value in values}
    if None in kinds:
        raise Unsupported(tp, ": Literal values must be str, int, float, bool or None")
    if kinds == {"integer", "number"}:
        kinds = {"number"}
    schema: dict[str, Any] = {"enum": list(values)}
    if len(kinds) == 1:
        schema = {"type": kinds.pop(), **schema}
    return schema


def _enum(tp: type[enum.Enum]) -> dict[str, Any]:
    values = [member.value for member in tp]
    if any(_json_scalar_type(value) is None for value in values):
        raise Unsupported(tp, ": its values must be str, int, float, bool or None")
    return {"enum": values}


def _union(args: tuple[Any, ...], seen: tuple[type, ...]) -> tuple[dict[str, Any], Convert | None]:
    members = [arg for arg in args if arg is not type(None)]
    branches = [compile_type(arg, seen) for arg in members]
    if len(members) < len(args):
        branches.append(({"type": "null"}, None))
    schema = {"anyOf": [branch_schema for branch_schema, _ in branches]}
    if all(convert is None for _, convert in branches):
        return schema, None
    # The loop has validated the value against the whole union; convert it the
    # way the first branch that accepts it says.
    import jsonschema  # here, not at the top: it is slow to import

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


def _field_hints(tp: type, seen: tuple[type, ...]) -> dict[str, Any]:
    """The resolved type hints of a TypedDict or a record, not already being compiled."""
    if tp in seen:
        raise Unsupported(tp, ": recursive types are not supported")
    try:
        return typing.get_type_hints(tp, include_extras=True)
    except Exception as error:
        raise Unsupported(tp, f": cannot resolve its type hints: {error}") from error


def _typed_dict(tp: type, seen: tuple[type, ...]) -> tuple[dict[str, Any], Convert | None]:
    hints = _field_hints(tp, seen)
    # __required_keys__ misses Required/NotRequired written as strings (PEP 563
    # annotations on Python < 3.14), so the resolved hints have the last word.
    required_keys: frozenset[str] = getattr(tp, "__required_keys__", frozenset())
    properties: dict[str, Any] = {}
    converters: dict[str, Convert] = {}
    required: list[str] = []
    for key, hint in hints.items():
        properties[key], convert = compile_type(hint, (*seen, tp))
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


def _record(tp: type, seen: tuple[type, ...]) -> tuple[dict[str, Any], Convert | None]:
    """An attrs class or a dataclass: an object of its init fields; built by calling it."""
    hints = _field_hints(tp, seen)
    # (name in JSON, keyword of __init__, has a default)
    fields: list[tuple[str, str, bool]] = []
    if attrs.has(tp):
        for field in attrs.fields(tp):
            if field.init:
                fields.append(
                    (field.name, field.alias or field.name, field.default is not attrs.NOTHING)
                )
    else:
        for item in dataclasses.fields(tp):
            if item.init:
                has_default = (
                    item.default is not dataclasses.MISSING
                    or item.default_factory is not dataclasses.MISSING
                )
                fields.append((item.name, item.name, has_default))
    properties: dict[str, Any] = {}
    converters: dict[str, Convert] = {}
    keywords: dict[str, str] = {}
    required: list[str] = []
    for name, keyword, has_default in fields:
        if name not in hints:
            raise Unsupported(tp, f": field {name!r} has no type annotation")
        properties[name], convert = compile_type(hints[name], (*seen, tp))
        if convert is not None:
            converters[name] = convert
        keywords[name] = keyword
        if not has_default:
            required.append(name)
    schema: dict[str, Any] = {"type": "object"}
    doc = _own_doc(tp)
    if doc:
        schema["description"] = doc
    schema["properties"] = properties
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False

    def build(value: dict[str, Any]) -> Any:
        return tp(
            **{
                keywords[key]: item if key not in converters else converters[key](item)
                for key, item in value.items()
            }
        )

    return schema, build


def _own_doc(tp: type) -> str:
    """The class's own docstring, first paragraph; not the one attrs or dataclasses make up."""
    doc = tp.__dict__.get("__doc__")
    if not isinstance(doc, str) or (
        dataclasses.is_dataclass(tp) and doc.startswith(tp.__name__ + "(")
    ):
        return ""
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ").strip()


def _tuple(args: tuple[Any, ...], seen: tuple[type, ...]) -> tuple[dict[str, Any], Convert | None]:
    if len(args) == 2 and args[1] is Ellipsis:
        items, convert = compile_type(args[0], seen)
        return {"type": "array", "items": items}, _array_converter(tuple, convert)
    if not args:  # tuple[()]
        return {"type": "array", "maxItems": 0}, tuple
    compiled = [compile_type(arg, seen) for arg in args]
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


def _array_converter(container: Convert | None, item: Convert | None) -> Convert | None:
    if item is None:
        return container
    make: Convert = list if container is None else container
    return lambda value: make(item(element) for element in value)


def json_default(value: object) -> object:
    """``value`` as JSON (Enum members as their values), or NO_DEFAULT if it has none."""
    if isinstance(value, enum.Enum):
        value = value.value
    if value is None or isinstance(value, str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else NO_DEFAULT
    if isinstance(value, list | tuple):
        items = [json_default(item) for item in value]
        return NO_DEFAULT if NO_DEFAULT in items else items
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        converted = {key: json_default(item) for key, item in value.items()}
        return NO_DEFAULT if NO_DEFAULT in converted.values() else converted
    return NO_DEFAULT
