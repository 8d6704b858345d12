"""The Server-Sent Events decoder: WHATWG event stream interpretation, chunk by chunk."""

from __future__ import annotations

import doctest
import itertools
import json
from collections.abc import Iterable, Sequence

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop.providers.sse as sse_module
from agentloop.providers.sse import ServerSentEvent, SSEDecoder

Event = ServerSentEvent


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    """Feed ``chunks`` to a fresh decoder, close it, and return every event."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    return events


def byte_chunks(data: bytes) -> list[bytes]:
    """``data`` as one-byte chunks."""
    return [data[i : i + 1] for i in range(len(data))]


def cut(data: bytes, points: Iterable[int]) -> list[bytes]:
    """``data`` split at ``points`` (positions, in any order; duplicates give empty chunks)."""
    bounds = [0, *sorted(points), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


# --- the public surface ------------------------------------------------------------


def test_all_is_pinned() -> None:
    """The module exports exactly the decoder and the event type."""
    assert sse_module.__all__ == ["SSEDecoder", "ServerSentEvent"]


def test_module_docstring_example_runs() -> None:
    """The module docstring's doctest example passes."""
    result = doctest.testmod(sse_module, raise_on_error=False)
    assert result.attempted == 4
    assert result.failed == 0


def test_event_defaults_and_frozen() -> None:
    """An event defaults to type "message", empty data and id, no retry, and is frozen."""
    event = ServerSentEvent()
    assert (event.event, event.data, event.id, event.retry) == ("message", "", "", None)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        event.data = "x"  # type: ignore[misc]


def test_feed_returns_only_events_completed_by_that_chunk() -> None:
    """Each feed returns just the events its chunk completed; close returns none left."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\ndata: b\n") == [Event(data="a")]
    assert decoder.feed(b"\ndata: c") == [Event(data="b")]
    assert decoder.feed(b"\n\n") == [Event(data="c")]
    assert decoder.close() == []


def test_close_twice_and_feed_after_close() -> None:
    """A second close returns []; feeding a closed decoder is a RuntimeError."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: x") == []
    assert decoder.close() == [Event(data="x")]
    assert decoder.close() == []
    with pytest.raises(RuntimeError, match="after close"):
        decoder.feed(b"data: y\n\n")


# --- line endings ------------------------------------------------------------------


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_line_endings(eol: bytes) -> None:
    """LF, CRLF and CR each end lines, and two of them dispatch an event."""
    stream = eol.join([b"event: a", b"data: 1", b"data: 2", b"", b"data: 3", b"", b""])
    assert decode(stream) == [Event(event="a", data="1\n2"), Event(data="3")]


def test_mixed_line_endings() -> None:
    """LF, CRLF and CR mixed in one stream; LF CR is two line ends, CR LF is one."""
    stream = b"data: a\r\ndata: b\rdata: c\n\r" + b"data: d\r\n\r\n" + b"data: e\n\r\n"
    assert decode(stream) == [Event(data="a\nb\nc"), Event(data="d"), Event(data="e")]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    """A CR ending one chunk and an LF starting the next are one line end, not a blank line."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert decoder.feed(b"\ndata: b\r") == []
    assert decoder.feed(b"") == []  # an empty chunk between CR and LF changes nothing
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\r") == [Event(data="a\nb")]
    assert decoder.feed(b"\n") == []
    assert decoder.close() == []


def test_crlf_ending_a_chunk_then_lf_is_a_blank_line() -> None:
    """A chunk ending in a whole CRLF does not swallow an LF that starts the next chunk."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r\n") == []
    assert decoder.feed(b"\ndata: b\r\n") == [Event(data="a")]
    assert decoder.feed(b"\r") == [Event(data="b")]


def test_cr_then_other_text_across_chunks() -> None:
    """A CR ending a chunk is a line end by itself when the next chunk does not start with LF."""
    assert decode(b"data: a\r", b"\r", b"data: b\r", b"data: c\r", b"\r") == [
        Event(data="a"),
        Event(data="b\nc"),
    ]


def test_other_unicode_line_breaks_are_not_line_ends() -> None:
    """VT, FF, FS, GS, RS, NEL, LS and PS are data, not line ends."""
    odd = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
    stream = f"data: a{odd}b\n\n".encode()
    assert decode(stream) == [Event(data=f"a{odd}b")]
    assert decode(*byte_chunks(stream)) == [Event(data=f"a{odd}b")]


# --- fields ------------------------------------------------------------------------


def test_multi_line_data() -> None:
    """Data lines join with LF; an empty data line adds an empty line; one trailing LF goes."""
    stream = b"data: first\ndata:\ndata: third\ndata\n\n"
    assert decode(stream) == [Event(data="first\n\nthird\n")]


def test_single_empty_data_line_dispatches_an_empty_event() -> None:
    """``data`` with an empty value makes a non-empty buffer, so an event with data ""."""
    assert decode(b"data:\n\ndata\n\n") == [Event(data=""), Event(data="")]


def test_comments_are_ignored() -> None:
    """Lines starting with a colon are comments, even ones that look like fields."""
    stream = b": keep-alive\n:data: no\ndata: yes\n:\n\n:ping\n\n"
    assert decode(stream) == [Event(data="yes")]


def test_event_type() -> None:
    """``event`` sets the type for one event; an empty type means "message"."""
    stream = b"event: add\ndata: 1\n\ndata: 2\n\nevent:\ndata: 3\n\nevent: a\nevent: b\ndata: 4\n\n"
    assert decode(stream) == [
        Event(event="add", data="1"),
        Event(event="message", data="2"),
        Event(event="message", data="3"),
        Event(event="b", data="4"),
    ]


def test_id_persists_across_events_and_empty_id_resets_it() -> None:
    """The last event ID carries over to later events until ``id`` sets or clears it."""
    decoder = SSEDecoder()
    events = decoder.feed(b"id: 1\ndata: a\n\ndata: b\n\nid: 2\ndata: c\n\n")
    assert events == [Event(data="a", id="1"), Event(data="b", id="1"), Event(data="c", id="2")]
    assert decoder.last_event_id == "2"
    assert decoder.feed(b"id\ndata: d\n\nid: 3\ndata: e\n\nid:\ndata: f\n\n") == [
        Event(data="d", id=""),
        Event(data="e", id="3"),
        Event(data="f", id=""),
    ]
    assert decoder.last_event_id == ""


def test_last_event_id_takes_effect_at_dispatch() -> None:
    """``last_event_id`` changes when a block is dispatched, even one without data."""
    decoder = SSEDecoder()
    assert decoder.feed(b"id: 7\n") == []
    assert decoder.last_event_id == ""
    assert decoder.feed(b"\n") == []
    assert decoder.last_event_id == "7"
    assert decoder.feed(b"data: x\n\n") == [Event(data="x", id="7")]


def test_id_with_nul_is_ignored() -> None:
    """An ``id`` whose value contains NUL is ignored; the previous ID stays."""
    decoder = SSEDecoder()
    events = decoder.feed(b"id: good\ndata: a\n\nid: b\x00d\ndata: b\n\n")
    assert events == [Event(data="a", id="good"), Event(data="b", id="good")]
    assert decoder.last_event_id == "good"


def test_id_may_contain_other_odd_characters() -> None:
    """An ID keeps spaces, colons and non-ASCII characters (only one leading space goes)."""
    assert decode("id:  a:b é\ndata: x\n\n".encode()) == [Event(data="x", id=" a:b é")]


def test_retry_valid() -> None:
    """``retry`` with ASCII digits sets the reconnection time and the event's retry."""
    decoder = SSEDecoder()
    assert decoder.retry is None
    events = decoder.feed(b"retry: 3000\ndata: a\n\ndata: b\n\nretry: 0010\ndata: c\n\n")
    assert events == [Event(data="a", retry=3000), Event(data="b"), Event(data="c", retry=10)]
    assert decoder.retry == 10


def test_retry_invalid_is_ignored() -> None:
    """A ``retry`` value that is empty or not all ASCII digits changes nothing."""
    decoder = SSEDecoder()
    assert decoder.feed(b"retry: 500\n\n") == []
    assert decoder.retry == 500
    bad = [b"", b"-1", b"1.5", b"10 ", b" 10", b"1e3", b"abc", "\u0663".encode(), "\u00b2".encode()]
    for value in bad:
        stream = b"retry: " + value + b"\ndata: x\n\n"
        assert decoder.feed(stream) == [Event(data="x")], value
    assert decoder.retry == 500


def test_retry_without_data_sets_the_time_but_dispatches_nothing() -> None:
    """A block with only ``retry`` updates ``retry``; its value is not carried to the next event."""
    decoder = SSEDecoder()
    assert decoder.feed(b"retry: 42\n\ndata: a\n\n") == [Event(data="a")]
    assert decoder.retry == 42


def test_retry_with_absurdly_many_digits_does_not_raise() -> None:
    """A retry longer than int() converts is ignored; leading zeros do not count."""
    decoder = SSEDecoder()
    huge = b"9" * 5000
    zeros = b"0" * 5000 + b"25"
    assert decoder.feed(b"retry: " + huge + b"\ndata: a\n\n") == [Event(data="a")]
    assert decoder.retry is None
    assert decoder.feed(b"retry: " + zeros + b"\ndata: b\n\n") == [Event(data="b", retry=25)]


def test_field_without_colon() -> None:
    """A line without a colon is a field with an empty value."""
    assert decode(b"data\ndata\n\nevent\ndata: x\n\n") == [Event(data="\n"), Event(data="x")]


def test_leading_space_handling() -> None:
    """No space after the colon keeps the value; of two spaces only one is dropped."""
    stream = b"data:no-space\n\ndata:  two\n\nevent:  t\ndata: \n\ndata:\tx\n\n"
    assert decode(stream) == [
        Event(data="no-space"),
        Event(data=" two"),
        Event(event=" t", data=""),
        Event(data="\tx"),
    ]


def test_only_first_colon_splits() -> None:
    """The value keeps every colon after the first."""
    assert decode(b"data: a: b:c\n\n") == [Event(data="a: b:c")]


def test_unknown_and_case_different_fields_are_ignored() -> None:
    """Unknown fields, fields with different case and a field named with a space are ignored."""
    stream = b"foo: bar\nData: no\nEVENT: no\ndata : no\nid : no\ndata: yes\n\n"
    assert decode(stream) == [Event(data="yes")]


def test_dataless_event_dispatches_nothing_and_resets_type() -> None:
    """A block with only ``event`` dispatches nothing, and its type does not leak forward."""
    decoder = SSEDecoder()
    assert decoder.feed(b"event: ping\n\n") == []
    assert decoder.feed(b"data: a\n\n") == [Event(event="message", data="a")]
    assert decoder.feed(b"event: x\n: comment\n\n\n\n") == []
    assert decoder.close() == []


# --- BOM, UTF-8 --------------------------------------------------------------------


def test_bom_at_start_is_dropped() -> None:
    """One BOM at the very start is dropped, so the first field name is recognised."""
    stream = b"\xef\xbb\xbfdata: a\n\n"
    assert decode(stream) == [Event(data="a")]
    assert decode(*byte_chunks(stream)) == [Event(data="a")]


def test_only_one_bom_is_dropped() -> None:
    """A second BOM at the start is part of the first field name, an unknown field."""
    assert decode(b"\xef\xbb\xbf\xef\xbb\xbfdata: a\n\ndata: b\n\n") == [Event(data="b")]


def test_bom_elsewhere_is_kept() -> None:
    """A BOM after the start is an ordinary character, in names and in values."""
    stream = "data: \ufeffa\n\n\ufeffdata: b\n\ndata: c\n\n".encode()
    assert decode(stream) == [Event(data="\ufeffa"), Event(data="c")]


def test_bom_after_empty_chunks_is_still_at_start() -> None:
    """Empty chunks before the first byte do not move the start of the stream."""
    assert decode(b"", b"", b"\xef\xbb\xbf", b"data: a\n\n") == [Event(data="a")]


def test_utf8_split_across_chunks() -> None:
    """Multi-byte characters split at every byte boundary decode as one character."""
    text = "data: h\u00e9llo \u4e16\u754c \U0001f600!\n\n"
    stream = text.encode()
    assert decode(*byte_chunks(stream)) == [Event(data="h\u00e9llo \u4e16\u754c \U0001f600!")]
    for i in range(len(stream) + 1):
        assert decode(stream[:i], stream[i:]) == [Event(data="héllo 世界 😀!")], i


def test_invalid_utf8_is_replaced() -> None:
    """Invalid bytes become U+FFFD, whole or chunked, and decoding goes on."""
    stream = b"data: a\xffb\xc3(\xed\xa0\x80z\n\ndata: ok\n\n"
    expected = [Event(data="a\ufffdb\ufffd(\ufffd\ufffd\ufffdz"), Event(data="ok")]
    assert decode(stream) == expected
    assert decode(*byte_chunks(stream)) == expected


def test_truncated_utf8_at_close_is_replaced() -> None:
    """An incomplete character at the end of the stream becomes U+FFFD at close."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\xe4\xb8") == []
    assert decoder.close() == [Event(data="a\ufffd")]


def test_empty_chunks() -> None:
    """Empty chunks return no events and change nothing, wherever they come."""
    decoder = SSEDecoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"data: a") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\n") == [Event(data="a")]
    assert decoder.feed(b"") == []
    assert decoder.close() == []
    assert decode() == []
    assert decode(b"", b"") == []


# --- end of stream (the deliberate deviation) --------------------------------------


def test_last_event_without_blank_line_is_dispatched_at_close() -> None:
    """A final event whose lines all ended but no blank line followed is dispatched at close."""
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n\nevent: end\nid: 9\nretry: 5\ndata: [DONE]\n") == [
        Event(data="a")
    ]
    assert decoder.last_event_id == ""
    assert decoder.close() == [Event(event="end", data="[DONE]", id="9", retry=5)]
    assert decoder.last_event_id == "9"
    assert decoder.retry == 5


def test_partial_last_line_is_processed_at_close() -> None:
    """A last line with no line ending is processed as a line, then the event dispatched."""
    assert decode(b"data: a\ndata: b") == [Event(data="a\nb")]
    assert decode(b"data: a\n\ndata") == [Event(data="a"), Event(data="")]
    assert decode(b"data: a\n\nevent: x") == [Event(data="a")]
    assert decode(b"data: a\n\n: comm") == [Event(data="a")]
    assert decode(b"data: x\nid: 4") == [Event(data="x", id="4")]


def test_stream_ending_in_cr_at_close() -> None:
    """A CR at the very end is a line end; close then dispatches the pending event."""
    assert decode(b"data: a\r") == [Event(data="a")]
    assert decode(b"data: a\r\r") == [Event(data="a")]


def test_close_without_pending_data_dispatches_nothing() -> None:
    """Close after a complete stream, or after a data-less block, returns no events."""
    assert decode(b"data: a\n\n") == [Event(data="a")]
    assert decode(b"data: a\n\nevent: x\nretry: 1\n") == [Event(data="a")]
    assert decode(b": only a comment") == []


# --- real-world shapes -------------------------------------------------------------

ANTHROPIC_EVENTS: list[tuple[str, dict[str, object]]] = [
    (
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "content": [],
                "model": "claude-sonnet-4-5",
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 25, "output_tokens": 1},
            },
        },
    ),
    (
        "content_block_start",
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ),
    ("ping", {"type": "ping"}),
    (
        "content_block_delta",
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hé"}},
    ),
    (
        "content_block_delta",
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": "llo 🌍\nsecond line"},
        },
    ),
    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 15},
        },
    ),
    ("message_stop", {"type": "message_stop"}),
]


def anthropic_stream() -> bytes:
    """An Anthropic Messages API stream, as the API sends it (compact JSON, LF, UTF-8)."""
    parts = [
        f"event: {name}\ndata: {json.dumps(body, ensure_ascii=False, separators=(',', ':'))}\n\n"
        for name, body in ANTHROPIC_EVENTS
    ]
    return "".join(parts).encode()


@pytest.mark.parametrize("size", [None, 1, 7, 64, 4096])
def test_anthropic_messages_stream(size: int | None) -> None:
    """An Anthropic stream decodes to its exact events, whole or in chunks of any size."""
    stream = anthropic_stream()
    chunks = (
        [stream] if size is None else [stream[i : i + size] for i in range(0, len(stream), size)]
    )
    events = decode(*chunks)
    assert [e.event for e in events] == [name for name, _ in ANTHROPIC_EVENTS]
    assert [json.loads(e.data) for e in events] == [body for _, body in ANTHROPIC_EVENTS]
    assert events[3] == Event(
        event="content_block_delta",
        data='{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hé"}}',
    )
    assert events[-1] == Event(event="message_stop", data='{"type":"message_stop"}')
    assert {(e.id, e.retry) for e in events} == {("", None)}


OPENAI_STREAM = (
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n'
    b"\n"
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n'
    b"\n"
    b": OPENROUTER PROCESSING\n"
    b"\n"
    b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n'
    b"\n"
    b"data: [DONE]\n"
    b"\n"
)

OPENAI_EVENTS = [
    Event(
        data='{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
        '"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}'
    ),
    Event(
        data='{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
        '"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}'
    ),
    Event(
        data='{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o",'
        '"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}'
    ),
    Event(data="[DONE]"),
]


@pytest.mark.parametrize("size", [None, 1, 5, 100])
def test_openai_chat_completions_stream(size: int | None) -> None:
    """An OpenAI Chat Completions stream, with a comment, ends with ``data: [DONE]``."""
    stream = OPENAI_STREAM
    chunks = (
        [stream] if size is None else [stream[i : i + size] for i in range(0, len(stream), size)]
    )
    assert decode(*chunks) == OPENAI_EVENTS


def test_openai_stream_ending_without_blank_line() -> None:
    """``data: [DONE]`` with no blank line (or no line end at all) still arrives, at close."""
    assert OPENAI_STREAM.endswith(b"data: [DONE]\n\n")
    assert decode(OPENAI_STREAM[:-1]) == OPENAI_EVENTS
    assert decode(OPENAI_STREAM[:-2]) == OPENAI_EVENTS
    decoder = SSEDecoder()
    assert decoder.feed(OPENAI_STREAM[:-2]) == OPENAI_EVENTS[:-1]
    assert decoder.close() == OPENAI_EVENTS[-1:]


def test_openai_stream_with_crlf() -> None:
    """The same stream with CRLF line ends (as some proxies send it) decodes the same."""
    assert decode(OPENAI_STREAM.replace(b"\n", b"\r\n")) == OPENAI_EVENTS
    crlf = OPENAI_STREAM.replace(b"\n", b"\r\n")
    assert decode(*[crlf[i : i + 3] for i in range(0, len(crlf), 3)]) == OPENAI_EVENTS


# --- properties --------------------------------------------------------------------

# Characters a line may hold: anything but CR, LF and surrogates, with the ones that
# str.splitlines() would wrongly treat as line ends, NUL, BOM and separators made likely.
_line_chars = st.characters(exclude_characters="\r\n", codec="utf-8") | st.sampled_from(
    ["\x00", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\ufeff", " ", ":"]
)
_line_text = st.text(_line_chars, max_size=12)
_field_names = st.sampled_from(["data"] * 4 + ["event", "id", "retry", "Data", "dat"]) | st.text(
    _line_chars, min_size=1, max_size=6
).filter(lambda s: ":" not in s and not s.startswith("\ufeff"))
_field_values = _line_text | st.sampled_from(["", " ", "  x", "123", "0", "1 2", "-5"])


@attrs.frozen
class Line:
    """One generated line: its text as sent, and (field, value) as the spec parses it."""

    text: str
    field: str | None  # None: blank line or comment
    value: str = ""


@st.composite
def lines(draw: st.DrawFn) -> Line:
    """A blank line, a comment, or a field in one of its three spellings."""
    kind = draw(st.sampled_from(["blank"] * 3 + ["comment", "colon_space", "colon", "bare"]))
    if kind == "blank":
        return Line("", None)
    if kind == "comment":
        return Line(":" + draw(_line_text), None)
    name = draw(_field_names)
    if kind == "bare":
        return Line(name, name, "")
    value = draw(_field_values)
    if kind == "colon_space":
        return Line(f"{name}: {value}", name, value)
    return Line(f"{name}:{value}", name, value[1:] if value.startswith(" ") else value)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, list[Line]]:
    """An SSE stream of generated lines, with random line ends, maybe a BOM, maybe unfinished."""
    body = draw(st.lists(lines(), max_size=25))
    text = "\ufeff" if draw(st.booleans()) else ""
    previous_eol = ""
    for i, line in enumerate(body):
        last = i == len(body) - 1
        choices = ["\n", "\r\n", "\r"]
        if previous_eol == "\r" and not line.text:
            choices = ["\r\n", "\r"]  # CR then a bare LF would be one CRLF, not a blank line
        if last:
            choices.append("")  # the stream may end mid-line
        eol = draw(st.sampled_from(choices))
        text += line.text + eol
        previous_eol = eol
    return text.encode(), body


def expected_events(body: Sequence[Line]) -> tuple[list[ServerSentEvent], str, int | None]:
    """The spec's events, last event ID and retry for ``body``, straight from the parsed lines."""
    events: list[ServerSentEvent] = []
    data: list[str] = []
    event_type, last_id, dispatched_id = "", "", ""
    retry: int | None = None
    block_retry: int | None = None

    def dispatch() -> None:
        nonlocal event_type, block_retry, dispatched_id
        dispatched_id = last_id
        if data:
            events.append(Event(event_type or "message", "\n".join(data), last_id, block_retry))
        data.clear()
        event_type, block_retry = "", None

    for line in body:
        if not line.text:
            dispatch()
        elif line.field == "data":
            data.append(line.value)
        elif line.field == "event":
            event_type = line.value
        elif line.field == "id" and "\x00" not in line.value:
            last_id = line.value
        elif line.field == "retry" and line.value and all(c in "0123456789" for c in line.value):
            retry = block_retry = int(line.value)
    dispatch()  # the end of the stream (the module's deviation)
    return events, dispatched_id, retry


def run(chunks: Iterable[bytes]) -> tuple[list[ServerSentEvent], str, int | None]:
    """Events, last event ID and retry after feeding ``chunks`` and closing."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    events += decoder.close()
    return events, decoder.last_event_id, decoder.retry


@settings(max_examples=300)
@given(streams(), st.data())
def test_generated_streams_match_the_spec_in_any_chunking(
    stream: tuple[bytes, list[Line]], data: st.DataObject
) -> None:
    """Whole, byte by byte, or cut anywhere, a generated stream gives the spec's exact events."""
    raw, body = stream
    expected = expected_events(body)
    points = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cut points")
    assert run([raw]) == expected
    assert run(cut(raw, points)) == expected
    assert run(byte_chunks(raw)) == expected
    for i in range(len(raw) + 1):
        assert run([raw[:i], raw[i:]]) == expected, i


@given(st.binary(max_size=300), st.data())
def test_arbitrary_bytes_never_raise_and_chunking_does_not_matter(
    raw: bytes, data: st.DataObject
) -> None:
    """Any bytes decode without raising, to the same result however they are cut."""
    whole = run([raw])
    points = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cut points")
    assert run(cut(raw, points)) == whole
    assert run(byte_chunks(raw)) == whole


@given(
    st.lists(
        st.sampled_from(
            [b"\r", b"\n", b"\r\n", b"data", b":", b" ", b"x", b"\xef\xbb\xbf", b"\xc3"]
        ),
        max_size=40,
    ),
    st.data(),
)
def test_sse_heavy_bytes_chunking_does_not_matter(parts: list[bytes], data: st.DataObject) -> None:
    """Streams dense in line ends, colons, BOM and split UTF-8 decode the same however cut."""
    raw = b"".join(parts)
    whole = run([raw])
    points = data.draw(st.lists(st.integers(0, len(raw)), max_size=12), label="cut points")
    assert run(cut(raw, points)) == whole
    assert run(byte_chunks(raw)) == whole
