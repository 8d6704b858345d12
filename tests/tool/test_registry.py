"""The quick argument check agrees with JSON Schema exactly on the schemas it takes."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agentloop._tool._registry import _quick_check

TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]
NAMES = st.sampled_from(["a", "b", "c", "path", "n"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(NAMES, inner, max_size=2),
    max_leaves=4,
)


@st.composite
def flat_schemas(draw: st.DrawFn) -> dict[str, Any]:
    properties = draw(
        st.dictionaries(
            NAMES,
            st.fixed_dictionaries(
                {"type": st.sampled_from(TYPES)}, optional={"description": st.just("x")}
            ),
            max_size=4,
        )
    )
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if properties:
        schema["required"] = draw(st.lists(st.sampled_from(sorted(properties)), unique=True))
    closed = draw(st.sampled_from([None, True, False]))
    if closed is not None:
        schema["additionalProperties"] = closed
    return schema


INTEGER = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
NUMBER = {"type": "object", "properties": {"n": {"type": "number"}}}


@settings(max_examples=400, deadline=None)
@given(flat_schemas(), st.dictionaries(NAMES, JSON, max_size=4) | JSON)
@example(INTEGER, {"n": 1.0})  # an integral float is an integer
@example(INTEGER, {"n": 1.5})
@example(INTEGER, {"n": True})  # a bool is not
@example(NUMBER, {"n": False})
@example(INTEGER, {})
@example({**INTEGER, "additionalProperties": False}, {"n": 1, "m": 2})
def test_quick_check_accepts_exactly_what_the_validator_accepts(
    schema: dict[str, Any], instance: Any
) -> None:
    quick = _quick_check(schema)
    assert quick is not None
    assert quick(instance) is jsonschema.Draft202012Validator(schema).is_valid(instance)


def test_quick_check_declines_schemas_it_cannot_decide() -> None:
    """Anything beyond plain types per property goes to the full validator."""
    declined = [
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}},
        {"type": "object", "properties": {"a": {"type": ["string", "null"]}}},
        {"type": "object", "properties": {"a": {"enum": [1]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "object", "properties": {}, "oneOf": []},
        {"type": "array"},
        {"properties": {"a": {"type": "string"}}},
    ]
    assert [_quick_check(schema) for schema in declined] == [None] * len(declined)
