"""JSON for every public value: one cattrs converter, and four helpers around it.

:func:`to_json` and :func:`from_json` turn messages, content blocks, events, stream
deltas, tool results, usage and :class:`~agentloop.PrunRecord` into JSON text and
back; :func:`to_dict` and :func:`from_dict` do the same with JSON-compatible Python
data (dicts, lists, strings, numbers, booleans, ``None``). :data:`converter` is the
configured :class:`cattrs.Converter` they use, for composing with your own types.

The wire format
---------------
Keys are the attribute names (snake_case). Every field is written, ``None`` as
``null``; tuples are lists; :class:`~agentloop.StopReason` and
:class:`~agentloop.ToolOutcome` are their values (``"tool_use"``, ``"timed_out"``);
``Usage``, ``ToolResult``, ``PrunRecord`` (and the other plain values) are plain
objects; ``ToolCall.arguments``, ``ToolResult.details`` and
``ToolExecutionStart.args`` are written as the JSON values they hold. Values that
are one of several classes carry a tag:

- content blocks, key ``"type"``: ``"text"``, ``"image"``, ``"thinking"``, ``"tool_call"``;
- messages, key ``"role"``: ``"user"``, ``"assistant"``, ``"tool_result"``;
- stream deltas, key ``"type"``: ``"text"``, ``"thinking"``, ``"tool_call"``, ``"restart"``;
- approval decisions, key ``"decision"``: ``"approve"``, ``"deny"``;
- events, key ``"type"``: the class name, ``"AgentStart"``, ``"ToolExecutionEnd"``...
  Every subclass of :class:`~agentloop.AgentEvent` is covered, including ones
  defined later, in any module: the tag is looked up among the subclasses alive
  when the data is read. Two live event classes with one name make that tag
  ambiguous, which is an error when reading it.

The tag is part of the class's format: it is written whatever the declared type,
and it is required (and must match) when reading, even into a concrete class. A
field with a default may be missing when reading; it takes its default (as the
constructor would: a missing ``timestamp`` is now). An
assistant message streaming a tool call, as a :class:`~agentloop.MessageUpdate`::

    {"type": "MessageUpdate", "loop_id": "main",
     "message": {"role": "assistant",
                 "content": [{"type": "thinking", "thinking": "Need the files.",
                              "signature": "sig-1", "redacted": false},
                             {"type": "tool_call", "id": "call_1", "name": "ls",
                              "arguments": {}, "raw_arguments": null}],
                 "stop_reason": "tool_use", "model": "m", "provider": "p",
                 "usage": {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0,
                           "total_tokens": 0, "reasoning": 0, "cost": 0.0},
                 "timestamp": 1700000000000, "error_message": null},
     "delta": {"type": "tool_call", "delta": "{\\"path\\"", "index": 1,
               "tool_call_id": "call_1", "name": "ls"}}

>>> from agentloop import Message, TextContent, UserMessage
>>> message = UserMessage((TextContent("hi"),), timestamp=1700000000000)
>>> to_dict(message)
{'role': 'user', 'content': [{'type': 'text', 'text': 'hi'}], 'timestamp': 1700000000000}
>>> to_json(message)
'{"content":[{"text":"hi","type":"text"}],"role":"user","timestamp":1700000000000}'
>>> from_json(to_json(message), Message) == message
True

The loop's own ``RunCounts`` (what a run's limits have counted), which a Temporal
run carries into its next execution, goes through the same converter.

:func:`to_json` is deterministic: keys sorted, no spaces, ASCII only (other
characters, lone surrogates included, are ``\\u`` escapes, so the text always
encodes as UTF-8), one line. NaN and infinities are refused (``ValueError``): they
are not JSON.

Reading into a union or a base class
------------------------------------
``type_`` may be a class (``UserMessage``, ``ToolResult``...), the base class
:class:`~agentloop.AgentEvent` (the tag picks the subclass; a concrete event class
accepts its own subclasses the same way), or one of the union aliases
:data:`~agentloop.Message`, :data:`~agentloop.Content`,
:data:`~agentloop.StreamDelta` and :data:`~agentloop.Decision` (the tag picks
the member), or a container of these (``list[AgentEvent]``,
``tuple[Message, ...]``). For a class, type checkers infer the result
(``from_json(text, UserMessage)`` is a ``UserMessage``);
for a union alias they infer ``Any``, so annotate: ``msg: Message = from_json(text,
Message)``.

Errors
------
:func:`from_dict` and :func:`from_json` raise :class:`DeserializationError` (a
``ValueError``) for any input they cannot turn into ``type_``: text that is not
JSON, an unknown or missing tag, a missing required field, an unknown key, a value
of the wrong JSON type (``"false"`` is not a boolean, ``1`` is not a string). Its
message names each problem with its JSON path (``@ $.content[0]``), ``errors``
lists them, and ``__cause__`` is the underlying (usually cattrs) exception. A
``type_`` the converter cannot handle at all (``ToolContext``) is a programming
error, not bad data: the exception from building its hook (cattrs'
``StructureHandlerNotFoundError``...) propagates unchanged. :data:`converter`
used directly raises cattrs' own exceptions (``ClassValidationError``...).
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar, overload

import attrs
import cattrs
from cattrs.errors import ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override
from cattrs.preconf.json import make_converter
from cattrs.v import format_exception

from ._approval import Approve, Deny
from ._errors import AgentloopError
from ._events import (
    AgentEvent,
    MessageUpdate,
    StreamRestart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from ._text import checked_text
from ._types import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "DeserializationError",
    "converter",
    "from_dict",
    "from_json",
    "to_dict",
    "to_json",
]

T = TypeVar("T")


class DeserializationError(AgentloopError, ValueError):
    """Data that cannot be read as the requested type.

    ``errors`` lists each problem found, as ``"<what> @ <JSON path>"``; the
    underlying exception is ``__cause__``.
    """

    def __init__(self, type_: object, errors: list[str]) -> None:
        self.type_name = _type_name(type_)
        self.errors = errors
        super().__init__(f"cannot read {self.type_name}: " + "; ".join(errors))


class _BadValue(ValueError):
    """A problem found by this module's own hooks; its message is shown as is."""


# --------------------------------------------------------------------------- tags


@attrs.frozen
class _Family:
    """Classes sharing one tag key: content blocks, messages, deltas or events."""

    key: str
    what: str  # "content type", "message role"...: how error messages name the tag


_CONTENT = _Family("type", "content type")
_MESSAGE = _Family("role", "message role")
_DELTA = _Family("type", "delta type")
_EVENT = _Family("type", "event type")
_DECISION = _Family("decision", "decision")

# The closed families: exactly these classes, exactly these tags.
_TAGS: Final[dict[type, tuple[_Family, str]]] = {
    TextContent: (_CONTENT, "text"),
    ImageContent: (_CONTENT, "image"),
    ThinkingContent: (_CONTENT, "thinking"),
    ToolCall: (_CONTENT, "tool_call"),
    UserMessage: (_MESSAGE, "user"),
    AssistantMessage: (_MESSAGE, "assistant"),
    ToolResultMessage: (_MESSAGE, "tool_result"),
    TextDelta: (_DELTA, "text"),
    ThinkingDelta: (_DELTA, "thinking"),
    ToolCallDelta: (_DELTA, "tool_call"),
    StreamRestart: (_DELTA, "restart"),
    Approve: (_DECISION, "approve"),
    Deny: (_DECISION, "deny"),
}


def _closed_tag(type_: Any) -> tuple[_Family, str] | None:
    try:
        return _TAGS.get(type_)
    except TypeError:  # an unhashable type form
        return None


def _is_event_class(type_: Any) -> bool:
    try:
        return isinstance(type_, type) and issubclass(type_, AgentEvent)
    except TypeError:
        return False


def _union_members(type_: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(type_) in (typing.Union, types.UnionType):
        return typing.get_args(type_)
    return None


def _tagged_union_family(type_: Any) -> _Family | None:
    """The family of a union of one family's classes (``None`` allowed), else None."""
    members = _union_members(type_)
    if members is None:
        return None
    families = set()
    for member in members:
        if member is type(None):
            continue
        tag = _closed_tag(member)
        if tag is None:
            return None
        families.add(tag[0])
    return families.pop() if len(families) == 1 else None


def _json_type(value: object) -> str:
    """How an error message names the JSON type of ``value``."""
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list() | tuple():
            return "an array"
        case Mapping():
            return "an object"
    return type(value).__name__


def _type_name(type_: object) -> str:
    members = _union_members(type_)
    if members is not None:
        return " | ".join(_type_name(member) for member in members)
    if type_ is type(None):
        return "None"
    if type_ is Ellipsis:
        return "..."
    args = typing.get_args(type_)
    if args:
        return f"{_type_name(typing.get_origin(type_))}[{', '.join(map(_type_name, args))}]"
    name = getattr(type_, "__name__", None)
    return name if isinstance(name, str) else repr(type_)


def _read_tag(data: object, family: _Family, expected: str) -> object:
    """Check that ``data`` is an object and return its tag (raising if it has none)."""
    if not isinstance(data, Mapping):
        raise _BadValue(f"expected an object tagged with {family.key!r}, got {_json_type(data)}")
    tag = data.get(family.key, _MISSING)
    if tag is _MISSING:
        raise _BadValue(f"missing {family.what} (key {family.key!r}); expected {expected}")
    return tag


_MISSING: Final = object()


def _init_keys(cls: type) -> frozenset[str]:
    return frozenset(a.alias for a in attrs.fields(cls) if a.init)


def _resolve_message(value: Any) -> Any:
    """A MessageUpdate's message as data: built first if it is still a builder."""
    message = value if isinstance(value, AssistantMessage) else value()
    return converter.unstructure(message, AssistantMessage)


def _overrides(cls: type, *, structure: bool) -> dict[str, Any]:
    """Per-field hooks: MessageUpdate's message may be held as a builder function."""
    if not issubclass(cls, MessageUpdate):
        return {}
    if structure:
        hook = override(struct_hook=lambda data, _: converter.structure(data, AssistantMessage))
    else:
        hook = override(unstruct_hook=_resolve_message)
    return {"_message": hook}


# --------------------------------------------------------------------------- hooks


def _make_tagged_unstructure(cls: type, family: _Family, tag: str) -> Callable[[Any], Any]:
    if any(a.name == family.key for a in attrs.fields(cls)):
        raise TypeError(f"{cls.__qualname__} has a field named {family.key!r}, its tag key")
    inner: Callable[[Any], dict[str, Any]] = make_dict_unstructure_fn(
        cls, converter, _cattrs_use_alias=True, **_overrides(cls, structure=False)
    )
    key = family.key

    if family is _EVENT:

        def unstructure_event(obj: Any) -> dict[str, Any]:
            if obj.__class__ is not cls:  # declared as a base class: use the real one
                return converter.unstructure(obj, obj.__class__)  # type: ignore[no-any-return]
            return {key: tag, **inner(obj)}

        return unstructure_event

    def unstructure(obj: Any) -> dict[str, Any]:
        return {key: tag, **inner(obj)}

    return unstructure


def _make_class_structure(cls: type, family: _Family, tag: str) -> Callable[[Any, Any], Any]:
    """Read ``cls`` from data carrying exactly its own tag."""
    inner: Callable[[Any, Any], Any] = make_dict_structure_fn(
        cls,
        converter,
        _cattrs_forbid_extra_keys=False,
        _cattrs_use_alias=True,
        **_overrides(cls, structure=True),
    )
    allowed = _init_keys(cls) | {family.key}

    def structure(data: Any, _: Any) -> Any:
        found = _read_tag(data, family, repr(tag))
        if found != tag:
            raise _BadValue(f"expected {family.what} {tag!r}, got {found!r}")
        if not allowed.issuperset(data):
            raise ForbiddenExtraKeysError("", cls, set(data) - allowed)
        return inner(data, cls)

    return structure


def _make_union_structure(union: Any) -> Callable[[Any, Any], Any]:
    """Read one member of a union of content blocks, messages or deltas, by its tag."""
    family = _tagged_union_family(union)
    assert family is not None
    members = [m for m in _union_members(union) or () if m is not type(None)]
    hooks = {_TAGS[m][1]: converter.get_structure_hook(m) for m in members}
    classes = {_TAGS[m][1]: m for m in members}
    allow_none = len(members) < len(_union_members(union) or ())
    expected = "one of " + ", ".join(repr(t) for t in sorted(hooks))

    def structure(data: Any, _: Any) -> Any:
        if data is None and allow_none:
            return None
        tag = _read_tag(data, family, expected)
        if not isinstance(tag, str) or tag not in hooks:
            raise _BadValue(f"unknown {family.what} {tag!r}; expected {expected}")
        return hooks[tag](data, classes[tag])

    return structure


def _event_classes_named(base: type, name: str) -> set[type]:
    """``base`` and its subclasses, alive now, whose name is ``name``."""
    found = set()
    stack = [base]
    seen = set()
    while stack:
        cls = stack.pop()
        if cls in seen:
            continue
        seen.add(cls)
        if cls.__name__ == name:
            found.add(cls)
        stack.extend(cls.__subclasses__())
    return found


def _make_event_structure(cls: type) -> Callable[[Any, Any], Any]:
    """Read ``cls`` or the subclass of it that the tag names (looked up at each call)."""
    own = _make_class_structure(cls, _EVENT, cls.__name__)
    expected = f"{cls.__name__} or the name of a subclass of it"

    def structure(data: Any, _: Any) -> Any:
        tag = _read_tag(data, _EVENT, expected)
        if not isinstance(tag, str):
            raise _BadValue(f"{_EVENT.what} must be a string, got {_json_type(tag)}")
        matches = _event_classes_named(cls, tag)
        if len(matches) > 1:
            # Decorating with a slotted attrs class creates a new class; the original
            # stays among the subclasses until it is garbage-collected. It is not an
            # attrs class in its own right: skip it.
            matches = {m for m in matches if "__attrs_attrs__" in m.__dict__} or matches
        if not matches:
            raise _BadValue(f"unknown {_EVENT.what} {tag!r}; expected {expected}")
        if len(matches) > 1:
            names = ", ".join(sorted(f"{m.__module__}.{m.__qualname__}" for m in matches))
            raise _BadValue(f"ambiguous {_EVENT.what} {tag!r}: several classes have it ({names})")
        (target,) = matches
        if target is cls:
            return own(data, cls)
        return converter.get_structure_hook(target)(data, target)

    return structure


# --------------------------------------------------------------------------- strict JSON scalars
# cattrs' defaults convert (``int("7")``, ``bool("false")`` is True); a wire format checks.


def _structure_str(value: Any, _: Any) -> str:
    if isinstance(value, str):
        return value
    raise _BadValue(f"expected a string, got {_json_type(value)}")


def _structure_int(value: Any, _: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise _BadValue(f"expected an integer, got {_json_type(value)}")


def _structure_float(value: Any, _: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise _BadValue(f"expected a number, got {_json_type(value)}")


def _structure_bool(value: Any, _: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _BadValue(f"expected a boolean, got {_json_type(value)}")


# --------------------------------------------------------------------------- the converter


def _is_fixed_tuple(type_: Any) -> bool:
    args = typing.get_args(type_)
    return typing.get_origin(type_) is tuple and not (len(args) == 2 and args[1] is Ellipsis)


def _fixed_tuple_unstructure(type_: Any) -> Callable[[Any], list[Any]]:
    args = typing.get_args(type_)
    return lambda value: [converter.unstructure(v, a) for v, a in zip(value, args, strict=True)]


def _make_converter() -> cattrs.Converter:
    conv = make_converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(bool, _structure_bool)
    # Fixed-size tuples (a permission subject's (kind, value)) are JSON arrays too.
    conv.register_unstructure_hook_factory(_is_fixed_tuple, _fixed_tuple_unstructure)
    conv.register_unstructure_hook(tuple, lambda value: [conv.unstructure(v) for v in value])
    # Registered last, so they take precedence over cattrs' own attrs and union hooks.
    conv.register_unstructure_hook_factory(
        lambda t: _closed_tag(t) is not None,
        lambda t: _make_tagged_unstructure(t, *_TAGS[t]),
    )
    conv.register_unstructure_hook_factory(
        _is_event_class, lambda t: _make_tagged_unstructure(t, _EVENT, t.__name__)
    )
    conv.register_structure_hook_factory(
        lambda t: _closed_tag(t) is not None,
        lambda t: _make_class_structure(t, *_TAGS[t]),
    )
    conv.register_structure_hook_factory(_is_event_class, _make_event_structure)
    conv.register_structure_hook_factory(
        lambda t: _tagged_union_family(t) is not None, _make_union_structure
    )
    return conv


converter: Final[cattrs.Converter] = _make_converter()
"""The configured converter behind :func:`to_dict` and :func:`from_dict`."""


# --------------------------------------------------------------------------- the helpers


def to_dict(value: object) -> Any:
    """Return ``value`` as JSON-compatible data (dicts, lists, str, int, float, bool, None).

    The value's own class decides the format, so a tuple or list of values works too.
    """
    return converter.unstructure(value)


def _format_error(exc: BaseException, type_: type | None) -> str:
    if isinstance(exc, _BadValue):
        return str(exc)
    text = format_exception(exc, type_)
    if isinstance(exc, ValueError | TypeError) and str(exc):
        text = f"{text}: {exc}"
    return text


@overload
def from_dict(data: object, type_: type[T]) -> T: ...
@overload
def from_dict(data: object, type_: object) -> Any: ...
def from_dict(data: object, type_: Any) -> Any:
    """Read ``data`` (as made by :func:`to_dict`) as ``type_``.

    ``type_`` is a class, :class:`~agentloop.AgentEvent`, or one of the union aliases
    ``Message``, ``Content``, ``StreamDelta``. Raises :class:`DeserializationError`.
    """
    hook = converter.get_structure_hook(type_)  # a bad type_ raises here, unchanged
    try:
        return hook(data, type_)
    except Exception as exc:
        errors = cattrs.transform_error(exc, format_exception=_format_error)
        raise DeserializationError(type_, errors) from exc


def to_json(value: object) -> str:
    """Return ``value`` as one line of JSON: keys sorted, no spaces, ASCII only.

    The same value always gives the same text. Raises ``ValueError`` for NaN or an
    infinite float and ``TypeError`` for a value JSON cannot hold (in ``details``).
    """
    return json.dumps(
        converter.unstructure(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
        allow_nan=False,
    )


def _reject_constant(name: str) -> Any:
    raise _BadValue(f"{name} is not a JSON number")


@overload
def from_json(text: str | bytes, type_: type[T]) -> T: ...
@overload
def from_json(text: str | bytes, type_: object) -> Any: ...
def from_json(text: str | bytes, type_: object) -> Any:
    """Read JSON text (as made by :func:`to_json`) as ``type_``; see :func:`from_dict`.

    Raises :class:`DeserializationError`, for text that is not JSON too.
    """
    try:
        data = json.loads(checked_text(text), parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN
        raise DeserializationError(type_, [f"invalid JSON: {exc}"]) from exc
    return from_dict(data, type_)
