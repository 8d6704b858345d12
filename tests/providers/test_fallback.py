"""FallbackProvider over the real wire formats: Anthropic fails, OpenAI answers."""

from __future__ import annotations

from typing import Any

import pytest
from test_anthropic import FakeAPI, api_error, fixture, stream
from test_openai import OPENAI, make, read, sse_response

import agentloop as al
from agentloop.providers import (
    AuthenticationError,
    FallbackError,
    FallbackProvider,
    ModelConfig,
    ModelRequest,
    OverloadedError,
    RetryConfig,
)
from agentloop.testing import EventRecorder

NO_RETRY = RetryConfig(max_retries=0, jitter=0)
REQUEST = ModelRequest(system_prompt="", messages=(al.UserMessage.text("Hi"),))
OVERLOADED = "Overloaded"


async def collect(provider: FallbackProvider) -> tuple[list[Any], al.AssistantMessage]:
    deltas: list[Any] = []

    async def emit(delta: Any) -> None:
        deltas.append(delta)

    return deltas, await provider.stream(REQUEST, emit)


def claude_overloaded() -> FakeAPI:
    return FakeAPI([api_error(529, "overloaded_error", OVERLOADED)])


async def test_an_overloaded_model_falls_back_on_the_next() -> None:
    claude = claude_overloaded()
    gpt, seen = make(OPENAI, [sse_response(read("text_usage"))], retry=NO_RETRY)
    deltas, message = await collect(FallbackProvider(claude.provider(retry=NO_RETRY), gpt))
    assert len(claude.requests) == len(seen) == 1
    assert (message.provider, message.model) == ("openai", "gpt-5.4-2026-03-05")
    assert message.stop_reason is al.StopReason.STOP
    assert not any(isinstance(delta, al.StreamRestart) for delta in deltas)  # nothing streamed
    assert "".join(d.delta for d in deltas) == message.text


async def test_a_reply_cut_short_is_voided_and_never_enters_the_history() -> None:
    """Claude streams "Hel", then an overloaded error event: the loop gets a StreamRestart,
    then GPT's reply, which alone enters the history."""
    claude = FakeAPI([stream(fixture("overloaded_error"))])
    gpt, _ = make(OPENAI, [sse_response(read("text_usage"))], retry=NO_RETRY)
    model = FallbackProvider(claude.provider(retry=NO_RETRY), gpt)
    agent = al.Agent(model)
    recorder = EventRecorder()
    async with agent.prompt("Hi") as events:
        async for event in events:
            recorder.events.append(event)
    updates = [e.delta for e in recorder.of_type(al.MessageUpdate)]
    assert updates[0] == al.TextDelta(delta="Hel", index=0)
    restart = updates[1]
    assert isinstance(restart, al.StreamRestart)
    assert (restart.attempt, restart.delay) == (2, 0.0)
    assert restart.error.startswith("claude-sonnet-5 failed (Anthropic ")
    assert restart.error.endswith("); asking gpt-5.4")
    answer = agent.messages[-1]
    assert isinstance(answer, al.AssistantMessage)
    assert (answer.model, answer.text) == (
        "gpt-5.4-2026-03-05",
        "".join(d.delta for d in updates[2:] if isinstance(d, al.TextDelta)),
    )
    assert [type(m).__name__ for m in agent.messages] == ["UserMessage", "AssistantMessage"]
    end = recorder.of_type(al.MessageEnd)[-1]
    assert end.message == answer


async def test_a_refused_key_is_not_a_reason_to_fall_back() -> None:
    claude = FakeAPI([api_error(401, "authentication_error", "invalid x-api-key")])
    gpt, seen = make(OPENAI, [sse_response(read("text_usage"))], retry=NO_RETRY)
    with pytest.raises(AuthenticationError):
        await collect(FallbackProvider(claude.provider(retry=NO_RETRY), gpt))
    assert seen == []  # the next model was not asked


async def test_when_every_model_fails_the_error_names_each() -> None:
    gpt, _ = make(OPENAI, [api_error(503, "server_error", "upstream down")], retry=NO_RETRY)
    model = FallbackProvider(claude_overloaded().provider(retry=NO_RETRY), gpt)
    with pytest.raises(FallbackError) as caught:
        await collect(model)
    error = caught.value
    assert [name for name, _ in error.errors] == ["claude-sonnet-5", "gpt-5.4"]
    assert isinstance(error.errors[0][1], OverloadedError)
    assert str(error) == (
        f"every model failed: claude-sonnet-5: {error.errors[0][1]}; gpt-5.4: {error.errors[1][1]}"
    )
    assert error.status == 503
    assert isinstance(error, al.AgentloopError)


async def test_in_a_run_a_total_failure_ends_it_with_an_error_stop() -> None:
    gpt, _ = make(OPENAI, [api_error(503, "server_error", "upstream down")], retry=NO_RETRY)
    agent = al.Agent(FallbackProvider(claude_overloaded().provider(retry=NO_RETRY), gpt))
    recorder = EventRecorder()
    async with agent.prompt("Hi") as events:
        async for event in events:
            recorder.events.append(event)
    end = recorder.of_type(al.AgentEnd)[0]
    assert end.stop_reason.kind is al.StopKind.ERROR
    assert end.stop_reason.message.startswith("every model failed: claude-sonnet-5: ")


def test_compaction_works_against_the_smallest_window() -> None:
    small = ModelConfig.openai_compatible("small", "http://127.0.0.1:1/v1", context_window=8000)
    gpt, _ = make(OPENAI, [], retry=NO_RETRY)
    tiny, _ = make(small, [], retry=NO_RETRY)
    model = FallbackProvider(gpt, tiny)
    assert model.model is small
    assert repr(model) == "FallbackProvider(gpt-5.4, small)"
    with pytest.raises(ValueError, match=r"^FallbackProvider needs at least one provider$"):
        FallbackProvider()
