"""Partial structured output: PartialJSON reads each piece once, and parsing stays linear.

A structured answer is parsed as it streams, for the ``OutputUpdate`` events.
Parsing the whole text after every piece made a 10 MB answer quadratic; now the
reader keeps its state between pieces (:class:`Reference` below is the plain
character-by-character reader it must agree with), and a long answer is parsed
again only once the text that came since paid for it (``PartialJSON.due``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
import agentloop._loop._output as output_module
from agentloop._loop._output import PartialJSON
from agentloop._text import scrub_json
from agentloop.testing import EventRecorder


class Reference:
    """The plain reader: one character at a time, the value parsed from scratch."""

    def __init__(self) -> None:
        self.text = ""
        self.closers: list[str] = []
        self.keys: list[bool] = []
        self.in_string = False
        self.string_is_key = False
        self.escape = False
        self.scalar = False
        self.good = 0
        self.good_closers = ""

    def feed(self, piece: str) -> None:
        start = len(self.text)
        self.text += piece
        for offset, char in enumerate(piece):
            position = start + offset
            if self.in_string:
                if self.escape:
                    self.escape = False
                elif char == "\\":
                    self.escape = True
                elif char == '"':
                    self.in_string = False
                    if self.string_is_key:
                        self.keys[-1] = False
                    else:
                        self.mark(position + 1)
                continue
            if self.scalar:
                if char in ",]} \t\r\n":
                    self.scalar = False
                    self.mark(position)
                else:
                    continue
            if char == '"':
                self.in_string = True
                self.string_is_key = bool(self.keys) and self.keys[-1]
            elif char in "{[":
                self.closers.append("}" if char == "{" else "]")
                self.keys.append(char == "{")
                self.mark(position + 1)
            elif char in "}]":
                if self.closers:
                    self.closers.pop()
                    self.keys.pop()
                self.mark(position + 1)
            elif char == ",":
                if self.keys and self.closers[-1] == "}":
                    self.keys[-1] = True
            elif char not in ": \t\r\n":
                self.scalar = True

    def mark(self, position: int) -> None:
        self.good = position
        self.good_closers = "".join(reversed(self.closers))

    def value(self) -> Any:
        text = self.text
        if self.in_string and not self.string_is_key:
            cut = text[:-1] if self.escape else text
            tail = cut.rfind("\\u")
            if tail != -1 and len(cut) - tail < 6:
                backslashes = len(cut[:tail]) - len(cut[:tail].rstrip("\\"))
                if backslashes % 2 == 0:
                    cut = cut[:tail]
            candidate = cut + '"' + "".join(reversed(self.closers))
        elif self.scalar and not self.closers:
            candidate = text
        else:
            candidate = text[: self.good] + self.good_closers
        for attempt in (candidate, text[: self.good] + self.good_closers):
            try:
                return scrub_json(json.loads(attempt))
            except ValueError:
                pass
        return None


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from('"\\{}[],: \n')),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet='ab"\\{}[]: ', max_size=5), children, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=400, deadline=None)
@given(
    JSON_VALUES,
    st.booleans(),
    st.integers(min_value=0, max_value=3),
    st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=20),
)
def test_the_reader_agrees_with_the_plain_reader_at_every_cut(
    value: Any, ascii_only: bool, indent: int, steps: list[int]
) -> None:
    """Whatever the text (escapes, whitespace, keys with brackets) and wherever the pieces
    are cut, the value so far is the plain reader's."""
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent or None)
    reader, reference = PartialJSON(), Reference()
    position, turn = 0, 0
    while position < len(text):
        piece = text[position : position + steps[turn % len(steps)]]
        position += len(piece)
        turn += 1
        reader.feed(piece)
        reference.feed(piece)
        assert reader.value() == reference.value(), (text, position)
    assert reader.value() == scrub_json(value)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]",:\\ a1tn.-e', max_size=60), st.integers(1, 5))
def test_the_reader_agrees_on_text_that_is_not_json(text: str, step: int) -> None:
    reader, reference = PartialJSON(), Reference()
    for start in range(0, len(text), step):
        reader.feed(text[start : start + step])
        reference.feed(text[start : start + step])
        assert reader.value() == reference.value()


# --------------------------------------------------------------------------- linear work


def answer(size: int) -> tuple[dict[str, Any], str]:
    """An answer of about ``size`` characters: records with strings, numbers, a list."""
    record = {"id": 0, "name": 'Café "Lima"', "tags": ["a", "[b]"], "note": "words " * 8}
    each = len(json.dumps(record)) + 2
    value = {"records": [{**record, "id": i} for i in range(size // each)]}
    return value, json.dumps(value)


SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"records": {"type": "array"}},
    "required": ["records"],
}


class Chunked:
    """A model that streams one answer in pieces of ``chunk`` characters: the
    final-result call's arguments (tool mode) or the reply's text (native mode)."""

    provider_name = "test"

    def __init__(self, text: str, chunk: int, native: bool) -> None:
        self.text, self.chunk, self.native = text, chunk, native

    async def stream(self, request: Any, emit: Any) -> al.AssistantMessage:
        text, chunk = self.text, self.chunk
        for start in range(0, len(text), chunk):
            piece = text[start : start + chunk]
            if self.native:
                await emit(al.TextDelta(delta=piece, index=0))
            else:
                await emit(
                    al.ToolCallDelta(delta=piece, index=0, tool_call_id="f1", name="final_result")
                )
        if self.native:
            return al.AssistantMessage((al.TextContent(text),), al.StopReason.STOP)
        arguments = json.loads(text)
        return al.AssistantMessage(
            (al.ToolCall("f1", "final_result", arguments),), al.StopReason.TOOL_USE
        )


@pytest.mark.parametrize("native", [False, True], ids=["tool", "native"])
async def test_a_long_answer_is_parsed_in_linear_work(
    monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    """A 1 MB answer in pieces of 64 characters: the partial reader parses at most
    8 times the answer's length in all (after every piece: some 8,000 times)."""
    value, text = answer(1_000_000)
    parsed = 0
    bound = 8 * len(text)
    real_loads = output_module.loads

    def counting(candidate: str, **kwargs: Any) -> Any:
        nonlocal parsed
        parsed += len(candidate)
        assert parsed <= bound, "the partial reader parses too much: quadratic"
        return real_loads(candidate, **kwargs)

    monkeypatch.setattr(output_module, "loads", counting)
    output = al.Output(SCHEMA, mode="native" if native else "tool")
    agent = al.Agent(Chunked(text, 64, native), output_type=output)
    recorder = EventRecorder()
    async with agent.prompt("go") as events:
        await recorder.consume(events)
    (end,) = recorder.of_type(al.AgentEnd)
    assert end.output == value
    updates = [event.partial for event in recorder.of_type(al.OutputUpdate)]
    assert updates[-1] == value
    assert len(updates) == 113  # of 15,989 pieces
    assert 0 < parsed <= bound


async def test_updates_of_a_long_answer_are_spaced_and_the_last_is_whole() -> None:
    """While the text is short every piece that changes the answer sends an update;
    then they space out (each parse paid for by the text since); the last update, after
    the last piece and before MessageEnd, is the whole answer."""
    value, text = answer(40_000)
    agent = al.Agent(Chunked(text, 100, False), output_type=al.Output(SCHEMA))
    recorder = EventRecorder()
    async with agent.prompt("go") as events:
        await recorder.consume(events)
    names = recorder.names()
    assert names.count("MessageUpdate") == 406
    sizes = [len(json.dumps(e.partial)) for e in recorder.of_type(al.OutputUpdate)]
    assert sizes == sorted(set(sizes))  # each shows more of the answer
    assert sizes[:3] == [104, 199, 300]  # a piece each
    assert sizes[-9:] == [8199, 9593, 11404, 13903, 17093, 21504, 27304, 35004, len(text)]
    assert len(sizes) == 73
    # The last update shows the whole answer, after the last piece, before MessageEnd.
    assert recorder.of_type(al.OutputUpdate)[-1].partial == value
    last = len(names) - 1 - names[::-1].index("OutputUpdate")
    assert names[last - 1 : last + 2] == ["MessageUpdate", "OutputUpdate", "MessageEnd"]
