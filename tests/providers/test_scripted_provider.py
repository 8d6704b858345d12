"""ScriptedProvider: streaming shape, ids, delays, failures, recording, exhaustion."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import agentloop as al
from agentloop.providers import (
    ModelRequest,
    ProviderError,
    ScriptedProvider,
    ScriptExhausted,
    call,
    fail,
    parse_tool_arguments,
    reply,
)


def request(*messages: al.Message) -> ModelRequest:
    return ModelRequest(system_prompt="sys", messages=messages or (al.UserMessage.text("hi"),))


async def stream(
    provider: ScriptedProvider, req: ModelRequest | None = None
) -> tuple[list[Any], al.AssistantMessage]:
    deltas: list[Any] = []

    async def emit(delta: Any) -> None:
        deltas.append(delta)

    message = await provider.stream(req or request(), emit)
    return deltas, message


async def test_text_streams_word_by_word() -> None:
    """Text arrives one word (with its whitespace) per delta."""
    deltas, message = await stream(ScriptedProvider([reply("Hello  big world\n")]))
    assert deltas == [
        al.TextDelta(delta="Hello  ", index=0),
        al.TextDelta(delta="big ", index=0),
        al.TextDelta(delta="world\n", index=0),
    ]
    assert message.content == (al.TextContent("Hello  big world\n"),)
    assert (message.stop_reason, message.model, message.provider) == (
        al.StopReason.STOP,
        "scripted",
        "scripted",
    )


async def test_tool_arguments_stream_as_partial_json_chunks() -> None:
    """Arguments arrive as chunks of their JSON text, none parseable alone."""
    deltas, message = await stream(
        ScriptedProvider([reply(call("read", {"path": "notes.txt"}))], chunk_size=5)
    )
    raw = json.dumps({"path": "notes.txt"})
    assert [d.delta for d in deltas] == [raw[i : i + 5] for i in range(0, len(raw), 5)]
    assert {(d.tool_call_id, d.name, d.index) for d in deltas} == {("call_1", "read", 0)}
    assert message.content == (al.ToolCall("call_1", "read", {"path": "notes.txt"}),)
    assert message.stop_reason is al.StopReason.TOOL_USE


async def test_call_ids_are_unique_across_turns() -> None:
    """Generated ids count up over the provider's life; explicit ids are kept."""
    provider = ScriptedProvider([reply(call("a"), call("b", id="mine")), reply(call("c"))])
    _, first = await stream(provider)
    _, second = await stream(provider)
    assert [c.id for c in first.tool_calls + second.tool_calls] == ["call_1", "mine", "call_3"]


async def test_malformed_arguments_are_kept_raw() -> None:
    """A string argument is sent as is; if it is not a JSON object it stays raw."""
    _, message = await stream(ScriptedProvider([reply(call("a", '{"x": 1'))]))
    assert message.content == (al.ToolCall("call_1", "a", {}, raw_arguments='{"x": 1'),)


async def test_delay_uses_trio_time(autojump_clock: Any) -> None:
    """The provider delay and per-turn delays sleep on trio's clock."""
    provider = ScriptedProvider([reply("a"), reply("b", delay=3.0)], delay=1.0)
    await stream(provider)
    assert trio.current_time() == 1.0
    await stream(provider)
    assert trio.current_time() == 4.0


async def test_delta_delay_spaces_the_deltas(autojump_clock: Any) -> None:
    """delta_delay waits between deltas, not before the first."""
    times: list[float] = []

    async def emit(delta: Any) -> None:
        times.append(trio.current_time())

    await ScriptedProvider([reply("a b c")], delta_delay=0.5).stream(request(), emit)
    assert times == [0.0, 0.5, 1.0]


async def test_streaming_is_cancellable(autojump_clock: Any) -> None:
    """A cancelled stream stops at its next checkpoint."""
    deltas: list[Any] = []

    async def emit(delta: Any) -> None:
        deltas.append(delta)

    with trio.move_on_after(1.2):
        await ScriptedProvider([reply("a b c d e")], delta_delay=1.0).stream(request(), emit)
    assert [d.delta for d in deltas] == ["a ", "b "]


async def test_failures_stream_content_then_raise() -> None:
    """fail() streams its content, then raises the scripted error."""
    deltas: list[Any] = []

    async def emit(delta: Any) -> None:
        deltas.append(delta)

    with pytest.raises(ProviderError, match=r"^overloaded$"):
        await ScriptedProvider([fail(ProviderError("overloaded"), "par tial")]).stream(
            request(), emit
        )
    assert [d.delta for d in deltas] == ["par ", "tial"]


async def test_requests_are_recorded() -> None:
    """Every request is kept, in order."""
    provider = ScriptedProvider([reply("a"), reply("b")])
    first, second = request(al.UserMessage.text("1")), request(al.UserMessage.text("2"))
    await stream(provider, first)
    await stream(provider, second)
    assert provider.requests == [first, second]


async def test_exhausted_script_raises() -> None:
    """A request past the end of the script raises ScriptExhausted, saying so."""
    provider = ScriptedProvider([reply("only")])
    await stream(provider)
    with pytest.raises(
        ScriptExhausted, match=r"^ScriptedProvider: request 2 has no scripted turn \(1 scripted\)$"
    ):
        await stream(provider)


async def test_steps_may_depend_on_the_request() -> None:
    """A callable step builds its turn from the request it answers."""
    provider = ScriptedProvider([lambda req: reply(f"you said {len(req.messages)} things")])
    _, message = await stream(provider, request(al.UserMessage.text("a"), al.UserMessage.text("b")))
    assert message.text == "you said 2 things"


async def test_estimated_usage() -> None:
    """Without scripted usage, tokens are estimated as UTF-8 bytes / 4, rounded up."""
    _, message = await stream(
        ScriptedProvider([reply("12345678")]), request(al.UserMessage.text("abcd"))
    )
    # sent: "sys" + "abcd" = 7 bytes -> 2 tokens; received: 8 bytes -> 2 tokens
    assert message.usage == al.Usage(input=2, output=2, total_tokens=4)


async def test_explicit_usage_and_stop_reason() -> None:
    """Scripted usage and stop reason are used as given."""
    usage = al.Usage(input=5, output=6, total_tokens=11)
    _, message = await stream(
        ScriptedProvider([reply("x", usage=usage, stop_reason=al.StopReason.LENGTH)])
    )
    assert (message.usage, message.stop_reason) == (usage, al.StopReason.LENGTH)


def test_chunk_size_must_be_positive() -> None:
    """A chunk size below one is refused."""
    with pytest.raises(ValueError, match=r"^chunk_size must be >= 1, got 0$"):
        ScriptedProvider(chunk_size=0)


def test_remaining_and_add() -> None:
    """remaining counts unplayed turns; add() appends."""
    provider = ScriptedProvider([reply("a")])
    provider.add(reply("b"), reply("c"))
    assert provider.remaining == 3


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("", ({}, None)),
        ("   ", ({}, None)),
        ('{"a": [1, 2]}', ({"a": [1, 2]}, None)),
        ('{"a": ', ({}, '{"a": ')),
        ("[1]", ({}, "[1]")),
        ("null", ({}, "null")),
    ],
)
def test_parse_tool_arguments(text: str, parsed: Any) -> None:
    """Arguments text parses to an object, or stays raw when it is not one."""
    assert parse_tool_arguments(text) == parsed
