"""agentloop.serialization: the JSON wire format of every public value."""

from __future__ import annotations

import importlib
import json
import math
import pkgutil
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import (
    STRATEGIES,
    approves,
    content_blocks,
    denies,
    events,
    messages,
    run_counts,
    stream_deltas,
)

import agentloop as al
from agentloop._loop import RunCounts
from agentloop.serialization import DeserializationError, from_dict, from_json, to_dict, to_json

# Public attrs classes that are not values: they hold live state, providers or callbacks.
NOT_VALUES = {
    "AgentContext",
    "AgentLoopConfig",
    "CompactionConfig",  # holds the summarizer function
    "FunctionTool",
    "Hooks",  # holds functions
    "Permissions",  # holds the approver function
    "ProjectInstructions",  # files on this machine, read at start: never sent anywhere
    "ToolContext",
}

TS = 1_700_000_000_000


def _name(type_: Any) -> str:
    return str(type_.__name__)


def _is_json_data(value: object) -> bool:
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list):
        return all(_is_json_data(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json_data(v) for k, v in value.items())
    return False


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("type_", list(STRATEGIES), ids=_name)
@given(data=st.data())
def test_round_trip_through_json(type_: type, data: st.DataObject) -> None:
    """from_json(to_json(x), type(x)) gives back an equal value of the same class."""
    value = data.draw(STRATEGIES[type_])
    back = from_json(to_json(value), type(value))
    assert type(back) is type(value)
    assert back == value


@pytest.mark.parametrize("type_", list(STRATEGIES), ids=_name)
@given(data=st.data())
def test_to_dict_returns_plain_json_data(type_: type, data: st.DataObject) -> None:
    """to_dict gives only dicts with str keys, lists, str, int, float, bool and None."""
    assert _is_json_data(to_dict(data.draw(STRATEGIES[type_])))


@pytest.mark.parametrize(
    ("union", "strategy"),
    [
        (al.Message, messages()),
        (al.Content, content_blocks()),
        (al.StreamDelta, stream_deltas()),
        (al.AgentEvent, events()),
        (al.Decision, approves | denies),
    ],
    ids=["Message", "Content", "StreamDelta", "AgentEvent", "Decision"],
)
@given(data=st.data())
def test_union_or_base_class_picks_the_tagged_class(
    union: Any, strategy: st.SearchStrategy[Any], data: st.DataObject
) -> None:
    """Reading into a union alias or AgentEvent returns an equal value of the right class."""
    value = data.draw(strategy)
    back = from_json(to_json(value), union)
    assert type(back) is type(value)
    assert back == value


@given(st.lists(events(), max_size=4))
def test_list_of_events_reads_through_list_of_base(values: list[al.AgentEvent]) -> None:
    """A list of mixed events reads back through list[AgentEvent], each as its own class."""
    back = from_json(to_json(values), list[al.AgentEvent])
    assert [type(v) for v in back] == [type(v) for v in values]
    assert back == values


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _agentloop_event_classes() -> set[str]:
    """Every subclass of AgentEvent defined in agentloop (qualified names), all modules loaded.

    Names, not classes: a slotted attrs class leaves its undecorated original among the
    subclasses until the garbage collector runs.
    """
    for module in pkgutil.walk_packages(al.__path__, "agentloop."):
        if module.name.rsplit(".", 1)[-1] == "__main__":
            continue
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as exc:  # an optional extra that is not installed
            if (exc.name or "agentloop").split(".")[0] == "agentloop":
                raise
    found: set[str] = set()
    stack: list[type] = [al.AgentEvent]
    while stack:
        cls = stack.pop()
        if cls.__module__.split(".")[0] == "agentloop":
            found.add(_qualified(cls))
        stack.extend(cls.__subclasses__())
    return found


def test_every_public_attrs_class_has_a_strategy() -> None:
    """Each attrs class in agentloop.__all__ (bar the non-values) is in STRATEGIES."""
    exported = {name: getattr(al, name) for name in al.__all__ if name not in NOT_VALUES}
    values = {obj for obj in exported.values() if isinstance(obj, type) and attrs.has(obj)}
    assert values - set(STRATEGIES) == set()


def test_every_event_class_has_a_strategy() -> None:
    """Each AgentEvent subclass defined in any agentloop module is in STRATEGIES."""
    assert _agentloop_event_classes() - {_qualified(cls) for cls in STRATEGIES} == set()


# --------------------------------------------------------------------------- golden format

USAGE = al.Usage(
    input=10, output=20, cache_read=3, cache_write=4, total_tokens=37, reasoning=5, cost=0.25
)
USAGE_JSON = {
    "input": 10,
    "output": 20,
    "cache_read": 3,
    "cache_write": 4,
    "total_tokens": 37,
    "reasoning": 5,
    "cost": 0.25,
}
ASSISTANT = al.AssistantMessage(
    (
        al.TextContent("Let me look."),
        al.ThinkingContent("Listing is cheap.", signature="sig-1"),
        al.ToolCall("call_1", "ls", {"path": ".", "all": True}),
    ),
    al.StopReason.TOOL_USE,
    model="model-1",
    provider="scripted",
    usage=USAGE,
    timestamp=TS + 1,
)
ASSISTANT_JSON = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Let me look."},
        {
            "type": "thinking",
            "thinking": "Listing is cheap.",
            "signature": "sig-1",
            "redacted": False,
        },
        {
            "type": "tool_call",
            "id": "call_1",
            "name": "ls",
            "arguments": {"path": ".", "all": True},
            "raw_arguments": None,
        },
    ],
    "stop_reason": "tool_use",
    "model": "model-1",
    "provider": "scripted",
    "usage": USAGE_JSON,
    "timestamp": TS + 1,
    "error_message": None,
}

GOLDEN: list[tuple[object, dict[str, Any]]] = [
    (
        al.UserMessage((al.TextContent("hi"), al.ImageContent("aGk=", "image/png")), timestamp=TS),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "aGk=", "mime_type": "image/png"},
            ],
            "timestamp": TS,
        },
    ),
    (ASSISTANT, ASSISTANT_JSON),
    (
        al.ToolResultMessage(
            "call_1",
            "ls",
            (al.TextContent("a.txt"),),
            is_error=True,
            timestamp=TS + 2,
            child_loop_id="child-1",
        ),
        {
            "role": "tool_result",
            "tool_call_id": "call_1",
            "tool_name": "ls",
            "content": [{"type": "text", "text": "a.txt"}],
            "is_error": True,
            "timestamp": TS + 2,
            "child_loop_id": "child-1",
            "outcome": "error",
        },
    ),
    (
        al.MessageUpdate(
            loop_id="main", message=ASSISTANT, delta=al.TextDelta(delta="Let", index=0)
        ),
        {
            "type": "MessageUpdate",
            "loop_id": "main",
            "message": ASSISTANT_JSON,
            "delta": {"type": "text", "delta": "Let", "index": 0},
        },
    ),
    (
        al.ToolExecutionEnd(
            loop_id="main",
            tool_call_id="call_1",
            tool_name="ls",
            result=al.ToolResult.text("a.txt", details={"entries": ["a.txt"], "truncated": False}),
            is_error=False,
        ),
        {
            "type": "ToolExecutionEnd",
            "loop_id": "main",
            "tool_call_id": "call_1",
            "tool_name": "ls",
            "result": {
                "content": [{"type": "text", "text": "a.txt"}],
                "details": {"entries": ["a.txt"], "truncated": False},
                "child_loop_id": None,
            },
            "is_error": False,
            "child_loop_id": None,
            "outcome": "ok",
        },
    ),
    (
        al.AgentEnd(
            loop_id="main",
            messages=(),
            usage=al.Usage(),
            timestamp=TS + 9,
            stop_reason=al.AgentStop(
                al.StopKind.AWAITING_APPROVAL, "Awaiting approval: write (call_2)"
            ),
            suspended=al.Suspended(
                pending=[
                    al.PendingCall(
                        tool_call_id="call_2",
                        tool_name="write",
                        arguments={"path": "a.md"},
                        reason="write on 'a.md' needs approval (the rule ask(write))",
                        rule="write",
                        subject=("path", "a.md"),
                    )
                ],
                results=[
                    al.ToolResultMessage(
                        "call_1", "ls", (al.TextContent("a.md"),), timestamp=TS + 3
                    )
                ],
                turn_index=1,
                turns_done=2,
                requests=2,
                tokens_used=30,
                cost=0.5,
                elapsed=1.25,
            ),
        ),
        {
            "type": "AgentEnd",
            "loop_id": "main",
            "messages": [],
            "usage": {
                "input": 0,
                "output": 0,
                "cache_read": 0,
                "cache_write": 0,
                "total_tokens": 0,
                "reasoning": 0,
                "cost": 0.0,
            },
            "timestamp": TS + 9,
            "stop_reason": {
                "kind": "awaiting_approval",
                "message": "Awaiting approval: write (call_2)",
                "error": None,
            },
            "usage_by_model": {},
            "output": None,
            "suspended": {
                "pending": [
                    {
                        "tool_call_id": "call_2",
                        "tool_name": "write",
                        "arguments": {"path": "a.md"},
                        "reason": "write on 'a.md' needs approval (the rule ask(write))",
                        "rule": "write",
                        "subject": ["path", "a.md"],
                    }
                ],
                "results": [
                    {
                        "role": "tool_result",
                        "tool_call_id": "call_1",
                        "tool_name": "ls",
                        "content": [{"type": "text", "text": "a.md"}],
                        "is_error": False,
                        "timestamp": TS + 3,
                        "child_loop_id": None,
                        "outcome": "ok",
                    }
                ],
                "turn_index": 1,
                "turns_done": 2,
                "requests": 2,
                "tokens_used": 30,
                "cost": 0.5,
                "elapsed": 1.25,
                "turn_elapsed": 0.0,
                "queued": [],
            },
        },
    ),
    (
        al.Approve("call_2", {"path": "b.md"}),
        {"decision": "approve", "tool_call_id": "call_2", "arguments": {"path": "b.md"}},
    ),
    (
        al.Deny("call_3", "Not today"),
        {"decision": "deny", "tool_call_id": "call_3", "reason": "Not today"},
    ),
]
GOLDEN_IDS = [
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "MessageUpdate",
    "ToolEnd",
    "AgentEndSuspended",
    "Approve",
    "Deny",
]


@pytest.mark.parametrize(("value", "expected"), GOLDEN, ids=GOLDEN_IDS)
def test_golden_json_is_written(value: object, expected: dict[str, Any]) -> None:
    """to_json writes exactly the pinned JSON."""
    assert json.loads(to_json(value)) == expected


@pytest.mark.parametrize(("value", "expected"), GOLDEN, ids=GOLDEN_IDS)
def test_golden_json_is_read(value: object, expected: dict[str, Any]) -> None:
    """from_json reads the pinned JSON back into the value."""
    assert from_json(json.dumps(expected), type(value)) == value


@pytest.mark.parametrize("index", [2, 4], ids=["ToolResultMessage", "ToolEnd"])
@pytest.mark.parametrize("is_error", [False, True])
def test_a_result_written_before_outcomes_reads_with_the_outcome_its_is_error_gives(
    index: int, is_error: bool
) -> None:
    """Session files written before ToolOutcome have no "outcome": OK, or ERROR."""
    value, expected = GOLDEN[index]
    old = {key: item for key, item in expected.items() if key != "outcome"}
    back = from_dict({**old, "is_error": is_error}, type(value))
    assert back.outcome is (al.ToolOutcome.ERROR if is_error else al.ToolOutcome.OK)
    assert back == attrs.evolve(value, is_error=is_error, outcome=back.outcome)  # type: ignore[misc]


def test_an_outcome_that_contradicts_is_error_is_refused() -> None:
    """A result cannot say "ok" and be an error: not when built, not when read."""
    with pytest.raises(ValueError, match=r"^outcome 'ok' contradicts is_error=True$"):
        al.ToolResultMessage("c", "t", (), is_error=True, outcome=al.ToolOutcome.OK)
    data = {**GOLDEN[4][1], "outcome": "timed_out"}
    with pytest.raises(DeserializationError) as read:
        from_dict(data, al.ToolExecutionEnd)
    assert read.value.errors == [
        "invalid value: outcome 'timed_out' contradicts is_error=False @ $"
    ]


@settings(max_examples=50)
@given(counts=run_counts())
def test_run_counts_cross_the_serialization_layer(counts: RunCounts) -> None:
    """What a run has counted, as a Temporal run carries it across continue-as-new."""
    assert from_dict(json.loads(to_json(counts)), RunCounts) == counts


def test_to_dict_puts_the_tag_first() -> None:
    """The tag is the first key of a tagged value's dict, for people reading it."""
    assert next(iter(to_dict(ASSISTANT))) == "role"


# --------------------------------------------------------------------------- the JSON text


def test_to_json_is_canonical_whatever_the_dict_order() -> None:
    """Equal values with differently ordered argument dicts give the same text."""
    first = al.ToolCall("c", "t", {"a": 1, "b": {"x": 1, "y": 2}})
    second = al.ToolCall("c", "t", {"b": {"y": 2, "x": 1}, "a": 1})
    assert to_json(first) == to_json(second)


def test_to_json_is_one_compact_line() -> None:
    """to_json writes no spaces and no newlines outside strings."""
    text = to_json(al.TextContent("x"))
    assert text == '{"text":"x","type":"text"}'


def test_lone_surrogate_survives_as_utf8() -> None:
    """Text with a lone surrogate is written as an escape, encodes as UTF-8 and reads back."""
    value = al.TextContent("broken \ud83d emoji")
    text = to_json(value)
    assert text.isascii()
    assert from_json(text, al.TextContent) == value


def test_nan_is_refused_when_writing() -> None:
    """A NaN cost is not JSON: to_json raises ValueError."""
    with pytest.raises(ValueError, match=r"JSON compliant"):
        to_json(al.Usage(cost=math.nan))


def test_from_json_accepts_bytes() -> None:
    """from_json reads UTF-8 bytes as well as text."""
    value = al.TextContent("héllo")
    assert from_json(to_json(value).encode("utf-8"), al.TextContent) == value


# --------------------------------------------------------------------------- malformed input


def test_deserialization_error_is_a_value_error() -> None:
    """DeserializationError subclasses ValueError, so one except clause catches bad input."""
    assert issubclass(DeserializationError, ValueError)


def test_unknown_content_type_is_rejected_with_its_path() -> None:
    """An unknown content tag raises DeserializationError naming the tag and the path."""
    data = {"role": "user", "content": [{"type": "video", "url": "x"}], "timestamp": TS}
    with pytest.raises(DeserializationError, match=r"'video'.*@ \$\.content\[0\]"):
        from_dict(data, al.Message)


def test_content_not_allowed_in_the_message_is_rejected() -> None:
    """A thinking block inside a user message is rejected: the member set is the field's."""
    data = {
        "role": "user",
        "content": [{"type": "thinking", "thinking": "x", "signature": None}],
        "timestamp": TS,
    }
    with pytest.raises(DeserializationError, match=r"unknown content type 'thinking'"):
        from_dict(data, al.UserMessage)


def test_unknown_message_role_is_rejected() -> None:
    """A message with role "system" raises DeserializationError."""
    with pytest.raises(DeserializationError, match=r"unknown message role 'system'"):
        from_dict({"role": "system", "content": [], "timestamp": TS}, al.Message)


def test_unknown_decision_is_rejected() -> None:
    """A decision tagged neither "approve" nor "deny" raises DeserializationError."""
    with pytest.raises(DeserializationError) as read:
        from_dict({"decision": "maybe", "tool_call_id": "c"}, al.Decision)
    assert read.value.errors == ["unknown decision 'maybe'; expected one of 'approve', 'deny' @ $"]


def test_unknown_event_type_is_rejected() -> None:
    """An event tag naming no AgentEvent subclass raises DeserializationError."""
    with pytest.raises(DeserializationError, match=r"unknown event type 'Nope'"):
        from_json('{"type": "Nope", "loop_id": "main"}', al.AgentEvent)


def test_event_of_another_class_is_rejected() -> None:
    """Data tagged AgentStart cannot be read as a ToolExecutionEnd."""
    with pytest.raises(DeserializationError, match=r"unknown event type 'AgentStart'"):
        from_dict(to_dict(al.AgentStart(loop_id="main")), al.ToolExecutionEnd)


def test_missing_tag_is_rejected_for_a_concrete_class() -> None:
    """The tag is required even when the class is named: {"text": "x"} is not a TextContent."""
    with pytest.raises(DeserializationError, match=r"missing content type"):
        from_dict({"text": "x"}, al.TextContent)


def test_missing_required_field_is_rejected_with_its_path() -> None:
    """A tool call without its "name" raises DeserializationError at $.content[0].name."""
    data = {
        "role": "assistant",
        "content": [{"type": "tool_call", "id": "c"}],
        "stop_reason": "stop",
    }
    with pytest.raises(
        DeserializationError, match=r"required field missing @ \$\.content\[0\]\.name"
    ):
        from_dict(data, al.AssistantMessage)


def test_missing_defaulted_field_takes_its_default() -> None:
    """A field with a default may be left out: "signature" then reads as None."""
    value = from_dict({"type": "thinking", "thinking": "x"}, al.ThinkingContent)
    assert value == al.ThinkingContent("x", signature=None)


def test_unknown_key_is_rejected() -> None:
    """A key the class does not have raises DeserializationError naming it."""
    with pytest.raises(DeserializationError, match=r"extra fields found \(colour\)"):
        from_dict({"type": "text", "text": "x", "colour": "red"}, al.TextContent)


def test_string_is_not_a_boolean() -> None:
    """The string "false" is not read as a boolean (cattrs' default would make it True)."""
    data = to_dict(al.ToolResultMessage("c", "t", (), timestamp=TS))
    data["is_error"] = "false"
    with pytest.raises(DeserializationError, match=r"expected a boolean.*@ \$\.is_error"):
        from_dict(data, al.ToolResultMessage)


def test_number_is_not_a_string() -> None:
    """A number where text is expected is rejected, not converted."""
    with pytest.raises(DeserializationError, match=r"expected a string, got a number"):
        from_dict({"type": "text", "text": 1}, al.TextContent)


def test_unknown_stop_reason_is_rejected() -> None:
    """A stop reason that is not a StopReason value raises DeserializationError."""
    data = dict(ASSISTANT_JSON, stop_reason="bored")
    with pytest.raises(DeserializationError, match=r"'bored'.*@ \$\.stop_reason"):
        from_dict(data, al.AssistantMessage)


def test_text_that_is_not_json_is_rejected() -> None:
    """from_json raises DeserializationError, not JSONDecodeError, for broken text."""
    with pytest.raises(DeserializationError, match=r"invalid JSON"):
        from_json('{"type": "text",', al.TextContent)


def test_nan_is_refused_when_reading() -> None:
    """The non-standard NaN literal is not read as a number."""
    with pytest.raises(DeserializationError, match=r"NaN is not a JSON number"):
        from_json('{"input": NaN}', al.Usage)


def test_deserialization_error_keeps_the_cause() -> None:
    """The underlying cattrs error is the DeserializationError's __cause__."""
    with pytest.raises(DeserializationError) as info:
        from_dict({"type": "text"}, al.TextContent)
    assert info.value.__cause__ is not None
    assert info.value.errors == ["required field missing @ $.text"]


def test_unsupported_type_is_not_reported_as_bad_data() -> None:
    """Asking for a type the converter cannot build (ToolContext) is not a DeserializationError."""
    with pytest.raises(Exception) as info:  # noqa: PT011 - cattrs decides which
        from_dict({}, al.ToolContext)
    assert not isinstance(info.value, DeserializationError)


# --------------------------------------------------------------------------- later subclasses


def test_event_class_defined_after_use_is_read_through_the_base() -> None:
    """An AgentEvent subclass defined after the converter has read events round-trips."""
    assert from_dict(to_dict(al.AgentStart(loop_id="warm")), al.AgentEvent).loop_id == "warm"

    @attrs.frozen(kw_only=True)
    class LateCustomEvent(al.AgentEvent):
        note: str
        usage: al.Usage

    value = LateCustomEvent(loop_id="main", note="hello", usage=USAGE)
    data = to_dict(value)
    assert data == {
        "type": "LateCustomEvent",
        "loop_id": "main",
        "note": "hello",
        "usage": USAGE_JSON,
    }
    back = from_json(to_json(value), al.AgentEvent)
    assert type(back) is LateCustomEvent
    assert back == value


def test_subclass_of_a_concrete_event_is_read_through_its_parent() -> None:
    """Reading as AgentStart returns the AgentStart subclass the tag names."""

    @attrs.frozen(kw_only=True)
    class LateAgentStartWithModel(al.AgentStart):
        model: str

    value = LateAgentStartWithModel(loop_id="main", model="m", timestamp=TS)
    back = from_json(to_json(value), al.AgentStart)
    assert type(back) is LateAgentStartWithModel
    assert back == value


def test_two_event_classes_with_one_name_are_ambiguous() -> None:
    """When two live subclasses share a name, reading that tag raises DeserializationError."""

    def make() -> type[al.AgentEvent]:
        @attrs.frozen(kw_only=True)
        class TwinNamedEvent(al.AgentEvent):
            pass

        return TwinNamedEvent

    first, second = make(), make()
    with pytest.raises(DeserializationError, match=r"ambiguous event type 'TwinNamedEvent'"):
        from_dict({"type": "TwinNamedEvent", "loop_id": "main"}, al.AgentEvent)
    assert first is not second  # both stay alive until the read is done
