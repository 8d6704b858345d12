"""Throughput of decoding and accumulating long model streams: SSE bytes in, a message out.

The script builds realistic event streams in memory and times, in one process:

1. **decode**: :class:`~agentloop.providers.sse.SSEDecoder` alone, fed the stream
   in fixed-size byte chunks (4 KiB and 64 KiB by default);
2. **decode+parse**: the decoder and the provider's stream parser, wired as
   ``HTTPProvider`` wires them (every event to ``parser.feed()``, stop once
   ``parser.done``, then ``parser.finish()``); the deltas are produced and
   dropped, nothing is awaited;
3. **end to end**, against the official SDKs: the stream served in the same chunks
   by an in-memory ``httpx2`` transport, from the request to the final message:
   agentloop's provider (``stream()``, under trio) and the official SDK
   (``anthropic``: ``messages.stream()`` then ``get_final_message()``; ``openai``:
   ``chat.completions.stream()`` then ``get_final_completion()``, and for the
   Responses API ``responses.stream()`` then ``get_final_response()``; under asyncio).
   ``--no-sdk`` leaves the SDKs out; an SDK that is not installed is left out too.

The streams (see benchmarks/README.md):

- ``anthropic mixed``: a Messages API stream: ``message_start``, a thinking block
  of ``thinking_delta`` events and a ``signature_delta``, a text block of
  ``text_delta`` events, a ``tool_use`` block of ``input_json_delta`` pieces,
  ``message_delta``, ``message_stop``, with ``ping`` events sprinkled in;
- ``openai mixed``: Chat Completions chunks: ``reasoning_content``, ``content``,
  then one tool call's ``arguments`` in pieces, a finish chunk, a usage chunk
  and ``data: [DONE]``;
- ``responses mixed``: OpenAI Responses API events: ``response.created``, a
  ``reasoning`` item (three summary parts of ``reasoning_summary_text.delta``
  events, ``encrypted_content``), a ``message`` item of ``output_text.delta``
  events, a ``function_call`` item of ``function_call_arguments.delta`` pieces,
  each item's ``done`` events, and ``response.completed`` with the whole output
  and the usage;
- ``... answer``: one long text block and nothing else (``--answer-mb`` of text
  in deltas of a few words), and the same at an eighth of the length: equal
  MB/s for both means no cost grows with the length of the message.

Deltas are one to four words, as the APIs send them, with some non-ASCII text
(accents, CJK, emoji) and JSON escapes (quotes, newlines). Before anything is
timed, each stream is decoded and parsed once and the finished message is
checked against what was streamed: the same thinking, signature, text and tool
arguments, and the deltas add up to the same text; then each stream runs end to
end once through agentloop and through the SDK, and the two final messages must
hold that same thinking (for the Responses API: the reasoning summary, the
item's id and ``encrypted_content``), text and tool call.

The APIs are the entries of ``APIS``: each gives its stream builders, agentloop's
provider and its official SDK's runner: ``anthropic``, ``openai`` (Chat
Completions) and ``responses`` (OpenAI's Responses API). Adding an API is
appending one entry.

Run it with ``python benchmarks/sse_decode.py``::

    python benchmarks/sse_decode.py --size 50 --repeat 3 --no-sdk
    python benchmarks/sse_decode.py --chunks 512,4096,65536 --profile
    python benchmarks/sse_decode.py --no-sdk --e2e-repeat 5

It prints MB/s (1 MB = 10**6 bytes of SSE) of each stage, median over the
repeats, and events per second of decode+parse; then the end-to-end table:
agentloop's MB/s, the SDK's, and agentloop/SDK against the 2x target.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any

import attrs
import httpx2
import trio

import agentloop as al
from agentloop.providers import (
    AnthropicProvider,
    ModelConfig,
    ModelRequest,
    OpenAIProvider,
    OpenAIResponsesProvider,
    RetryConfig,
)
from agentloop.providers._http import HTTPProvider, StreamParser
from agentloop.providers.sse import SSEDecoder

MB = 1_000_000
SEED = 20260519
# Where both clients send their request: the in-memory transport answers it, and an address
# under .invalid cannot reach a network if something were misconfigured.
BASE_URL = "http://sse-bench.invalid"
ANTHROPIC_MODEL = ModelConfig.anthropic(
    "claude-sonnet-5", api_key="sk-ant-bench-not-a-key", base_url=BASE_URL
)
OPENAI_MODEL = ModelConfig.openai(
    "gpt-5.4", api_key="sk-bench-not-a-key", base_url=f"{BASE_URL}/v1"
)
RESPONSES_MODEL = ModelConfig.openai_responses(
    "gpt-5.4", api_key="sk-bench-not-a-key", base_url=f"{BASE_URL}/v1"
)
# Every mixed stream ends with one write_file call: this path, then its content, in pieces.
ANTHROPIC_CALL_ID = "toolu_01WDkRNXpZ8yyaGKxJ7V9Jbu"
OPENAI_CALL_ID = "call_Wq3kP0"
RESPONSES_CALL_ID = "call_r3AdM3kQ8nZx2LpV7bW0yTcE"
ARGUMENTS_PREFIX = '{"path": "notes/long.md", "content": "'

# Words the fake model says. Mostly English; some accents, CJK, emoji (2-4 UTF-8 bytes, so
# characters get split across chunk boundaries), and characters JSON escapes (quotes,
# backslashes, newlines).
ENGLISH = (
    "the quick brown fox jumps over a lazy dog and then we read the file to see what it "
    "says about configuration values parsing errors retries streams tokens messages "
    "function returns None when called with an empty list so I should check that first "
    "because the tests expect a ValueError instead"
)
WORDS = [
    *ENGLISH.split(),
    "café",
    "naïve",
    "über",
    "résumé",
    "jalapeño",
    "日本語",
    "テキスト",
    "中文",
    "🙂",
    "🚀",
    "→",
    "€5",
    '"quoted"',
    "C:\\path\\to",
    "x\ty",
]
NEWLINES = ("\n", "\n\n", "\n- ", "\n```python\n", "\n```\n")


def deltas(rng: random.Random) -> Iterator[str]:
    """Endless deltas of a few words each, as a model streams them."""
    while True:
        if rng.random() < 0.05:
            yield rng.choice(NEWLINES)
            continue
        yield "".join(" " + rng.choice(WORDS) for _ in range(rng.randint(1, 4)))


def json_pieces(rng: random.Random, prefix: str, done: Callable[[], bool]) -> Iterator[str]:
    """A JSON object's text in pieces of 5-40 characters, cut anywhere, until ``done()``.

    The object is ``prefix`` (an opened string) plus words, then ``"}``.
    """
    pending = prefix
    words = deltas(rng)
    while not done():
        while len(pending) < 64:
            pending += json.dumps(next(words), ensure_ascii=False)[1:-1]
        size = rng.randint(5, 40)
        yield pending[:size]
        pending = pending[size:]
    pending += '"}'
    while pending:
        size = rng.randint(5, 40)
        yield pending[:size]
        pending = pending[size:]


def compact(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


class Writer:
    """Writes an event stream, counting its bytes and events."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.events = 0

    def event(self, name: str | None, data: str) -> None:
        block = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
        encoded = block.encode()
        self.parts.append(encoded)
        self.size += len(encoded)
        self.events += 1


@attrs.frozen
class Expected:
    """What the parser must finish with."""

    thinking: str | None
    signature: str | None
    text: str
    arguments: str | None  # the tool call's JSON text, as streamed
    call_id: str | None  # the tool call's id
    stop_reason: al.StopReason


@attrs.frozen
class Stream:
    name: str
    api: str  # the name of its entry in APIS
    data: bytes
    events: int
    expected: Expected
    runs: int = 1  # runs per timed sample of the decode stages: short streams go in batches

    def parser(self) -> StreamParser:
        return PARSING[self.api].parser()


# --------------------------------------------------------------------------- Anthropic


class AnthropicWriter(Writer):
    """Messages API events, each with ``event:`` and compact JSON, pings sprinkled in."""

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng

    def send(self, payload: dict[str, Any]) -> None:
        if self.rng.random() < 0.01:  # the API pings now and then
            self.event("ping", '{"type": "ping"}')
        self.event(payload["type"], compact(payload))

    def delta(self, index: int, delta: dict[str, Any]) -> None:
        self.send({"type": "content_block_delta", "index": index, "delta": delta})

    def message_start(self) -> None:
        usage = {
            "input_tokens": 480,
            "cache_creation_input_tokens": 1200,
            "cache_read_input_tokens": 0,
            "output_tokens": 4,
            "service_tier": "standard",
        }
        message: dict[str, Any] = {
            "id": "msg_01Aq9w938a90dw8q7dwDKcY4",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-5",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        self.send({"type": "message_start", "message": message})

    def block(self, index: int, kind: str, done: Callable[[int], bool]) -> str:
        """Start a text or thinking block; stream word deltas until ``done(utf8_bytes)``.

        Returns the block's text. The caller stops the block.
        """
        start = {"type": kind, kind: ""} | ({"signature": ""} if kind == "thinking" else {})
        self.send({"type": "content_block_start", "index": index, "content_block": start})
        pieces: list[str] = []
        streamed = 0
        words = deltas(self.rng)
        while not done(streamed):
            piece = next(words)
            pieces.append(piece)
            streamed += len(piece.encode())
            self.delta(index, {"type": f"{kind}_delta", kind: piece})
        return "".join(pieces)

    def stop(self, index: int) -> None:
        self.send({"type": "content_block_stop", "index": index})

    def message_end(self, stop_reason: str) -> None:
        self.send(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": self.events * 3},
            }
        )
        self.send({"type": "message_stop"})


BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def anthropic_mixed(size: int) -> Stream:
    """About ``size`` bytes: thinking to 30% of them, text to 75%, then tool arguments."""
    rng = random.Random(SEED)
    w = AnthropicWriter(rng)
    w.message_start()
    thinking = w.block(0, "thinking", lambda _: w.size >= size * 0.3)
    signature = "".join(rng.choice(BASE64) for _ in range(342)) + "=="
    w.delta(0, {"type": "signature_delta", "signature": signature})
    w.stop(0)
    text = w.block(1, "text", lambda _: w.size >= size * 0.75)
    w.stop(1)
    tool = {"type": "tool_use", "id": ANTHROPIC_CALL_ID, "name": "write_file", "input": {}}
    w.send({"type": "content_block_start", "index": 2, "content_block": tool})
    w.delta(2, {"type": "input_json_delta", "partial_json": ""})
    pieces: list[str] = []
    for piece in json_pieces(rng, ARGUMENTS_PREFIX, lambda: w.size >= size - 500):
        pieces.append(piece)
        w.delta(2, {"type": "input_json_delta", "partial_json": piece})
    w.stop(2)
    w.message_end("tool_use")
    arguments = "".join(pieces)
    expected = Expected(
        thinking, signature, text, arguments, ANTHROPIC_CALL_ID, al.StopReason.TOOL_USE
    )
    return Stream("anthropic mixed", "anthropic", b"".join(w.parts), w.events, expected)


def anthropic_answer(text_bytes: int, name: str) -> Stream:
    """One text block of ``text_bytes`` bytes of UTF-8 text, in word deltas."""
    w = AnthropicWriter(random.Random(SEED + 1))
    w.message_start()
    text = w.block(0, "text", lambda streamed: streamed >= text_bytes)
    w.stop(0)
    w.message_end("end_turn")
    expected = Expected(None, None, text, None, None, al.StopReason.STOP)
    return Stream(name, "anthropic", b"".join(w.parts), w.events, expected)


# --------------------------------------------------------------------------- OpenAI


CHUNK: dict[str, Any] = {
    "id": "chatcmpl-CZq1uYx8Jd3wT0aLhE2nVbKpR7sQm",
    "object": "chat.completion.chunk",
    "created": 1773912034,
    "model": "gpt-5.4-2026-03-05",
    "service_tier": "default",
    "system_fingerprint": "fp_b705f0c291",
}


class OpenAIWriter(Writer):
    """Chat Completions chunks, as OpenAI's API sends them: ``data:`` lines only."""

    def chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        self.event(None, compact(CHUNK | {"choices": [choice], "usage": None}))

    def pieces(self, field: str, done: Callable[[int], bool], rng: random.Random) -> str:
        """``content`` or ``reasoning_content`` word deltas until ``done(utf8_bytes)``."""
        pieces: list[str] = []
        streamed = 0
        words = deltas(rng)
        while not done(streamed):
            piece = next(words)
            pieces.append(piece)
            streamed += len(piece.encode())
            self.chunk({"content": None, field: piece} if field != "content" else {field: piece})
        return "".join(pieces)

    def end(self, finish_reason: str) -> None:
        self.chunk({}, finish_reason)
        usage = {
            "prompt_tokens": 310,
            "completion_tokens": self.events * 3,
            "total_tokens": 310 + self.events * 3,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": self.events, "audio_tokens": 0},
        }
        self.event(None, compact(CHUNK | {"choices": [], "usage": usage}))
        self.event(None, "[DONE]")


def openai_mixed(size: int) -> Stream:
    """About ``size`` bytes: reasoning to 30% of them, content to 75%, then a tool call."""
    rng = random.Random(SEED + 2)
    w = OpenAIWriter()
    w.chunk({"role": "assistant", "content": "", "refusal": None})
    thinking = w.pieces("reasoning_content", lambda _: w.size >= size * 0.3, rng)
    text = w.pieces("content", lambda _: w.size >= size * 0.75, rng)
    function = {"name": "write_file", "arguments": ""}
    w.chunk(
        {
            "tool_calls": [
                {"index": 0, "id": OPENAI_CALL_ID, "type": "function", "function": function}
            ]
        }
    )
    pieces: list[str] = []
    for piece in json_pieces(rng, ARGUMENTS_PREFIX, lambda: w.size >= size - 1000):
        pieces.append(piece)
        w.chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    w.end("tool_calls")
    arguments = "".join(pieces)
    expected = Expected(thinking, None, text, arguments, OPENAI_CALL_ID, al.StopReason.TOOL_USE)
    return Stream("openai mixed", "openai", b"".join(w.parts), w.events, expected)


def openai_answer(text_bytes: int, name: str) -> Stream:
    """One answer of ``text_bytes`` bytes of UTF-8 text, in word deltas."""
    w = OpenAIWriter()
    w.chunk({"role": "assistant", "content": "", "refusal": None})
    text = w.pieces("content", lambda streamed: streamed >= text_bytes, random.Random(SEED + 3))
    w.end("stop")
    expected = Expected(None, None, text, None, None, al.StopReason.STOP)
    return Stream(name, "openai", b"".join(w.parts), w.events, expected)


# --------------------------------------------------------------------------- OpenAI Responses


RESPONSE_ID = "resp_b48a4a05598e76966e26ce78829d2cb051c34193c7ad764b"
REASONING_ID = "rs_10a318ad98b9dccbe56c6dfef9b29b0db63550b3531f8c7a"
MESSAGE_ID = "msg_2f4a28211f046e7ae94f0dc926791f05e42d5c35c413f208"
FUNCTION_ID = "fc_4cea8af44750263a449def71db56450d4305d9f32ed9d538"
WRITE_FILE = {
    "type": "function",
    "description": "Write a file.",
    "name": "write_file",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
    "strict": False,
}
# The response object of response.created, response.in_progress and response.completed, as
# the API sends it (tests/fixtures/responses/); status, output and usage are set per event.
RESPONSE: dict[str, Any] = {
    "id": RESPONSE_ID,
    "object": "response",
    "created_at": 1773912034,
    "status": "in_progress",
    "background": False,
    "completed_at": None,
    "error": None,
    "incomplete_details": None,
    "instructions": None,
    "max_output_tokens": 128000,
    "max_tool_calls": None,
    "model": "gpt-5.4-2026-03-05",
    "output": [],
    "parallel_tool_calls": True,
    "previous_response_id": None,
    "prompt_cache_key": None,
    "prompt_cache_retention": None,
    "reasoning": {"effort": "medium", "summary": "detailed"},
    "safety_identifier": None,
    "service_tier": "auto",
    "store": False,
    "temperature": 1.0,
    "text": {"format": {"type": "text"}, "verbosity": "medium"},
    "tool_choice": "auto",
    "tools": [WRITE_FILE],
    "top_logprobs": 0,
    "top_p": 1.0,
    "truncation": "disabled",
    "usage": None,
    "user": None,
    "metadata": {},
}
SUMMARY_TITLES = (
    "**Reading the request**\n\n",
    "**Planning the change**\n\n",
    "**Checking it**\n\n",
)
ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


class ResponsesWriter(Writer):
    """Responses API events: ``event:`` and compact JSON with its ``sequence_number``.

    Every delta carries an ``obfuscation`` padding of 1-16 characters, as the API's do.
    Each item's ``done`` events and ``response.completed`` repeat what its deltas said:
    ``owed`` counts those bytes ahead, so that the builders can aim at a stream size.
    """

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self.rng = rng
        self.owed = 0  # bytes the done events and response.completed will repeat
        self.output: list[dict[str, Any]] = []  # the finished items, for response.completed
        self.paddings = [
            "".join(rng.choice(ALPHANUMERIC) for _ in range(rng.randint(1, 16))) for _ in range(256)
        ]

    def send(self, kind: str, fields: dict[str, Any], repeats: int = 0) -> None:
        """One event; ``repeats``: the bytes of it that were owed."""
        self.event(kind, compact({"type": kind, "sequence_number": self.events} | fields))
        self.owed -= repeats

    def response(self, kind: str, usage: dict[str, Any] | None = None) -> None:
        """``response.created``, ``response.in_progress`` or ``response.completed``."""
        if kind != "response.completed":
            self.send(kind, {"response": RESPONSE})
            return
        response = RESPONSE | {
            "status": "completed",
            "completed_at": 1773912037,
            "output": self.output,
            "service_tier": "default",
            "usage": usage,
        }
        self.send(kind, {"response": response}, repeats=self.owed)

    def pieces(
        self,
        kind: str,
        fields: dict[str, Any],
        done: Callable[[int], bool],
        copies: int,
        first: str = "",
    ) -> str:
        """``kind`` deltas of a few words until ``done(utf8_bytes)``; returns their text.

        ``fields`` says where they go (``item_id``, ``output_index``...); ``first``, if any,
        is the first delta, always sent; each delta's text is repeated ``copies`` times by
        later events.
        """
        pieces: list[str] = []
        streamed = 0
        words = deltas(self.rng)
        extra: dict[str, Any] = {"logprobs": []} if kind == "response.output_text.delta" else {}
        piece = first
        while piece or not done(streamed):
            piece = piece or next(words)
            pieces.append(piece)
            size = len(piece.encode())
            streamed += size
            self.owed += copies * size
            padding = self.rng.choice(self.paddings)
            self.send(kind, fields | {"delta": piece} | extra | {"obfuscation": padding})
            piece = ""
        return "".join(pieces)

    def message(self, index: int, done: Callable[[int], bool]) -> str:
        """A message item of one ``output_text`` part: streamed, then its done events."""
        item: dict[str, Any] = {
            "id": MESSAGE_ID,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        self.send("response.output_item.added", {"output_index": index, "item": item})
        where = {"item_id": MESSAGE_ID, "output_index": index, "content_index": 0}
        part: dict[str, Any] = {
            "type": "output_text",
            "annotations": [],
            "logprobs": [],
            "text": "",
        }
        self.send("response.content_part.added", where | {"part": part})
        # Repeated by output_text.done, content_part.done, output_item.done, response.completed.
        text = self.pieces("response.output_text.delta", where, done, copies=4)
        size = len(text.encode())
        self.send("response.output_text.done", where | {"text": text, "logprobs": []}, size)
        part = part | {"text": text}
        self.send("response.content_part.done", where | {"part": part}, size)
        item = item | {"status": "completed", "content": [part]}
        self.send("response.output_item.done", {"output_index": index, "item": item}, size)
        self.output.append(item)
        return text


def responses_usage(events: int, reasoning: int) -> dict[str, Any]:
    return {
        "input_tokens": 2048,
        "input_tokens_details": {"cached_tokens": 1920, "cache_write_tokens": 0},
        "output_tokens": events * 3 + reasoning,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": 2048 + events * 3 + reasoning,
    }


def responses_mixed(size: int) -> Stream:
    """About ``size`` bytes: reasoning to 30% of them, the message to 75%, then a call.

    The shares count what the done events and ``response.completed`` repeat. The reasoning
    item has three summary parts and ``encrypted_content`` (1% of the size, in the item's
    added and done events and in the response).
    """
    rng = random.Random(SEED + 4)
    w = ResponsesWriter(rng)
    w.response("response.created")
    w.response("response.in_progress")

    encrypted = "gAAAAAB" + base64.urlsafe_b64encode(rng.randbytes(max(size // 133, 192))).decode()
    reasoning: dict[str, Any] = {
        "id": REASONING_ID,
        "type": "reasoning",
        "encrypted_content": encrypted,
        "summary": [],
    }
    w.send("response.output_item.added", {"output_index": 0, "item": reasoning})
    w.owed += 2 * len(encrypted)  # again in output_item.done and response.completed
    parts: list[str] = []
    for number, title in enumerate(SUMMARY_TITLES):
        where = {"item_id": REASONING_ID, "output_index": 0, "summary_index": number}
        part = {"type": "summary_text", "text": ""}
        w.send("response.reasoning_summary_part.added", where | {"part": part})
        share = 0.3 * (number + 1) / len(SUMMARY_TITLES)

        def part_done(_: int, share: float = share) -> bool:
            return w.size + w.owed >= size * share

        # Repeated by summary_text.done, summary_part.done, output_item.done, response.completed.
        text = w.pieces(
            "response.reasoning_summary_text.delta", where, part_done, copies=4, first=title
        )
        parts.append(text)
        length = len(text.encode())
        w.send("response.reasoning_summary_text.done", where | {"text": text}, length)
        part = part | {"text": text}
        w.send("response.reasoning_summary_part.done", where | {"part": part}, length)
    summary = [{"type": "summary_text", "text": text} for text in parts]
    reasoning = reasoning | {"summary": summary}
    w.send(
        "response.output_item.done",
        {"output_index": 0, "item": reasoning},
        len(encrypted) + sum(len(text.encode()) for text in parts),
    )
    w.output.append(reasoning)

    text = w.message(1, lambda _: w.size + w.owed >= size * 0.75)

    call: dict[str, Any] = {
        "id": FUNCTION_ID,
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": RESPONSES_CALL_ID,
        "name": "write_file",
    }
    w.send("response.output_item.added", {"output_index": 2, "item": call})
    where = {"item_id": FUNCTION_ID, "output_index": 2}
    pieces: list[str] = []
    for piece in json_pieces(rng, ARGUMENTS_PREFIX, lambda: w.size + w.owed >= size - 1500):
        pieces.append(piece)
        # Repeated, escaped, by function_call_arguments.done, output_item.done, response.completed.
        w.owed += 3 * (len(compact(piece).encode()) - 2)
        padding = rng.choice(w.paddings)
        w.send(
            "response.function_call_arguments.delta",
            where | {"delta": piece, "obfuscation": padding},
        )
    arguments = "".join(pieces)
    length = len(compact(arguments).encode()) - 2
    w.send("response.function_call_arguments.done", where | {"arguments": arguments}, length)
    call = call | {"status": "completed", "arguments": arguments}
    w.send("response.output_item.done", {"output_index": 2, "item": call}, length)
    w.output.append(call)
    w.response("response.completed", responses_usage(w.events, len(encrypted) // 3))

    thinking = "\n\n".join(parts)  # agentloop's ThinkingContent: the parts, a blank line apart
    signature = compact(
        {"id": REASONING_ID, "encrypted_content": encrypted, "summary": [len(p) for p in parts]}
    )
    expected = Expected(
        thinking, signature, text, arguments, RESPONSES_CALL_ID, al.StopReason.TOOL_USE
    )
    return Stream("responses mixed", "responses", b"".join(w.parts), w.events, expected)


def responses_answer(text_bytes: int, name: str) -> Stream:
    """One message of ``text_bytes`` bytes of UTF-8 text, in word deltas."""
    w = ResponsesWriter(random.Random(SEED + 5))
    w.response("response.created")
    w.response("response.in_progress")
    text = w.message(0, lambda streamed: streamed >= text_bytes)
    w.response("response.completed", responses_usage(w.events, 0))
    expected = Expected(None, None, text, None, None, al.StopReason.STOP)
    return Stream(name, "responses", b"".join(w.parts), w.events, expected)


# --------------------------------------------------------------------------- end to end

REQUEST = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))
SDK_MESSAGES = [{"role": "user", "content": "hi"}]


class Body(httpx2.AsyncByteStream):
    """A response body that yields the stream in the chunks it was cut into."""

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


def transport(chunks: Sequence[bytes]) -> httpx2.MockTransport:
    """An in-memory server answering every request with the stream, in ``chunks``.

    The same for both sides: each gets an ``httpx2.AsyncClient`` on it (both SDKs are
    built on httpx2, as agentloop is).
    """

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Body(chunks)
        )

    return httpx2.MockTransport(handler)


@attrs.frozen
class Final:
    """What a final message holds, to check that both sides did the same work."""

    thinking: str | None
    signature: str | None
    text: str
    calls: tuple[tuple[str, str, Any], ...]  # (id, name, parsed arguments)


def final_of(message: al.AssistantMessage) -> Final:
    """agentloop's message as a :class:`Final`."""
    thinking = [block for block in message.content if isinstance(block, al.ThinkingContent)]
    return Final(
        "".join(block.thinking for block in thinking) if thinking else None,
        next((block.signature for block in thinking if block.signature), None),
        message.text,
        tuple((call.id, call.name, call.arguments) for call in message.tool_calls),
    )


def expected_final(expected: Expected) -> Final:
    """What the stream was built to hold, as a :class:`Final`."""
    calls: tuple[tuple[str, str, Any], ...] = ()
    if expected.arguments is not None:
        assert expected.call_id is not None
        calls = ((expected.call_id, "write_file", json.loads(expected.arguments)),)
    return Final(expected.thinking, expected.signature, expected.text, calls)


@attrs.frozen
class SDK:
    """An official SDK, used as its documentation shows, on the in-memory transport."""

    label: str  # "anthropic 2.13.0"
    client: Callable[[httpx2.AsyncClient], Any]  # made before the clock starts
    final: Callable[[Any], Awaitable[Any]]  # the request, the stream read, the final message
    view: Callable[[Any], Final]  # that message as a Final, checked against agentloop's


def anthropic_sdk() -> SDK:
    """``messages.stream()`` then ``get_final_message()``. ImportError: not installed."""
    import anthropic

    def client(http: httpx2.AsyncClient) -> Any:
        return anthropic.AsyncAnthropic(
            api_key="sk-ant-bench-not-a-key", base_url=BASE_URL, http_client=http, max_retries=0
        )

    async def final(client: Any) -> Any:
        async with client.messages.stream(
            model="claude-sonnet-5", max_tokens=64_000, messages=SDK_MESSAGES
        ) as stream:
            return await stream.get_final_message()

    def view(message: Any) -> Final:
        blocks = message.content
        thinking = [block for block in blocks if block.type == "thinking"]
        return Final(
            "".join(block.thinking for block in thinking) if thinking else None,
            next((block.signature for block in thinking if block.signature), None),
            "".join(block.text for block in blocks if block.type == "text"),
            tuple((b.id, b.name, b.input) for b in blocks if b.type == "tool_use"),
        )

    return SDK(f"anthropic {anthropic.__version__}", client, final, view)


def openai_sdk() -> SDK:
    """``chat.completions.stream()`` then ``get_final_completion()``. ImportError: not installed.

    The SDK has no reasoning field in Chat Completions: it keeps ``reasoning_content``
    in the message's ``model_extra``, accumulated like the known fields.
    """
    import openai

    def client(http: httpx2.AsyncClient) -> Any:
        return openai.AsyncOpenAI(
            api_key="sk-bench-not-a-key", base_url=f"{BASE_URL}/v1", http_client=http, max_retries=0
        )

    async def final(client: Any) -> Any:
        async with client.chat.completions.stream(model="gpt-5.4", messages=SDK_MESSAGES) as stream:
            return await stream.get_final_completion()

    def view(completion: Any) -> Final:
        message = completion.choices[0].message
        calls = message.tool_calls or []
        return Final(
            (message.model_extra or {}).get("reasoning_content"),
            None,
            message.content or "",
            tuple((c.id, c.function.name, json.loads(c.function.arguments)) for c in calls),
        )

    return SDK(f"openai {openai.__version__}", client, final, view)


def responses_sdk() -> SDK:
    """``responses.stream()`` then ``get_final_response()``. ImportError: not installed.

    The reasoning item's id, ``encrypted_content`` and summary parts are what agentloop
    keeps in its thinking block's signature (see agentloop/providers/_responses.py): the
    view writes them the same way, so the check compares all three.
    """
    import openai

    def client(http: httpx2.AsyncClient) -> Any:
        return openai.AsyncOpenAI(
            api_key="sk-bench-not-a-key", base_url=f"{BASE_URL}/v1", http_client=http, max_retries=0
        )

    async def final(client: Any) -> Any:
        async with client.responses.stream(model="gpt-5.4", input="hi") as stream:
            return await stream.get_final_response()

    def view(response: Any) -> Final:
        items = response.output
        reasoning = [item for item in items if item.type == "reasoning"]
        thinking = signature = None
        if reasoning:
            parts = [part.text for item in reasoning for part in item.summary]
            thinking = "\n\n".join(parts)
            kept: dict[str, Any] = {"id": reasoning[0].id}
            if reasoning[0].encrypted_content is not None:
                kept["encrypted_content"] = reasoning[0].encrypted_content
            if len(parts) > 1:
                kept["summary"] = [len(part) for part in parts]
            signature = compact(kept)
        return Final(
            thinking,
            signature,
            "".join(
                part.text
                for item in items
                if item.type == "message"
                for part in item.content
                if part.type == "output_text"
            ),
            tuple(
                (item.call_id, item.name, json.loads(item.arguments))
                for item in items
                if item.type == "function_call"
            ),
        )

    return SDK(f"openai {openai.__version__}", client, final, view)


async def _drop(delta: al.StreamDelta) -> None:
    """The deltas' consumer end to end: takes each and drops it."""


def run_agentloop(api: API, chunks: Sequence[bytes]) -> tuple[float, al.AssistantMessage]:
    """Nanoseconds from the request to agentloop's final message, and the message (trio)."""

    async def run() -> tuple[float, al.AssistantMessage]:
        async with httpx2.AsyncClient(transport=transport(chunks)) as http:
            provider = api.provider(http)
            gc.collect()
            start = time.perf_counter_ns()
            message = await provider.stream(REQUEST, _drop)
            return time.perf_counter_ns() - start, message

    return trio.run(run)


def run_sdk(sdk: SDK, chunks: Sequence[bytes]) -> tuple[float, Any]:
    """Nanoseconds from the request to the SDK's final message, and the message (asyncio)."""

    async def run() -> tuple[float, Any]:
        async with httpx2.AsyncClient(transport=transport(chunks)) as http:
            client = sdk.client(http)
            gc.collect()
            start = time.perf_counter_ns()
            message = await sdk.final(client)
            return time.perf_counter_ns() - start, message

    return asyncio.run(run())


def check_end_to_end(stream: Stream, sdk: SDK | None, chunk_size: int) -> None:
    """One run each way: agentloop's and the SDK's final messages hold what was streamed."""
    chunks = chunked(stream.data, chunk_size)
    want = expected_final(stream.expected)
    _, message = run_agentloop(api_named(stream.api), chunks)
    assert final_of(message) == want, (stream.name, "agentloop end to end")
    assert message.stop_reason is stream.expected.stop_reason, stream.name
    if sdk is not None:
        _, final = run_sdk(sdk, chunks)
        assert sdk.view(final) == want, (stream.name, sdk.label)


# --------------------------------------------------------------------------- the APIs


@attrs.frozen
class API:
    """One API the benchmark covers: its streams, agentloop's provider, the official SDK.

    Adding an API is appending one of these to ``APIS``:
    the builders write its streams (the same shapes: see ``anthropic_mixed``), ``provider``
    makes agentloop's provider on a given client (``None``: its own, never used, for
    the decode stages, which only take its ``parser()``), and ``sdk`` imports the official
    SDK and returns its runner, or raises ImportError when it is not installed.
    """

    name: str
    mixed: Callable[[int], Stream]  # about N bytes: thinking, text, a write_file call
    answer: Callable[[int, str], Stream]  # one text answer of N bytes of text, named
    provider: Callable[[httpx2.AsyncClient | None], HTTPProvider]
    sdk: Callable[[], SDK]


APIS: list[API] = [
    API(
        "anthropic",
        anthropic_mixed,
        anthropic_answer,
        lambda http: AnthropicProvider(ANTHROPIC_MODEL, client=http, retry=RetryConfig.none()),
        anthropic_sdk,
    ),
    API(
        "openai",
        openai_mixed,
        openai_answer,
        lambda http: OpenAIProvider(OPENAI_MODEL, client=http, retry=RetryConfig.none()),
        openai_sdk,
    ),
    API(
        "responses",  # OpenAI's Responses API
        responses_mixed,
        responses_answer,
        lambda http: OpenAIResponsesProvider(
            RESPONSES_MODEL, client=http, retry=RetryConfig.none()
        ),
        responses_sdk,
    ),
]
# The providers whose parser() the decode stages use; no request is made through them.
PARSING: dict[str, HTTPProvider] = {entry.name: entry.provider(None) for entry in APIS}


def api_named(name: str) -> API:
    return next(entry for entry in APIS if entry.name == name)


# --------------------------------------------------------------------------- the work


def chunked(data: bytes, size: int) -> list[bytes]:
    """``data`` in ``size``-byte chunks, as ``bytes`` (what the HTTP client yields)."""
    return [data[start : start + size] for start in range(0, len(data), size)]


def decode(chunks: Sequence[bytes]) -> int:
    """Stage 1: the decoder alone; returns how many events it dispatched."""
    decoder = SSEDecoder()
    count = 0
    for chunk in chunks:
        count += len(decoder.feed(chunk))
    return count + len(decoder.close())


def decode_parse(chunks: Sequence[bytes], parser: StreamParser) -> al.AssistantMessage:
    """Stage 2: decoder and parser as ``HTTPProvider._attempt`` wires them; deltas dropped."""
    decoder = SSEDecoder()
    for chunk in chunks:
        for event in decoder.feed(chunk):
            parser.feed(event)
        if parser.done:
            break
    else:
        for event in decoder.close():
            parser.feed(event)
    return parser.finish()


def check(stream: Stream) -> None:
    """Decode and parse ``stream`` once; assert the message and the deltas are what was sent."""
    decoder = SSEDecoder()
    parser = stream.parser()
    streamed: dict[type, list[str]] = {al.TextDelta: [], al.ThinkingDelta: [], al.ToolCallDelta: []}
    events = 0
    for chunk in chunked(stream.data, 4096):
        for event in decoder.feed(chunk):
            events += 1
            for delta in parser.feed(event):
                assert not isinstance(delta, al.StreamRestart)  # only the HTTP core sends it
                streamed[type(delta)].append(delta.delta)
        if parser.done:
            break
    assert parser.done, stream.name
    assert events == stream.events, (stream.name, events, stream.events)
    message = parser.finish()
    expected = stream.expected
    want: list[Any] = []
    if expected.thinking is not None:
        want.append(al.ThinkingContent(expected.thinking, expected.signature))
    want.append(al.TextContent(expected.text))
    if expected.arguments is not None:
        assert expected.call_id is not None
        want.append(al.ToolCall(expected.call_id, "write_file", json.loads(expected.arguments)))
    assert list(message.content) == want, stream.name
    assert message.stop_reason is expected.stop_reason, (stream.name, message.stop_reason)
    assert "".join(streamed[al.TextDelta]) == expected.text, stream.name
    assert "".join(streamed[al.ThinkingDelta]) == (expected.thinking or ""), stream.name
    assert "".join(streamed[al.ToolCallDelta]) == (expected.arguments or ""), stream.name
    assert decode(chunked(stream.data, 65536)) == stream.events, stream.name


# --------------------------------------------------------------------------- timing

NOISE = 1.2  # a median further than this above its min: the timings are noisy
FLAT_TARGET = 1.25  # the long answer's MB/s within this factor of the short one's


def time_decode(stream: Stream, chunk_size: int) -> float:
    """Nanoseconds to decode ``stream`` alone (per run; a sample is ``stream.runs`` runs)."""
    chunks = chunked(stream.data, chunk_size)
    gc.collect()
    start = time.perf_counter_ns()
    counts = [decode(chunks) for _ in range(stream.runs)]
    elapsed = time.perf_counter_ns() - start
    assert counts == [stream.events] * stream.runs, (stream.name, counts)
    return elapsed / stream.runs


def time_decode_parse(stream: Stream, chunk_size: int) -> float:
    """Nanoseconds to decode and parse ``stream`` into its message (per run)."""
    chunks = chunked(stream.data, chunk_size)
    parsers = [stream.parser() for _ in range(stream.runs)]
    gc.collect()
    start = time.perf_counter_ns()
    messages = [decode_parse(chunks, parser) for parser in parsers]
    elapsed = time.perf_counter_ns() - start
    assert all(m.stop_reason is stream.expected.stop_reason for m in messages), stream.name
    return elapsed / stream.runs


def time_end_to_end(
    stream: Stream, chunk_size: int, sdk: SDK | None, sdk_first: bool
) -> tuple[float, float | None]:
    """Nanoseconds from the request to the final message: agentloop's, and the SDK's.

    One run each, back to back, in the order ``sdk_first`` says.
    """
    chunks = chunked(stream.data, chunk_size)
    entry = api_named(stream.api)
    sdk_ns: float | None = None
    if sdk is not None and sdk_first:
        sdk_ns, _ = run_sdk(sdk, chunks)
    agentloop_ns, message = run_agentloop(entry, chunks)
    if sdk is not None and not sdk_first:
        sdk_ns, _ = run_sdk(sdk, chunks)
    assert message.stop_reason is stream.expected.stop_reason, stream.name
    return agentloop_ns, sdk_ns


def build(providers: Sequence[str], size: float, answer: float) -> list[Stream]:
    """Per API: the mixed stream, the long answer, the short answer (8 runs a sample)."""
    streams: list[Stream] = []
    for entry in APIS:
        if entry.name not in providers:
            continue
        streams.append(entry.mixed(int(size * MB)))
        streams.append(entry.answer(int(answer * MB), answer_name(entry.name, answer)))
        short = entry.answer(int(answer * MB / 8), answer_name(entry.name, answer / 8))
        streams.append(attrs.evolve(short, runs=8))  # as many bytes a sample as the long one
    return streams


def load_sdks(providers: Sequence[str], no_sdk: bool) -> dict[str, SDK | None]:
    """Each API's official SDK runner; None (said so) for those not installed, or all."""
    sdks: dict[str, SDK | None] = dict.fromkeys(providers)
    if no_sdk:
        print("--no-sdk: end to end, agentloop alone")
        return sdks
    for entry in APIS:
        if entry.name not in providers:
            continue
        try:
            sdks[entry.name] = entry.sdk()
        except ImportError as error:
            print(
                f"the official SDK for {entry.name} is not installed ({error.name}): "
                "its end-to-end column is skipped"
            )
    return sdks


def answer_name(provider: str, megabytes: float) -> str:
    return f"{provider} answer {megabytes:g} MB text"


def chunk_label(size: int) -> str:
    return f"{size // 1024} KiB" if size % 1024 == 0 else f"{size} B"


def profile(stream: Stream, chunk_size: int, top: int = 10) -> str:
    """cProfile's top functions by own time (tottime) for decode+parse of ``stream``."""
    chunks = chunked(stream.data, chunk_size)
    parser = stream.parser()
    gc.collect()
    profiler = cProfile.Profile()
    profiler.enable()
    decode_parse(chunks, parser)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).strip_dirs().sort_stats("tottime").print_stats(top)
    lines = out.getvalue().strip().splitlines()
    start = next(i for i, line in enumerate(lines) if "function calls" in line)
    return "\n".join(line for line in lines[start:] if line.strip() and "Ordered by" not in line)


def main(
    providers: list[str],
    size: float,
    answer: float,
    chunk_sizes: list[int],
    repeat: int,
    profile_chunk: int | None,
    end_to_end_repeat: int,
    no_sdk: bool,
) -> None:
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print(f"agentloop {al.__version__}")
    print(f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"repeats: {repeat} (median shown); 1 MB = 10**6 bytes of SSE")
    sdks = load_sdks(providers, no_sdk)
    if size > 10 and sdks.get("anthropic") is not None:
        print(
            "note: the anthropic SDK's time on the mixed stream grows with the square of its "
            "size (18 s a run at --size 20, about 2 minutes at 50); --no-sdk leaves it out"
        )
    # What is loaded by now (agentloop, trio, httpx2, the SDKs' thousands of pydantic
    # classes) lives as long as the process: out of the collector's scans, the gc.collect()
    # before each sample takes microseconds, not 100 ms, and the SDKs' modules do not make
    # a full collection during a timed run cost more than it did without them.
    gc.freeze()

    began = time.perf_counter()
    streams = build(providers, size, answer)
    for stream in streams:
        check(stream)
    print(f"built and checked {len(streams)} streams in {time.perf_counter() - began:.1f} s")
    # End to end once each way (also the warm-up of that stage): both final messages hold
    # exactly what was streamed, so both sides did the same work.
    began = time.perf_counter()
    for stream in streams:
        check_end_to_end(stream, sdks[stream.api], chunk_sizes[0])
    # What the SDKs built at their first use lives as long as the process too: the openai
    # SDK loads its responses resources and builds the pydantic schemas of the Responses
    # types then (about 30,000 objects, which made every gc.collect() 15 ms).
    gc.collect()
    gc.freeze()
    labels = list(dict.fromkeys(sdk.label for sdk in sdks.values() if sdk is not None))
    print(
        f"checked {len(streams)} streams end to end in {time.perf_counter() - began:.1f} s: "
        f"the final messages of {', '.join(['agentloop', *labels])} hold exactly the "
        "streamed thinking, text and tool call"
    )

    # Warm-up: check() ran every stream through both stages once; then one more untimed run
    # of each stage on the short answers.
    for stream in streams:
        if "answer" not in stream.name:
            continue
        time_decode(stream, chunk_sizes[0])
        time_decode_parse(stream, chunk_sizes[0])

    # Round-robin over the configurations, alternating which stage goes first, so that a slow
    # spell of the machine hits every row alike.
    configs = [(stream, chunk) for chunk in chunk_sizes for stream in streams]
    decode_ns: dict[tuple[str, int], list[float]] = {(st.name, c): [] for st, c in configs}
    parse_ns: dict[tuple[str, int], list[float]] = {(st.name, c): [] for st, c in configs}
    for repetition in range(repeat):
        for stream, chunk in configs:
            key = stream.name, chunk
            if repetition % 2 == 0:
                decode_ns[key].append(time_decode(stream, chunk))
                parse_ns[key].append(time_decode_parse(stream, chunk))
            else:
                parse_ns[key].append(time_decode_parse(stream, chunk))
                decode_ns[key].append(time_decode(stream, chunk))

    print()
    header = (
        f"{'stream':<30} | {'MB':>5} | {'events':>6} | {'chunk':>6} | {'decode MB/s':>11} "
        f"| {'decode+parse MB/s':>17} | {'events/s':>8} | {'parse µs/event':>14}"
    )
    print(header)
    print("-" * len(header))
    noisy = False
    for stream in streams:
        megabytes = len(stream.data) / MB
        for chunk in chunk_sizes:
            decodes, parses = decode_ns[stream.name, chunk], parse_ns[stream.name, chunk]
            d_median, p_median = statistics.median(decodes), statistics.median(parses)
            noisy = noisy or d_median > NOISE * min(decodes) or p_median > NOISE * min(parses)
            print(
                f"{stream.name:<30} | {megabytes:>5.1f} | {stream.events:>6} "
                f"| {chunk_label(chunk):>6} | {megabytes / (d_median / 1e9):>11.1f} "
                f"| {megabytes / (p_median / 1e9):>17.1f} "
                f"| {stream.events / (p_median / 1e9):>8.0f} "
                f"| {(p_median - d_median) / 1000 / stream.events:>14.2f}"
            )
    print()

    sizes = {stream.name: len(stream.data) for stream in streams}
    for provider in providers:
        long, short = answer_name(provider, answer), answer_name(provider, answer / 8)
        for chunk in chunk_sizes:
            # The best run of each: noise only ever slows a run down.
            long_ns, short_ns = min(parse_ns[long, chunk]), min(parse_ns[short, chunk])
            growth = (long_ns / sizes[long]) / (short_ns / sizes[short])
            verdict = "flat" if growth <= FLAT_TARGET else "NOT flat"
            print(
                f"length growth, {provider}, {chunk_label(chunk)} chunks: decode+parse MB/s of the "
                f"{answer / 8:g} MB answer is {growth:.2f}x that of the {answer:g} MB answer "
                f"(best runs): {verdict} (target <= {FLAT_TARGET}x)"
            )
    noisy = end_to_end(streams, sdks, chunk_sizes, end_to_end_repeat) or noisy
    if noisy:
        print(
            f"warning: some medians are more than {NOISE}x their min: the timings are noisy "
            "(was the machine busy?); rerun on an idle machine, or with a larger --repeat"
        )

    if profile_chunk is not None:
        for stream in streams:
            if stream.name.endswith("mixed"):
                print()
                print(
                    f"cProfile, decode+parse of {stream.name}, {chunk_label(profile_chunk)} chunks:"
                )
                print(profile(stream, profile_chunk))


SDK_TARGET = 2.0  # agentloop end to end at least this many times the SDK's MB/s


def end_to_end(
    streams: Sequence[Stream],
    sdks: dict[str, SDK | None],
    chunk_sizes: Sequence[int],
    repeat: int,
) -> bool:
    """Time and print the end-to-end table; return whether the timings were noisy."""
    configs = [(stream, chunk) for chunk in chunk_sizes for stream in streams]
    ours: dict[tuple[str, int], list[float]] = {(st.name, c): [] for st, c in configs}
    theirs: dict[tuple[str, int], list[float]] = {(st.name, c): [] for st, c in configs}
    # Round-robin, alternating which side goes first, as above.
    for repetition in range(repeat):
        for stream, chunk in configs:
            sdk = sdks[stream.api]
            agentloop_ns, sdk_ns = time_end_to_end(stream, chunk, sdk, repetition % 2 == 1)
            ours[stream.name, chunk].append(agentloop_ns)
            if sdk_ns is not None:
                theirs[stream.name, chunk].append(sdk_ns)

    print()
    print(
        "end to end: from the request to the final message, the stream served in the same "
        f"chunks by an in-memory httpx2 transport (median of {repeat}); agentloop/SDK is the "
        "median of the per-repeat ratios"
    )
    header = (
        f"{'stream':<30} | {'MB':>5} | {'chunk':>6} | {'agentloop MB/s':>14} | {'SDK':<17} "
        f"| {'SDK MB/s':>8} | {'agentloop/SDK':>13} | target >= {SDK_TARGET:g}x"
    )
    print(header)
    print("-" * len(header))
    noisy = False
    ratios: list[float] = []
    for stream in streams:
        megabytes = len(stream.data) / MB
        sdk = sdks[stream.api]
        for chunk in chunk_sizes:
            mine, other = ours[stream.name, chunk], theirs[stream.name, chunk]
            median = statistics.median(mine)
            noisy = noisy or median > NOISE * min(mine)
            row = (
                f"{stream.name:<30} | {megabytes:>5.1f} | {chunk_label(chunk):>6} "
                f"| {megabytes / (median / 1e9):>14.1f} | "
            )
            if sdk is None:
                print(row + f"{'-':<17} | {'-':>8} | {'-':>13} | -")
                continue
            sdk_median = statistics.median(other)
            noisy = noisy or sdk_median > NOISE * min(other)
            ratio = statistics.median(s / a for s, a in zip(other, mine, strict=True))
            ratios.append(ratio)
            verdict = "ok" if ratio >= SDK_TARGET else f"BELOW {SDK_TARGET:g}x"
            print(
                row + f"{sdk.label:<17} | {megabytes / (sdk_median / 1e9):>8.1f} "
                f"| {ratio:>12.2f}x | {verdict}"
            )
    if ratios:
        verdict = "ok" if min(ratios) >= SDK_TARGET else f"BELOW {SDK_TARGET:g}x"
        print(
            f"end to end: agentloop is {min(ratios):.2f}x to {max(ratios):.2f}x the SDKs' MB/s: "
            f"{verdict} (target >= {SDK_TARGET:g}x)"
        )
    return noisy


def parse_list(text: str, choices: Sequence[str] | None = None) -> list[str]:
    values = [part.strip() for part in text.split(",") if part.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"empty list: {text!r}")
    if choices is not None and not set(values) <= set(choices):
        raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}: {text!r}")
    return list(dict.fromkeys(values))


def parse_chunks(text: str) -> list[int]:
    try:
        values = [int(part) for part in parse_list(text)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"chunk sizes must be >= 1: {text!r}")
    return values


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="MB/s of SSE decoding and stream parsing for long Anthropic, OpenAI Chat "
        "Completions and OpenAI Responses streams, and end to end against the official SDKs."
    )
    parser.add_argument(
        "--size",
        type=positive,
        default=5.0,
        help="MB of SSE in each mixed stream (default: 5; try 50)",
    )
    parser.add_argument(
        "--answer-mb",
        type=positive,
        default=1.0,
        help="MB of text in the long single-answer streams; the short ones have an eighth "
        "(default: 1)",
    )
    parser.add_argument(
        "--chunks",
        type=parse_chunks,
        default=[4096, 65536],
        help="comma-separated byte chunk sizes to feed the decoder (default: 4096,65536)",
    )
    names = [entry.name for entry in APIS]
    parser.add_argument(
        "--providers",
        type=lambda text: parse_list(text, names),
        default=names,
        help=f"comma-separated providers (default: {','.join(names)})",
    )
    parser.add_argument(
        "--repeat", type=lambda text: int(positive(text)), default=5, help="timed runs (default: 5)"
    )
    parser.add_argument(
        "--e2e-repeat",
        type=lambda text: int(positive(text)),
        default=3,
        help="timed runs end to end, each side (default: 3; the SDKs take about 10 s for "
        "the 21 MB OpenAI answer)",
    )
    parser.add_argument(
        "--no-sdk",
        action="store_true",
        help="leave the official SDKs out: time agentloop end to end alone",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="then print cProfile's top 10 by tottime of decode+parse of each mixed stream",
    )
    args = parser.parse_args(argv)
    profile_chunk = args.chunks[0] if args.profile else None
    main(
        args.providers,
        args.size,
        args.answer_mb,
        args.chunks,
        args.repeat,
        profile_chunk,
        args.e2e_repeat,
        args.no_sdk,
    )


if __name__ == "__main__":
    cli()
