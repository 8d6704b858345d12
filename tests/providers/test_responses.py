"""OpenAIResponsesProvider: Responses API requests, stream parsing, SDK parity, errors, retries."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx2
import openai
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
    OpenAIResponsesProvider,
    OutputFormat,
    OverloadedError,
    ProviderError,
    RateLimitError,
    RetryConfig,
    ServerError,
    ThinkingLevel,
    ToolDefinition,
)
from agentloop.providers.sse import ServerSentEvent, SSEDecoder

KEY = "sk-test-RESPONSES-SECRET-42"
FIXTURES = Path(__file__).parent.parent / "fixtures" / "responses"

GPT = ModelConfig.openai_responses("gpt-5.4", api_key=KEY)
GPT4 = ModelConfig.openai_responses("gpt-4.1", api_key=KEY)  # does not reason
MODEL_ID = "gpt-5.4-2026-03-05"  # what the fixtures' responses say

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
    model: ModelConfig,
    responses: list[Any],
    retry: RetryConfig | None = None,
    *,
    store: bool = False,
) -> tuple[OpenAIResponsesProvider, list[httpx2.Request]]:
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
    return OpenAIResponsesProvider(model, retry=retry, client=client, store=store), seen


async def collect(
    provider: OpenAIResponsesProvider, request: ModelRequest = REQUEST
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


def parse(
    *events: dict[str, Any] | str, store: bool = False, model: ModelConfig = GPT
) -> tuple[list[Any], al.AssistantMessage]:
    """Feed events (dicts as JSON, strings as they are) to a parser; return deltas and message."""
    parser = OpenAIResponsesProvider(model, store=store).parser()
    deltas: list[Any] = []
    for event in events:
        data = event if isinstance(event, str) else json.dumps(event)
        deltas.extend(parser.feed(ServerSentEvent(data=data)))
    return deltas, untimed(parser.finish())


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
    *content: Any, stop: al.StopReason, model: str = MODEL_ID, usage: al.Usage = NO_USAGE
) -> al.AssistantMessage:
    return al.AssistantMessage(content, stop, model, "openai", usage, timestamp=0)


def signature(
    item_id: str,
    encrypted: str | None = None,
    *,
    parts: list[int] | None = None,
    response_id: str | None = None,
) -> str:
    """The signature the provider keeps on a reasoning block (see the module docstring)."""
    fields: dict[str, Any] = {"id": item_id}
    if encrypted is not None:
        fields["encrypted_content"] = encrypted
    if parts is not None:
        fields["summary"] = parts
    if response_id is not None:
        fields["response_id"] = response_id
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def carrier(response_id: str) -> str:
    """The signature of the empty block that keeps a response id (store=True, no reasoning)."""
    return f'{{"response_id":"{response_id}"}}'


T = al.TextDelta
R = al.ThinkingDelta


def C(delta: str, index: int, call_id: str, name: str) -> al.ToolCallDelta:
    return al.ToolCallDelta(delta=delta, index=index, tool_call_id=call_id, name=name)


# Events, as the API sends them, for the parser tests.
def created(response_id: str = "resp_1", model: str = "gpt-5.4-x") -> dict[str, Any]:
    response = {"id": response_id, "object": "response", "status": "in_progress", "model": model}
    return {"type": "response.created", "sequence_number": 0, "response": response}


def completed(
    response_id: str = "resp_1", usage: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    response = {"id": response_id, "status": "completed", "usage": usage, **fields}
    return {"type": "response.completed", "response": response}


def added(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def done(index: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response.output_item.done", "output_index": index, "item": item}


def text(index: int, delta: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "output_index": index, "delta": delta}


def summary(index: int, part: int, delta: str) -> dict[str, Any]:
    return {
        "type": "response.reasoning_summary_text.delta",
        "output_index": index,
        "summary_index": part,
        "delta": delta,
    }


def arguments(index: int, delta: str) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "output_index": index, "delta": delta}


def call_item(call_id: str, name: str, args: str = "", status: str = "completed") -> dict[str, Any]:
    return {
        "id": f"fc_{call_id}",
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": args,
    }


MESSAGE_ITEM = {"id": "msg_1", "type": "message", "status": "in_progress", "content": []}


# --------------------------------------------------------------------------- fixtures

ENCRYPTED_TOOL = (
    "gAAAAABpv64KRyeK7qjvxOS6IWD9xxhGgljIOqgT8GcEYW2k_bYxSOeJBlRndGEXOUALuzZuJDyD"
    "g6kh_o4m7nS11Hd0kqKxLJR3PzsEbbGDiOiuh3tx1mpRX0U-Vf4DArmSHlxMw4HazJ2v1fA2HScP"
    "IkV7SwaWPfO4b6egsDEffHSbR5Gl1a194tV4UaxRlZMG4_qubNvcLqqFvo7ZpgUC1B9SGly8AuwP"
    "q290lT32PFFyAPRfVVCE95HJbUWpqpGWva-8FbLRORyftago5J46c5JePwe44ZhHp7lPQmPBXmXP"
    "81B2bq4xYZhhL6sIgl3MIAFJ=="
)
ENCRYPTED_NO_SUMMARY = (
    "gAAAAABp7GLw8w3X5vRDdw7voW8TIvdIUZgHr3f6fjx7nOI73ufoRrc_LyC3sOUS66reldaaOqFI"
    "Hc2zjkxNnIxkkIWEzgAjSq5k_6Z6hftPhy0HXFaiJ2HykWnF7E1dMBpRpeCGTibfzN7bh15lqsj5"
    "qaqNOhMq7zD48vZhsI0yaYBrJh75wlXgyHgnkhDkzBlSt9KpOGYimJehT-p95RGEfqopG4bqsVhS"
    "omav9i29XSNBE0LfBNat=="
)
ENCRYPTED_ECHO = (
    "gAAAAABpLTh7cr38C0UN5VhVKIfnj2Gqlq3ZYb4gWzCcuIHz-V45413qnO7mtdR8sX28w4Qajwe6"
    "cWCHUYjqruGer8W0Yug9stehCzacXm2LROytTXWox3HyfzesS539YCHviCXL_ilAhpmVewJxhYxU"
    "wsCg42ed4tcEoupd=="
)
RS_TOOL = "rs_10a318ad98b9dccbe56c6dfef9b29b0db63550b3531f8c7a"
RS_NO_SUMMARY = "rs_30e89227bfe0d18dc349983dfa74842fc336d2081b66c230"
RS_ECHO = "rs_12ae1410726349ef8dbaffa3db842414761ef08bef656280"
RESP_TEXT = "resp_1c4ebc2729532c49996698f6ae94301f04059ac0f2ccd200"
RESP_TOOL = "resp_b48a4a05598e76966e26ce78829d2cb051c34193c7ad764b"
CALL_WEATHER = "call_Wq3kP0vXn7LhB2sYdG5mTzQe"
CALL_TIME = "call_Zt8mR2cJk4NwF9pVaH1xUyLo"
CALL_READ = "call_r3AdM3kQ8nZx2LpV7bW0yTcE"
CALL_WRITE = "call_Ln9xQ4mB7vK2pR8sT1wYcZaD"
CALL_ECHO = "call_e1Hq7ZsW3xK9mN2bV5cR8tYp"
THINKING = (
    '**Reading the file**\n\nThe user wants README.md; I\u2019ll read it.\n\nThen summarise "it".'
)

FIXTURE_CASES: dict[str, tuple[list[Any], al.AssistantMessage]] = {
    "text_usage": (
        [T(delta="Héllo"), T(delta=" wörld 👋"), T(delta="!")],
        message(
            al.TextContent("Héllo wörld 👋!"),
            stop=al.StopReason.STOP,
            usage=usage(176, 9, cached=1024, cost=0.000831),
        ),
    ),
    "parallel_tools": (
        [
            C("", 0, CALL_WEATHER, "get_weather"),
            C('{"ci', 0, CALL_WEATHER, "get_weather"),
            C('ty": "Paris"}', 0, CALL_WEATHER, "get_weather"),
            C("", 1, CALL_TIME, "get_time"),
            C('{"tz": ', 1, CALL_TIME, "get_time"),
            C('"Europe/Paris"}', 1, CALL_TIME, "get_time"),
        ],
        message(
            al.ToolCall(CALL_WEATHER, "get_weather", {"city": "Paris"}),
            al.ToolCall(CALL_TIME, "get_time", {"tz": "Europe/Paris"}),
            stop=al.StopReason.TOOL_USE,
            usage=usage(310, 58, cost=0.001645),
        ),
    ),
    "reasoning_tool": (
        [
            R(delta="**Reading the file**\n\nThe user"),
            R(delta=" wants README.md; I\u2019ll read it."),
            R(delta="\n\n"),
            R(delta="Then"),
            R(delta=' summarise "it".'),
            C("", 1, CALL_READ, "read_file"),
            C('{"path":', 1, CALL_READ, "read_file"),
            C(' "README.md"}', 1, CALL_READ, "read_file"),
        ],
        message(
            al.ThinkingContent(THINKING, signature(RS_TOOL, ENCRYPTED_TOOL, parts=[61, 20])),
            al.ToolCall(CALL_READ, "read_file", {"path": "README.md"}),
            stop=al.StopReason.TOOL_USE,
            usage=usage(128, 180, cached=1920, reasoning=128, cost=0.0035),
        ),
    ),
    "reasoning_no_summary": (
        [T(delta="2 + 2", index=1), T(delta=" = 4.", index=1)],
        message(
            al.ThinkingContent("", signature(RS_NO_SUMMARY, ENCRYPTED_NO_SUMMARY)),
            al.TextContent("2 + 2 = 4."),
            stop=al.StopReason.STOP,
            usage=usage(20, 40, reasoning=24, cost=0.00065),
        ),
    ),
    "refusal": (
        [T(delta="I'm sorry,"), T(delta=" but I can't help with that.")],
        message(
            al.TextContent("I'm sorry, but I can't help with that."),
            stop=al.StopReason.REFUSAL,
            usage=usage(24, 12, cost=0.00024),
        ),
    ),
    "incomplete": (
        [
            T(delta="Writing"),
            T(delta=" it now."),
            C("", 1, CALL_WRITE, "write_file"),
            C('{"path": "src/ma', 1, CALL_WRITE, "write_file"),
            C('in.py", "content": "impo', 1, CALL_WRITE, "write_file"),
        ],
        message(
            al.TextContent("Writing it now."),
            al.ToolCall(
                CALL_WRITE,
                "write_file",
                {},
                raw_arguments='{"path": "src/main.py", "content": "impo',
            ),
            stop=al.StopReason.LENGTH,
            usage=usage(800, 64, cost=0.00296),
        ),
    ),
    "echo_call": (
        [
            R(delta="**Shouting**\n\nEcho"),
            R(delta=" will shout it."),
            C("", 1, CALL_ECHO, "echo"),
            C('{"text":', 1, CALL_ECHO, "echo"),
            C(' "hi"}', 1, CALL_ECHO, "echo"),
        ],
        message(
            al.ThinkingContent(
                "**Shouting**\n\nEcho will shout it.", signature(RS_ECHO, ENCRYPTED_ECHO)
            ),
            al.ToolCall(CALL_ECHO, "echo", {"text": "hi"}),
            stop=al.StopReason.TOOL_USE,
            usage=usage(96, 40, reasoning=16, cost=0.00084),
        ),
    ),
}
MODES = ["whole", "bytes", "random"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(FIXTURE_CASES))
async def test_fixture_gives_exact_deltas_and_message_however_cut(name: str, mode: str) -> None:
    """A recorded stream gives the same deltas and message whole, byte by byte or cut anywhere."""
    expected_deltas, expected_message = FIXTURE_CASES[name]
    for parts in chunkings(read(name), mode):
        provider, _ = make(GPT, [sse_response(parts)], RetryConfig.none())
        deltas, final = await collect(provider)
        assert deltas == expected_deltas
        assert final == expected_message


FAILING_CASES: dict[str, tuple[list[Any], type[ProviderError], str, float | None]] = {
    "cut_off": (
        [T(delta="The answer"), T(delta=" is")],
        NetworkError,
        "OpenAI stream ended before the response finished",
        None,
    ),
    "error_mid_stream": (
        [T(delta="Working")],
        ServerError,
        "OpenAI API error in the stream (server_error): "
        "The server had an error while processing your request. Sorry about that!",
        None,
    ),
    "failed_server_error": (
        [T(delta="Let me")],
        ServerError,
        "OpenAI response failed (server_error): An error occurred while processing your "
        "request. You can retry your request, or contact us through our help center at "
        "help.openai.com if the error persists. Please include the request ID "
        "req_7f3c2a1e9b8d4c6f0a5e in your message.",
        None,
    ),
    "failed_rate_limit": (
        [],
        RateLimitError,
        "OpenAI response failed (rate_limit_exceeded): Rate limit reached for gpt-5.4 in "
        "organization org-abc on tokens per min (TPM): Limit 30000, Used 29500, Requested "
        "1200. Please try again in 1.4s. Visit https://platform.openai.com/account/rate-limits "
        "to learn more.",
        1.4,
    ),
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(FAILING_CASES))
async def test_failing_fixture_raises_the_same_error_however_cut(name: str, mode: str) -> None:
    """A cut-off stream, an error event and a failed response raise their exact error."""
    expected_deltas, error_type, message_text, retry_after = FAILING_CASES[name]
    for parts in chunkings(read(name), mode):
        provider, _ = make(GPT, [sse_response(parts)], RetryConfig.none())
        deltas: list[Any] = []

        async def emit(delta: Any, deltas: list[Any] = deltas) -> None:
            deltas.append(delta)

        with pytest.raises(error_type) as caught:
            await provider.stream(REQUEST, emit)
        assert type(caught.value) is error_type
        assert str(caught.value) == message_text
        assert caught.value.retryable
        assert caught.value.retry_after == retry_after
        assert deltas == expected_deltas


@pytest.mark.parametrize("name", sorted(FAILING_CASES))
async def test_failed_stream_is_retried_then_succeeds(autojump_clock: Any, name: str) -> None:
    """A failed stream: a restart, a wait (1 s, or the 1.4 s asked for), then the new reply."""
    expected_deltas, _, message_text, retry_after = FAILING_CASES[name]
    provider, seen = make(GPT, [sse_response(read(name)), sse_response(read("text_usage"))])
    deltas, final = await collect(provider)
    delay = 1.0 if retry_after is None else retry_after
    assert deltas == [
        *expected_deltas,
        al.StreamRestart(attempt=2, delay=delay, error=message_text),
        *FIXTURE_CASES["text_usage"][0],
    ]
    assert final == FIXTURE_CASES["text_usage"][1]
    assert autojump_clock.current_time() == delay  # the clock started at 0
    assert len(seen) == 2


async def test_store_keeps_the_response_id_on_the_reasoning() -> None:
    """With store=True, each signed reasoning block also records its response's id."""
    provider, _ = make(GPT, [sse_response(read("reasoning_tool"))], store=True)
    _, final = await collect(provider)
    assert final.content[0] == al.ThinkingContent(
        THINKING, signature(RS_TOOL, ENCRYPTED_TOOL, parts=[61, 20], response_id=RESP_TOOL)
    )
    assert final.content[1:] == FIXTURE_CASES["reasoning_tool"][1].content[1:]


async def test_store_adds_an_empty_block_for_the_id_when_there_is_no_reasoning() -> None:
    """With store=True, a reply with no reasoning ends with an empty block holding the id."""
    provider, _ = make(GPT, [sse_response(read("text_usage"))], store=True)
    deltas, final = await collect(provider)
    assert deltas == FIXTURE_CASES["text_usage"][0]
    assert final.content == (
        al.TextContent("Héllo wörld 👋!"),
        al.ThinkingContent("", carrier(RESP_TEXT)),
    )
    assert final.text == "Héllo wörld 👋!"


# --------------------------------------------------------------------------- SDK parity

# The fixtures that end with response.completed (the SDK's final response needs it).
SUCCESS = sorted(set(FIXTURE_CASES) - {"incomplete"})


async def _sdk_final(body: bytes) -> Any:
    """The official openai SDK's final response for a stream of ``body``."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    client = openai.AsyncOpenAI(
        api_key=KEY, base_url="https://api.openai.com/v1", http_client=http, max_retries=0
    )
    async with client.responses.stream(model="gpt-5.4", input="hi") as stream:
        final = await stream.get_final_response()
    await client.close()
    return final


def _sdk_view(response: Any) -> dict[str, Any]:
    """What both parsers must agree on, read off the SDK's final response."""
    texts, calls, reasoning = [], [], []
    for item in response.output:
        if item.type == "message":
            texts.append(
                "".join(p.text if p.type == "output_text" else p.refusal for p in item.content)
            )
        elif item.type == "function_call":
            calls.append((item.call_id, item.name, json.loads(item.arguments)))
        elif item.type == "reasoning":
            summary_text = "\n\n".join(part.text for part in item.summary)
            reasoning.append((item.id, summary_text, item.encrypted_content))
    counts = response.usage
    cached = counts.input_tokens_details.cached_tokens
    return {
        "model": response.model,
        "text": "".join(texts),
        "calls": calls,
        "reasoning": reasoning,
        "usage": (
            counts.input_tokens - cached,
            cached,
            counts.output_tokens,
            counts.output_tokens_details.reasoning_tokens,
            counts.total_tokens,
        ),
    }


def _our_view(final: al.AssistantMessage) -> dict[str, Any]:
    reasoning = []
    for block in final.content:
        if isinstance(block, al.ThinkingContent):
            assert block.signature is not None
            kept = json.loads(block.signature)
            reasoning.append((kept["id"], block.thinking, kept.get("encrypted_content")))
    counts = final.usage
    return {
        "model": final.model,
        "text": final.text,
        "calls": [(call.id, call.name, call.arguments) for call in final.tool_calls],
        "reasoning": reasoning,
        "usage": (
            counts.input,
            counts.cache_read,
            counts.output,
            counts.reasoning,
            counts.total_tokens,
        ),
    }


@pytest.mark.parametrize("name", SUCCESS)
def test_the_official_sdk_reads_the_same_bytes_the_same_way(name: str) -> None:
    """openai's own SDK, given the same bytes, finds the same text, calls, reasoning and usage."""
    body = read(name)
    sdk = _sdk_view(asyncio.run(_sdk_final(body)))
    parser = OpenAIResponsesProvider(GPT).parser()
    decoder = SSEDecoder()
    for event in [*decoder.feed(body), *decoder.close()]:
        parser.feed(event)
    ours = _our_view(parser.finish())
    assert ours == sdk
    assert sdk["text"] or sdk["calls"]  # nothing vacuous


# --------------------------------------------------------------------------- the parser


def test_unknown_events_and_data_that_is_not_json_are_skipped() -> None:
    """Keep-alives, a stray [DONE], content_part events and events to come change nothing."""
    deltas, final = parse(
        created(),
        "[DONE]",
        {"type": "keepalive", "sequence_number": 1},
        added(0, MESSAGE_ITEM),
        {"type": "response.content_part.added", "output_index": 0, "content_index": 0},
        {"type": "response.output_text.annotation.added", "output_index": 0},
        text(0, "ok"),
        {"type": "response.web_search_call.searching", "output_index": 1},
        added(1, {"id": "ws_1", "type": "web_search_call", "status": "in_progress"}),
        completed(),
    )
    assert deltas == [T(delta="ok")]
    assert final == message(al.TextContent("ok"), stop=al.StopReason.STOP, model="gpt-5.4-x")


def test_the_sse_event_name_is_used_when_the_data_has_no_type() -> None:
    """A server that puts the type only in the ``event:`` line is read the same."""
    parser = OpenAIResponsesProvider(GPT).parser()
    delta = {"output_index": 0, "delta": "hey"}
    assert list(
        parser.feed(ServerSentEvent(event="response.output_text.delta", data=json.dumps(delta)))
    ) == [T(delta="hey")]
    parser.feed(ServerSentEvent(event="response.completed", data='{"response": {}}'))
    assert parser.done
    assert untimed(parser.finish()) == message(
        al.TextContent("hey"), stop=al.StopReason.STOP, model="gpt-5.4"
    )


def test_the_final_text_of_an_item_completes_what_the_deltas_missed() -> None:
    """Text, arguments and summaries known only from done events are emitted when they come."""
    deltas, final = parse(
        created(),
        added(0, {"id": "rs_9", "type": "reasoning", "summary": []}),
        done(
            0,
            {
                "id": "rs_9",
                "type": "reasoning",
                "encrypted_content": "enc",
                "summary": [{"type": "summary_text", "text": "Think."}],
            },
        ),
        added(1, MESSAGE_ITEM),
        text(1, "Hel"),
        done(1, {**MESSAGE_ITEM, "content": [{"type": "output_text", "text": "Hello"}]}),
        added(2, call_item("c1", "ls")),
        {
            "type": "response.function_call_arguments.done",
            "output_index": 2,
            "arguments": '{"p": 1}',
        },
        done(2, call_item("c1", "ls", '{"p": 1}')),
        completed(),
    )
    assert deltas == [
        R(delta="Think."),
        T(delta="Hel", index=1),
        T(delta="lo", index=1),
        C("", 2, "c1", "ls"),
        C('{"p": 1}', 2, "c1", "ls"),
    ]
    assert final.content == (
        al.ThinkingContent("Think.", '{"id":"rs_9","encrypted_content":"enc"}'),
        al.TextContent("Hello"),
        al.ToolCall("c1", "ls", {"p": 1}),
    )


def test_a_call_seen_only_when_done_is_announced_whole() -> None:
    """A function call with no output_item.added streams as one delta when its item is done."""
    deltas, final = parse(created(), done(0, call_item("c7", "pwd", "{}")), completed())
    assert deltas == [C("{}", 0, "c7", "pwd")]
    assert final == message(
        al.ToolCall("c7", "pwd", {}), stop=al.StopReason.TOOL_USE, model="gpt-5.4-x"
    )


def test_interleaved_calls_are_assembled_by_output_index() -> None:
    """Argument deltas of two calls that interleave go to their own calls."""
    deltas, final = parse(
        created(),
        added(0, call_item("a", "ls", status="in_progress")),
        added(1, call_item("b", "cat", status="in_progress")),
        arguments(1, '{"f": '),
        arguments(0, "{}"),
        arguments(1, '"x"}'),
        done(0, call_item("a", "ls", "{}")),
        done(1, call_item("b", "cat", '{"f": "x"}')),
        completed(),
    )
    assert deltas == [
        C("", 0, "a", "ls"),
        C("", 1, "b", "cat"),
        C('{"f": ', 1, "b", "cat"),
        C("{}", 0, "a", "ls"),
        C('"x"}', 1, "b", "cat"),
    ]
    assert final.tool_calls == (al.ToolCall("a", "ls", {}), al.ToolCall("b", "cat", {"f": "x"}))


def test_summary_parts_without_part_added_are_still_separated() -> None:
    """A delta of a new summary part starts with the blank line that separates parts."""
    deltas, final = parse(
        created(),
        added(0, {"id": "rs_1", "type": "reasoning", "summary": []}),
        summary(0, 0, "One."),
        summary(0, 1, "Two."),
        summary(0, 1, " More."),
        completed(),
    )
    assert deltas == [R(delta="One."), R(delta="\n\nTwo."), R(delta=" More.")]
    # The item never finished: its reasoning is kept, unsigned (it cannot go back).
    assert final.content == (al.ThinkingContent("One.\n\nTwo. More."),)


def test_a_text_delta_without_its_item_starts_a_message() -> None:
    """Text for an output index no item.added announced still makes a text block."""
    deltas, final = parse(created(), text(3, "Hi"), text(3, "!"), completed())
    assert deltas == [T(delta="Hi"), T(delta="!")]
    assert final.content == (al.TextContent("Hi!"),)


def test_a_call_that_did_not_finish_is_never_run() -> None:
    """A call whose item was not done keeps its arguments as raw_arguments, even valid JSON."""
    _, final = parse(
        created(),
        added(0, call_item("c1", "rm", status="in_progress")),
        arguments(0, "{}"),
        {**completed(), "type": "response.incomplete"},
    )
    assert final.content == (al.ToolCall("c1", "rm", {}, raw_arguments="{}"),)
    assert final.stop_reason is al.StopReason.LENGTH


@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("max_output_tokens", al.StopReason.LENGTH),
        ("content_filter", al.StopReason.REFUSAL),
        (None, al.StopReason.LENGTH),
    ],
)
def test_incomplete_reason_is_the_stop_reason(reason: str | None, stop: al.StopReason) -> None:
    """response.incomplete stops as LENGTH, or REFUSAL for the content filter."""
    incomplete = {
        "type": "response.incomplete",
        "response": {"id": "resp_1", "incomplete_details": {"reason": reason}},
    }
    _, final = parse(created(), added(0, MESSAGE_ITEM), text(0, "Par"), incomplete)
    assert final.stop_reason is stop
    assert final.text == "Par"


def test_a_refusal_with_calls_still_runs_the_calls() -> None:
    """A refusal part beside function calls: the calls need their results, so TOOL_USE."""
    refusal = {"type": "response.refusal.delta", "output_index": 0, "delta": "No."}
    _, final = parse(
        created(),
        added(0, MESSAGE_ITEM),
        refusal,
        done(1, call_item("c1", "ls", "{}")),
        completed(),
    )
    assert final.stop_reason is al.StopReason.TOOL_USE


def test_usage_reads_cached_and_reasoning_tokens() -> None:
    """input excludes the cached tokens; reasoning is part of output; cost at the preset prices."""
    counts = {
        "input_tokens": 10_000,
        "input_tokens_details": {"cached_tokens": 8_000},
        "output_tokens": 1_000,
        "output_tokens_details": {"reasoning_tokens": 600},
        "total_tokens": 11_000,
    }
    _, final = parse(created(), completed(usage=counts))
    assert final.usage == usage(2_000, 1_000, cached=8_000, reasoning=600, cost=0.022)


def test_the_response_model_names_the_message() -> None:
    """The model the response names (a dated snapshot) is the message's model."""
    _, final = parse(created(model="gpt-5.4-2026-03-05"), completed())
    assert final.model == "gpt-5.4-2026-03-05"
    assert final.provider == "openai"


def error_event(**fields: Any) -> dict[str, Any]:
    return {"type": "error", "sequence_number": 3, "param": None, **fields}


def failed(**error: Any) -> dict[str, Any]:
    return {"type": "response.failed", "response": {"id": "resp_1", "error": error or None}}


@pytest.mark.parametrize(
    ("event", "error_type", "message_text", "retry_after"),
    [
        (
            error_event(code="rate_limit_exceeded", message="Slow down. Try again in 250ms."),
            RateLimitError,
            "OpenAI API error in the stream (rate_limit_exceeded): Slow down. Try again in 250ms.",
            0.25,
        ),
        (
            failed(
                code="context_length_exceeded",
                message="Your input exceeds the context window of this model. "
                "Please adjust your input and try again.",
            ),
            ContextOverflowError,
            "OpenAI response failed (context_length_exceeded): Your input exceeds the context "
            "window of this model. Please adjust your input and try again.",
            None,
        ),
        (
            error_event(
                code="invalid_request_error",
                message="This model's maximum context length is 400000 tokens.",
            ),
            ContextOverflowError,
            "OpenAI API error in the stream (invalid_request_error): "
            "This model's maximum context length is 400000 tokens.",
            None,
        ),
        (
            failed(code="invalid_prompt", message="Invalid prompt: flagged."),
            BadRequestError,
            "OpenAI response failed (invalid_prompt): Invalid prompt: flagged.",
            None,
        ),
        (
            failed(code="image_too_large", message="The image is too large."),
            BadRequestError,
            "OpenAI response failed (image_too_large): The image is too large.",
            None,
        ),
        (
            error_event(code="insufficient_quota", message="You exceeded your current quota."),
            ProviderError,
            "OpenAI API error in the stream (insufficient_quota): You exceeded your current quota.",
            None,
        ),
        (
            error_event(code="invalid_api_key", message="Incorrect API key provided."),
            AuthenticationError,
            "OpenAI API error in the stream (invalid_api_key): Incorrect API key provided.",
            None,
        ),
        (
            error_event(code=None, message="The engine is currently overloaded."),
            OverloadedError,
            "OpenAI API error in the stream: The engine is currently overloaded.",
            None,
        ),
        (
            {"type": "error", "error": {"type": "server_error", "message": "Worker crashed."}},
            ServerError,
            "OpenAI API error in the stream (server_error): Worker crashed.",
            None,
        ),
        (
            error_event(code="mystery", message="Something odd."),
            ServerError,
            "OpenAI API error in the stream (mystery): Something odd.",
            None,
        ),
        (
            failed(),
            ServerError,
            "OpenAI response failed: the response failed, with no error given",
            None,
        ),
    ],
)
def test_errors_in_the_stream_are_classified(
    event: dict[str, Any], error_type: type, message_text: str, retry_after: float | None
) -> None:
    """An error event or a failed response raises its class, by code or else by its words."""
    parser = OpenAIResponsesProvider(GPT).parser()
    parser.feed(ServerSentEvent(data=json.dumps(created())))
    with pytest.raises(error_type) as caught:
        parser.feed(ServerSentEvent(data=json.dumps(event)))
    assert type(caught.value) is error_type
    assert str(caught.value) == message_text
    assert caught.value.retry_after == retry_after
    assert caught.value.retryable is (error_type in (RateLimitError, OverloadedError, ServerError))


def test_an_error_event_whose_data_is_not_json_is_an_error() -> None:
    """``event: error`` with plain text is a (retried) server error quoting it."""
    parser = OpenAIResponsesProvider(GPT).parser()
    with pytest.raises(ServerError, match=r"^OpenAI API error in the stream: worker died$"):
        parser.feed(ServerSentEvent(event="error", data="worker died"))


def test_stream_errors_redact_the_key_and_header_secrets() -> None:
    """A key or a secret header echoed in an error event is replaced by ***."""
    model = attrs.evolve(GPT, headers={"x-proxy-auth": "proxy-token-0123456789"})
    parser = OpenAIResponsesProvider(model).parser()
    event = error_event(code="server_error", message=f"bad {KEY} and proxy-token-0123456789")
    with pytest.raises(ServerError) as caught:
        parser.feed(ServerSentEvent(data=json.dumps(event)))
    assert str(caught.value) == "OpenAI API error in the stream (server_error): bad *** and ***"


# --------------------------------------------------------------------------- HTTP errors


def openai_error(
    status: int, message_text: str, kind: str, code: str | None, **headers: str
) -> httpx2.Response:
    body = {"error": {"message": message_text, "type": kind, "param": None, "code": code}}
    return httpx2.Response(status, json=body, headers=headers)


@pytest.mark.parametrize(
    ("response", "error_type", "message_text"),
    [
        (
            openai_error(
                400,
                "Your input exceeds the context window of this model. "
                "Please adjust your input and try again.",
                "invalid_request_error",
                "context_length_exceeded",
            ),
            ContextOverflowError,
            "OpenAI API error 400 (invalid_request_error): Your input exceeds the context "
            "window of this model. Please adjust your input and try again.",
        ),
        (
            openai_error(
                400,
                "Item with id 'rs_1' not found. Items are not persisted when `store` is set to "
                "false.",
                "invalid_request_error",
                None,
            ),
            BadRequestError,
            "OpenAI API error 400 (invalid_request_error): Item with id 'rs_1' not found. "
            "Items are not persisted when `store` is set to false.",
        ),
        (
            openai_error(401, "Incorrect API key provided.", "invalid_request_error", None),
            AuthenticationError,
            "OpenAI API error 401 (invalid_request_error): Incorrect API key provided.",
        ),
        (
            openai_error(500, "The server had an error.", "server_error", None),
            ServerError,
            "OpenAI API error 500 (server_error): The server had an error.",
        ),
    ],
)
async def test_http_error_raises_its_class(
    response: httpx2.Response, error_type: type, message_text: str
) -> None:
    """Each HTTP error with OpenAI's JSON body raises its class with OpenAI's message."""
    provider, seen = make(GPT, [response], RetryConfig.none())
    with pytest.raises(error_type) as caught:
        await collect(provider)
    assert type(caught.value) is error_type
    assert str(caught.value) == message_text
    assert len(seen) == 1


async def test_rate_limit_status_waits_retry_after_then_succeeds(autojump_clock: Any) -> None:
    """A 429 with retry-after 2: a restart, a 2 s wait, then the stream."""
    limited = openai_error(
        429, "Slow down.", "requests", "rate_limit_exceeded", **{"retry-after": "2"}
    )
    provider, seen = make(GPT, [limited, sse_response(read("text_usage"))])
    deltas, final = await collect(provider)
    assert deltas == [
        al.StreamRestart(attempt=2, delay=2.0, error="OpenAI API error 429 (requests): Slow down."),
        *FIXTURE_CASES["text_usage"][0],
    ]
    assert final == FIXTURE_CASES["text_usage"][1]
    assert autojump_clock.current_time() == 2.0
    assert len(seen) == 2


# --------------------------------------------------------------------------- requests

IMAGE = al.ImageContent("aGVsbG8=", "image/png")
IMAGE_PART = {
    "type": "input_image",
    "image_url": "data:image/png;base64,aGVsbG8=",
    "detail": "auto",
}
WEATHER = ToolDefinition(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
SCREENSHOT = ToolDefinition("screenshot", "Capture the screen.", {"type": "object"})
REASONING = al.ThinkingContent(
    "Two things.\n\nWeather first.",
    signature("rs_1", "ZW5jcnlwdGVk", parts=[11, 14]),
)
HISTORY: tuple[al.Message, ...] = (
    al.UserMessage((al.TextContent("What is this? Then the weather."), IMAGE), timestamp=1),
    al.AssistantMessage(
        (
            REASONING,
            al.TextContent("A cat. Checking."),
            al.ToolCall("call_1", "get_weather", {"city": "Zürich"}),
            al.ToolCall("call_2", "screenshot", {}),
        ),
        al.StopReason.TOOL_USE,
        timestamp=2,
    ),
    al.ToolResultMessage("call_1", "get_weather", (al.TextContent("18°C, cloudy"),), timestamp=3),
    al.ToolResultMessage("call_2", "screenshot", (IMAGE,), timestamp=4),
    al.AssistantMessage((), al.StopReason.ABORTED, timestamp=5, error_message="Aborted"),
    al.UserMessage.text("Stop and summarise."),
)
CONVERSATION = ModelRequest(
    system_prompt="You are terse.",
    messages=HISTORY,
    tools=(WEATHER, SCREENSHOT),
    thinking=ThinkingLevel.HIGH,
    temperature=0.3,
)
TOOLS_JSON = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        "strict": False,
    },
    {
        "type": "function",
        "name": "screenshot",
        "description": "Capture the screen.",
        "parameters": {"type": "object"},
        "strict": False,
    },
]
INPUT_JSON = [
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "What is this? Then the weather."}, IMAGE_PART],
    },
    {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [
            {"type": "summary_text", "text": "Two things."},
            {"type": "summary_text", "text": "Weather first."},
        ],
        "encrypted_content": "ZW5jcnlwdGVk",
    },
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "A cat. Checking."}],
    },
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Zürich"}',
    },
    {"type": "function_call", "call_id": "call_2", "name": "screenshot", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "18°C, cloudy"},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": "(the result is the image in the next message)",
    },
    {
        "type": "message",
        "role": "user",
        "content": [
            {
                "type": "input_text",
                "text": "The image from the result of screenshot (tool call call_2):",
            },
            IMAGE_PART,
        ],
    },
    {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Stop and summarise."}],
    },
]


async def sent(model: ModelConfig, request: ModelRequest, *, store: bool = False) -> httpx2.Request:
    """The HTTP request the provider sends for ``request``."""
    provider, seen = make(model, [sse_response(read("text_usage"))], store=store)
    await collect(provider, request)
    return seen[0]


async def test_request_body() -> None:
    """The whole history as input items; reasoning with its summary; no temperature."""
    request = await sent(GPT, CONVERSATION)
    assert body_of(request) == {
        "model": "gpt-5.4",
        "input": INPUT_JSON,
        "stream": True,
        "store": False,
        "instructions": "You are terse.",
        "tools": TOOLS_JSON,
        "max_output_tokens": 128_000,
        "reasoning": {"effort": "high", "summary": "auto"},
        "include": ["reasoning.encrypted_content"],
    }


async def test_request_url_and_headers() -> None:
    """The request goes to {base_url}/responses with the bearer key and the model's headers."""
    model = attrs.evolve(GPT, headers={"OpenAI-Organization": "org-abc"})
    request = await sent(model, REQUEST)
    assert (request.method, str(request.url)) == ("POST", "https://api.openai.com/v1/responses")
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["openai-organization"] == "org-abc"


async def test_a_model_that_does_not_reason_gets_temperature_and_no_reasoning_fields() -> None:
    """gpt-4.1: temperature is sent; no reasoning, no include (the API would refuse it)."""
    request = await sent(GPT4, attrs.evolve(REQUEST, max_tokens=1024, temperature=0.2))
    assert body_of(request) == {
        "model": "gpt-4.1",
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ],
        "stream": True,
        "store": False,
        "max_output_tokens": 1024,
        "temperature": 0.2,
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
async def test_thinking_level_maps_to_the_reasoning_effort(
    level: ThinkingLevel, effort: str | None
) -> None:
    """Each level is its effort, with summaries; OFF sends no reasoning (and then temperature)."""
    request = await sent(GPT, attrs.evolve(REQUEST, thinking=level, temperature=0.5))
    body = body_of(request)
    if effort is None:
        assert ("reasoning" in body, body["temperature"]) == (False, 0.5)
    else:
        assert (body["reasoning"], "temperature" in body) == (
            {"effort": effort, "summary": "auto"},
            False,
        )
    assert body["include"] == ["reasoning.encrypted_content"]


async def test_minimal_effort_falls_back_to_low() -> None:
    """A server that does not know "minimal" is sent "low"."""
    model = attrs.evolve(GPT, compat=Compat(reasoning_effort=True, minimal_effort=False))
    request = await sent(model, attrs.evolve(REQUEST, thinking=ThinkingLevel.MINIMAL))
    assert body_of(request)["reasoning"] == {"effort": "low", "summary": "auto"}


async def test_an_output_format_is_the_text_format() -> None:
    """A structured answer asked for (native mode) is text.format, a JSON schema."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    output = OutputFormat("answer", schema, strict=True)
    request = await sent(GPT4, attrs.evolve(REQUEST, output=output))
    assert body_of(request)["text"] == {
        "format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}
    }


async def test_malformed_arguments_in_history_are_sent_as_an_empty_object() -> None:
    """A call whose arguments did not parse is sent back with "{}", not its broken text."""
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
    request = await sent(GPT, attrs.evolve(REQUEST, messages=history))
    assert body_of(request)["input"][1:] == [
        {"type": "function_call", "call_id": "call_9", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "Invalid arguments: ..."},
    ]


async def test_reasoning_that_cannot_go_back_is_left_out() -> None:
    """Unsigned, another provider's, unreadable, and last-in-its-message reasoning is not sent."""
    history = (
        al.UserMessage.text("go"),
        al.AssistantMessage(
            (
                al.ThinkingContent("Aborted thought."),  # no signature
                al.ThinkingContent("Claude's.", signature="EqQBCkYIBxgCKkD0"),  # Anthropic's
                al.ThinkingContent("Lost.", signature='{"id":"rs_2"}'),  # nothing to read back
                al.TextContent("Done."),
                al.ThinkingContent("", signature("rs_3", "ZW5j")),  # nothing follows it
            ),
            al.StopReason.STOP,
        ),
        al.UserMessage.text("Again."),
    )
    request = await sent(GPT, attrs.evolve(REQUEST, messages=history))
    assert body_of(request)["input"][1:] == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Again."}]},
    ]


async def test_summary_parts_go_back_whole_when_their_lengths_no_longer_fit() -> None:
    """Recorded part lengths that do not match the thinking text send it as one part."""
    block = al.ThinkingContent("Edited text.", signature("rs_4", "ZW5j", parts=[3, 3]))
    history = (
        al.UserMessage.text("go"),
        al.AssistantMessage((block, al.TextContent("Ok.")), al.StopReason.STOP),
    )
    request = await sent(GPT, attrs.evolve(REQUEST, messages=history))
    assert body_of(request)["input"][1] == {
        "type": "reasoning",
        "id": "rs_4",
        "summary": [{"type": "summary_text", "text": "Edited text."}],
        "encrypted_content": "ZW5j",
    }


async def test_reasoning_round_trip_sends_back_what_the_stream_gave() -> None:
    """A streamed reasoning item goes back as it came: id, both summary parts, encrypted content."""
    provider, seen = make(
        GPT, [sse_response(read("reasoning_tool")), sse_response(read("text_usage"))]
    )
    _, first = await collect(provider)
    history = (
        al.UserMessage.text("Summarise the README."),
        first,
        al.ToolResultMessage(CALL_READ, "read_file", (al.TextContent("# agentloop"),)),
    )
    await collect(provider, attrs.evolve(REQUEST, messages=history))
    assert body_of(seen[1])["input"][1:] == [
        {
            "type": "reasoning",
            "id": RS_TOOL,
            "summary": [
                {
                    "type": "summary_text",
                    "text": "**Reading the file**\n\nThe user wants README.md; I\u2019ll read it.",
                },
                {"type": "summary_text", "text": 'Then summarise "it".'},
            ],
            "encrypted_content": ENCRYPTED_TOOL,
        },
        {
            "type": "function_call",
            "call_id": CALL_READ,
            "name": "read_file",
            "arguments": '{"path": "README.md"}',
        },
        {"type": "function_call_output", "call_id": CALL_READ, "output": "# agentloop"},
    ]


def stored(text_: str, response_id: str | None) -> al.AssistantMessage:
    """An assistant message as store=True leaves it (or, without an id, as another provider)."""
    content: list[Any] = [al.TextContent(text_)]
    if response_id is not None:
        content.append(al.ThinkingContent("", carrier(response_id)))
    return al.AssistantMessage(tuple(content), al.StopReason.STOP)


async def test_store_chains_on_the_last_response_and_sends_only_what_follows() -> None:
    """store=True: store true, previous_response_id, and only the input after that response."""
    history = (
        al.UserMessage.text("One."),
        stored("First.", "resp_a"),
        al.UserMessage.text("Two."),
        stored("Second.", "resp_b"),
        al.UserMessage.text("Three."),
    )
    request = await sent(GPT, attrs.evolve(REQUEST, messages=history), store=True)
    assert body_of(request) == {
        "model": "gpt-5.4",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Three."}],
            }
        ],
        "stream": True,
        "store": True,
        "previous_response_id": "resp_b",
        "max_output_tokens": 128_000,
    }


async def test_store_chains_past_a_message_that_has_no_response_id() -> None:
    """A later message with no id (another provider's, an aborted one) is sent in full."""
    history = (
        al.UserMessage.text("One."),
        stored("First.", "resp_a"),
        al.UserMessage.text("Two."),
        stored("Partial", None),
        al.UserMessage.text("Three."),
    )
    request = await sent(GPT, attrs.evolve(REQUEST, messages=history), store=True)
    body = body_of(request)
    assert body["previous_response_id"] == "resp_a"
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Two."}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Partial"}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Three."}]},
    ]


async def test_store_with_no_stored_response_sends_everything() -> None:
    """store=True with nothing to chain on: the whole history, no previous_response_id."""
    request = await sent(GPT, attrs.evolve(REQUEST, messages=HISTORY[:4]), store=True)
    body = body_of(request)
    assert "previous_response_id" not in body
    assert body["store"] is True
    assert body["input"] == INPUT_JSON[:8]


async def test_stateless_provider_ignores_response_ids() -> None:
    """store=False never chains: ids in the history are not sent, the history is."""
    history = (al.UserMessage.text("One."), stored("First.", "resp_a"), al.UserMessage.text("Two."))
    request = await sent(GPT, attrs.evolve(REQUEST, messages=history))
    body = body_of(request)
    assert ("previous_response_id" in body, body["store"], len(body["input"])) == (False, False, 3)


async def test_store_round_trip_through_two_calls() -> None:
    """The first reply's response id is the second request's previous_response_id."""
    provider, seen = make(
        GPT,
        [sse_response(read("reasoning_tool")), sse_response(read("text_usage"))],
        store=True,
    )
    _, first = await collect(provider)
    result = al.ToolResultMessage(CALL_READ, "read_file", (al.TextContent("# agentloop"),))
    history = (al.UserMessage.text("Summarise the README."), first, result)
    _, second = await collect(provider, attrs.evolve(REQUEST, messages=history))
    assert body_of(seen[1]) == {
        "model": "gpt-5.4",
        "input": [{"type": "function_call_output", "call_id": CALL_READ, "output": "# agentloop"}],
        "stream": True,
        "store": True,
        "previous_response_id": RESP_TOOL,
        "max_output_tokens": 128_000,
    }
    assert second.content[-1] == al.ThinkingContent("", carrier(RESP_TEXT))


# --------------------------------------------------------------------------- a real server


def events_of(body: bytes) -> list[bytes]:
    """The body cut after each event: one HTTP chunk per event."""
    return [part + b"\n\n" for part in body.split(b"\n\n") if part]


async def test_agent_calls_a_tool_and_answers_over_a_real_server() -> None:
    """An Agent over a real socket: the model reasons and calls echo, gets its result, answers."""
    replies = [Reply(events_of(read("echo_call"))), Reply(events_of(read("text_usage")))]
    async with serve(*replies) as server:
        model = attrs.evolve(GPT, base_url=f"{server.url}/v1")
        async with OpenAIResponsesProvider(model, retry=RetryConfig.none()) as provider:
            echo = Echo()
            agent = al.Agent(provider, system_prompt="Be brief.", tools=[echo])
            await agent.run("Shout hi")
    assert echo.calls == [{"text": "hi"}]
    assert [attrs.evolve(m, timestamp=0) for m in agent.messages] == [
        al.UserMessage((al.TextContent("Shout hi"),), timestamp=0),
        FIXTURE_CASES["echo_call"][1],
        al.ToolResultMessage(CALL_ECHO, "echo", (al.TextContent("HI"),), timestamp=0),
        FIXTURE_CASES["text_usage"][1],
    ]
    first, second = server.requests
    assert (first.method, first.path, second.path) == ("POST", "/v1/responses", "/v1/responses")
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.json()["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Shout hi"}]}
    ]
    assert second.json()["instructions"] == "Be brief."
    assert second.json()["input"] == [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "Shout hi"}],
        },
        {
            "type": "reasoning",
            "id": RS_ECHO,
            "summary": [{"type": "summary_text", "text": "**Shouting**\n\nEcho will shout it."}],
            "encrypted_content": ENCRYPTED_ECHO,
        },
        {
            "type": "function_call",
            "call_id": CALL_ECHO,
            "name": "echo",
            "arguments": '{"text": "hi"}',
        },
        {"type": "function_call_output", "call_id": CALL_ECHO, "output": "HI"},
    ]


async def test_real_server_dropped_connection_is_retried() -> None:
    """A connection dropped mid-stream: a restart delta, then the retried reply in full."""
    parts = events_of(read("text_usage"))
    async with serve(Reply(parts, drop_after=5), Reply(parts)) as server:
        model = attrs.evolve(GPT, base_url=f"{server.url}/v1")
        retry = RetryConfig(initial_delay=0, jitter=0)
        async with OpenAIResponsesProvider(model, retry=retry) as provider:
            deltas, final = await collect(provider)
    assert deltas == [
        T(delta="Héllo"),
        al.StreamRestart(
            attempt=2,
            delay=0.0,
            error="OpenAI API connection failed: peer closed connection without sending "
            "complete message body (incomplete chunked read)",
        ),
        *FIXTURE_CASES["text_usage"][0],
    ]
    assert final == FIXTURE_CASES["text_usage"][1]
    assert len(server.requests) == 2


# --------------------------------------------------------------------------- construction


def test_model_id_builds_the_responses_preset() -> None:
    """A model id string is ModelConfig.openai_responses(id, api_key=...)."""
    provider = OpenAIResponsesProvider("gpt-5.4-mini", api_key=KEY)
    assert provider.model == ModelConfig.openai_responses("gpt-5.4-mini", api_key=KEY)
    assert (provider.store, provider.api_name) == (False, "OpenAI")


def test_the_preset() -> None:
    """The preset: OpenAI's URL, key variable, limits and prices; reasoning unless gpt-4."""
    config = ModelConfig.openai_responses("gpt-5.4")
    chat = ModelConfig.openai("gpt-5.4")
    assert (config.api, config.provider, config.base_url, config.api_key_env) == (
        "openai-responses",
        "openai",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    )
    assert (config.context_window, config.max_tokens, config.cost) == (
        chat.context_window,
        chat.max_tokens,
        chat.cost,
    )
    assert config.compat == Compat(reasoning_effort=True)
    reasons = {
        id: ModelConfig.openai_responses(id).compat.reasoning_effort
        for id in ("o3", "gpt-5.5", "gpt-4.1", "gpt-4o-mini", "gpt-5-chat-latest", "chatgpt-4o")
    }
    assert reasons == {
        "o3": True,
        "gpt-5.5": True,
        "gpt-4.1": False,
        "gpt-4o-mini": False,
        "gpt-5-chat-latest": False,
        "chatgpt-4o": False,
    }


def test_it_is_a_provider() -> None:
    """OpenAIResponsesProvider satisfies the Provider protocol the loop takes."""
    assert isinstance(OpenAIResponsesProvider(GPT), al.providers.Provider)


def test_a_chat_completions_model_is_refused() -> None:
    """A Chat Completions ModelConfig is a ValueError naming the mismatch."""
    with pytest.raises(
        ValueError,
        match=r"^OpenAIResponsesProvider speaks the 'openai-responses' API; openai model "
        r"'gpt-5.4' is configured for the 'openai' API$",
    ):
        OpenAIResponsesProvider(ModelConfig.openai(api_key=KEY))


def test_repr_hides_the_key() -> None:
    """repr(provider) names the model and URL, never the key."""
    assert repr(OpenAIResponsesProvider(GPT)) == (
        "OpenAIResponsesProvider(model='gpt-5.4', base_url='https://api.openai.com/v1')"
    )


async def test_errors_name_another_server_by_its_provider() -> None:
    """A Responses server other than OpenAI's is named by the config's provider."""
    model = ModelConfig.openai_responses(
        "gpt-5.4", api_key=KEY, base_url="https://res.openai.azure.com/openai/v1", provider="azure"
    )
    provider, seen = make(model, [sse_response(read("cut_off"))], RetryConfig.none())
    with pytest.raises(NetworkError, match=r"^azure stream ended before the response finished$"):
        await collect(provider)
    assert str(seen[0].url) == "https://res.openai.azure.com/openai/v1/responses"


async def test_key_never_appears_in_http_errors() -> None:
    """A server that echoes the key in a status error has it redacted."""
    response = openai_error(
        401, f"Incorrect API key provided: {KEY}.", "invalid_request_error", None
    )
    provider, _ = make(GPT, [response], RetryConfig.none())
    with pytest.raises(AuthenticationError) as caught:
        await collect(provider)
    assert str(caught.value) == (
        "OpenAI API error 401 (invalid_request_error): Incorrect API key provided: ***."
    )
