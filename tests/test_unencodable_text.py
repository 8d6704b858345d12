"""Text that cannot be encoded never enters the history: lone surrogates become U+FFFD.

A model can stream the JSON escape ``\\ud800`` (a lone surrogate) in text or in
tool-call arguments; a tool can return one (a file name that is not UTF-8,
say). Once such a string is in the history, every later request would fail
to encode. These tests drive arbitrary strings through a whole turn on the
real wire formats (Anthropic and OpenAI event streams over an in-memory HTTP
transport) and check that the next requests go out as valid UTF-8 JSON.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import trio
import trio.testing
from helpers import TEXT_SCHEMA
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop.providers import (
    AnthropicProvider,
    ModelConfig,
    ModelRequest,
    OpenAIProvider,
    RetryConfig,
    ScriptedProvider,
    call,
    reply,
)
from agentloop.serialization import converter

KEY = "sk-test-0123456789abcdef"
SURROGATES = st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\udc80"])
#: Any code point, lone surrogates included (hypothesis leaves them out by default).
#: (st.text leaves them out even from an alphabet that has them: join characters instead.)
ANY_TEXT = st.lists(st.one_of(st.characters(exclude_categories=()), SURROGATES), max_size=20).map(
    "".join
)


def encodable(value: Any) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def clean(text: str) -> str:
    """What the loop turns ``text`` into: each lone surrogate replaced by U+FFFD."""
    return "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def wire(text: str) -> str:
    """What the loop makes of ``text`` sent as JSON: escaped pairs join, lone ones go."""
    return clean(json.loads(json.dumps(text)))


def history_strings(messages: Any) -> list[str]:
    """Every string in the history, as the session file would write it."""
    return [json.dumps(converter.unstructure(m), ensure_ascii=False) for m in messages]


class Echo:
    """Returns its argument and a text of the test's choosing (maybe unencodable)."""

    name = "echo"
    label = "Echo"
    description = "Echo the text."
    parameters_schema = TEXT_SCHEMA

    def __init__(self, output: str) -> None:
        self.output = output
        self.seen: list[str] = []

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.seen.append(params["text"])
        await ctx.on_progress(self.output) if ctx.on_progress else None
        return al.ToolResult.text(f"{params['text']}|{self.output}", details={"out": self.output})


# --------------------------------------------------------------------------- wire formats


def _escaped(text: str) -> str:
    """``text`` as JSON would carry it: lone surrogates as ``\\udXXX`` escapes."""
    return json.dumps(text)


def anthropic_stream(text: str, arguments_json: str) -> bytes:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": arguments_json},
        },
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 5},
        },
        {"type": "message_stop"},
    ]
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode("ascii") for e in events
    )


def anthropic_done() -> bytes:
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_2",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-5",
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode("ascii") for e in events
    )


def openai_stream(text: str, arguments_json: str) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-5",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks = [
        chunk({"role": "assistant", "content": text}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "echo", "arguments": arguments_json},
                    }
                ]
            }
        ),
        chunk({}, "tool_calls"),
    ]
    return b"".join(f"data: {json.dumps(c)}\n\n".encode("ascii") for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def openai_done() -> bytes:
    body = {
        "id": "chatcmpl-2",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-5",
        "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}],
    }
    return f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n".encode("ascii")


class Server:
    """An in-memory API: the first request gets ``first``, later ones ``done``.

    Each request body must be valid UTF-8 JSON, as a real server requires.
    """

    def __init__(self, first: bytes, done: bytes) -> None:
        self.bodies: list[Any] = []
        self._answers = [first]
        self._done = done

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        self.bodies.append(json.loads(request.content.decode("utf-8")))
        answer = self._answers.pop(0) if self._answers else self._done

        async def body() -> AsyncIterator[bytes]:
            yield answer

        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))


def provider_for(api: str, server: Server) -> al.providers.Provider:
    retry = RetryConfig(max_retries=0)
    if api == "anthropic":
        model = ModelConfig.anthropic("claude-sonnet-5", api_key=KEY)
        return AnthropicProvider(model, retry=retry, client=server.client())
    return OpenAIProvider(
        ModelConfig.openai("gpt-5", api_key=KEY), retry=retry, client=server.client()
    )


# --------------------------------------------------------------------------- the property


async def whole_turn(api: str, text: str, argument: str, output: str, raw: bool) -> None:
    # raw: a surrogate arrives as a character inside the arguments' JSON text; else as
    # an escape inside it (escaped twice on the wire).
    arguments_json = '{"text": "' + argument + '"}' if raw else json.dumps({"text": argument})
    stream = anthropic_stream if api == "anthropic" else openai_stream
    done = anthropic_done if api == "anthropic" else openai_done
    server = Server(stream(text, arguments_json), done())
    echo = Echo(output)
    agent = al.Agent(provider_for(api, server), tools=[echo])
    events: list[al.AgentEvent] = []
    async with agent.prompt("go") as channel:
        async for event in channel:
            events.append(event)
    await agent.run("again")  # the request after the one that follows the tool

    # Every request went out, as UTF-8 JSON.
    assert len(server.bodies) == 3
    # What entered the history is the text with U+FFFD for each lone surrogate.
    assistant = agent.messages[1]
    assert isinstance(assistant, al.AssistantMessage)
    assert assistant.text == wire(text)
    assert assistant.tool_calls[0].arguments == {"text": wire(argument)}
    assert echo.seen == [wire(argument)]
    result = agent.messages[2]
    assert isinstance(result, al.ToolResultMessage)
    assert result.text == f"{wire(argument)}|{clean(output)}"
    assert all(encodable(s) for s in history_strings(agent.messages))
    # ... and every event is encodable too (a session file writes them).
    for event in events:
        json.dumps(converter.unstructure(event), ensure_ascii=False).encode("utf-8")


@settings(max_examples=60, deadline=None)
@given(
    api=st.sampled_from(["anthropic", "openai"]),
    text=ANY_TEXT,
    # Raw inside the arguments' JSON text: no quote, backslash or control character.
    argument=ANY_TEXT.filter(lambda s: all(c not in '"\\' and c >= " " for c in s)),
    output=ANY_TEXT,
    raw=st.booleans(),
)
def test_any_text_through_a_whole_turn_keeps_the_next_request_encodable(
    api: str, text: str, argument: str, output: str, raw: bool
) -> None:
    trio.run(whole_turn, api, text, argument, output, raw)


async def test_lone_surrogate_in_every_streamed_place_becomes_the_replacement_character() -> None:
    """The issue's case: ``\\ud800`` in a text delta and in arguments, then two more requests."""
    for api in ("anthropic", "openai"):
        await whole_turn(api, "bad \ud800 char", "x\udfffy", "out \udc80", raw=False)
        await whole_turn(api, "bad \ud800 char", "x\udfffy", "out \udc80", raw=True)


async def test_scripted_and_custom_providers_are_scrubbed_by_the_loop() -> None:
    """Whatever a provider returns is scrubbed before it enters the history."""
    model = ScriptedProvider([reply("t\ud800", call("echo", {"text": "a\udc00"})), reply("done")])
    echo = Echo("o\ud800")
    schema_free = al.Agent(model, tools=[echo])
    await schema_free.run("p\ud800")
    prompt, assistant, result, final = schema_free.messages
    assert prompt.text == "p\ufffd"
    assert isinstance(assistant, al.AssistantMessage)
    assert assistant.text == "t\ufffd"
    assert assistant.tool_calls[0].arguments == {"text": "a\ufffd"}
    assert result.text == "a\ufffd|o\ufffd"
    assert isinstance(result, al.ToolResultMessage)
    assert final.text == "done"
    # The request after the tool carried only clean text.
    second = model.requests[1].messages
    assert all(encodable(s) for s in history_strings(second))


async def test_a_history_given_from_outside_is_scrubbed() -> None:
    """A saved history (written before this fix, say) no longer poisons every request."""
    bad = [
        al.UserMessage.text("hi\ud800"),
        al.AssistantMessage((al.TextContent("yo\udfff"),), al.StopReason.STOP),
    ]
    model = ScriptedProvider([reply("fine")])
    agent = al.Agent(model, messages=bad)
    await agent.run("next")
    assert [m.text for m in agent.messages] == ["hi\ufffd", "yo\ufffd", "next", "fine"]
    agent.context.messages = bad
    assert [m.text for m in agent.messages] == ["hi\ufffd", "yo\ufffd"]


async def test_steering_and_progress_text_are_scrubbed() -> None:
    model = ScriptedProvider([reply("a", call("echo", {"text": "x"})), reply("b")])
    echo = Echo("p\ud800")
    agent = al.Agent(model, tools=[echo])
    agent.steer("s\udc00")
    progress: list[str] = []
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ProgressMessage):
                progress.append(event.text)
    assert progress == ["p\ufffd"]
    assert agent.messages[1].text == "s\ufffd"


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_providers_scrub_their_own_deltas_and_messages(api: str) -> None:
    """Called directly (no loop around it), a provider emits and returns clean text."""
    stream = anthropic_stream if api == "anthropic" else openai_stream
    done = anthropic_done if api == "anthropic" else openai_done
    server = Server(stream("a\ud800b", json.dumps({"text": "x\udfff"})), done())
    provider = provider_for(api, server)
    deltas: list[al.StreamDelta] = []

    async def emit(delta: al.StreamDelta) -> None:
        deltas.append(delta)

    request = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))
    message = await provider.stream(request, emit)
    assert message.text == "a\ufffdb"
    assert message.tool_calls[0].arguments == {"text": "x\ufffd"}
    assert [d.delta for d in deltas if isinstance(d, al.TextDelta)] == ["a\ufffdb"]
