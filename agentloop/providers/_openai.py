"""OpenAIProvider: OpenAI Chat Completions, streamed, for OpenAI and any compatible server.

The request is ``POST {base_url}/chat/completions`` with ``stream: true``; the
reply is a stream of ``chat.completion.chunk`` events ended by ``data: [DONE]``.
Servers that speak this dialect differ in small ways, and the parser takes
them all:

- reasoning arrives as ``delta.reasoning_content`` (DeepSeek, vLLM),
  ``delta.reasoning`` (OpenRouter, xAI, Ollama) or ``delta.reasoning_details``
  (OpenRouter); the first of them that a chunk carries is used, so a server
  that sends the same text twice (OpenRouter does) is not read twice;
- a tool call's ``id`` and ``name`` may come in any chunk, and its arguments in
  pieces, interleaved with other calls': calls are assembled by their
  ``index``;
- ``finish_reason: "stop"`` with tool calls means the calls are to be run;
- usage comes in a last chunk with ``choices: []`` (``stream_options``), in the
  chunk that finishes, or under ``x_groq``;
- some servers end the stream without ``[DONE]``: after a ``finish_reason``
  that is a clean end, before one the stream was cut off (retried);
- an ``error`` object in a chunk is the matching :class:`ProviderError`.

A request with ``output`` (structured output, native mode) sends
``response_format: {type: json_schema, json_schema: {name, schema, strict}}``.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Unpack

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
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    NetworkError,
    OverloadedError,
    ProviderError,
    RateLimitError,
    ServerError,
    classify_http_error,
    redact,
)
from ._http import (
    HTTPOptions,
    HTTPProvider,
    bearer_headers,
    join_url,
    resolve_model,
)
from ._model import ModelConfig, Secret, ThinkingLevel
from .sse import ServerSentEvent

__all__ = ["OpenAIEndpoint", "OpenAIProvider"]

_FINISH_REASONS = {
    "stop": StopReason.STOP,
    "length": StopReason.LENGTH,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.REFUSAL,
}
_EFFORTS = {
    ThinkingLevel.MINIMAL: "minimal",
    ThinkingLevel.LOW: "low",
    ThinkingLevel.MEDIUM: "medium",
    ThinkingLevel.HIGH: "high",
}
# reasoning_details entries that hold readable text, and the field holding it.
_DETAIL_TEXT = {
    "reasoning.text": "text",
    "text": "text",
    "thinking": "text",
    "reasoning.summary": "summary",
}


def _server_name(model: ModelConfig) -> str:
    """How messages name the API: ``OpenAI``, the provider's name, or the server's host."""
    if model.provider == "openai":
        return "OpenAI"
    if model.provider != "openai-compatible":
        return model.provider
    # The generic name says nothing about which server: add its host (never userinfo).
    parts = urllib.parse.urlsplit(model.base_url)
    host = parts.hostname or model.base_url
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return f"openai-compatible ({host})"


class OpenAIEndpoint(HTTPProvider):
    """What OpenAI's two APIs share: a bearer key, an endpoint under ``base_url``,
    reasoning efforts, and errors that name the configured server."""

    #: The endpoint's path under the model's ``base_url``.
    path = ""

    def __init__(self, config: ModelConfig, **options: Unpack[HTTPOptions]) -> None:
        super().__init__(config, **options)
        self.api_name = _server_name(config)  # error messages name the configured server

    def url(self) -> str:
        """``{base_url}`` then the endpoint's path (before a query the URL has)."""
        return join_url(self.model.base_url, self.path)

    def headers(self, api_key: str | None) -> dict[str, str]:
        """JSON in, an event stream out, the key as a bearer token, then the model's headers."""
        return bearer_headers(api_key, self.model.headers)

    def effort(self, level: ThinkingLevel) -> str:
        """The ``reasoning_effort`` for a thinking level other than OFF."""
        effort = _EFFORTS[level]
        if effort == "minimal" and not self.model.compat.minimal_effort:
            effort = "low"
        return effort


class OpenAIProvider(OpenAIEndpoint):
    """A model behind OpenAI's Chat Completions API, or any server that speaks it.

    ::

        provider = OpenAIProvider("gpt-5.4")                      # OPENAI_API_KEY
        ollama = ModelConfig.openai_compatible(
            "qwen3:32b", "http://localhost:11434/v1", provider="ollama"
        )
        local = OpenAIProvider(ollama)

    Args:
        model: A :class:`ModelConfig` (its ``api`` must be ``"openai"``), or a
            model id for :meth:`ModelConfig.openai`.
        api_key: The key to send; overrides the model's. By default the model's
            key, else its ``api_key_env`` variable (``OPENAI_API_KEY``).
        retry, client, timeout, rng, idle_timeout, request_timeout: As for
            :class:`HTTPProvider`.

    Errors name the API: ``OpenAI`` for OpenAI's own, else the model's
    ``provider`` (``"ollama API error 404 ..."``), with the server's host when
    the provider has the generic name ``openai-compatible``.

    Raises:
        ValueError: the model is not a Chat Completions model, or it needs an API
            key and none was given or found.
    """

    api_name = "OpenAI"
    path = "/chat/completions"

    def __init__(
        self,
        model: ModelConfig | str = "gpt-5.4",
        *,
        api_key: str | Secret | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        config = resolve_model(model, api_key, ModelConfig.openai, "openai", "OpenAIProvider")
        super().__init__(config, **options)

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions request for ``request``."""
        model = self.model
        compat = model.compat
        body: dict[str, Any] = {
            "model": model.id,
            "messages": _messages(request.system_prompt, request.messages, model),
            "stream": True,
        }
        if compat.stream_usage:
            body["stream_options"] = {"include_usage": True}
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": dict(tool.parameters),
                    },
                }
                for tool in request.tools
            ]
        max_tokens = model.max_tokens if request.max_tokens is None else request.max_tokens
        body[compat.max_tokens_field] = max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if compat.reasoning_effort and request.thinking is not ThinkingLevel.OFF:
            body["reasoning_effort"] = self.effort(request.thinking)
        if request.output is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.output.name,
                    "schema": dict(request.output.schema),
                    "strict": request.output.strict,
                },
            }
        return body

    def parser(self) -> _ChunkParser:
        """A fresh parser for one response stream."""
        return _ChunkParser(self.model, self.api_name, secrets=self.secrets())


# --------------------------------------------------------------------------- request


def _image_part(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "image_url",
        "image_url": {"url": f"data:{image.mime_type};base64,{image.data}"},
    }


def _user(message: UserMessage) -> dict[str, Any]:
    blocks = message.content
    if len(blocks) == 1 and isinstance(blocks[0], TextContent):
        return {"role": "user", "content": blocks[0].text}
    if not blocks:
        return {"role": "user", "content": ""}
    parts = [
        {"type": "text", "text": block.text}
        if isinstance(block, TextContent)
        else _image_part(block)
        for block in blocks
    ]
    return {"role": "user", "content": parts}


def _assistant(message: AssistantMessage) -> dict[str, Any] | None:
    text = message.text
    calls = message.tool_calls
    if not text and not calls:
        return None  # an aborted turn that produced nothing: nothing to send
    entry: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        entry["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    # Servers parse the history's arguments: broken text would fail
                    # the whole request. The call's result already quotes it.
                    "arguments": "{}"
                    if call.raw_arguments is not None
                    else json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in calls
        ]
    return entry


def _tool(message: ToolResultMessage, with_name: bool) -> dict[str, Any]:
    text = message.text
    if not text and any(isinstance(block, ImageContent) for block in message.content):
        text = "(the result is the image in the next message)"
    entry: dict[str, Any] = {"role": "tool", "tool_call_id": message.tool_call_id, "content": text}
    if with_name:
        entry["name"] = message.tool_name
    return entry


def result_image_parts(
    results: Sequence[ToolResultMessage],
    text_type: str,
    image_part: Callable[[ImageContent], dict[str, Any]],
) -> list[dict[str, Any]]:
    """The images of ``results`` as content parts, each run introduced by a text part
    naming its call (tool results cannot hold images in either OpenAI API)."""
    parts: list[dict[str, Any]] = []
    for result in results:
        images = [block for block in result.content if isinstance(block, ImageContent)]
        if images:
            parts.append(
                {
                    "type": text_type,
                    "text": f"The image{'s' if len(images) > 1 else ''} from the result of "
                    f"{result.tool_name} (tool call {result.tool_call_id}):",
                }
            )
            parts.extend(image_part(image) for image in images)
    return parts


def _result_images(results: Sequence[ToolResultMessage]) -> dict[str, Any] | None:
    """One user message carrying the images of ``results``, which tool messages cannot."""
    parts = result_image_parts(results, "text", _image_part)
    return {"role": "user", "content": parts} if parts else None


def _messages(
    system_prompt: str, history: Sequence[Message], model: ModelConfig
) -> list[dict[str, Any]]:
    compat = model.compat
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": compat.system_role, "content": system_prompt})
    results: list[ToolResultMessage] = []  # the run of tool messages being written

    def end_results() -> None:
        images = _result_images(results)
        if images is not None:
            messages.append(images)
        results.clear()

    for message in history:
        if isinstance(message, ToolResultMessage):
            results.append(message)
            messages.append(_tool(message, compat.tool_result_name))
            continue
        end_results()
        if isinstance(message, UserMessage):
            messages.append(_user(message))
        else:
            entry = _assistant(message)
            if entry is not None:
                messages.append(entry)
    end_results()
    return messages


# --------------------------------------------------------------------------- stream


@attrs.define
class _Call:
    """A tool call being assembled from its chunks."""

    id: str = ""
    name: str = ""
    arguments: list[str] = attrs.field(factory=list)  # pieces: joined once, not per chunk
    block: int | None = None  # its content index, once it was emitted


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _content(value: object) -> str:
    """A delta's ``content``: a string, or a list of parts whose text parts count (Mistral)."""
    if isinstance(value, list):
        return "".join(
            _text(part.get("text"))
            for part in value
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return _text(value)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _reasoning(delta: Mapping[str, Any]) -> str:
    """The reasoning text a chunk's delta carries, read from one field only."""
    for name in ("reasoning_content", "reasoning"):
        text = _text(delta.get(name))
        if text:
            return text
    details = delta.get("reasoning_details")
    if not isinstance(details, list):
        return ""
    pieces: list[str] = []
    for detail in details:
        if isinstance(detail, Mapping):
            key = _DETAIL_TEXT.get(_text(detail.get("type")))
            if key is not None:
                pieces.append(_text(detail.get(key)))
    return "".join(pieces)


def _usage(data: Mapping[str, Any], model: ModelConfig) -> Usage:
    prompt = _int(data.get("prompt_tokens"))
    completion = _int(data.get("completion_tokens"))
    prompt_details = data.get("prompt_tokens_details")
    if isinstance(prompt_details, Mapping) and "cached_tokens" in prompt_details:
        cached = _int(prompt_details.get("cached_tokens"))
    else:
        cached = _int(data.get("prompt_cache_hit_tokens"))  # DeepSeek's older field
    completion_details = data.get("completion_tokens_details")
    reasoning = (
        _int(completion_details.get("reasoning_tokens"))
        if isinstance(completion_details, Mapping)
        else 0
    )
    usage = Usage(
        input=max(prompt - cached, 0),
        output=completion,
        cache_read=cached,
        total_tokens=_int(data.get("total_tokens")) or prompt + completion,
        reasoning=reasoning,
    )
    return attrs.evolve(usage, cost=model.cost.of(usage))


_RATE_LIMIT_WORDS = ("rate limit", "rate_limit", "rate-limit", "too many requests")
_AUTH_WORDS = ("invalid_api_key", "invalid api key", "authentication", "unauthorized")


def _stream_error(api: str, error: object, secrets: Sequence[str]) -> ProviderError:
    """The :class:`ProviderError` for an ``error`` object sent inside the stream.

    A status in ``code`` (``429``, ``"502"``) classifies it as the HTTP status
    would; without one, its words do. An error that says nothing recognisable is
    a :class:`ServerError` (retried): the server had accepted the request and
    failed on its side while answering it.
    """
    fields: Mapping[str, Any] = error if isinstance(error, Mapping) else {"message": str(error)}
    message = fields.get("message")
    if not isinstance(message, str):
        message = json.dumps(fields, ensure_ascii=False)
    code = fields.get("code")
    status: int | None = None
    if isinstance(code, int) and not isinstance(code, bool):
        status = code if 400 <= code <= 599 else None
        code = None
    elif isinstance(code, str) and code.isdigit():
        status = int(code) if 400 <= int(code) <= 599 else None
        code = None
    kind = fields.get("type") or code
    text = f"{message} {kind or ''} {code or ''}".lower()
    cls: type[ProviderError]
    if status is not None:
        cls = type(classify_http_error(api, status, json.dumps({"error": fields})))
    elif isinstance(classify_http_error(api, 400, text), ContextOverflowError):
        cls = ContextOverflowError
    elif any(word in text for word in _RATE_LIMIT_WORDS):
        cls = RateLimitError
    elif "overloaded" in text:
        cls = OverloadedError
    elif any(word in text for word in _AUTH_WORDS):
        cls = AuthenticationError
    elif "invalid_request" in text:
        cls = BadRequestError
    else:
        cls = ServerError
    what = (
        f"{api} API error{f' {status}' if status else ''} in the stream"
        + (f" ({kind})" if kind else "")
        + f": {message}"
    )
    return cls(redact(what, secrets), status=status)


class _ChunkParser:
    """Reads one Chat Completions stream; see :class:`~agentloop.providers._http.StreamParser`."""

    def __init__(self, model: ModelConfig, api: str, *, secrets: Sequence[str] = ()) -> None:
        self.done = False  # [DONE] arrived
        self._model = model
        self._api = api
        self._secrets = secrets
        self._model_id = ""
        self.response_id = ""  # the completion's id (every chunk carries it)
        self._finish: str | None = None  # the finish_reason, once one arrived
        # Content order: each block's number, by key (a dict: thousands of calls stay linear).
        self._blocks: dict[Literal["thinking", "text"] | int, int] = {}
        self._thinking: list[str] = []  # pieces, joined at the end (no quadratic +=)
        self._text: list[str] = []
        self._refused = False
        self._calls: dict[int, _Call] = {}
        self._call_ids: dict[str, int] = {}  # a call's id -> its position (the first)
        self._top_call = -1  # the highest position of a call so far
        self._usage: Usage | None = None

    def _block(self, key: Literal["thinking", "text"] | int) -> int:
        number = self._blocks.get(key)
        if number is None:
            number = self._blocks[key] = len(self._blocks)
        return number

    def feed(self, event: ServerSentEvent) -> Sequence[StreamDelta]:
        """Take one event; return its deltas. Raises ProviderError for an error chunk."""
        data = event.data.strip()
        if data == "[DONE]":
            self.done = True
            return self._flush_calls()
        try:
            chunk = loads(data)  # lone surrogates scrubbed: see agentloop._text
        except ValueError:
            if event.event == "error":
                raise _stream_error(self._api, data, self._secrets) from None
            return ()  # not a chunk (a proxy's keep-alive...): nothing to read
        if not isinstance(chunk, Mapping):
            return ()
        if chunk.get("error") is not None:
            raise _stream_error(self._api, chunk["error"], self._secrets)
        if event.event == "error":
            raise _stream_error(self._api, chunk, self._secrets)
        model_id = _text(chunk.get("model"))
        if model_id and not self._model_id:
            self._model_id = model_id
        if not self.response_id:
            self.response_id = _text(chunk.get("id"))
        usage = chunk.get("usage")
        if not isinstance(usage, Mapping):
            groq = chunk.get("x_groq")
            usage = groq.get("usage") if isinstance(groq, Mapping) else None
        if isinstance(usage, Mapping):
            self._usage = _usage(usage, self._model)
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return ()
        choice = next(
            (c for c in choices if isinstance(c, Mapping) and c.get("index", 0) == 0), None
        )
        if choice is None:
            return ()
        deltas: list[StreamDelta] = []
        delta = choice.get("delta")
        if isinstance(delta, Mapping):
            self._read_delta(delta, deltas)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self._finish = finish
            deltas.extend(self._flush_calls())
        return deltas

    def _read_delta(self, delta: Mapping[str, Any], deltas: list[StreamDelta]) -> None:
        reasoning = _reasoning(delta)
        if reasoning:
            self._thinking.append(reasoning)
            deltas.append(ThinkingDelta(delta=reasoning, index=self._block("thinking")))
        for field in ("content", "refusal"):
            text = _content(delta.get(field))
            if text:
                self._refused = self._refused or field == "refusal"
                self._text.append(text)
                deltas.append(TextDelta(delta=text, index=self._block("text")))
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for piece in tool_calls:
                if isinstance(piece, Mapping):
                    self._read_call(piece, deltas)

    def _read_call(self, piece: Mapping[str, Any], deltas: list[StreamDelta]) -> None:
        call_id = _text(piece.get("id"))
        position = piece.get("index")
        if not isinstance(position, int) or isinstance(position, bool):
            # No index (a few servers): the call with this id, else a new call when an
            # id comes, else the last call goes on.
            known = self._call_ids.get(call_id) if call_id else None
            if known is not None:
                position = known
            elif call_id or not self._calls:
                position = len(self._calls)
            else:
                position = self._top_call  # the last call goes on
        call = self._calls.get(position)
        if call is None:
            call = self._calls[position] = _Call()
            self._top_call = max(self._top_call, position)
        if call_id and not call.id:
            call.id = call_id
            self._call_ids.setdefault(call_id, position)
        function = piece.get("function")
        arguments = ""
        if isinstance(function, Mapping):
            name = _text(function.get("name"))
            if name and not call.name:
                call.name = name
            arguments = _text(function.get("arguments"))
        if arguments:
            call.arguments.append(arguments)
        if call.block is None:
            if call.id and call.name:
                deltas.append(self._announce(position, call))
        elif arguments:
            deltas.append(
                ToolCallDelta(
                    delta=arguments, index=call.block, tool_call_id=call.id, name=call.name
                )
            )

    def _announce(self, position: int, call: _Call) -> ToolCallDelta:
        """The call's first delta: everything buffered until its id and name were known."""
        call.block = self._block(position)
        return ToolCallDelta(
            delta="".join(call.arguments), index=call.block, tool_call_id=call.id, name=call.name
        )

    def _flush_calls(self) -> list[StreamDelta]:
        """At the end, announce the calls still waiting for an id or a name."""
        return [
            self._announce(position, call)
            for position, call in sorted(self._calls.items())
            if call.block is None
        ]

    def finish(self) -> AssistantMessage:
        """The message. Raises NetworkError if the stream ended before it finished."""
        if not self.done and self._finish is None:
            raise NetworkError(f"{self._api} stream ended before it finished")
        self._flush_calls()
        content: list[AssistantContent] = []
        for key in self._blocks:
            if key == "thinking":
                content.append(ThinkingContent("".join(self._thinking)))
            elif key == "text":
                content.append(TextContent("".join(self._text)))
            else:
                call = self._calls[key]
                arguments, raw = parse_tool_arguments("".join(call.arguments))
                content.append(ToolCall(call.id, call.name, arguments, raw))
        stop = _FINISH_REASONS.get(self._finish or "stop", StopReason.STOP)
        if self._calls and stop is StopReason.STOP:
            stop = StopReason.TOOL_USE
        elif not self._calls and stop is StopReason.TOOL_USE:
            stop = StopReason.STOP  # "tool_calls" with no call: nothing to run
        if self._refused and stop is StopReason.STOP:
            stop = StopReason.REFUSAL
        return AssistantMessage(
            tuple(content),
            stop,
            model=self._model_id or self._model.id,
            provider=self._model.provider,
            usage=self._usage or Usage(),
        )
