"""AnthropicProvider: the Messages API request, its event stream, errors, and a real run."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio
from helpers import TEXT_SCHEMA, Echo
from sse_server import Reply, serve

import agentloop as al
from agentloop import (
    AssistantMessage,
    ImageContent,
    StopReason,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agentloop._loop._stream import PartialMessage
from agentloop.providers import (
    AuthenticationError,
    BadRequestError,
    Compat,
    ContextOverflowError,
    ModelConfig,
    ModelRequest,
    NetworkError,
    OutputFormat,
    OverloadedError,
    ProviderError,
    RateLimitError,
    RetryConfig,
    ServerError,
    ThinkingLevel,
    ToolDefinition,
)
from agentloop.providers._anthropic import AnthropicProvider
from agentloop.providers.sse import ServerSentEvent

FIXTURES = Path(__file__).parent.parent / "fixtures" / "anthropic"
KEY = "sk-ant-api03-TEST-SECRET-0123456789"
MODEL = ModelConfig.anthropic("claude-sonnet-5", api_key=KEY)
HAIKU = ModelConfig.anthropic("claude-haiku-4-5", api_key=KEY)  # budget thinking
EPHEMERAL = {"type": "ephemeral"}

SIG_WEATHER = (
    "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYdsNYxnQ3tCDJ1fk0Vw4I+2pN0Z3y6y0PvA+gJCA=="
)
SIG_CHECK = (
    "ErUBCkYIBxgCIkCzH1fj0pQmL3tFbUW9c6FPdR0kWjz3u/e/iHhuJ3gYxMUjsdN4sVkxCHRhKAEhr8lT5qSs0B6cIDiTyB"
    "nYjWO+EgxJDt2jJ8YbVwQLsV0aDJT0iGCfkSC59rhP6Q=="
)
REDACTED = (
    "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB9URj"
    "2pLmN3kF8/dW5hR7xJ0aP1oLs9yTcMnKVf2wRpEGjH9XZaBt4UvDcPrQ=="
)
READ_A, READ_B = "toolu_01A4Jqvyr5wFcWCP6BUajEoV", "toolu_01NRLabsLyVHZPKxbKvkfSMn"
WEATHER = "toolu_01WDkRNXpZ8yyaGKxJ7V9Jbu"
WRITE = "toolu_01Ld3ZCGkN9qYuG8qvVQ2ypG"


# --------------------------------------------------------------------------- helpers


def usage(input: int = 0, output: int = 0, cache_read: int = 0, cache_write: int = 0) -> Usage:
    """Usage as the provider reports it: the total, and the cost at claude-sonnet-5's prices."""
    counts = Usage(
        input, output, cache_read, cache_write, input + output + cache_read + cache_write
    )
    return attrs.evolve(counts, cost=MODEL.cost.of(counts))


def reply(content: Sequence[Any], stop: StopReason, used: Usage) -> AssistantMessage:
    """An expected reply of claude-sonnet-5, stamped 0 (see ``plain``)."""
    return AssistantMessage(content, stop, "claude-sonnet-5", "anthropic", used, timestamp=0)


def plain(message: Any) -> Any:
    """``message`` with timestamp 0, to compare with expectations."""
    return attrs.evolve(message, timestamp=0)


def fixture(name: str) -> bytes:
    return (FIXTURES / f"{name}.sse").read_bytes()


def sse(*events: dict[str, Any]) -> bytes:
    """An Anthropic event stream: each event named by its type."""
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode() for event in events
    )


def stream(*chunks: bytes) -> httpx2.Response:
    """A 200 event stream whose body arrives in exactly these chunks."""

    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())


def api_error(status: int, kind: str, message: str, **headers: str) -> httpx2.Response:
    """An error response shaped like Anthropic's."""
    body = {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
    return httpx2.Response(status, json=body, headers={"request-id": body["request_id"], **headers})


def random_cuts(body: bytes, rng: random.Random) -> list[bytes]:
    cuts = sorted(rng.sample(range(1, len(body)), rng.randint(1, 40)))
    return [body[start:end] for start, end in zip([0, *cuts], [*cuts, len(body)], strict=True)]


@attrs.define
class FakeAPI:
    """A MockTransport server answering each request with its next response."""

    responses: list[Any]
    requests: list[httpx2.Request] = attrs.field(factory=list)

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.responses[len(self.requests) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    def provider(
        self, model: ModelConfig = MODEL, retry: RetryConfig | None = None
    ) -> AnthropicProvider:
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))
        return AnthropicProvider(model, retry=retry or RetryConfig(jitter=0), client=client)

    def body(self, position: int = 0) -> Any:
        return json.loads(self.requests[position].content)


REQUEST = ModelRequest(system_prompt="", messages=(UserMessage.text("Hi"),))


async def collect(
    provider: AnthropicProvider, request: ModelRequest = REQUEST
) -> tuple[list[Any], AssistantMessage]:
    deltas: list[Any] = []

    async def emit(delta: Any) -> None:
        deltas.append(delta)

    message = await provider.stream(request, emit)
    return deltas, message


async def body_of(request: ModelRequest, model: ModelConfig = MODEL) -> Any:
    """The JSON body the provider sends for ``request``."""
    api = FakeAPI([stream(fixture("text"))])
    await collect(api.provider(model), request)
    return api.body()


def parse(*events: dict[str, Any]) -> tuple[list[Any], AssistantMessage]:
    """Feed ``events`` straight to a parser; its deltas and its message."""
    parser = AnthropicProvider(MODEL).parser()
    deltas = [
        delta
        for event in events
        for delta in parser.feed(ServerSentEvent(event["type"], json.dumps(event)))
    ]
    return deltas, plain(parser.finish())


START = {
    "type": "message_start",
    "message": {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    },
}
STOP = {"type": "message_stop"}


def block_start(index: int, **block: Any) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, **delta: Any) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str | None, **usage: int) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": stop_reason}}
    if usage:
        event["usage"] = usage
    return event


# --------------------------------------------------------------------------- the stream

EXPECTED = {
    "text": reply(
        [TextContent("Hello! Café au lait ☕ is on the menu.")],
        StopReason.STOP,
        usage(input=25, output=12),
    ),
    "parallel_tools": reply(
        [
            TextContent("I'll read both files."),
            ToolCall(READ_A, "read_file", {"path": "a.txt"}),
            ToolCall(READ_B, "read_file", {"path": "docs/b.txt"}),
        ],
        StopReason.TOOL_USE,
        usage(input=12, output=98, cache_read=1830),
    ),
    "thinking_tool": reply(
        [
            ThinkingContent(
                "The user wants the weather in Paris. I should call get_weather with the city.",
                SIG_WEATHER,
            ),
            TextContent("Let me check the weather in Paris."),
            ToolCall(WEATHER, "get_weather", {"city": "Paris", "unit": "celsius"}),
        ],
        StopReason.TOOL_USE,
        usage(input=480, output=156, cache_write=1200),
    ),
    "redacted_thinking": reply(
        [
            ThinkingContent("Checking the request.", SIG_CHECK),
            ThinkingContent("", REDACTED, redacted=True),
            TextContent("Here is a safe summary."),
        ],
        StopReason.STOP,
        usage(input=310, output=87),
    ),
    "max_tokens_tool": reply(
        [
            TextContent("I'll write the notes file."),
            ToolCall(
                WRITE, "write_file", {}, r'{"path": "notes.md", "content": "# Notes\n\nFirst, the'
            ),
        ],
        StopReason.LENGTH,
        usage(input=205, output=64),
    ),
    "refusal": reply(
        [TextContent("I can't help with that")], StopReason.REFUSAL, usage(input=41, output=9)
    ),
    "pause_turn": reply(
        [TextContent("Let me search for the release notes.")],
        StopReason.PAUSED,
        usage(input=2140, output=52),
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_fixture_gives_the_same_message_however_the_bytes_arrive(name: str) -> None:
    """Whole, byte by byte, or cut at random: the same deltas and the exact expected message."""
    body = fixture(name)
    rng = random.Random(name)
    splits = [[body], [body[i : i + 1] for i in range(len(body))]]
    splits += [random_cuts(body, rng) for _ in range(10)]
    results = []
    for chunks in splits:
        deltas, message = await collect(FakeAPI([stream(*chunks)]).provider())
        results.append((deltas, plain(message)))
    assert results[0][1] == EXPECTED[name]
    assert all(result == results[0] for result in results)


async def test_text_deltas_arrive_in_order() -> None:
    """The text fixture streams its three text pieces at block index 0."""
    deltas, _ = await collect(FakeAPI([stream(fixture("text"))]).provider())
    assert deltas == [
        TextDelta(delta="Hello", index=0),
        TextDelta(delta="! Café au lait ☕ is", index=0),
        TextDelta(delta=" on the menu.", index=0),
    ]


async def test_parallel_tool_call_deltas_name_their_call() -> None:
    """Each tool_use block opens with an empty delta, then its JSON pieces, id and name on each."""
    deltas, _ = await collect(FakeAPI([stream(fixture("parallel_tools"))]).provider())

    def call(delta: str, index: int, call_id: str) -> ToolCallDelta:
        return ToolCallDelta(delta=delta, index=index, tool_call_id=call_id, name="read_file")

    assert deltas == [
        TextDelta(delta="I'll read", index=0),
        TextDelta(delta=" both files.", index=0),
        call("", 1, READ_A),
        call('{"pa', 1, READ_A),
        call('th": "a.', 1, READ_A),
        call('txt"}', 1, READ_A),
        call("", 2, READ_B),
        call('{"path":', 2, READ_B),
        call(' "docs/b.txt"', 2, READ_B),
        call("}", 2, READ_B),
    ]


async def test_thinking_deltas_and_no_delta_for_the_signature() -> None:
    """Thinking streams as ThinkingDelta; the signature_delta emits nothing."""
    deltas, _ = await collect(FakeAPI([stream(fixture("thinking_tool"))]).provider())
    assert deltas == [
        ThinkingDelta(delta="The user wants the weather in Paris.", index=0),
        ThinkingDelta(delta=" I should call get_weather with the city.", index=0),
        TextDelta(delta="Let me check the weather in Paris.", index=1),
        ToolCallDelta(delta="", index=2, tool_call_id=WEATHER, name="get_weather"),
        ToolCallDelta(
            delta='{"city": "Paris", ', index=2, tool_call_id=WEATHER, name="get_weather"
        ),
        ToolCallDelta(
            delta='"unit": "celsius"}', index=2, tool_call_id=WEATHER, name="get_weather"
        ),
    ]


async def test_loop_partial_message_shows_the_blocks_in_order() -> None:
    """The loop's accumulator turns the deltas into the final blocks, arguments still {}."""
    deltas, _ = await collect(FakeAPI([stream(fixture("redacted_thinking"))]).provider())
    partial = PartialMessage()
    for delta in deltas:
        partial.apply(delta)
    assert partial.message().content == (
        ThinkingContent("Checking the request."),
        ThinkingContent(""),
        TextContent("Here is a safe summary."),
    )


async def test_usage_is_priced_at_the_models_rates() -> None:
    """25 tokens in and 12 out at $2 / $10 per million cost $0.00017."""
    _, message = await collect(FakeAPI([stream(fixture("text"))]).provider())
    assert message.usage == Usage(input=25, output=12, total_tokens=37, cost=0.00017)


def test_message_delta_usage_replaces_every_count_it_has() -> None:
    """Newer APIs send cumulative input and cache counts in message_delta: they win."""
    _, message = parse(
        START,
        message_delta(
            "end_turn",
            input_tokens=14,
            cache_read_input_tokens=300,
            cache_creation_input_tokens=40,
            output_tokens=7,
        ),
        STOP,
    )
    assert message.usage == usage(input=14, output=7, cache_read=300, cache_write=40)


def test_message_delta_without_usage_keeps_counts_and_stop_reason() -> None:
    """A message_delta with no usage still sets the stop reason and zeroes nothing."""
    _, message = parse(START, message_delta("max_tokens"), STOP)
    assert (message.stop_reason, message.usage) == (StopReason.LENGTH, usage(input=10, output=1))


@pytest.mark.parametrize(
    ("raw", "stop_reason"),
    [
        ("end_turn", StopReason.STOP),
        ("stop_sequence", StopReason.STOP),
        ("tool_use", StopReason.TOOL_USE),
        ("max_tokens", StopReason.LENGTH),
        ("model_context_window_exceeded", StopReason.LENGTH),
        ("pause_turn", StopReason.PAUSED),
        ("refusal", StopReason.REFUSAL),
        ("a_reason_from_the_future", StopReason.STOP),
        (None, StopReason.STOP),
    ],
)
def test_stop_reasons_map(raw: str | None, stop_reason: StopReason) -> None:
    """Each API stop reason maps to its StopReason; unknown or missing ones are STOP."""
    assert parse(START, message_delta(raw), STOP)[1].stop_reason is stop_reason


def test_model_comes_from_message_start() -> None:
    """The reply names the model the API says answered, not the one asked for."""
    start = json.loads(json.dumps(START))
    start["message"]["model"] = "claude-sonnet-5-20261001"
    assert parse(start, STOP)[1].model == "claude-sonnet-5-20261001"


def test_unfinished_tool_call_keeps_its_text_as_raw_arguments() -> None:
    """A tool_use block with no content_block_stop is never run: its text, even "", is kept raw."""
    _, message = parse(
        START,
        block_start(0, type="tool_use", id="toolu_1", name="ls", input={}),
        block_delta(0, type="input_json_delta", partial_json='{"path": "."}'),
        block_start(1, type="tool_use", id="toolu_2", name="ls", input={}),
        STOP,
    )
    assert message.content == (
        ToolCall("toolu_1", "ls", {}, '{"path": "."}'),
        ToolCall("toolu_2", "ls", {}, ""),
    )


def test_finished_tool_call_without_arguments_has_none() -> None:
    """A stopped tool_use block with no JSON is a call with {} arguments, not raw text."""
    _, message = parse(
        START,
        block_start(0, type="tool_use", id="toolu_1", name="now", input={}),
        block_stop(0),
        STOP,
    )
    assert message.content == (ToolCall("toolu_1", "now", {}),)


def test_unknown_events_blocks_and_deltas_are_ignored() -> None:
    """Future event, block and delta types pass without deltas or content."""
    deltas, message = parse(
        START,
        {"type": "future_event", "detail": 1},
        block_start(0, type="text", text=""),
        block_delta(0, type="citations_delta", citation={"cited_text": "x"}),
        block_delta(0, type="text_delta", text="Hi"),
        block_start(1, type="container_upload", file_id="file_01"),
        block_delta(1, type="text_delta", text="not text"),
        block_stop(1),
        STOP,
    )
    assert deltas == [TextDelta(delta="Hi", index=0)]
    assert message.content == (TextContent("Hi"),)


def test_events_after_message_stop_are_ignored() -> None:
    """Once message_stop arrives the message is complete."""
    deltas, message = parse(
        START,
        block_start(0, type="text", text=""),
        STOP,
        block_delta(0, type="text_delta", text="x"),
    )
    assert (deltas, message.content) == ([], ())


def test_block_start_text_is_kept() -> None:
    """Text already in content_block_start is emitted and kept."""
    deltas, message = parse(START, block_start(0, type="text", text="Hi"), block_stop(0), STOP)
    assert deltas == [TextDelta(delta="Hi", index=0)]
    assert message.content == (TextContent("Hi"),)


async def test_stream_cut_before_message_stop_is_a_network_error() -> None:
    """A body that ends before message_stop raises NetworkError (retryable)."""
    body = fixture("text")
    cut = body[: body.index(b"event: message_stop")]
    with pytest.raises(NetworkError, match=r"^Anthropic stream ended before message_stop$"):
        await collect(FakeAPI([stream(cut)]).provider(retry=RetryConfig.none()))


async def test_malformed_event_is_a_server_error() -> None:
    """An event whose data is not a JSON object raises a (retryable) ServerError."""
    body = b'event: content_block_delta\ndata: {"type": "content_bl\n\n'
    with pytest.raises(ServerError) as caught:
        await collect(FakeAPI([stream(body)]).provider(retry=RetryConfig.none()))
    assert str(caught.value) == (
        'Anthropic API sent a malformed content_block_delta event: {"type": "content_bl'
    )


async def test_error_event_raises_overloaded() -> None:
    """An overloaded_error event mid-stream raises OverloadedError with the API's words."""
    api = FakeAPI([stream(fixture("overloaded_error"))])
    with pytest.raises(OverloadedError) as caught:
        await collect(api.provider(retry=RetryConfig.none()))
    assert str(caught.value) == "Anthropic API error (overloaded_error): Overloaded"


async def test_error_event_is_retried_and_restarts(autojump_clock: Any) -> None:
    """After an overloaded_error event: a restart delta, a 1 s wait, then the whole reply."""
    api = FakeAPI([stream(fixture("overloaded_error")), stream(fixture("text"))])
    deltas, message = await collect(api.provider())
    assert deltas[:2] == [
        TextDelta(delta="Hel", index=0),
        al.StreamRestart(
            attempt=2, delay=1.0, error="Anthropic API error (overloaded_error): Overloaded"
        ),
    ]
    assert len(deltas) == 5
    assert plain(message) == EXPECTED["text"]


@pytest.mark.parametrize(
    ("kind", "message", "error_type"),
    [
        ("overloaded_error", "Overloaded", OverloadedError),
        ("rate_limit_error", "Rate limited", RateLimitError),
        ("api_error", "Internal server error", ServerError),
        ("timeout_error", "Request timed out", ServerError),
        ("authentication_error", "invalid x-api-key", AuthenticationError),
        ("permission_error", "not allowed", AuthenticationError),
        ("invalid_request_error", "max_tokens: too large", BadRequestError),
        ("invalid_request_error", "prompt is too long: 210000 tokens", ContextOverflowError),
        ("billing_error", "credit balance too low", ProviderError),
        ("some_future_error", "something failed", ServerError),
    ],
)
def test_error_events_map_to_error_classes(
    kind: str, message: str, error_type: type[ProviderError]
) -> None:
    """Each error type in an error event raises its ProviderError class."""
    with pytest.raises(ProviderError) as caught:
        parse(START, {"type": "error", "error": {"type": kind, "message": message}})
    assert type(caught.value) is error_type
    assert str(caught.value) == f"Anthropic API error ({kind}): {message}"


# --------------------------------------------------------------------------- HTTP errors


@pytest.mark.parametrize(
    ("response", "error_type", "message"),
    [
        (
            api_error(400, "invalid_request_error", "messages.0: `content` must not be empty"),
            BadRequestError,
            "Anthropic API error 400 (invalid_request_error): "
            "messages.0: `content` must not be empty",
        ),
        (
            api_error(
                400, "invalid_request_error", "prompt is too long: 1048577 tokens > 1000000 maximum"
            ),
            ContextOverflowError,
            "Anthropic API error 400 (invalid_request_error): "
            "prompt is too long: 1048577 tokens > 1000000 maximum",
        ),
        (
            api_error(401, "authentication_error", "invalid x-api-key"),
            AuthenticationError,
            "Anthropic API error 401 (authentication_error): invalid x-api-key",
        ),
    ],
)
async def test_client_errors_raise_at_once(
    response: httpx2.Response, error_type: type[ProviderError], message: str
) -> None:
    """400 and 401 raise their class with the API's message, without a retry."""
    api = FakeAPI([response, stream(fixture("text"))])
    with pytest.raises(ProviderError) as caught:
        await collect(api.provider())
    assert (type(caught.value), str(caught.value)) == (error_type, message)
    assert len(api.requests) == 1


async def test_rate_limit_waits_retry_after_then_succeeds(autojump_clock: Any) -> None:
    """A 429 with retry-after 12: a restart delta, a 12 s wait, then the reply."""
    api = FakeAPI(
        [
            api_error(
                429,
                "rate_limit_error",
                "Number of requests has exceeded your per-minute rate limit",
                **{"retry-after": "12"},
            ),
            stream(fixture("text")),
        ]
    )
    start = trio.current_time()
    deltas, message = await collect(api.provider())
    assert trio.current_time() - start == 12.0
    assert deltas[0] == al.StreamRestart(
        attempt=2,
        delay=12.0,
        error="Anthropic API error 429 (rate_limit_error): "
        "Number of requests has exceeded your per-minute rate limit",
    )
    assert plain(message) == EXPECTED["text"]


async def test_overloaded_529_is_retried_then_succeeds(autojump_clock: Any) -> None:
    """A 529 overloaded_error is retried after the backoff, and the retry's reply is returned."""
    api = FakeAPI(
        [
            api_error(529, "overloaded_error", "Overloaded", **{"x-should-retry": "true"}),
            stream(fixture("text")),
        ]
    )
    deltas, message = await collect(api.provider())
    assert deltas[0] == al.StreamRestart(
        attempt=2, delay=1.0, error="Anthropic API error 529 (overloaded_error): Overloaded"
    )
    assert (len(api.requests), plain(message)) == (2, EXPECTED["text"])


# --------------------------------------------------------------------------- the request

TOOLS = (
    ToolDefinition(
        "read_file",
        "Read a text file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolDefinition("list_files", "List a directory.", {"type": "object", "properties": {}}),
)
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQ"
    "AAAABJRU5ErkJggg=="
)
CONVERSATION = ModelRequest(
    system_prompt="You are a careful assistant.",
    tools=TOOLS,
    temperature=0.3,
    messages=(
        UserMessage(
            (
                TextContent("What do these files say? See the screenshot."),
                ImageContent(PNG, "image/png"),
            )
        ),
        AssistantMessage(
            (
                ThinkingContent("Both files are needed.", signature=SIG_WEATHER),
                ThinkingContent("an unsigned thought, from an aborted stream"),
                TextContent("I'll read both."),
                TextContent(""),
                ToolCall("toolu_01A", "read_file", {"path": "a.txt"}),
                ToolCall("toolu_01B", "read_file", {"path": "b.txt"}),
            ),
            StopReason.TOOL_USE,
            provider="anthropic",
        ),
        ToolResultMessage("toolu_01A", "read_file", (TextContent("alpha"),)),
        ToolResultMessage("toolu_01B", "read_file", (TextContent("No such file: b.txt"),), True),
        UserMessage.text("Only the first one matters."),
        AssistantMessage(
            (ThinkingContent("", REDACTED, redacted=True), TextContent("The first says alpha.")),
            StopReason.STOP,
            provider="anthropic",
        ),
        UserMessage.text("Now summarise it."),
        AssistantMessage((), StopReason.ABORTED, error_message="Aborted"),
        UserMessage.text("Summarise it in one line."),
    ),
)


async def test_another_providers_reasoning_is_not_sent_back() -> None:
    """A FallbackProvider's other model signed it: the API could not verify it."""
    signed = '{"id":"rs_1","encrypted_content":"gAAA"}'
    history = (
        UserMessage.text("Hi"),
        AssistantMessage(
            (ThinkingContent("Thinking.", signed), TextContent("Hello.")),
            StopReason.STOP,
            provider="openai",
        ),
        UserMessage.text("Again"),
    )
    body = await body_of(ModelRequest(system_prompt="", messages=history))
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello."}],
    }


async def test_conversation_maps_to_alternating_turns() -> None:
    """Signed thinking kept, unsigned and blank blocks dropped, results first, empty turn gone."""
    body = await body_of(CONVERSATION)
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What do these files say? See the screenshot."},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
        },
        {
            "role": "assistant",
            "content": [
                {
                    "type": "thinking",
                    "thinking": "Both files are needed.",
                    "signature": SIG_WEATHER,
                },
                {"type": "text", "text": "I'll read both."},
                {
                    "type": "tool_use",
                    "id": "toolu_01A",
                    "name": "read_file",
                    "input": {"path": "a.txt"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_01B",
                    "name": "read_file",
                    "input": {"path": "b.txt"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01A",
                    "content": [{"type": "text", "text": "alpha"}],
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_01B",
                    "content": [{"type": "text", "text": "No such file: b.txt"}],
                    "is_error": True,
                },
                {"type": "text", "text": "Only the first one matters.", "cache_control": EPHEMERAL},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "redacted_thinking", "data": REDACTED},
                {"type": "text", "text": "The first says alpha."},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Now summarise it."},
                {"type": "text", "text": "Summarise it in one line.", "cache_control": EPHEMERAL},
            ],
        },
    ]


async def test_system_prompt_is_one_cached_text_block() -> None:
    """The system prompt is a list of one text block, marked for caching."""
    body = await body_of(CONVERSATION)
    assert body["system"] == [
        {"type": "text", "text": "You are a careful assistant.", "cache_control": EPHEMERAL}
    ]


async def test_tools_carry_their_schema_and_the_last_is_cached() -> None:
    """Tools are name, description and input_schema; the last one is a cache breakpoint."""
    body = await body_of(CONVERSATION)
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a text file.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
        {
            "name": "list_files",
            "description": "List a directory.",
            "input_schema": {"type": "object", "properties": {}},
            "cache_control": EPHEMERAL,
        },
    ]


async def test_an_hour_long_cache_marks_every_breakpoint_with_its_ttl() -> None:
    """compat.cache_ttl="1h": the same four breakpoints, each with ttl 1h."""
    model = attrs.evolve(MODEL, compat=Compat(cache_ttl="1h"))
    body = await body_of(CONVERSATION, model)
    hour = {"type": "ephemeral", "ttl": "1h"}
    marks = [
        block["cache_control"]
        for part in (body["system"], body["tools"], *(m["content"] for m in body["messages"]))
        for block in part
        if "cache_control" in block
    ]
    assert marks == [hour] * 4


def test_an_unknown_cache_ttl_is_refused() -> None:
    with pytest.raises(ValueError, match="'cache_ttl' must be in"):
        Compat(cache_ttl="1d")  # type: ignore[arg-type]


async def test_top_level_fields_and_their_order() -> None:
    """model, max_tokens (the model's), stream, then the rest; temperature kept without thinking."""
    body = await body_of(CONVERSATION)
    assert list(body) == [
        "model",
        "max_tokens",
        "stream",
        "system",
        "messages",
        "tools",
        "temperature",
    ]
    assert (body["model"], body["max_tokens"], body["stream"], body["temperature"]) == (
        "claude-sonnet-5",
        128_000,
        True,
        0.3,
    )


async def test_at_most_four_cache_breakpoints() -> None:
    """System, last tool and the last two user turns: four cache_control markers in all."""
    body = await body_of(CONVERSATION)
    assert json.dumps(body).count('"cache_control"') == 4


async def test_caching_off_sends_no_cache_control() -> None:
    """With prompt_caching off, nothing is marked."""
    model = attrs.evolve(MODEL, compat=Compat(prompt_caching=False))
    body = await body_of(CONVERSATION, model)
    assert "cache_control" not in json.dumps(body)


async def test_request_headers_and_url() -> None:
    """POST {base_url}/v1/messages with the key, the API version, and the model's headers."""
    model = attrs.evolve(
        MODEL,
        base_url="https://proxy.example/anthropic/",
        headers={"anthropic-beta": "context-1m-2025-08-07"},
    )
    api = FakeAPI([stream(fixture("text"))])
    await collect(api.provider(model))
    request = api.requests[0]
    assert (request.method, str(request.url)) == (
        "POST",
        "https://proxy.example/anthropic/v1/messages",
    )
    assert {
        name: request.headers[name] for name in ("x-api-key", "anthropic-version", "accept")
    } == {
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
        "accept": "text/event-stream",
    }
    assert request.headers["content-type"] == "application/json"
    assert request.headers["anthropic-beta"] == "context-1m-2025-08-07"


async def test_request_max_tokens_wins_over_the_models() -> None:
    """A request's own max_tokens is sent instead of the model's default."""
    body = await body_of(attrs.evolve(REQUEST, max_tokens=512))
    assert body["max_tokens"] == 512


async def test_no_key_sends_no_key_header(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model that needs no key (a local gateway) gets no x-api-key header."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = ModelConfig.anthropic(requires_api_key=False)
    api = FakeAPI([stream(fixture("text"))])
    await collect(api.provider(model))
    assert "x-api-key" not in api.requests[0].headers


async def test_empty_system_prompt_and_no_tools_are_omitted() -> None:
    """No system prompt and no tools: neither field is sent."""
    body = await body_of(REQUEST)
    assert body == {
        "model": "claude-sonnet-5",
        "max_tokens": 128_000,
        "stream": True,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hi", "cache_control": EPHEMERAL}],
            }
        ],
    }


async def test_call_with_raw_arguments_is_sent_with_empty_input() -> None:
    """A call whose arguments were not JSON goes back with input {}; its result says why."""
    request = ModelRequest(
        system_prompt="",
        messages=(
            UserMessage.text("Go"),
            AssistantMessage((ToolCall("toolu_1", "ls", {}, '{"path": '),), StopReason.LENGTH),
            ToolResultMessage("toolu_1", "ls", (TextContent("Invalid arguments"),), True),
        ),
    )
    body = await body_of(request)
    assert body["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
    ]


async def test_tool_result_with_an_image_and_an_empty_result() -> None:
    """Result blocks may hold images; a result with no content sends no content field."""
    request = ModelRequest(
        system_prompt="",
        messages=(
            UserMessage.text("Go"),
            AssistantMessage(
                (ToolCall("toolu_1", "shot", {}), ToolCall("toolu_2", "touch", {})),
                StopReason.TOOL_USE,
            ),
            ToolResultMessage(
                "toolu_1", "shot", (TextContent("done"), ImageContent(PNG, "image/png"))
            ),
            ToolResultMessage("toolu_2", "touch", ()),
        ),
    )
    body = await body_of(request, attrs.evolve(MODEL, compat=Compat(prompt_caching=False)))
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [
                {"type": "text", "text": "done"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": PNG},
                },
            ],
            "is_error": False,
        },
        {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": False},
    ]


async def test_tool_results_go_first_in_their_user_turn() -> None:
    """A user message between a call and its result still comes after the tool_result."""
    request = ModelRequest(
        system_prompt="",
        messages=(
            UserMessage.text("Go"),
            AssistantMessage((ToolCall("toolu_1", "ls", {}),), StopReason.TOOL_USE),
            UserMessage.text("Hurry"),
            ToolResultMessage("toolu_1", "ls", (TextContent("a.txt"),)),
        ),
    )
    body = await body_of(request, attrs.evolve(MODEL, compat=Compat(prompt_caching=False)))
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "a.txt"}],
                "is_error": False,
            },
            {"type": "text", "text": "Hurry"},
        ],
    }


async def test_turn_of_only_unsigned_thinking_is_skipped() -> None:
    """An assistant turn left empty is skipped and the user turns around it merge."""
    request = ModelRequest(
        system_prompt="",
        messages=(
            UserMessage.text("One"),
            AssistantMessage((ThinkingContent("unsigned"), TextContent("  ")), StopReason.ABORTED),
            UserMessage.text("Two"),
        ),
    )
    body = await body_of(request, attrs.evolve(MODEL, compat=Compat(prompt_caching=False)))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "One"}, {"type": "text", "text": "Two"}],
        }
    ]


# --------------------------------------------------------------------------- thinking


def thinking_request(level: ThinkingLevel, max_tokens: int | None = None) -> ModelRequest:
    return ModelRequest(
        system_prompt="",
        messages=(UserMessage.text("Think"),),
        thinking=level,
        temperature=0.7,
        max_tokens=max_tokens,
    )


def thinking_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {
        name: body[name]
        for name in ("max_tokens", "thinking", "output_config", "temperature")
        if name in body
    }


@pytest.mark.parametrize(
    ("level", "effort"),
    [
        (ThinkingLevel.MINIMAL, "low"),
        (ThinkingLevel.LOW, "low"),
        (ThinkingLevel.MEDIUM, "medium"),
        (ThinkingLevel.HIGH, "high"),
    ],
)
async def test_adaptive_thinking_sends_an_effort(level: ThinkingLevel, effort: str) -> None:
    """Adaptive models get thinking {type: adaptive} and the level's effort; no temperature."""
    body = await body_of(thinking_request(level))
    assert thinking_fields(body) == {
        "max_tokens": 128_000,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": effort},
    }


POINT_SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "number"}},
    "required": ["x"],
    "additionalProperties": False,
}


async def test_structured_output_format_goes_beside_the_effort() -> None:
    """Native structured output: output_config.format, with the effort when thinking."""
    request = attrs.evolve(
        thinking_request(ThinkingLevel.LOW), output=OutputFormat("answer", POINT_SCHEMA, True)
    )
    body = await body_of(request)
    assert body["output_config"] == {
        "effort": "low",
        "format": {"type": "json_schema", "schema": POINT_SCHEMA},
    }
    body = await body_of(attrs.evolve(REQUEST, output=OutputFormat("answer", POINT_SCHEMA)))
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": POINT_SCHEMA}}


async def test_adaptive_thinking_without_effort() -> None:
    """compat.effort off: adaptive thinking with no output_config."""
    model = attrs.evolve(MODEL, compat=Compat(thinking="adaptive", effort=False))
    body = await body_of(thinking_request(ThinkingLevel.HIGH), model)
    assert thinking_fields(body) == {"max_tokens": 128_000, "thinking": {"type": "adaptive"}}


@pytest.mark.parametrize(
    ("level", "budget"),
    [
        (ThinkingLevel.MINIMAL, 1024),
        (ThinkingLevel.LOW, 4096),
        (ThinkingLevel.MEDIUM, 10_000),
        (ThinkingLevel.HIGH, 32_000),
    ],
)
async def test_budget_thinking_sends_the_levels_budget(level: ThinkingLevel, budget: int) -> None:
    """Budget models get thinking {type: enabled, budget_tokens}; no effort, no temperature."""
    body = await body_of(thinking_request(level), HAIKU)
    assert thinking_fields(body) == {
        "max_tokens": 64_000,
        "thinking": {"type": "enabled", "budget_tokens": budget},
    }


async def test_budget_thinking_raises_a_small_max_tokens() -> None:
    """max_tokens 2000 with a 10000 budget becomes 11024: the budget must fit below it."""
    body = await body_of(thinking_request(ThinkingLevel.MEDIUM, max_tokens=2000), HAIKU)
    assert thinking_fields(body) == {
        "max_tokens": 11_024,
        "thinking": {"type": "enabled", "budget_tokens": 10_000},
    }


async def test_budget_fits_the_models_output_limit() -> None:
    """A model limited to 16000 output tokens gets a HIGH budget of 14976, not 32000."""
    model = attrs.evolve(HAIKU, max_tokens=16_000)
    body = await body_of(thinking_request(ThinkingLevel.HIGH), model)
    assert thinking_fields(body) == {
        "max_tokens": 16_000,
        "thinking": {"type": "enabled", "budget_tokens": 14_976},
    }


async def test_budget_is_never_below_the_api_minimum() -> None:
    """Even a 1500-token model gets the API's minimum budget of 1024, with room above it."""
    model = attrs.evolve(HAIKU, max_tokens=1500)
    body = await body_of(thinking_request(ThinkingLevel.LOW), model)
    assert thinking_fields(body) == {
        "max_tokens": 2048,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }


async def test_models_without_thinking_get_no_thinking_field() -> None:
    """compat.thinking "none": nothing about thinking is sent, and temperature is."""
    model = attrs.evolve(MODEL, compat=Compat(thinking="none"))
    body = await body_of(thinking_request(ThinkingLevel.HIGH), model)
    assert thinking_fields(body) == {"max_tokens": 128_000, "temperature": 0.7}


@pytest.mark.parametrize("model", [MODEL, HAIKU], ids=["adaptive", "budget"])
async def test_thinking_off_sends_no_thinking_field(model: ModelConfig) -> None:
    """OFF sends no thinking field (not even type: disabled), and temperature is kept."""
    body = await body_of(thinking_request(ThinkingLevel.OFF), model)
    assert thinking_fields(body) == {"max_tokens": model.max_tokens, "temperature": 0.7}


# --------------------------------------------------------------------------- a real server


async def test_real_server_happy_path() -> None:
    """Over a real socket, in chunks: the request arrives whole and the reply parses."""
    body = fixture("thinking_tool")
    chunks = [body[:100], body[100:1001], body[1001:]]
    async with serve(Reply(chunks)) as server:
        provider = AnthropicProvider(attrs.evolve(MODEL, base_url=server.url))
        async with provider:
            _, message = await collect(provider, CONVERSATION)
    served = server.requests[0]
    assert (served.method, served.path) == ("POST", "/v1/messages")
    assert (served.headers["x-api-key"], served.headers["anthropic-version"]) == (KEY, "2023-06-01")
    assert served.json()["messages"][0]["content"][0]["text"] == (
        "What do these files say? See the screenshot."
    )
    assert plain(message) == EXPECTED["thinking_tool"]


async def test_real_server_dropped_mid_stream_is_retried() -> None:
    """The connection drops mid-body: a StreamRestart, then the retry's full reply."""
    body = fixture("text")
    first_delta_end = body.index(b"event: content_block_delta", body.index(b"Hello"))
    dropped = Reply([body[:first_delta_end], body[first_delta_end:]], drop_after=1)
    async with serve(dropped, Reply([body])) as server:
        provider = AnthropicProvider(
            attrs.evolve(MODEL, base_url=server.url),
            retry=RetryConfig(initial_delay=0, jitter=0),
        )
        async with provider:
            deltas, message = await collect(provider)
    assert deltas[0] == TextDelta(delta="Hello", index=0)
    assert deltas[1] == al.StreamRestart(
        attempt=2,
        delay=0.0,
        error="Anthropic API connection failed: peer closed connection without sending "
        "complete message body (incomplete chunked read)",
    )
    assert deltas[2:] == [
        TextDelta(delta="Hello", index=0),
        TextDelta(delta="! Café au lait ☕ is", index=0),
        TextDelta(delta=" on the menu.", index=0),
    ]
    assert (len(server.requests), plain(message)) == (2, EXPECTED["text"])


# --------------------------------------------------------------------------- end to end

ECHO_ID = "toolu_01EchoGZ4uQ9dK8mXvT3nLpR"


def _turn(content: list[tuple[dict[str, Any], list[str]]], stop: str, output: int) -> bytes:
    """One reply's event stream: each block with its delta pieces, then the stop."""
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_01",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 50, "output_tokens": 1},
            },
        }
    ]
    for index, (block, pieces) in enumerate(content):
        events.append(block_start(index, **block))
        events += [
            block_delta(index, type="text_delta", text=p)
            if block["type"] == "text"
            else block_delta(index, type="input_json_delta", partial_json=p)
            for p in pieces
        ]
        events.append(block_stop(index))
    events += [message_delta(stop, output_tokens=output), STOP]
    return sse(*events)


async def test_agent_runs_a_tool_and_answers() -> None:
    """An Agent calls echo through the API, sends the result back, and gets the answer."""
    api = FakeAPI(
        [
            stream(
                _turn(
                    [
                        ({"type": "text", "text": ""}, ["Shouting now."]),
                        (
                            {"type": "tool_use", "id": ECHO_ID, "name": "echo", "input": {}},
                            ['{"text"', ': "hi"}'],
                        ),
                    ],
                    "tool_use",
                    20,
                )
            ),
            stream(_turn([({"type": "text", "text": ""}, ["It says ", "HI."])], "end_turn", 6)),
        ]
    )
    agent = al.Agent(api.provider(), system_prompt="Be brief.", tools=[Echo()])
    await agent.run("Shout hi")
    assert [plain(message) for message in agent.messages] == [
        UserMessage((TextContent("Shout hi"),), timestamp=0),
        reply(
            [TextContent("Shouting now."), ToolCall(ECHO_ID, "echo", {"text": "hi"})],
            StopReason.TOOL_USE,
            usage(input=50, output=20),
        ),
        ToolResultMessage(ECHO_ID, "echo", (TextContent("HI"),), timestamp=0),
        reply([TextContent("It says HI.")], StopReason.STOP, usage(input=50, output=6)),
    ]
    second = api.body(1)
    assert second["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Shout hi", "cache_control": EPHEMERAL}],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Shouting now."},
                {"type": "tool_use", "id": ECHO_ID, "name": "echo", "input": {"text": "hi"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": ECHO_ID,
                    "content": [{"type": "text", "text": "HI"}],
                    "is_error": False,
                    "cache_control": EPHEMERAL,
                }
            ],
        },
    ]
    assert second["tools"] == [
        {
            "name": "echo",
            "description": "Echo text back in capitals.",
            "input_schema": TEXT_SCHEMA,
            "cache_control": EPHEMERAL,
        }
    ]


# --------------------------------------------------------------------------- construction, secrets


def test_a_model_id_builds_the_anthropic_preset() -> None:
    """A string is a model id for ModelConfig.anthropic, with the given key."""
    provider = AnthropicProvider("claude-haiku-4-5", api_key=KEY)
    assert provider.model == HAIKU
    assert provider.api_name == "Anthropic"


def test_api_key_overrides_the_configs_key() -> None:
    """api_key= replaces the key of a given ModelConfig."""
    provider = AnthropicProvider(ModelConfig.anthropic(api_key="sk-old"), api_key=KEY)
    assert provider.model.resolve_api_key() == KEY


def test_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no key given, ANTHROPIC_API_KEY is used."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    assert AnthropicProvider().model.resolve_api_key() == KEY


def test_missing_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key anywhere: ValueError naming the variable."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ValueError, match=r"or set ANTHROPIC_API_KEY$"):
        AnthropicProvider()


def test_a_config_for_another_api_is_refused() -> None:
    """An OpenAI model config is not silently sent to the Messages API."""
    with pytest.raises(ValueError, match=r"^AnthropicProvider speaks the 'anthropic' API; "):
        AnthropicProvider(ModelConfig.openai(api_key=KEY))


def test_the_key_is_not_in_the_repr() -> None:
    """repr(provider) names the model and URL, never the key."""
    assert repr(AnthropicProvider(MODEL)) == (
        "AnthropicProvider(model='claude-sonnet-5', base_url='https://api.anthropic.com')"
    )


@pytest.mark.parametrize(
    "response",
    [
        api_error(401, "authentication_error", f"invalid x-api-key: {KEY}"),
        stream(sse(START, {"type": "error", "error": {"type": "api_error", "message": KEY}})),
        stream(f"event: message_start\ndata: {{{KEY}\n\n".encode()),
    ],
    ids=["http-error", "error-event", "malformed-event"],
)
async def test_the_key_is_not_in_error_messages(response: httpx2.Response) -> None:
    """An API that echoes the key back does not get it into the error message."""
    with pytest.raises(ProviderError) as caught:
        await collect(FakeAPI([response]).provider(retry=RetryConfig.none()))
    assert KEY not in str(caught.value)
    assert "***" in str(caught.value)


def test_error_events_redact_header_secrets_too() -> None:
    """A secret passed as a header is redacted from an in-stream error, like the key."""
    model = attrs.evolve(MODEL, headers={"x-proxy-auth": "proxy-token-0123456789"})
    parser = AnthropicProvider(model).parser()
    error = {
        "type": "error",
        "error": {"type": "api_error", "message": "bad proxy-token-0123456789"},
    }
    with pytest.raises(ServerError) as caught:
        parser.feed(ServerSentEvent("error", json.dumps(error)))
    assert str(caught.value) == "Anthropic API error (api_error): bad ***"
