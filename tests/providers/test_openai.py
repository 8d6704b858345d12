"""OpenAIProvider: Chat Completions requests, stream parsing, errors, retries, real sockets."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
from helpers import Echo
from sse_server import Reply, serve

import agentloop as al
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
from agentloop.providers._openai import OpenAIProvider
from agentloop.providers.sse import ServerSentEvent

KEY = "sk-test-OPENAI-SECRET-42"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "openai"

OPENAI = ModelConfig.openai("gpt-5.4", api_key=KEY)
LLAMA = ModelConfig.openai_compatible("qwen3-8b", "http://127.0.0.1:8080/v1", provider="llama.cpp")
DEEPSEEK = ModelConfig.openai_compatible(
    "deepseek-reasoner", "https://api.deepseek.com", provider="deepseek", api_key=KEY
)
OPENROUTER = ModelConfig.openai_compatible(
    "anthropic/claude-sonnet-4.6",
    "https://openrouter.ai/api/v1",
    provider="openrouter",
    api_key=KEY,
)
AZURE = ModelConfig.openai_compatible(
    "gpt-5.4", "https://res.openai.azure.com/openai/v1", provider="azure", api_key=KEY
)
OLLAMA = ModelConfig.openai_compatible("qwen3:32b", "http://localhost:11434/v1", provider="ollama")
VLLM = ModelConfig.openai_compatible(
    "meta-llama/Llama-3.3-70B-Instruct", "http://gpu-box:8000/v1", provider="vllm"
)

REQUEST = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))


# --------------------------------------------------------------------------- helpers


def read(name: str) -> bytes:
    return (FIXTURES / f"{name}.sse").read_bytes()


async def _body(parts: Sequence[bytes]) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


def sse_response(body: bytes | Sequence[bytes]) -> httpx2.Response:
    """A 200 event stream whose body arrives in the given pieces."""
    parts = [body] if isinstance(body, bytes) else body
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=_body(parts))


def make(
    model: ModelConfig, responses: list[Any], retry: RetryConfig | None = None
) -> tuple[OpenAIProvider, list[httpx2.Request]]:
    """A provider whose server answers with ``responses`` in turn (an exception is raised)."""
    seen: list[httpx2.Request] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        answer = responses[len(seen) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    retry = RetryConfig(jitter=0) if retry is None else retry
    return OpenAIProvider(model, retry=retry, client=client), seen


async def collect(
    provider: OpenAIProvider, request: ModelRequest = REQUEST
) -> tuple[list[al.StreamDelta], al.AssistantMessage]:
    deltas: list[al.StreamDelta] = []

    async def emit(delta: al.StreamDelta) -> None:
        deltas.append(delta)

    message = await provider.stream(request, emit)
    return deltas, untimed(message)


def untimed(message: al.AssistantMessage) -> al.AssistantMessage:
    return attrs.evolve(message, timestamp=0)


def chunkings(body: bytes, mode: str) -> list[list[bytes]]:
    """The body whole, byte by byte, or cut at seeded random points (five ways)."""
    if mode == "whole":
        return [[body]]
    if mode == "bytes":
        return [[body[i : i + 1] for i in range(len(body))]]
    rng = random.Random(len(body))
    ways = []
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(body)), 15))
        ways.append([body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)])
    return ways


def body_of(request: httpx2.Request) -> Any:
    return json.loads(request.content)


def parse(*chunks: Any, model: ModelConfig = OPENAI) -> tuple[list[Any], al.AssistantMessage]:
    """Feed chunks (dicts as JSON, strings as they are) to a parser; return deltas and message."""
    parser = OpenAIProvider(model).parser()
    deltas: list[Any] = []
    for chunk in chunks:
        data = chunk if isinstance(chunk, str) else json.dumps(chunk)
        deltas.extend(parser.feed(ServerSentEvent(data=data)))
    return deltas, untimed(parser.finish())


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}


def usage(
    input: int, output: int, *, cached: int = 0, reasoning: int = 0, cost: float = 0.0
) -> al.Usage:
    return al.Usage(
        input=input,
        output=output,
        cache_read=cached,
        total_tokens=input + cached + output,
        reasoning=reasoning,
        cost=cost,
    )


NO_USAGE = al.Usage()


def message(
    *content: Any, stop: al.StopReason, model: str, provider: str, usage: al.Usage = NO_USAGE
) -> al.AssistantMessage:
    return al.AssistantMessage(content, stop, model, provider, usage, timestamp=0)


T = al.TextDelta
R = al.ThinkingDelta


def C(delta: str, index: int, call_id: str, name: str) -> al.ToolCallDelta:
    return al.ToolCallDelta(delta=delta, index=index, tool_call_id=call_id, name=name)


# --------------------------------------------------------------------------- fixtures

GPT = "gpt-5.4-2026-03-05"
FIXTURE_CASES: dict[str, tuple[ModelConfig, list[Any], al.AssistantMessage]] = {
    "text_usage": (
        OPENAI,
        [T(delta="Héllo"), T(delta=" wörld 👋"), T(delta="!")],
        message(
            al.TextContent("Héllo wörld 👋!"),
            stop=al.StopReason.STOP,
            model=GPT,
            provider="openai",
            usage=usage(176, 9, cached=1024, cost=0.000831),
        ),
    ),
    "parallel_tools": (
        OPENAI,
        [
            C("", 0, "call_Wq3kP0", "get_weather"),
            C('{"ci', 0, "call_Wq3kP0", "get_weather"),
            C("", 1, "call_Zt8mR2", "get_time"),
            C('ty": "Paris"}', 0, "call_Wq3kP0", "get_weather"),
            C('{"tz": ', 1, "call_Zt8mR2", "get_time"),
            C('"Europe/Paris"}', 1, "call_Zt8mR2", "get_time"),
        ],
        message(
            al.ToolCall("call_Wq3kP0", "get_weather", {"city": "Paris"}),
            al.ToolCall("call_Zt8mR2", "get_time", {"tz": "Europe/Paris"}),
            stop=al.StopReason.TOOL_USE,
            model=GPT,
            provider="openai",
            usage=usage(310, 58, cost=0.001645),
        ),
    ),
    "late_id": (
        LLAMA,
        [
            T(delta="Let me look."),
            C('{"path":', 1, "call_r3AdM3", "read_file"),
            C(' "README.md"}', 1, "call_r3AdM3", "read_file"),
        ],
        message(
            al.TextContent("Let me look."),
            al.ToolCall("call_r3AdM3", "read_file", {"path": "README.md"}),
            stop=al.StopReason.TOOL_USE,  # finish_reason "stop", but a call came
            model="qwen3-8b-q4_k_m.gguf",
            provider="llama.cpp",
            usage=usage(240, 21),
        ),
    ),
    "reasoning_content": (
        DEEPSEEK,
        [
            R(delta="The user asks 2+2."),
            R(delta=" That is 4."),
            T(delta="2 + 2", index=1),
            T(delta=" = 4.", index=1),
        ],
        message(
            al.ThinkingContent("The user asks 2+2. That is 4."),
            al.TextContent("2 + 2 = 4."),
            stop=al.StopReason.STOP,
            model="deepseek-reasoner",
            provider="deepseek",
            usage=usage(15, 30, reasoning=22),
        ),
    ),
    "openrouter_reasoning": (
        OPENROUTER,
        [
            R(delta="Check the"),
            R(delta=" units."),
            R(delta=" Metres."),
            T(delta="It is 3 m.", index=1),
        ],
        message(
            al.ThinkingContent("Check the units. Metres."),
            al.TextContent("It is 3 m."),
            stop=al.StopReason.STOP,
            model="anthropic/claude-sonnet-4.6",
            provider="openrouter",
            usage=usage(52, 40, reasoning=31),
        ),
    ),
    "length_cut": (
        OPENAI,
        [
            C("", 0, "call_Ln9xQ4", "write_file"),
            C('{"path": "src/ma', 0, "call_Ln9xQ4", "write_file"),
            C('in.py", "content": "impo', 0, "call_Ln9xQ4", "write_file"),
        ],
        message(
            al.ToolCall(
                "call_Ln9xQ4",
                "write_file",
                {},
                raw_arguments='{"path": "src/main.py", "content": "impo',
            ),
            stop=al.StopReason.LENGTH,
            model=GPT,
            provider="openai",
            usage=usage(800, 16, cost=0.00224),
        ),
    ),
    "content_filter": (
        AZURE,
        [T(delta="Here is how")],
        message(
            al.TextContent("Here is how"),
            stop=al.StopReason.REFUSAL,
            model=GPT,  # the prompt-filter chunk's empty model is skipped
            provider="azure",
        ),
    ),
    "no_done": (
        OLLAMA,
        [T(delta="Done"), T(delta=".")],
        message(
            al.TextContent("Done."),
            stop=al.StopReason.STOP,
            model="qwen3:32b",
            provider="ollama",
            usage=usage(30, 2),
        ),
    ),
    "crlf": (
        VLLM,
        [T(delta="Bonjour"), T(delta=", le monde.")],
        message(
            al.TextContent("Bonjour, le monde."),
            stop=al.StopReason.STOP,
            model="meta-llama/Llama-3.3-70B-Instruct",
            provider="vllm",
            usage=usage(12, 7),
        ),
    ),
}
MODES = ["whole", "bytes", "random"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(FIXTURE_CASES))
async def test_fixture_gives_exact_deltas_and_message_however_cut(name: str, mode: str) -> None:
    """A recorded stream gives the same deltas and message whole, byte by byte or cut anywhere."""
    model, expected_deltas, expected_message = FIXTURE_CASES[name]
    for parts in chunkings(read(name), mode):
        provider, _ = make(model, [sse_response(parts)], RetryConfig.none())
        deltas, final = await collect(provider)
        assert deltas == expected_deltas
        assert final == expected_message


FAILING_CASES: dict[str, tuple[list[Any], type[ProviderError], str]] = {
    "cut_off": (
        [T(delta="The answer is")],
        NetworkError,
        "OpenAI stream ended before it finished",
    ),
    "error_mid_stream": (
        [T(delta="Working")],
        ServerError,
        "OpenAI API error in the stream (server_error): "
        "The server had an error while processing your request. Sorry about that!",
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(FAILING_CASES))
async def test_failing_fixture_raises_the_same_error_however_cut(name: str, mode: str) -> None:
    """A cut-off stream and an error chunk raise their exact error, however the bytes arrive."""
    expected_deltas, error_type, text = FAILING_CASES[name]
    for parts in chunkings(read(name), mode):
        provider, _ = make(OPENAI, [sse_response(parts)], RetryConfig.none())
        deltas: list[Any] = []

        async def emit(delta: Any, deltas: list[Any] = deltas) -> None:
            deltas.append(delta)

        with pytest.raises(error_type) as caught:
            await provider.stream(REQUEST, emit)
        assert type(caught.value) is error_type
        assert str(caught.value) == text
        assert caught.value.retryable
        assert deltas == expected_deltas


@pytest.mark.parametrize("name", sorted(FAILING_CASES))
async def test_failed_stream_is_retried_then_succeeds(autojump_clock: Any, name: str) -> None:
    """A cut-off stream or an error chunk: a restart, a 1 s wait, then the whole new reply."""
    expected_deltas, _, text = FAILING_CASES[name]
    provider, seen = make(OPENAI, [sse_response(read(name)), sse_response(read("text_usage"))])
    deltas, final = await collect(provider)
    assert deltas == [
        *expected_deltas,
        al.StreamRestart(attempt=2, delay=1.0, error=text),
        *FIXTURE_CASES["text_usage"][1],
    ]
    assert final == FIXTURE_CASES["text_usage"][2]
    assert len(seen) == 2


# --------------------------------------------------------------------------- the parser


def test_reasoning_details_alone_are_thinking() -> None:
    """OpenRouter reasoning_details text and summaries are thinking; encrypted ones are skipped."""
    details = [
        {"type": "reasoning.summary", "summary": "Plan: "},
        {"type": "reasoning.encrypted", "data": "b3BhcXVl"},
        {"type": "reasoning.text", "text": "add them."},
    ]
    deltas, final = parse(chunk({"reasoning_details": details}), chunk({}, "stop"), "[DONE]")
    assert deltas == [R(delta="Plan: add them.")]
    assert final.content == (al.ThinkingContent("Plan: add them."),)


def test_xai_reasoning_field_is_thinking() -> None:
    """delta.reasoning (xAI, Ollama) streams as thinking, ahead of the text."""
    deltas, final = parse(
        chunk({"reasoning": "Hmm."}), chunk({"content": "Yes."}), chunk({}, "stop"), "[DONE]"
    )
    assert deltas == [R(delta="Hmm."), T(delta="Yes.", index=1)]
    assert final.content == (al.ThinkingContent("Hmm."), al.TextContent("Yes."))


def test_call_with_no_id_is_announced_when_the_choice_finishes() -> None:
    """A call whose id never comes streams at finish_reason, id empty for the loop to fill."""
    deltas, final = parse(
        chunk({"tool_calls": [{"index": 0, "function": {"name": "ls", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert deltas == [C("{}", 0, "", "ls")]
    assert final.content == (al.ToolCall("", "ls", {}),)
    assert final.stop_reason is al.StopReason.TOOL_USE


def test_calls_without_an_index_are_told_apart_by_id() -> None:
    """Servers that send no index: a new id starts a new call, pieces without one continue it."""
    deltas, final = parse(
        chunk({"tool_calls": [{"id": "a", "function": {"name": "ls", "arguments": '{"p":'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": ' "."}'}}]}),
        chunk({"tool_calls": [{"id": "b", "function": {"name": "pwd", "arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    assert deltas == [C('{"p":', 0, "a", "ls"), C(' "."}', 0, "a", "ls"), C("{}", 1, "b", "pwd")]
    assert final.tool_calls == (al.ToolCall("a", "ls", {"p": "."}), al.ToolCall("b", "pwd", {}))


class CountingIndex(int):
    """A call's index that counts how often it is compared."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountingIndex.compared += 1
        return int.__eq__(self, other)

    __hash__ = int.__hash__


class CountingCalls(dict[int, Any]):
    """The parser's calls, counting each walk over them."""

    walks = 0

    def __iter__(self) -> Any:
        CountingCalls.walks += 1
        return super().__iter__()

    def items(self) -> Any:
        CountingCalls.walks += 1
        return super().items()


CALLS = 5_000


def test_thousands_of_indexed_calls_take_linear_work() -> None:
    """Finding a call's block was a search through the blocks so far: quadratic in calls."""
    parser = OpenAIProvider(OPENAI).parser()
    CountingIndex.compared = 0
    for i in range(CALLS):
        piece = {"index": CountingIndex(i), "id": f"c{i}", "function": {"name": "t"}}
        parser._read_call(piece, [])  # type: ignore[attr-defined]
    assert CountingIndex.compared <= CALLS
    parser.feed(ServerSentEvent(data=json.dumps(chunk({}, "tool_calls"))))
    final = parser.finish()
    assert [call.id for call in final.tool_calls] == [f"c{i}" for i in range(CALLS)]


def test_thousands_of_calls_without_an_index_take_linear_work() -> None:
    """Each piece without an index looked through every call so far."""
    parser = OpenAIProvider(OPENAI).parser()
    parser._calls = CountingCalls()  # type: ignore[attr-defined]
    CountingCalls.walks = 0
    chunks = []
    for i in range(CALLS):
        chunks.append(chunk({"tool_calls": [{"id": f"c{i}", "function": {"name": "t"}}]}))
        chunks.append(chunk({"tool_calls": [{"function": {"arguments": "{}"}}]}))
    for data in chunks:
        parser.feed(ServerSentEvent(data=json.dumps(data)))
    assert CountingCalls.walks == 0
    parser.feed(ServerSentEvent(data=json.dumps(chunk({}, "tool_calls"))))
    final = parser.finish()
    assert CountingCalls.walks == 2  # the calls left unannounced: at the finish reason, at the end
    assert final.tool_calls == tuple(al.ToolCall(f"c{i}", "t", {}) for i in range(CALLS))


def test_tool_calls_finish_without_calls_is_stop() -> None:
    """finish_reason tool_calls with no call in the stream is a plain stop: nothing to run."""
    _, final = parse(chunk({"content": "Hi"}), chunk({}, "tool_calls"), "[DONE]")
    assert final.stop_reason is al.StopReason.STOP


def test_refusal_is_text_and_a_refusal() -> None:
    """delta.refusal streams as text, and the message stops as a refusal."""
    deltas, final = parse(
        chunk({"content": None, "refusal": "I can't help with that."}), chunk({}, "stop"), "[DONE]"
    )
    assert deltas == [T(delta="I can't help with that.")]
    assert (final.text, final.stop_reason) == ("I can't help with that.", al.StopReason.REFUSAL)


def test_content_parts_count_their_text() -> None:
    """A delta content given as a list of parts (Mistral) streams its text parts."""
    parts = [{"type": "thinking", "thinking": []}, {"type": "text", "text": "Salut"}]
    deltas, _ = parse(chunk({"content": parts}), chunk({}, "stop"), "[DONE]")
    assert deltas == [T(delta="Salut")]


def test_groq_usage_is_read() -> None:
    """Usage under x_groq, on the last chunk, counts as the chunk's usage."""
    groq = {"usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}
    _, final = parse(
        chunk({"content": "ok"}), chunk({}, "stop", x_groq=groq), "[DONE]", model=OLLAMA
    )
    assert final.usage == usage(20, 5)


def test_deepseek_cache_hits_are_cache_reads() -> None:
    """DeepSeek's prompt_cache_hit_tokens count as cache reads when no details are given."""
    counts = {"prompt_tokens": 100, "completion_tokens": 5, "prompt_cache_hit_tokens": 64}
    _, final = parse(chunk({}, "stop", usage=counts), "[DONE]", model=DEEPSEEK)
    assert final.usage == usage(36, 5, cached=64)


def test_data_that_is_not_json_is_skipped() -> None:
    """A data line that is not a chunk (a proxy's keep-alive) is skipped."""
    deltas, final = parse("ping", chunk({"content": "ok"}), "[1, 2]", chunk({}, "stop"), "[DONE]")
    assert deltas == [T(delta="ok")]
    assert final.text == "ok"


def test_only_the_first_choice_is_read() -> None:
    """With several choices (n > 1), only choice 0 makes the message."""
    both = {
        "choices": [
            {"index": 1, "delta": {"content": "other"}, "finish_reason": None},
            {"index": 0, "delta": {"content": "mine"}, "finish_reason": None},
        ]
    }
    deltas, _ = parse(both, chunk({}, "stop"), "[DONE]")
    assert deltas == [T(delta="mine")]


def test_done_alone_is_an_empty_message() -> None:
    """A stream of only [DONE] ends cleanly with an empty message under the configured id."""
    deltas, final = parse("[DONE]")
    assert (deltas, final) == (
        [],
        message(stop=al.StopReason.STOP, model="gpt-5.4", provider="openai"),
    )


@pytest.mark.parametrize(
    ("error", "error_type", "text"),
    [
        (
            {
                "message": "Rate limit reached for gpt-5.4 on tokens per min (TPM).",
                "type": "tokens",
                "code": "rate_limit_exceeded",
            },
            RateLimitError,
            "OpenAI API error in the stream (tokens): "
            "Rate limit reached for gpt-5.4 on tokens per min (TPM).",
        ),
        (
            {"code": 429, "message": "Provider returned error"},
            RateLimitError,
            "OpenAI API error 429 in the stream: Provider returned error",
        ),
        (
            {"code": 502, "message": "Upstream idle timeout"},
            ServerError,
            "OpenAI API error 502 in the stream: Upstream idle timeout",
        ),
        (
            {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error",
            },
            ContextOverflowError,
            "OpenAI API error 400 in the stream (exceed_context_size_error): "
            "the request exceeds the available context size, try increasing it",
        ),
        (
            {
                "message": "This model's maximum context length is 128000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            },
            ContextOverflowError,
            "OpenAI API error in the stream (invalid_request_error): "
            "This model's maximum context length is 128000 tokens.",
        ),
        (
            {"message": "Overloaded", "type": "overloaded_error"},
            OverloadedError,
            "OpenAI API error in the stream (overloaded_error): Overloaded",
        ),
        (
            {"message": "Unknown parameter: 'foo'.", "type": "invalid_request_error"},
            BadRequestError,
            "OpenAI API error in the stream (invalid_request_error): Unknown parameter: 'foo'.",
        ),
        ("boom", ServerError, "OpenAI API error in the stream: boom"),
    ],
)
def test_error_chunk_is_classified(error: Any, error_type: type, text: str) -> None:
    """An error object in a chunk raises the matching class, by its status or its words."""
    parser = OpenAIProvider(OPENAI).parser()
    parser.feed(ServerSentEvent(data=json.dumps(chunk({"content": "a"}))))
    with pytest.raises(error_type) as caught:
        parser.feed(ServerSentEvent(data=json.dumps({"error": error})))
    assert type(caught.value) is error_type
    assert str(caught.value) == text


def test_error_event_with_text_data_is_an_error() -> None:
    """An ``event: error`` whose data is not JSON is a (retried) server error quoting it."""
    parser = OpenAIProvider(OPENAI).parser()
    with pytest.raises(ServerError, match=r"^OpenAI API error in the stream: worker died$"):
        parser.feed(ServerSentEvent(event="error", data="worker died"))


# --------------------------------------------------------------------------- HTTP errors


def openai_error(
    status: int, message: str, kind: str, code: str | None, **headers: str
) -> httpx2.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return httpx2.Response(status, json=body, headers=headers)


@pytest.mark.parametrize(
    ("response", "error_type", "text"),
    [
        (
            openai_error(
                400,
                "Invalid value: 'tool'. Supported values are: 'system', 'user'.",
                "invalid_request_error",
                "invalid_value",
            ),
            BadRequestError,
            "OpenAI API error 400 (invalid_request_error): "
            "Invalid value: 'tool'. Supported values are: 'system', 'user'.",
        ),
        (
            openai_error(
                400,
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130532 tokens. Please reduce the length of the messages.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            ContextOverflowError,
            "OpenAI API error 400 (invalid_request_error): This model's maximum context "
            "length is 128000 tokens. However, your messages resulted in 130532 tokens. "
            "Please reduce the length of the messages.",
        ),
        (
            openai_error(
                401,
                "Incorrect API key provided: sk-test-***42. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
                "invalid_request_error",
                "invalid_api_key",
            ),
            AuthenticationError,
            "OpenAI API error 401 (invalid_request_error): Incorrect API key provided: "
            "sk-test-***42. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
        ),
        (
            openai_error(
                429,
                "Rate limit reached for gpt-5.4 in organization org-abc on tokens per min "
                "(TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 2s.",
                "tokens",
                "rate_limit_exceeded",
                **{"retry-after": "2"},
            ),
            RateLimitError,
            "OpenAI API error 429 (tokens): Rate limit reached for gpt-5.4 in organization "
            "org-abc on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. "
            "Please try again in 2s.",
        ),
        (
            openai_error(
                500,
                "The server had an error while processing your request. Sorry about that!",
                "server_error",
                None,
            ),
            ServerError,
            "OpenAI API error 500 (server_error): "
            "The server had an error while processing your request. Sorry about that!",
        ),
        (
            openai_error(
                503,
                "The engine is currently overloaded, please try again later.",
                "server_error",
                None,
            ),
            ServerError,
            "OpenAI API error 503 (server_error): "
            "The engine is currently overloaded, please try again later.",
        ),
    ],
)
async def test_http_error_raises_its_class(
    response: httpx2.Response, error_type: type, text: str
) -> None:
    """Each HTTP error with OpenAI's JSON body raises its class with OpenAI's message."""
    provider, seen = make(OPENAI, [response], RetryConfig.none())
    with pytest.raises(error_type) as caught:
        await collect(provider)
    assert type(caught.value) is error_type
    assert str(caught.value) == text
    assert len(seen) == 1


async def test_rate_limit_waits_retry_after_then_succeeds(autojump_clock: Any) -> None:
    """A 429 with retry-after 2: a restart, a 2 s wait, then the stream."""
    limited = openai_error(
        429, "Slow down.", "requests", "rate_limit_exceeded", **{"retry-after": "2"}
    )
    provider, seen = make(OPENAI, [limited, sse_response(read("text_usage"))])
    deltas, final = await collect(provider)
    assert deltas[0] == al.StreamRestart(
        attempt=2, delay=2.0, error="OpenAI API error 429 (requests): Slow down."
    )
    assert deltas[1:] == FIXTURE_CASES["text_usage"][1]
    assert final == FIXTURE_CASES["text_usage"][2]
    assert len(seen) == 2


# --------------------------------------------------------------------------- requests

IMAGE = al.ImageContent("aGVsbG8=", "image/png")
WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SCREENSHOT = ToolDefinition("screenshot", "Capture the screen.", {"type": "object"})
HISTORY: tuple[al.Message, ...] = (
    al.UserMessage((al.TextContent("What is this? Then the weather."), IMAGE), timestamp=1),
    al.AssistantMessage(
        (
            al.ThinkingContent("They want two things.", signature="c2ln"),
            al.TextContent("A cat. Checking."),
            al.ToolCall("call_1", "get_weather", {"city": "Zürich"}),
            al.ToolCall("call_2", "screenshot", {}),
        ),
        al.StopReason.TOOL_USE,
        timestamp=2,
    ),
    al.ToolResultMessage("call_1", "get_weather", (al.TextContent("18°C, cloudy"),), timestamp=3),
    al.ToolResultMessage("call_2", "screenshot", (al.TextContent("Captured."), IMAGE), timestamp=4),
    al.AssistantMessage((), al.StopReason.ABORTED, timestamp=5, error_message="Aborted"),
    al.UserMessage.text("Stop and summarise."),
)
CONVERSATION = ModelRequest(
    system_prompt="You are terse.",
    messages=HISTORY,
    tools=(WEATHER, SCREENSHOT),
    thinking=ThinkingLevel.HIGH,
)
IMAGE_PART = {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}
TOOLS_JSON = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "screenshot",
            "description": "Capture the screen.",
            "parameters": {"type": "object"},
        },
    },
]


def history_json(system_role: str) -> list[dict[str, Any]]:
    return [
        {"role": system_role, "content": "You are terse."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "What is this? Then the weather."}, IMAGE_PART],
        },
        {
            "role": "assistant",
            "content": "A cat. Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Zürich"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "screenshot", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18°C, cloudy"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Captured."},
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "The image from the result of screenshot (tool call call_2):",
                },
                IMAGE_PART,
            ],
        },
        {"role": "user", "content": "Stop and summarise."},
    ]


async def sent(model: ModelConfig, request: ModelRequest) -> httpx2.Request:
    """The HTTP request the provider sends for ``request``."""
    provider, seen = make(model, [sse_response(read("text_usage"))])
    await collect(provider, request)
    return seen[0]


async def test_openai_request_body() -> None:
    """OpenAI's preset: developer role, max_completion_tokens, reasoning_effort, usage asked."""
    request = await sent(OPENAI, CONVERSATION)
    assert body_of(request) == {
        "model": "gpt-5.4",
        "messages": history_json("developer"),
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": TOOLS_JSON,
        "max_completion_tokens": 128_000,
        "reasoning_effort": "high",
    }


async def test_structured_output_sends_a_response_format() -> None:
    """Native structured output: response_format json_schema with the name and strictness."""
    schema = {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}
    request = attrs.evolve(CONVERSATION, output=OutputFormat("answer", schema, strict=False))
    body = body_of(await sent(OPENAI, request))
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": schema, "strict": False},
    }
    assert "response_format" not in body_of(await sent(OPENAI, CONVERSATION))


async def test_openai_request_url_and_headers() -> None:
    """The request goes to {base_url}/chat/completions with the bearer key and model headers."""
    model = attrs.evolve(OPENAI, headers={"OpenAI-Organization": "org-abc"})
    request = await sent(model, REQUEST)
    assert (request.method, str(request.url)) == (
        "POST",
        "https://api.openai.com/v1/chat/completions",
    )
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["openai-organization"] == "org-abc"


async def test_compatible_request_body() -> None:
    """A compatible server: system role, max_tokens, temperature, no reasoning_effort."""
    request = await sent(OLLAMA, attrs.evolve(CONVERSATION, max_tokens=1024, temperature=0.2))
    assert body_of(request) == {
        "model": "qwen3:32b",
        "messages": history_json("system"),
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": TOOLS_JSON,
        "max_tokens": 1024,
        "temperature": 0.2,
    }
    assert str(request.url) == "http://localhost:11434/v1/chat/completions"


async def test_no_authorization_header_without_a_key() -> None:
    """A keyless local server gets no authorization header at all."""
    request = await sent(OLLAMA, REQUEST)
    assert "authorization" not in request.headers


async def test_empty_system_prompt_no_tools_no_usage_option() -> None:
    """An empty system prompt, no tools and no stream_usage leave their keys out."""
    model = attrs.evolve(OLLAMA, compat=Compat(stream_usage=False))
    request = await sent(model, REQUEST)
    assert body_of(request) == {
        "model": "qwen3:32b",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": 8192,
    }


@pytest.mark.parametrize(
    ("level", "effort"),
    [
        (ThinkingLevel.OFF, None),
        (ThinkingLevel.MINIMAL, "minimal"),
        (ThinkingLevel.LOW, "low"),
        (ThinkingLevel.MEDIUM, "medium"),
        (ThinkingLevel.HIGH, "high"),
    ],
)
async def test_thinking_level_maps_to_reasoning_effort(
    level: ThinkingLevel, effort: str | None
) -> None:
    """Each thinking level is its reasoning_effort; OFF sends none."""
    request = await sent(OPENAI, attrs.evolve(REQUEST, thinking=level))
    assert body_of(request).get("reasoning_effort") == effort


async def test_minimal_effort_falls_back_to_low() -> None:
    """A server that does not know "minimal" is sent "low"."""
    model = attrs.evolve(OPENAI, compat=attrs.evolve(OPENAI.compat, minimal_effort=False))
    request = await sent(model, attrs.evolve(REQUEST, thinking=ThinkingLevel.MINIMAL))
    assert body_of(request)["reasoning_effort"] == "low"


async def test_malformed_arguments_in_history_are_sent_as_empty_object() -> None:
    """A call whose arguments did not parse is sent back as "{}", not its broken text."""
    history = (
        al.UserMessage.text("go"),
        al.AssistantMessage(
            (al.ToolCall("call_9", "get_weather", {}, raw_arguments='{"city": "Par'),),
            al.StopReason.TOOL_USE,
        ),
        al.ToolResultMessage(
            "call_9", "get_weather", (al.TextContent("Invalid arguments: ..."),), is_error=True
        ),
    )
    request = await sent(OPENAI, attrs.evolve(REQUEST, messages=history))
    assert body_of(request)["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"},
            }
        ],
    }


async def test_tool_messages_carry_names_when_the_server_wants_them() -> None:
    """compat.tool_result_name puts the tool's name on each tool message."""
    model = attrs.evolve(OLLAMA, compat=Compat(tool_result_name=True))
    request = await sent(model, attrs.evolve(REQUEST, messages=HISTORY[:4]))
    tools = [m for m in body_of(request)["messages"] if m["role"] == "tool"]
    assert tools == [
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "18°C, cloudy",
            "name": "get_weather",
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "Captured.", "name": "screenshot"},
    ]


async def test_image_only_tool_result_says_where_the_image_is() -> None:
    """A tool result that is only images gets a note as its text; the images follow."""
    history = (
        *HISTORY[:3],
        al.ToolResultMessage("call_2", "screenshot", (IMAGE, IMAGE)),
    )
    request = await sent(OPENAI, attrs.evolve(REQUEST, messages=history))
    assert body_of(request)["messages"][3:] == [
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": "(the result is the image in the next message)",
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "The images from the result of screenshot (tool call call_2):",
                },
                IMAGE_PART,
                IMAGE_PART,
            ],
        },
    ]


# --------------------------------------------------------------------------- a real server


def events_of(body: bytes) -> list[bytes]:
    """The body cut after each event: one HTTP chunk per event."""
    return [part + b"\n\n" for part in body.split(b"\n\n") if part]


async def test_real_server_happy_path() -> None:
    """Over a real socket the request arrives whole and the reply streams into the message."""
    async with serve(Reply(events_of(read("text_usage")))) as server:
        model = attrs.evolve(OPENAI, base_url=f"{server.url}/v1")
        provider = OpenAIProvider(model, retry=RetryConfig.none())
        async with provider:
            deltas, final = await collect(provider)
    assert deltas == FIXTURE_CASES["text_usage"][1]
    assert final == FIXTURE_CASES["text_usage"][2]
    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json()["messages"] == [{"role": "user", "content": "hi"}]


async def test_real_server_dropped_connection_is_retried() -> None:
    """A connection dropped mid-stream: a restart delta, then the retried reply in full."""
    parts = events_of(read("text_usage"))
    async with serve(Reply(parts, drop_after=2), Reply(parts)) as server:
        model = attrs.evolve(OPENAI, base_url=f"{server.url}/v1")
        retry = RetryConfig(initial_delay=0, jitter=0)
        provider = OpenAIProvider(model, retry=retry)
        async with provider:
            deltas, final = await collect(provider)
    assert deltas == [
        T(delta="Héllo"),
        al.StreamRestart(
            attempt=2,
            delay=0.0,
            error="OpenAI API connection failed: peer closed connection without sending "
            "complete message body (incomplete chunked read)",
        ),
        *FIXTURE_CASES["text_usage"][1],
    ]
    assert final == FIXTURE_CASES["text_usage"][2]
    assert len(server.requests) == 2


# --------------------------------------------------------------------------- end to end


def openai_sse(*chunks: dict[str, Any]) -> bytes:
    return b"".join(b"data: %s\n\n" % json.dumps(c).encode() for c in chunks) + b"data: [DONE]\n\n"


async def test_agent_calls_a_tool_and_answers() -> None:
    """An Agent on OpenAIProvider runs the model's call, sends its result, gets the answer."""
    call = {"index": 0, "id": "call_e1", "type": "function", "function": {"name": "echo"}}
    first = openai_sse(
        chunk({"role": "assistant", "tool_calls": [call]}, model="gpt-5.4-x"),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"text": "hi"}'}}]}),
        chunk({}, "tool_calls"),
    )
    second = openai_sse(chunk({"content": "It said HI."}, model="gpt-5.4-x"), chunk({}, "stop"))
    provider, seen = make(OPENAI, [sse_response(first), sse_response(second)])
    agent = al.Agent(provider, system_prompt="Be brief.", tools=[Echo()])
    await agent.run("Shout hi")
    assert [attrs.evolve(m, timestamp=0) for m in agent.messages] == [
        al.UserMessage((al.TextContent("Shout hi"),), timestamp=0),
        message(
            al.ToolCall("call_e1", "echo", {"text": "hi"}),
            stop=al.StopReason.TOOL_USE,
            model="gpt-5.4-x",
            provider="openai",
        ),
        al.ToolResultMessage("call_e1", "echo", (al.TextContent("HI"),), timestamp=0),
        message(
            al.TextContent("It said HI."),
            stop=al.StopReason.STOP,
            model="gpt-5.4-x",
            provider="openai",
        ),
    ]
    assert body_of(seen[1])["messages"] == [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "Shout hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_e1",
                    "type": "function",
                    "function": {"name": "echo", "arguments": '{"text": "hi"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_e1", "content": "HI"},
    ]


# --------------------------------------------------------------------------- construction, secrets


def test_model_id_builds_the_openai_preset() -> None:
    """A model id string is ModelConfig.openai(id, api_key=...)."""
    provider = OpenAIProvider("gpt-5.4-mini", api_key=KEY)
    assert provider.model == ModelConfig.openai("gpt-5.4-mini", api_key=KEY)


def test_it_is_a_provider() -> None:
    """OpenAIProvider satisfies the Provider protocol the loop takes."""
    assert isinstance(OpenAIProvider(OLLAMA), al.providers.Provider)


def test_api_key_overrides_the_model_key() -> None:
    """api_key given with a ModelConfig replaces the config's key."""
    provider = OpenAIProvider(OPENAI, api_key="sk-other")
    assert provider.model.resolve_api_key() == "sk-other"
    assert provider.model.id == "gpt-5.4"


def test_a_model_of_another_api_is_refused() -> None:
    """An Anthropic ModelConfig is a ValueError naming the mismatch."""
    with pytest.raises(
        ValueError,
        match=r"^OpenAIProvider speaks the 'openai' API; anthropic model 'claude-sonnet-5' "
        r"is configured for the 'anthropic' API$",
    ):
        OpenAIProvider(ModelConfig.anthropic(api_key=KEY))


@pytest.mark.parametrize(
    ("model", "name"),
    [
        (OPENAI, "OpenAI"),
        (OLLAMA, "ollama"),
        (
            ModelConfig.openai_compatible("m", "http://user:pw@gpu-box:8000/v1"),
            "openai-compatible (gpu-box:8000)",
        ),
    ],
)
async def test_errors_name_the_configured_server(model: ModelConfig, name: str) -> None:
    """Errors name OpenAI, the provider, or for the generic name the host (never its userinfo)."""
    provider, _ = make(model, [sse_response(read("cut_off"))], RetryConfig.none())
    with pytest.raises(NetworkError) as caught:
        await collect(provider)
    assert str(caught.value) == f"{name} stream ended before it finished"


def test_repr_hides_the_key() -> None:
    """repr(provider) names the model and URL, never the key."""
    provider = OpenAIProvider(OPENAI)
    assert repr(provider) == (
        "OpenAIProvider(model='gpt-5.4', base_url='https://api.openai.com/v1')"
    )


@pytest.mark.parametrize(
    "response",
    [
        openai_error(401, f"Incorrect API key provided: {KEY}.", "invalid_request_error", None),
        sse_response(
            b'data: {"error": {"message": "bad key %s", "type": "invalid_api_key"}}\n\n'
            % KEY.encode()
        ),
    ],
)
async def test_key_never_appears_in_errors(response: httpx2.Response) -> None:
    """A server that echoes the key, in a status error or a stream error, has it redacted."""
    provider, _ = make(OPENAI, [response], RetryConfig.none())
    with pytest.raises(AuthenticationError) as caught:
        await collect(provider)
    assert KEY not in str(caught.value)
    assert "***" in str(caught.value)


def test_error_chunks_redact_header_secrets_too() -> None:
    """A secret passed as a header is redacted from an in-stream error, like the key."""
    model = attrs.evolve(OPENAI, headers={"x-proxy-auth": "proxy-token-0123456789"})
    parser = OpenAIProvider(model).parser()
    chunk = {"error": {"message": "bad proxy-token-0123456789", "type": "server_error"}}
    with pytest.raises(ProviderError) as caught:
        parser.feed(ServerSentEvent(data=json.dumps(chunk)))
    assert "proxy-token-0123456789" not in str(caught.value)
    assert str(caught.value).endswith("bad ***")
