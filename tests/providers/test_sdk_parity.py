"""Parity with the official SDKs: the same bytes give the same message.

Every recorded stream in ``tests/fixtures/anthropic`` and ``tests/fixtures/openai`` is
served, byte for byte, by an in-memory ``httpx2.MockTransport`` to two clients:

- the official SDK (``anthropic.AsyncAnthropic`` with ``messages.stream()`` and
  ``get_final_message()``; ``openai.AsyncOpenAI`` with ``chat.completions.stream()``
  and ``get_final_completion()``), under asyncio;
- agentloop's provider (``AnthropicProvider`` / ``OpenAIProvider``), through its
  real ``stream()`` (HTTP core, SSE decoder, stream parser), under trio.

Both SDKs are built on ``httpx2`` here (``anthropic`` 2.x and ``openai`` 3.x require
it), so one transport serves both sides.

The two final messages are compared field by field, as a view each side is reduced
to: text, thinking and its signature, redacted thinking, tool calls (id, name, parsed
arguments), the stop reason mapped to :class:`StopReason`, and the token counts.
A stream that fails must raise in both, with the exact exception classes listed in
``FAILING``. Where the SDK and agentloop disagree on purpose (``KNOWN_DIFFERENCES``,
each with why ours is right), ``test_known_difference_is_exactly_this`` pins the
exact difference and that everything else agrees.

Every fixture file must have a case here, and every fixture directory must be
covered or listed in ``NOT_COVERED``: ``test_every_fixture_has_a_parity_case``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import httpx2
import pytest
import trio

import agentloop as al
from agentloop.providers import (
    AnthropicProvider,
    ModelConfig,
    ModelRequest,
    NetworkError,
    OpenAIProvider,
    OverloadedError,
    ProviderError,
    RetryConfig,
    ServerError,
)

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

FIXTURES = Path(__file__).parent.parent / "fixtures"
PROVIDERS = ("anthropic", "openai")  # the fixture directories this module covers
# Fixture directories of other APIs, not compared with an SDK here (yet): a new directory
# must be added to PROVIDERS (with its cases) or here, with the reason.
NOT_COVERED = {
    "responses": "the OpenAI Responses API: compared with the openai SDK's responses.stream() "
    "in tests/test_responses.py",
}
BASE_URL = "http://sdk-parity.invalid"
ANTHROPIC_MODEL = ModelConfig.anthropic(
    "claude-sonnet-5", api_key="sk-ant-parity-test-key", base_url=BASE_URL
)
OPENAI_MODEL = ModelConfig.openai(
    "gpt-5.4", api_key="sk-parity-test-key", base_url=f"{BASE_URL}/v1"
)
REQUEST = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))
SDK_MESSAGES = [{"role": "user", "content": "hi"}]

# The SDKs' stop reasons, mapped here (not with agentloop's own tables) to StopReason.
ANTHROPIC_STOP = {
    "end_turn": al.StopReason.STOP,
    "stop_sequence": al.StopReason.STOP,
    "tool_use": al.StopReason.TOOL_USE,
    "max_tokens": al.StopReason.LENGTH,
    "refusal": al.StopReason.REFUSAL,
    "pause_turn": al.StopReason.PAUSED,
}
OPENAI_FINISH = {
    "stop": al.StopReason.STOP,
    "tool_calls": al.StopReason.TOOL_USE,
    "length": al.StopReason.LENGTH,
    "content_filter": al.StopReason.REFUSAL,
}
# Anthropic blocks agentloop deliberately leaves out of the message: server tools run on
# Anthropic's side, and their results are not for the loop to run or show.
SERVER_SIDE_BLOCKS = {"server_tool_use", "web_search_tool_result"}


# --------------------------------------------------------------------------- the cases


@attrs.frozen
class Failing:
    """A stream that ends in an error: the exact classes each side raises."""

    sdk: type[Exception] | None  # None: the SDK raises nothing (a known difference)
    ours: type[ProviderError]


# Streams that end in a message: compared field by field.
MESSAGES = [
    "anthropic/max_tokens_tool.sse",
    "anthropic/parallel_tools.sse",
    "anthropic/pause_turn.sse",
    "anthropic/redacted_thinking.sse",
    "anthropic/refusal.sse",
    "anthropic/text.sse",
    "anthropic/thinking_tool.sse",
    "openai/content_filter.sse",
    "openai/crlf.sse",
    "openai/late_id.sse",
    "openai/length_cut.sse",
    "openai/no_done.sse",
    "openai/openrouter_reasoning.sse",
    "openai/parallel_tools.sse",
    "openai/reasoning_content.sse",
    "openai/text_usage.sse",
]
# Streams that fail. The SDK raises its generic classes: the error event arrives in a
# 200 response, so there is no status for the SDK to choose a subclass by.
FAILING = {
    "anthropic/overloaded_error.sse": Failing(anthropic.APIStatusError, OverloadedError),
    "openai/error_mid_stream.sse": Failing(openai.APIError, ServerError),
    "openai/cut_off.sse": Failing(None, NetworkError),
}

TRUNCATED_WRITE = '{"path": "notes.md", "content": "# Notes\\n\\nFirst, the'
CUT_OFF_TEXT = "The answer is"
# Where agentloop and the SDK disagree: (the view's field, the SDK's value, ours, why).
KNOWN_DIFFERENCES: dict[str, tuple[str, Any, Any, str]] = {
    "anthropic/max_tokens_tool.sse": (
        "content",
        ("tool_use", "toolu_01Ld3ZCGkN9qYuG8qvVQ2ypG", "write_file", {"path": "notes.md"}),
        ("tool_use", "toolu_01Ld3ZCGkN9qYuG8qvVQ2ypG", "write_file", ("unparsed", TRUNCATED_WRITE)),
        "a tool_use cut off by max_tokens: the anthropic SDK parses its truncated arguments in "
        "jiter's partial mode to input={'path': 'notes.md'} (the unfinished 'content' string "
        "dropped); agentloop keeps arguments={} and raw_arguments=<the text as streamed>, so "
        "the call is never run with half its arguments",
    ),
    "openai/cut_off.sse": (
        "raises",
        None,
        "NetworkError",
        "a stream cut before any finish_reason and [DONE]: the openai SDK's stream helper "
        f"returns a completion (finish_reason=None, content={CUT_OFF_TEXT!r}) without an "
        "error; agentloop raises NetworkError('OpenAI stream ended before it finished'), "
        "which is retried",
    ),
}


def parity_params(names: list[str]) -> list[str]:
    """The fixtures that parse the same: the known differences have their own exact test."""
    return [name for name in names if name not in KNOWN_DIFFERENCES]


# --------------------------------------------------------------------------- serving


def read(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def transport(body: bytes, path: str) -> httpx2.MockTransport:
    """Answers one POST to ``path`` with ``body`` as a 200 event stream."""

    async def handler(request: httpx2.Request) -> httpx2.Response:
        assert (request.method, request.url.path) == ("POST", path)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return httpx2.MockTransport(handler)


def sdk_anthropic(body: bytes) -> Any:
    """The anthropic SDK's final message (``anthropic.types.Message``) for ``body``."""

    async def run() -> Any:
        http = httpx2.AsyncClient(transport=transport(body, "/v1/messages"))
        async with (
            anthropic.AsyncAnthropic(
                api_key="sk-ant-parity-test-key", base_url=BASE_URL, http_client=http, max_retries=0
            ) as client,
            client.messages.stream(
                model="claude-sonnet-5", max_tokens=1024, messages=SDK_MESSAGES
            ) as stream,
        ):
            return await stream.get_final_message()

    return asyncio.run(run())


def sdk_openai(body: bytes) -> Any:
    """The openai SDK's final completion (a ``ChatCompletion``) for ``body``.

    ``get_final_completion()`` refuses to give a completion that finished for
    ``length`` or ``content_filter`` (it raises LengthFinishReasonError /
    ContentFilterFinishReasonError); the completion it accumulated is on the error,
    and that is the SDK's parse of the bytes.
    """

    async def run() -> Any:
        http = httpx2.AsyncClient(transport=transport(body, "/v1/chat/completions"))
        async with (
            openai.AsyncOpenAI(
                api_key="sk-parity-test-key",
                base_url=f"{BASE_URL}/v1",
                http_client=http,
                max_retries=0,
            ) as client,
            client.chat.completions.stream(model="gpt-5.4", messages=SDK_MESSAGES) as stream,
        ):
            try:
                return await stream.get_final_completion()
            except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as error:
                refused = error
        completion = refused.completion
        finish = (
            "length" if isinstance(refused, openai.LengthFinishReasonError) else "content_filter"
        )
        assert completion.choices[0].finish_reason == finish
        return completion

    return asyncio.run(run())


def ours(name: str) -> al.AssistantMessage:
    """agentloop's message for the fixture: its provider's ``stream()``, no retries."""
    body = read(name)
    provider_name = name.split("/")[0]

    async def run() -> al.AssistantMessage:
        provider: AnthropicProvider | OpenAIProvider
        if provider_name == "anthropic":
            http = httpx2.AsyncClient(transport=transport(body, "/v1/messages"))
            provider = AnthropicProvider(ANTHROPIC_MODEL, client=http, retry=RetryConfig.none())
        else:
            http = httpx2.AsyncClient(transport=transport(body, "/v1/chat/completions"))
            provider = OpenAIProvider(OPENAI_MODEL, client=http, retry=RetryConfig.none())

        async def emit(delta: al.StreamDelta) -> None:
            pass

        async with http:
            return await provider.stream(REQUEST, emit)

    return trio.run(run)


def sdk_message(name: str) -> Any:
    body = read(name)
    return sdk_anthropic(body) if name.startswith("anthropic/") else sdk_openai(body)


def raised(call: Callable[[], object]) -> Exception | None:
    """The exception ``call`` raises, or None."""
    try:
        call()
    except Exception as error:
        return error
    return None


# --------------------------------------------------------------------------- the views


def arguments_view(arguments: dict[str, Any], raw: str | None) -> Any:
    """A call's arguments: the object, or ("unparsed", text) when they were not one."""
    return arguments if raw is None else ("unparsed", raw)


def arguments_text_view(text: str) -> Any:
    """The same view of arguments the SDK gives as text (OpenAI's, never parsed by it)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return ("unparsed", text)
    return value if isinstance(value, dict) else ("unparsed", text)


def our_anthropic_view(message: al.AssistantMessage) -> dict[str, Any]:
    content: list[tuple[Any, ...]] = []
    for block in message.content:
        if isinstance(block, al.TextContent):
            content.append(("text", block.text))
        elif isinstance(block, al.ThinkingContent) and block.redacted:
            content.append(("redacted_thinking", block.signature))
        elif isinstance(block, al.ThinkingContent):
            content.append(("thinking", block.thinking, block.signature))
        elif isinstance(block, al.ToolCall):
            arguments = arguments_view(block.arguments, block.raw_arguments)
            content.append(("tool_use", block.id, block.name, arguments))
        else:
            raise AssertionError(f"unexpected block {block!r}")
    usage = message.usage
    return {
        "content": content,
        "stop_reason": message.stop_reason,
        "usage": (usage.input, usage.output, usage.cache_read, usage.cache_write),
    }


def sdk_anthropic_view(message: Any) -> dict[str, Any]:
    content: list[tuple[Any, ...]] = []
    for block in message.content:
        if block.type == "text":
            content.append(("text", block.text))
        elif block.type == "thinking":
            content.append(("thinking", block.thinking, block.signature or None))
        elif block.type == "redacted_thinking":
            content.append(("redacted_thinking", block.data))
        elif block.type == "tool_use":
            content.append(("tool_use", block.id, block.name, block.input))
        else:
            assert block.type in SERVER_SIDE_BLOCKS, block.type
    usage = message.usage
    return {
        "content": content,
        "stop_reason": ANTHROPIC_STOP[message.stop_reason],
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens or 0,
            usage.cache_creation_input_tokens or 0,
        ),
    }


def our_openai_view(message: al.AssistantMessage) -> dict[str, Any]:
    thinking = [b.thinking for b in message.content if isinstance(b, al.ThinkingContent)]
    assert all(
        b.signature is None and not b.redacted
        for b in message.content
        if isinstance(b, al.ThinkingContent)
    )
    text = [b.text for b in message.content if isinstance(b, al.TextContent)]
    usage = message.usage
    return {
        "thinking": "".join(thinking) if thinking else None,
        "text": "".join(text) if text else None,
        "calls": [
            (call.id, call.name, arguments_view(call.arguments, call.raw_arguments))
            for call in message.tool_calls
        ],
        "stop_reason": message.stop_reason,
        # agentloop's Usage.input excludes cached tokens (they are in cache_read), so that
        # input + cache_read is the prompt; OpenAI's prompt_tokens include them.
        "usage": {
            "prompt": usage.input + usage.cache_read,
            "cached": usage.cache_read,
            "cache_write": usage.cache_write,
            "completion": usage.output,
            "reasoning": usage.reasoning,
            "total": usage.total_tokens,
        },
    }


def sdk_reasoning(message: Any) -> str | None:
    """The reasoning text of another server's dialect, from the fields the SDK kept raw.

    The openai SDK has no reasoning field in Chat Completions; it keeps unknown fields
    in pydantic's ``model_extra``, accumulated by its generic delta merger (strings
    concatenated, list entries merged by their ``index``):

    - ``reasoning_content`` (DeepSeek, vLLM): the text;
    - ``reasoning_details`` (OpenRouter): entries of one ``index`` merged into one, whose
      ``text`` is every streamed text piece (its ``type`` is the last entry's, so it is
      not looked at). OpenRouter also mirrors the text in ``reasoning``, but not in
      every chunk (the fixture's third has ``reasoning: null``), so ``reasoning``
      alone is short of the full text and is not the field to compare.
    """
    extra = message.model_extra or {}
    if isinstance(extra.get("reasoning_content"), str):
        return str(extra["reasoning_content"]) or None
    details = extra.get("reasoning_details")
    if isinstance(details, list):
        return "".join(d.get("text") or "" for d in details) or None
    return None


def sdk_openai_view(completion: Any) -> dict[str, Any]:
    (choice,) = completion.choices
    message = choice.message
    calls = [
        (call.id, call.function.name, arguments_text_view(call.function.arguments))
        for call in message.tool_calls or []
    ]
    stop_reason = OPENAI_FINISH[choice.finish_reason]
    if calls and stop_reason is al.StopReason.STOP:
        # "stop" with tool calls (llama.cpp, some others) still asks for the calls to be
        # run: agentloop's documented reading, applied to the SDK's finish_reason.
        stop_reason = al.StopReason.TOOL_USE
    usage = completion.usage
    prompt_details = usage.prompt_tokens_details if usage is not None else None
    completion_details = usage.completion_tokens_details if usage is not None else None
    return {
        "thinking": sdk_reasoning(message),
        "text": (message.content or "") + (message.refusal or "") or None,
        "calls": calls,
        "stop_reason": stop_reason,
        "usage": {
            "prompt": usage.prompt_tokens if usage is not None else 0,
            "cached": (prompt_details.cached_tokens or 0) if prompt_details else 0,
            "cache_write": (prompt_details.cache_write_tokens or 0) if prompt_details else 0,
            "completion": usage.completion_tokens if usage is not None else 0,
            "reasoning": (completion_details.reasoning_tokens or 0) if completion_details else 0,
            "total": usage.total_tokens if usage is not None else 0,
        },
    }


def views(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the SDK's view, agentloop's view) of the fixture's final message."""
    sdk, message = sdk_message(name), ours(name)
    if name.startswith("anthropic/"):
        return sdk_anthropic_view(sdk), our_anthropic_view(message)
    return sdk_openai_view(sdk), our_openai_view(message)


# --------------------------------------------------------------------------- the tests


def test_every_fixture_has_a_parity_case() -> None:
    """A fixture added without a case here fails; so does a case whose fixture is gone."""
    directories = sorted(path.name for path in FIXTURES.iterdir())
    assert directories == sorted([*PROVIDERS, *NOT_COVERED])
    present = sorted(
        f"{provider}/{path.name}"
        for provider in PROVIDERS
        for path in (FIXTURES / provider).iterdir()
    )
    assert present == sorted([*MESSAGES, *FAILING])
    assert not set(MESSAGES) & set(FAILING)
    assert set(KNOWN_DIFFERENCES) <= {*MESSAGES, *FAILING}


@pytest.mark.parametrize("name", parity_params(MESSAGES))
def test_same_message_as_the_sdk(name: str) -> None:
    """agentloop's final message equals the official SDK's parse of the same bytes."""
    sdk, mine = views(name)
    assert mine == sdk


@pytest.mark.parametrize("name", parity_params(sorted(FAILING)))
def test_failing_stream_raises_in_both(name: str) -> None:
    """A stream that fails raises in the SDK and in agentloop, each its exact class."""
    case = FAILING[name]
    ours_error = raised(lambda: ours(name))
    assert type(ours_error) is case.ours
    sdk_error = raised(lambda: sdk_message(name))
    assert sdk_error is not None, f"the SDK parsed {name} without an error"
    assert type(sdk_error) is case.sdk
    # Both report the API's own error type and message.
    body: Any = getattr(sdk_error, "body", None)  # APIError's: the event's JSON
    error = body["error"] if name.startswith("anthropic/") else body
    assert str(ours_error).endswith(f" ({error['type']}): {error['message']}")


@pytest.mark.parametrize("name", sorted(KNOWN_DIFFERENCES))
def test_known_difference_is_exactly_this(name: str) -> None:
    """Each known difference is exactly the one stated, and the rest of the parse agrees."""
    field, sdk_value, our_value, _ = KNOWN_DIFFERENCES[name]
    if field == "raises":  # openai/cut_off.sse: the SDK's completion, and our error
        error = raised(lambda: ours(name))
        assert type(error).__name__ == our_value
        assert str(error) == "OpenAI stream ended before it finished"
        completion = sdk_message(name)
        (choice,) = completion.choices
        assert (choice.finish_reason, choice.message.content) == (sdk_value, CUT_OFF_TEXT)
        return
    sdk, mine = views(name)
    assert sdk_value in sdk[field]
    assert our_value in mine[field]
    assert [our_value if item == sdk_value else item for item in sdk[field]] == mine[field]
    assert {k: v for k, v in sdk.items() if k != field} == {
        k: v for k, v in mine.items() if k != field
    }
