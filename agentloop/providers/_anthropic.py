"""AnthropicProvider: Claude models over Anthropic's Messages API, streamed.

The request
-----------

``POST {base_url}/v1/messages`` with ``stream: true``. The history is mapped
onto the API's strictly alternating ``user`` / ``assistant`` turns:

- A :class:`~agentloop.UserMessage` is a ``user`` turn of text and image blocks.
- An :class:`~agentloop.AssistantMessage` is an ``assistant`` turn of text,
  thinking and ``tool_use`` blocks. Thinking is sent back only when it carries
  the API's signature and the message came from this provider (``model.provider``):
  unsigned reasoning (an aborted stream) and another provider's reasoning (its
  signature cannot be verified) are refused by the API; redacted thinking goes back as
  ``redacted_thinking``. A call whose arguments were not a JSON object
  (``raw_arguments`` set) is sent with ``input: {}``: its error result already
  tells the model what went wrong.
- The :class:`~agentloop.ToolResultMessage` answers to one assistant turn are
  ``tool_result`` blocks at the start of the next ``user`` turn; a user message
  that follows them (steering, a follow-up) joins that turn after them.
- Blank text blocks are dropped, a message left with no blocks (an aborted,
  empty reply) is skipped, and consecutive turns of one role are merged, so
  roles always alternate.

With ``model.compat.prompt_caching``, up to four cache breakpoints (the API's
limit) are set: the system prompt, the last tool, and the last block of each of
the last two ``user`` turns (the earlier one reads what the previous request
cached; the last one caches this request for the next), each
``{"type": "ephemeral"}``, with ``"ttl": "1h"`` when ``compat.cache_ttl`` is
``"1h"``.

Thinking (:class:`ThinkingLevel`), by ``model.compat.thinking``:

- ``"adaptive"``: ``thinking: {type: adaptive}``, and with ``compat.effort``
  ``output_config: {effort}`` (``low`` for MINIMAL and LOW, ``medium``, ``high``).
- ``"budget"``: ``thinking: {type: enabled, budget_tokens}``, with the budgets of
  :data:`THINKING_BUDGETS`. The budget is at least the API's minimum of 1024
  and is capped so that it fits the model's output limit (``model.max_tokens``)
  with 1024 tokens to spare. The API requires ``max_tokens`` to exceed the
  budget, so a request whose ``max_tokens`` leaves less than 1024 tokens after
  the budget has ``max_tokens`` raised to ``budget + 1024``.
- ``"none"``, or :attr:`ThinkingLevel.OFF`: no thinking field at all.

``temperature`` is sent only when it is set and no thinking field is sent: the
API refuses to change it while the model thinks.

A request with ``output`` (structured output, native mode) sends
``output_config: {format: {type: json_schema, schema}}`` beside any effort.

The stream
----------

Events are read by their JSON ``type``: text, thinking and tool-call arguments
are emitted as :class:`~agentloop.TextDelta`, :class:`~agentloop.ThinkingDelta`
and :class:`~agentloop.ToolCallDelta`, indexed by the API's content block
index. A ``tool_use`` block emits an empty ToolCallDelta when it starts, so the
call shows at once; a ``redacted_thinking`` block emits an empty ThinkingDelta.
``error`` events raise the matching :class:`ProviderError`, so overload and
rate limits mid-stream are retried. Unknown events and block types are ignored.

A stream that ends before ``message_stop`` is a :class:`NetworkError` (retried).
A ``tool_use`` block that never got its ``content_block_stop`` keeps its
arguments text, even empty, as ``raw_arguments``, so the loop does not run it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

import attrs

from .._events import StreamDelta, TextDelta, ThinkingDelta, ToolCallDelta
from .._text import loads
from .._types import (
    AssistantContent,
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._base import ModelRequest, parse_tool_arguments
from ._errors import (
    _OVERFLOW_PHRASES,
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    NetworkError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    error_detail,
    redact,
)
from ._http import (
    HTTPOptions,
    HTTPProvider,
    join_url,
    resolve_model,
)
from ._model import ModelConfig, Secret, ThinkingLevel
from .sse import ServerSentEvent

__all__ = ["ANTHROPIC_VERSION", "THINKING_BUDGETS", "AnthropicProvider"]

#: The ``anthropic-version`` header sent with every request.
ANTHROPIC_VERSION = "2023-06-01"

#: ``budget_tokens`` per thinking level, for models with budget thinking.
THINKING_BUDGETS: dict[ThinkingLevel, int] = {
    ThinkingLevel.MINIMAL: 1024,
    ThinkingLevel.LOW: 4096,
    ThinkingLevel.MEDIUM: 10_000,
    ThinkingLevel.HIGH: 32_000,
}
_MIN_BUDGET = 1024  # the API's minimum budget_tokens
_ANSWER_ROOM = 1024  # tokens left for the answer after the thinking budget

_EFFORTS: dict[ThinkingLevel, str] = {
    ThinkingLevel.MINIMAL: "low",
    ThinkingLevel.LOW: "low",
    ThinkingLevel.MEDIUM: "medium",
    ThinkingLevel.HIGH: "high",
}

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": StopReason.STOP,
    "stop_sequence": StopReason.STOP,
    "tool_use": StopReason.TOOL_USE,
    "max_tokens": StopReason.LENGTH,
    "model_context_window_exceeded": StopReason.LENGTH,
    "pause_turn": StopReason.PAUSED,
    "refusal": StopReason.REFUSAL,
}

_ERROR_TYPES: dict[str, type[ProviderError]] = {
    "overloaded_error": OverloadedError,
    "rate_limit_error": RateLimitError,
    "api_error": ServerError,
    "timeout_error": ServerError,
    "authentication_error": AuthenticationError,
    "permission_error": AuthenticationError,
    "invalid_request_error": BadRequestError,
    "not_found_error": BadRequestError,
    "request_too_large": BadRequestError,
    "billing_error": ProviderError,  # out of credit: retrying does not help
}

_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
_SNIPPET = 200

# --------------------------------------------------------------------------- request


def _image(block: ImageContent) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
    }


def _content_blocks(content: Sequence[TextContent | ImageContent]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        else:
            blocks.append(_image(block))
    return blocks


def _assistant_blocks(message: AssistantMessage, provider: str) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                blocks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingContent):
            if not block.signature or message.provider != provider:
                # Unsigned reasoning, or another provider's (a FallbackProvider's other
                # model, say), whose signature the API cannot verify: it refuses both.
                continue
            if block.redacted:
                blocks.append({"type": "redacted_thinking", "data": block.signature})
            else:
                blocks.append(
                    {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
                )
        else:
            arguments = {} if block.raw_arguments is not None else block.arguments
            blocks.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
            )
    return blocks


def _tool_result(message: ToolResultMessage) -> dict[str, Any]:
    result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    content = _content_blocks(message.content)
    if content:
        result["content"] = content
    result["is_error"] = message.is_error
    return result


@attrs.define
class _Turn:
    role: str
    results: list[dict[str, Any]]
    blocks: list[dict[str, Any]]


def _messages(history: Sequence[Message], provider: str = "anthropic") -> list[dict[str, Any]]:
    """The API's alternating turns for ``history``; see the module docstring."""
    turns: list[_Turn] = []
    for message in history:
        if isinstance(message, UserMessage):
            turn = _Turn("user", [], _content_blocks(message.content))
        elif isinstance(message, ToolResultMessage):
            turn = _Turn("user", [_tool_result(message)], [])
        else:
            turn = _Turn("assistant", [], _assistant_blocks(message, provider))
        if not turn.results and not turn.blocks:
            continue
        if turns and turns[-1].role == turn.role:
            turns[-1].results += turn.results
            turns[-1].blocks += turn.blocks
        else:
            turns.append(turn)
    # Tool results come first in their user turn, as the API requires.
    return [{"role": turn.role, "content": turn.results + turn.blocks} for turn in turns]


def _mark_cache(body: dict[str, Any], ttl: str) -> None:
    """Set the four cache breakpoints: system, last tool, last two user turns."""
    marker = {"type": "ephemeral"} if ttl == "5m" else {"type": "ephemeral", "ttl": ttl}
    if "system" in body:
        body["system"][-1]["cache_control"] = dict(marker)
    if "tools" in body:
        body["tools"][-1]["cache_control"] = dict(marker)
    users = [message for message in body["messages"] if message["role"] == "user"]
    for message in users[-2:]:
        message["content"][-1]["cache_control"] = dict(marker)


# --------------------------------------------------------------------------- stream


@attrs.define
class _Block:
    """One content block as it streams in."""

    kind: str  # "text", "thinking", "redacted_thinking" or "tool_use"
    parts: list[str] = attrs.field(factory=list)  # text, thinking or JSON, in pieces
    signature: str = ""  # thinking's signature; redacted thinking's data
    id: str = ""
    name: str = ""
    stopped: bool = False

    @property
    def text(self) -> str:
        return "".join(self.parts)


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _AnthropicStreamParser:
    """Reads one Messages API event stream into an assistant message."""

    def __init__(self, model: ModelConfig, secrets: Sequence[str]) -> None:
        self._model = model
        self._secrets = secrets
        self._blocks: dict[int, _Block] = {}
        self._ignored: set[int] = set()  # blocks of types this parser does not know
        self._usage = dict.fromkeys(_USAGE_KEYS, 0)
        self._model_id = model.id
        self._stop_reason: str | None = None
        self._done = False
        self.response_id = ""  # the message's id (message_start)

    @property
    def done(self) -> bool:
        return self._done

    def feed(self, event: ServerSentEvent) -> Sequence[StreamDelta]:
        if self._done:
            return ()
        data = self._load(event)
        kind = data.get("type", event.event)
        if kind == "content_block_delta":
            return self._delta(data)
        if kind == "content_block_start":
            return self._start(data)
        if kind == "content_block_stop":
            index = _int(data.get("index"))
            if index is not None and index in self._blocks:
                self._blocks[index].stopped = True
        elif kind == "message_start":
            message = data.get("message")
            if isinstance(message, dict):
                if isinstance(message.get("model"), str) and message["model"]:
                    self._model_id = message["model"]
                if isinstance(message.get("id"), str):
                    self.response_id = message["id"]
                self._take_usage(message.get("usage"))
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
                self._stop_reason = delta["stop_reason"]
            self._take_usage(data.get("usage"))
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            raise self._error(event.data)
        return ()  # ping, and events this parser does not know

    def finish(self) -> AssistantMessage:
        if not self._done:
            raise NetworkError("Anthropic stream ended before message_stop")
        content: list[AssistantContent] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.kind == "text":
                if block.text:
                    content.append(TextContent(block.text))
            elif block.kind == "thinking":
                content.append(ThinkingContent(block.text, block.signature or None))
            elif block.kind == "redacted_thinking":
                content.append(ThinkingContent("", block.signature, redacted=True))
            else:
                if block.stopped:
                    arguments, raw = parse_tool_arguments(block.text)
                else:  # cut off before its end: never run it
                    arguments, raw = {}, block.text
                content.append(ToolCall(block.id, block.name, arguments, raw))
        counts = self._usage
        usage = Usage(
            input=counts["input_tokens"],
            output=counts["output_tokens"],
            cache_read=counts["cache_read_input_tokens"],
            cache_write=counts["cache_creation_input_tokens"],
            total_tokens=sum(counts.values()),
        )
        stop_reason = _STOP_REASONS.get(self._stop_reason or "", StopReason.STOP)
        return AssistantMessage(
            tuple(content),
            stop_reason,
            model=self._model_id,
            provider=self._model.provider,
            usage=attrs.evolve(usage, cost=self._model.cost.of(usage)),
        )

    # ----------------------------------------------------------------- events

    def _load(self, event: ServerSentEvent) -> dict[str, Any]:
        try:
            data = loads(event.data)  # lone surrogates scrubbed: see agentloop._text
        except ValueError:
            data = None
        if not isinstance(data, dict):
            snippet = event.data[:_SNIPPET] + ("..." if len(event.data) > _SNIPPET else "")
            raise ServerError(
                redact(
                    f"Anthropic API sent a malformed {event.event} event: {snippet}", self._secrets
                )
            )
        return data

    def _start(self, data: dict[str, Any]) -> Sequence[StreamDelta]:
        index = _int(data.get("index"))
        block = data.get("content_block")
        if index is None or not isinstance(block, dict):
            return ()
        kind = block.get("type")
        if kind == "text":
            text = _str(block.get("text"))
            self._blocks[index] = _Block("text", [text])
            return (TextDelta(delta=text, index=index),) if text else ()
        if kind == "thinking":
            thinking = _str(block.get("thinking"))
            signature = _str(block.get("signature"))
            self._blocks[index] = _Block("thinking", [thinking], signature)
            return (ThinkingDelta(delta=thinking, index=index),) if thinking else ()
        if kind == "redacted_thinking":
            data_ = _str(block.get("data"))
            self._blocks[index] = _Block("redacted_thinking", signature=data_)
            return (ThinkingDelta(delta="", index=index),)
        if kind == "tool_use":
            call_id = _str(block.get("id"))
            name = _str(block.get("name"))
            self._blocks[index] = _Block("tool_use", id=call_id, name=name)
            return (ToolCallDelta(delta="", index=index, tool_call_id=call_id, name=name),)
        self._ignored.add(index)  # server tools, their results, future block types
        return ()

    def _delta(self, data: dict[str, Any]) -> Sequence[StreamDelta]:
        index = _int(data.get("index"))
        delta = data.get("delta")
        if index is None or index in self._ignored or not isinstance(delta, dict):
            return ()
        kind = delta.get("type")
        block = self._blocks.get(index)
        if kind == "text_delta":
            text = delta.get("text")
            if not isinstance(text, str):
                return ()
            if block is None:  # no content_block_start: keep the text anyway
                block = self._blocks[index] = _Block("text")
            if block.kind != "text" or not text:
                return ()
            block.parts.append(text)
            return (TextDelta(delta=text, index=index),)
        if kind == "thinking_delta":
            thinking = delta.get("thinking")
            if not isinstance(thinking, str):
                return ()
            if block is None:
                block = self._blocks[index] = _Block("thinking")
            if block.kind != "thinking" or not thinking:
                return ()
            block.parts.append(thinking)
            return (ThinkingDelta(delta=thinking, index=index),)
        if kind == "signature_delta":
            signature = delta.get("signature")
            if block is not None and block.kind == "thinking" and isinstance(signature, str):
                block.signature += signature
            return ()
        if kind == "input_json_delta":
            piece = delta.get("partial_json")
            if block is None or block.kind != "tool_use" or not isinstance(piece, str) or not piece:
                return ()
            block.parts.append(piece)
            return (
                ToolCallDelta(delta=piece, index=index, tool_call_id=block.id, name=block.name),
            )
        return ()  # citations and future delta types

    def _take_usage(self, usage: object) -> None:
        """Take every count ``usage`` has; later events carry cumulative counts."""
        if not isinstance(usage, dict):
            return
        for key in _USAGE_KEYS:
            value = _int(usage.get(key))
            if value is not None:
                self._usage[key] = value

    def _error(self, body: str) -> ProviderError:
        kind, detail = error_detail(body)
        message = redact(
            "Anthropic API error" + (f" ({kind})" if kind else "") + f": {detail}", self._secrets
        )
        # An unknown error after the API accepted the request: transient, like api_error.
        cls = _ERROR_TYPES.get(kind or "", ServerError)
        if issubclass(cls, BadRequestError) and any(
            phrase in detail.lower() for phrase in _OVERFLOW_PHRASES
        ):
            cls = ContextOverflowError
        return cls(message)


# --------------------------------------------------------------------------- provider


class AnthropicProvider(HTTPProvider):
    """Claude, through Anthropic's Messages API, streamed (``stream: true``).

    See the module documentation for how the history, thinking, caching and the
    stream are mapped. Failures are retried per ``retry``; see
    :class:`~agentloop.providers._http.HTTPProvider`.

    Example::

        provider = AnthropicProvider("claude-sonnet-5")   # key from ANTHROPIC_API_KEY
        agent = Agent(provider, thinking_level=ThinkingLevel.MEDIUM)

    Args:
        model: A :class:`ModelConfig` (``api="anthropic"``), or a model id for
            :meth:`ModelConfig.anthropic`.
        api_key: The API key; overrides the config's. By default it comes from
            the config, else from ``ANTHROPIC_API_KEY`` at each request.
        retry, client, timeout, rng, idle_timeout, request_timeout: As for
            :class:`HTTPProvider`.

    Raises:
        ValueError: no API key, or the config is not for the Anthropic API.
    """

    api_name = "Anthropic"

    def __init__(
        self,
        model: ModelConfig | str = "claude-sonnet-5",
        *,
        api_key: str | Secret | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        config = resolve_model(
            model, api_key, ModelConfig.anthropic, "anthropic", "AnthropicProvider"
        )
        super().__init__(config, **options)

    def url(self) -> str:
        return join_url(self.model.base_url, "/v1/messages")

    def headers(self, api_key: str | None) -> dict[str, str]:
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        if api_key:
            headers["x-api-key"] = api_key
        headers.update(self.model.headers)
        return headers

    def body(self, request: ModelRequest) -> dict[str, Any]:
        model = self.model
        max_tokens = model.max_tokens if request.max_tokens is None else request.max_tokens
        thinking: dict[str, Any] | None = None
        output_config: dict[str, Any] | None = None
        if request.thinking is not ThinkingLevel.OFF:
            if model.compat.thinking == "adaptive":
                thinking = {"type": "adaptive"}
                if model.compat.effort:
                    output_config = {"effort": _EFFORTS[request.thinking]}
            elif model.compat.thinking == "budget":
                budget = self._budget(request.thinking)
                thinking = {"type": "enabled", "budget_tokens": budget}
                max_tokens = max(max_tokens, budget + _ANSWER_ROOM)
        body: dict[str, Any] = {"model": model.id, "max_tokens": max_tokens, "stream": True}
        if request.system_prompt.strip():
            body["system"] = [{"type": "text", "text": request.system_prompt}]
        body["messages"] = _messages(request.messages, model.provider)
        if request.tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": dict(tool.parameters),
                }
                for tool in request.tools
            ]
        if thinking is not None:
            body["thinking"] = thinking
        if request.output is not None:
            output_config = output_config or {}
            output_config["format"] = {"type": "json_schema", "schema": dict(request.output.schema)}
        if output_config is not None:
            body["output_config"] = output_config
        if request.temperature is not None and thinking is None:
            body["temperature"] = request.temperature
        if model.compat.prompt_caching:
            _mark_cache(body, model.compat.cache_ttl)
        return body

    def _budget(self, level: ThinkingLevel) -> int:
        """The level's budget, fitted under the model's output limit, never below 1024."""
        budget = min(THINKING_BUDGETS[level], self.model.max_tokens - _ANSWER_ROOM)
        return max(budget, _MIN_BUDGET)

    def parser(self) -> _AnthropicStreamParser:
        return _AnthropicStreamParser(self.model, self.secrets())
