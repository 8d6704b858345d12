"""OpenAIResponsesProvider: OpenAI's Responses API (``POST /v1/responses``), streamed.

The request
-----------

``POST {base_url}/responses`` with ``stream: true``. The system prompt is
``instructions``; the history becomes ``input`` items:

- a :class:`~agentloop.UserMessage` is a ``user`` message of ``input_text`` and
  ``input_image`` parts (images as ``data:`` URLs);
- an :class:`~agentloop.AssistantMessage` is, block by block in its order: a
  ``reasoning`` item for each :class:`~agentloop.ThinkingContent` this
  provider signed (see below), an ``assistant`` message of one ``output_text``
  for each text block, a ``function_call`` item (``call_id``, ``name``,
  ``arguments`` as a JSON string) for each tool call. A call whose arguments
  were not a JSON object (``raw_arguments`` set) is sent with ``"{}"``: its
  error result already tells the model what it sent. A reasoning item is only
  sent before the item it led to: one left last (its turn was cut short) is
  dropped, as the API refuses it;
- a :class:`~agentloop.ToolResultMessage` is a ``function_call_output`` with
  the result's text. The output cannot hold images, so the images of a run of
  results follow them in one ``user`` message that says which call each came
  from (a result that is only images says so in its output).

``tools`` are ``function`` tools (``strict: false``: the loop checks arguments
against the schema itself); ``max_output_tokens`` is the request's limit or the
model's; a request with ``output`` (structured output, native mode) sends
``text: {format: {type: json_schema, name, schema, strict}}``.

When ``model.compat.reasoning_effort`` is set (the model reasons) and the
thinking level is not OFF, ``reasoning`` is ``{effort, summary: "auto"}``
(``minimal`` becomes ``low`` without ``compat.minimal_effort``), and then no
``temperature`` is sent; otherwise a set temperature is.

Reasoning round trip, and what ``ThinkingContent.signature`` holds
------------------------------------------------------------------

A ``reasoning`` output item becomes a :class:`~agentloop.ThinkingContent`
whose ``thinking`` is its summary, the summary parts joined by a blank line
(``"\\n\\n"``), and whose ``signature`` is what must go back to the API, as a
compact JSON object:

``id``
    the item's id (``"rs_..."``);
``encrypted_content``
    the reasoning itself, encrypted by the API, from the item's
    ``response.output_item.done`` (absent if the API sent none);
``summary``
    the length of each summary part within ``thinking``, when there are two
    or more, so that the parts are sent back as they came;
``response_id``
    with ``store=True`` only: the response the item belongs to, which the API
    keeps.

The signature is set only when the item was finished; reasoning cut off by the
end of the stream has none. Unsigned reasoning, reasoning with neither
``encrypted_content`` nor ``response_id`` (the API could not read it back) and
reasoning of other providers (whose signature is not such an object) is not
sent back. Without ``store``, the provider is stateless: it sends
``store: false`` and, for a model that reasons, asks for
``include: ["reasoning.encrypted_content"]``.

Stored responses: ``store=True``
--------------------------------

The provider sends ``store: true``, and every message it produces keeps its
response's id: in the signature of its reasoning blocks, or, when the response
had no reasoning, in an empty ``ThinkingContent("", signature='{"response_id":
...}')`` added at the end of the content. The next request sends
``previous_response_id``, the id of the latest assistant message that has one,
and only the history after that message: the API holds the rest. A history
with no such message is sent whole. (With chaining, the API's copy of the
conversation is what the model sees: messages removed from the history by
pruning or compaction before the chained message still count there.)

The stream
----------

Events are read by their JSON ``type`` (the SSE ``event:`` name when there is
none): ``response.output_text.delta`` and ``response.refusal.delta`` stream as
:class:`~agentloop.TextDelta`, ``response.reasoning_summary_text.delta`` as
:class:`~agentloop.ThinkingDelta` (a ``"\\n\\n"`` delta between two summary
parts), ``response.function_call_arguments.delta`` as
:class:`~agentloop.ToolCallDelta`; a function call starts with an empty
ToolCallDelta carrying its ``call_id`` and ``name``. Each output item is one
content block, indexed in the order the items came. An item's ``done`` event
is its final form: its text, arguments, summary and ``encrypted_content``
replace what the deltas said (a missing end is emitted as one more delta).

``response.completed`` ends the stream: the stop reason is TOOL_USE when
function calls came, REFUSAL when a refusal did, else STOP; ``usage`` counts
``input`` without the cached tokens, which are ``cache_read``, and
``reasoning`` is the part of ``output`` spent reasoning. ``response.incomplete``
ends it too: LENGTH (``max_output_tokens``), or REFUSAL
(``content_filter``). A function call whose item did not finish keeps its
arguments text as ``raw_arguments``, so the loop does not run it.

``response.failed`` and ``error`` events raise the matching
:class:`ProviderError` (rate limits, overload and server errors are retried; a
rate limit's "try again in 1.5s" is its ``retry_after``). A stream that ends
before ``response.completed`` or ``response.incomplete`` is a
:class:`NetworkError` (retried). Unknown events and item types are ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
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
    redact,
)
from ._http import (
    HTTPOptions,
    resolve_model,
)
from ._model import ModelConfig, Secret, ThinkingLevel
from ._openai import OpenAIEndpoint, result_image_parts
from .sse import ServerSentEvent

__all__ = ["OpenAIResponsesProvider"]

_PART_SEPARATOR = "\n\n"  # between two reasoning summary parts in ``thinking``
_IMAGE_NOTE = "(the result is the image in the next message)"

# ``code`` of an error event or of a failed response's ``error``, and its class.
_ERROR_CODES: dict[str, type[ProviderError]] = {
    "server_error": ServerError,
    "internal_error": ServerError,
    "vector_store_timeout": ServerError,
    "timeout": ServerError,
    "rate_limit_exceeded": RateLimitError,
    "rate_limit_error": RateLimitError,
    "overloaded": OverloadedError,
    "overloaded_error": OverloadedError,
    "server_is_overloaded": OverloadedError,
    "slow_down": OverloadedError,
    "context_length_exceeded": ContextOverflowError,
    "insufficient_quota": ProviderError,  # out of credit: waiting does not help
    "invalid_api_key": AuthenticationError,
    "authentication_error": AuthenticationError,
    "permission_denied": AuthenticationError,
    "invalid_prompt": BadRequestError,
    "invalid_request_error": BadRequestError,
    "data_residency_mismatch": BadRequestError,
    "bio_policy": ProviderError,  # refused by a policy: retrying gives the same
    "misalignment_policy_violation": ProviderError,
}
# Codes of the image errors (image_too_large, invalid_base64_image...): bad requests.
_BAD_INPUT_PREFIXES = ("invalid_", "image_", "unsupported_", "empty_", "failed_to_")
_RATE_LIMIT_WORDS = ("rate limit", "rate_limit", "too many requests")
_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s)\b", re.IGNORECASE)


# --------------------------------------------------------------------------- request


def _image(image: ImageContent) -> dict[str, Any]:
    return {
        "type": "input_image",
        "image_url": f"data:{image.mime_type};base64,{image.data}",
        "detail": "auto",
    }


def _user(message: UserMessage) -> dict[str, Any] | None:
    parts = [
        {"type": "input_text", "text": block.text}
        if isinstance(block, TextContent)
        else _image(block)
        for block in message.content
    ]
    return {"type": "message", "role": "user", "content": parts} if parts else None


def _signature(block: ThinkingContent) -> dict[str, Any] | None:
    """What this provider kept in ``block.signature``, or None (unsigned, another provider's)."""
    signature = block.signature
    if not signature or signature[0] != "{":
        return None
    try:
        data = loads(signature)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _summary(thinking: str, lengths: object) -> list[dict[str, str]]:
    """The summary parts of a reasoning item, cut out of ``thinking`` as they came."""
    parts = [thinking] if thinking else []
    if isinstance(lengths, list) and len(lengths) > 1:
        sizes = [n for n in lengths if type(n) is int and n >= 0]
        gap = len(_PART_SEPARATOR)
        if len(sizes) == len(lengths) and sum(sizes) + gap * (len(sizes) - 1) == len(thinking):
            parts, start = [], 0
            for size in sizes:
                parts.append(thinking[start : start + size])
                start += size + gap
    return [{"type": "summary_text", "text": part} for part in parts]


def _reasoning(block: ThinkingContent) -> dict[str, Any] | None:
    """The ``reasoning`` input item for ``block``, or None when it cannot go back."""
    data = _signature(block)
    if data is None:
        return None
    item_id = data.get("id")
    encrypted = data.get("encrypted_content")
    if not isinstance(item_id, str) or not item_id:
        return None
    if not isinstance(encrypted, str) and not isinstance(data.get("response_id"), str):
        return None  # neither the reasoning itself nor a stored copy: the API cannot read it
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": _summary(block.thinking, data.get("summary")),
    }
    if isinstance(encrypted, str):
        item["encrypted_content"] = encrypted
    return item


def _assistant(message: AssistantMessage) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, TextContent):
            if block.text:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": block.text}],
                    }
                )
        elif isinstance(block, ThinkingContent):
            item = _reasoning(block)
            if item is not None:
                items.append(item)
        else:
            items.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    # The API parses the history's arguments: broken text would fail
                    # the whole request. The call's result already quotes it.
                    "arguments": "{}"
                    if block.raw_arguments is not None
                    else json.dumps(block.arguments, ensure_ascii=False),
                }
            )
    while items and items[-1]["type"] == "reasoning":
        items.pop()  # reasoning must come with the item it led to, or not at all
    return items


def _result(message: ToolResultMessage) -> dict[str, Any]:
    text = message.text
    if not text and any(isinstance(block, ImageContent) for block in message.content):
        text = _IMAGE_NOTE
    return {"type": "function_call_output", "call_id": message.tool_call_id, "output": text}


def _result_images(results: Sequence[ToolResultMessage]) -> dict[str, Any] | None:
    """One user message carrying the images of ``results``, which outputs cannot."""
    parts = result_image_parts(results, "input_text", _image)
    return {"type": "message", "role": "user", "content": parts} if parts else None


def _response_id(message: AssistantMessage) -> str | None:
    """The id of the stored response ``message`` came from (``store=True``), if it has one."""
    for block in message.content:
        if isinstance(block, ThinkingContent):
            data = _signature(block)
            if data is not None:
                value = data.get("response_id")
                if isinstance(value, str) and value:
                    return value
    return None


def _input(history: Sequence[Message], store: bool) -> tuple[str | None, list[dict[str, Any]]]:
    """``(previous_response_id, input items)`` for ``history``; see the module docstring."""
    previous: str | None = None
    start = 0
    if store:
        for position in range(len(history) - 1, -1, -1):
            message = history[position]
            if isinstance(message, AssistantMessage):
                previous = _response_id(message)
                if previous is not None:
                    start = position + 1
                    break
    items: list[dict[str, Any]] = []
    results: list[ToolResultMessage] = []  # the run of tool results being written

    def end_results() -> None:
        images = _result_images(results)
        if images is not None:
            items.append(images)
        results.clear()

    for message in history[start:]:
        if isinstance(message, ToolResultMessage):
            results.append(message)
            items.append(_result(message))
            continue
        end_results()
        if isinstance(message, UserMessage):
            item = _user(message)
            if item is not None:
                items.append(item)
        else:
            items.extend(_assistant(message))
    end_results()
    return previous, items


# --------------------------------------------------------------------------- errors


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _stream_error(
    api: str, error: Mapping[str, Any], secrets: Sequence[str], *, failed: bool = False
) -> ProviderError:
    """The :class:`ProviderError` for an ``error`` event or a failed response's ``error``.

    The ``code`` (else the ``type``) picks the class; an unknown one is read by
    its words, and one that says nothing recognisable is a :class:`ServerError`
    (retried): the API had accepted the request and failed while answering it.
    """
    nested = error.get("error")
    if isinstance(nested, Mapping):  # {"type": "error", "error": {...}}
        error = nested
    message = error.get("message")
    if not isinstance(message, str) or not message:
        message = json.dumps(dict(error), ensure_ascii=False) if error else "(no message)"
    code = _str(error.get("code")) or _str(error.get("type"))
    if code == "error":
        code = ""
    text = f"{message} {code}".lower()
    cls = _ERROR_CODES.get(code)
    if cls is None:
        if any(phrase in text for phrase in _OVERFLOW_PHRASES):
            cls = ContextOverflowError
        elif any(word in text for word in _RATE_LIMIT_WORDS):
            cls = RateLimitError
        elif "overloaded" in text:
            cls = OverloadedError
        elif code.startswith(_BAD_INPUT_PREFIXES):
            cls = BadRequestError
        else:
            cls = ServerError
    elif cls is BadRequestError and any(phrase in text for phrase in _OVERFLOW_PHRASES):
        cls = ContextOverflowError
    retry_after: float | None = None
    if cls is RateLimitError:
        wait = _TRY_AGAIN.search(message)
        if wait is not None:
            retry_after = float(wait[1]) / (1000 if wait[2].lower() == "ms" else 1)
    where = "response failed" if failed else "API error in the stream"
    what = f"{api} {where}" + (f" ({code})" if code else "") + f": {message}"
    return cls(redact(what, secrets), retry_after=retry_after)


# --------------------------------------------------------------------------- stream


class _Item:
    """One output item as it streams in: a message, a reasoning item or a function call."""

    __slots__ = (
        "block",
        "call_id",
        "done",
        "encrypted",
        "id",
        "kind",
        "name",
        "part",
        "pieces",
        "status",
        "summary",
    )

    def __init__(self, kind: str, block: int, item_id: str) -> None:
        self.kind = kind  # "message", "reasoning" or "function_call"
        self.block = block  # its index in the content
        self.id = item_id
        self.pieces: list[str] = []  # text, summary or arguments: joined once, at the end
        self.call_id = ""
        self.name = ""
        self.part = -1  # the reasoning summary part being streamed
        self.summary: list[str] | None = None  # the finished summary parts
        self.encrypted: str | None = None
        self.done = False  # its response.output_item.done arrived
        self.status: object = None

    def text(self) -> str:
        pieces = self.pieces
        if len(pieces) > 1:
            self.pieces = pieces = ["".join(pieces)]
        return pieces[0] if pieces else ""


_KINDS = frozenset({"message", "reasoning", "function_call"})


class _ResponsesStreamParser:
    """Reads one Responses API event stream.

    See :class:`~agentloop.providers._http.StreamParser`.
    """

    def __init__(
        self, model: ModelConfig, api: str, *, store: bool = False, secrets: Sequence[str] = ()
    ) -> None:
        self.done = False  # response.completed or response.incomplete arrived
        self._model = model
        self._api = api
        self._store = store
        self._secrets = secrets
        self._items: dict[object, _Item] = {}  # by output_index (an int)
        self._blocks = 0
        self._response_id = ""
        self._model_id = ""
        self._incomplete: str | None = None  # the reason, for response.incomplete
        self._refused = False
        self._usage: Usage | None = None

    def feed(self, event: ServerSentEvent) -> Sequence[StreamDelta]:
        """Take one event; return its deltas. Raises ProviderError for a failure."""
        try:
            data = loads(event.data)  # lone surrogates scrubbed: see agentloop._text
        except ValueError:
            if event.event == "error":
                raise _stream_error(self._api, {"message": event.data}, self._secrets) from None
            return ()  # not JSON (a proxy's keep-alive, a stray [DONE]): nothing to read
        if type(data) is not dict:
            return ()
        kind = data.get("type") or event.event
        # The frequent events first: one comparison each for the deltas.
        if kind == "response.output_text.delta":
            return self._text(data, False)
        if kind == "response.function_call_arguments.delta":
            return self._arguments(data)
        if kind == "response.reasoning_summary_text.delta":
            return self._summary(data)
        if kind == "response.refusal.delta":
            return self._text(data, True)
        if kind == "response.output_item.added":
            return self._item_added(data)
        if kind == "response.output_item.done":
            return self._item_done(data)
        if kind == "response.reasoning_summary_part.added":
            return self._part_added(data)
        if kind == "response.function_call_arguments.done":
            item = self._items.get(data.get("output_index"))
            arguments = data.get("arguments")
            if item is not None and item.kind == "function_call" and type(arguments) is str:
                return self._settle(item, arguments)
            return ()
        if kind == "response.created" or kind == "response.in_progress":
            self._take_response(data.get("response"))
            return ()
        if kind == "response.completed" or kind == "response.incomplete":
            response = data.get("response")
            self._take_response(response)
            if kind == "response.incomplete":
                details = response.get("incomplete_details") if type(response) is dict else None
                reason = details.get("reason") if type(details) is dict else None
                self._incomplete = reason if type(reason) is str else ""
            self.done = True
            return ()
        if kind == "response.failed":
            response = data.get("response")
            error = response.get("error") if type(response) is dict else None
            if type(error) is not dict:
                error = {"message": "the response failed, with no error given"}
            raise _stream_error(self._api, error, self._secrets, failed=True)
        if kind == "error":
            raise _stream_error(self._api, data, self._secrets)
        return ()  # content_part, *.done already known, keep-alives, events to come

    # ----------------------------------------------------------------- deltas

    def _text(self, data: dict[str, Any], refusal: bool) -> Sequence[StreamDelta]:
        text = data.get("delta")
        if type(text) is not str or not text:
            return ()
        item = self._items.get(data.get("output_index"))
        if item is None:
            item = self._add(data.get("output_index"), "message", _str(data.get("item_id")))
            if item is None:
                return ()
        elif item.kind != "message":
            return ()
        if refusal:
            self._refused = True
        item.pieces.append(text)
        return (TextDelta(delta=text, index=item.block),)

    def _arguments(self, data: dict[str, Any]) -> Sequence[StreamDelta]:
        piece = data.get("delta")
        item = self._items.get(data.get("output_index"))
        if item is None or item.kind != "function_call" or type(piece) is not str or not piece:
            return ()
        item.pieces.append(piece)
        return (
            ToolCallDelta(delta=piece, index=item.block, tool_call_id=item.call_id, name=item.name),
        )

    def _summary(self, data: dict[str, Any]) -> Sequence[StreamDelta]:
        text = data.get("delta")
        if type(text) is not str or not text:
            return ()
        item = self._items.get(data.get("output_index"))
        if item is None:
            item = self._add(data.get("output_index"), "reasoning", _str(data.get("item_id")))
            if item is None:
                return ()
        elif item.kind != "reasoning":
            return ()
        part = data.get("summary_index")
        if part != item.part:  # the first part, or one whose part.added did not come
            if item.part < 0:
                item.part = part if type(part) is int else 0
            elif type(part) is int:
                item.part = part
                text = _PART_SEPARATOR + text
        item.pieces.append(text)
        return (ThinkingDelta(delta=text, index=item.block),)

    def _part_added(self, data: dict[str, Any]) -> Sequence[StreamDelta]:
        item = self._items.get(data.get("output_index"))
        part = data.get("summary_index")
        if item is None or item.kind != "reasoning" or type(part) is not int or part == item.part:
            return ()
        started = item.part >= 0
        item.part = part
        if not started:
            return ()
        item.pieces.append(_PART_SEPARATOR)
        return (ThinkingDelta(delta=_PART_SEPARATOR, index=item.block),)

    # ----------------------------------------------------------------- items

    def _add(self, position: object, kind: str, item_id: str) -> _Item | None:
        if type(position) is not int or position in self._items:
            return None
        item = self._items[position] = _Item(kind, self._blocks, item_id)
        self._blocks += 1
        return item

    def _item_added(self, data: dict[str, Any]) -> Sequence[StreamDelta]:
        fields = data.get("item")
        if type(fields) is not dict:
            return ()
        kind = fields.get("type")
        if kind not in _KINDS:
            return ()  # web searches, other tools' calls, items to come
        item = self._add(data.get("output_index"), kind, _str(fields.get("id")))
        if item is None or kind != "function_call":
            return ()
        item.call_id = _str(fields.get("call_id"))
        item.name = _str(fields.get("name"))
        arguments = _str(fields.get("arguments"))
        if arguments:
            item.pieces.append(arguments)
        return (
            ToolCallDelta(
                delta=arguments, index=item.block, tool_call_id=item.call_id, name=item.name
            ),
        )

    def _item_done(self, data: dict[str, Any]) -> Sequence[StreamDelta]:
        fields = data.get("item")
        if type(fields) is not dict:
            return ()
        kind = fields.get("type")
        if kind not in _KINDS:
            return ()
        position = data.get("output_index")
        item = self._items.get(position)
        announce = item is None and kind == "function_call"
        if item is None:
            item = self._add(position, kind, _str(fields.get("id")))
            if item is None:
                return ()
        if item.kind != kind:
            return ()
        item.done = True
        item.status = fields.get("status")
        item.id = _str(fields.get("id")) or item.id
        if kind == "message":
            return self._settle(item, self._message_text(fields))
        if kind == "function_call":
            item.call_id = _str(fields.get("call_id")) or item.call_id
            item.name = _str(fields.get("name")) or item.name
            arguments = fields.get("arguments")
            if announce:  # no output_item.added: the call shows now, whole
                item.pieces.append(_str(arguments))
                return (
                    ToolCallDelta(
                        delta=item.text(),
                        index=item.block,
                        tool_call_id=item.call_id,
                        name=item.name,
                    ),
                )
            return self._settle(item, arguments) if type(arguments) is str else ()
        encrypted = fields.get("encrypted_content")
        item.encrypted = encrypted if type(encrypted) is str and encrypted else None
        summary = fields.get("summary")
        if type(summary) is not list:
            return ()
        item.summary = [_str(part.get("text")) for part in summary if type(part) is dict]
        return self._settle(item, _PART_SEPARATOR.join(item.summary))

    def _message_text(self, fields: dict[str, Any]) -> str | None:
        content = fields.get("content")
        if type(content) is not list:
            return None
        pieces: list[str] = []
        for part in content:
            if type(part) is dict:
                if part.get("type") == "refusal":
                    self._refused = True
                    pieces.append(_str(part.get("refusal")))
                else:
                    pieces.append(_str(part.get("text")))
        return "".join(pieces)

    def _settle(self, item: _Item, final: str | None) -> Sequence[StreamDelta]:
        """Make ``final``, an item's finished text, its text; emit what the deltas missed."""
        streamed = item.text()
        if not final or final == streamed:
            return ()  # nothing said at the end (a sloppy server): the deltas stand
        item.pieces = [final]
        if not final.startswith(streamed):
            return ()  # the deltas disagree with the end: the end wins, in the message
        rest = final[len(streamed) :]
        if item.kind == "message":
            return (TextDelta(delta=rest, index=item.block),)
        if item.kind == "reasoning":
            return (ThinkingDelta(delta=rest, index=item.block),)
        return (
            ToolCallDelta(delta=rest, index=item.block, tool_call_id=item.call_id, name=item.name),
        )

    @property
    def response_id(self) -> str:
        """The response's id (``response.created``)."""
        return self._response_id

    def _take_response(self, response: object) -> None:
        if type(response) is not dict:
            return
        if not self._response_id:
            self._response_id = _str(response.get("id"))
        model_id = _str(response.get("model"))
        if model_id:
            self._model_id = model_id
        usage = response.get("usage")
        if type(usage) is dict:
            self._usage = self._read_usage(usage)

    def _read_usage(self, data: dict[str, Any]) -> Usage:
        prompt = _int(data.get("input_tokens"))
        output = _int(data.get("output_tokens"))
        details = data.get("input_tokens_details")
        cached = _int(details.get("cached_tokens")) if type(details) is dict else 0
        details = data.get("output_tokens_details")
        reasoning = _int(details.get("reasoning_tokens")) if type(details) is dict else 0
        usage = Usage(
            input=max(prompt - cached, 0),
            output=output,
            cache_read=cached,
            total_tokens=_int(data.get("total_tokens")) or prompt + output,
            reasoning=reasoning,
        )
        return attrs.evolve(usage, cost=self._model.cost.of(usage))

    # ----------------------------------------------------------------- the end

    def finish(self) -> AssistantMessage:
        """The message. Raises NetworkError if the stream ended before the response did."""
        if not self.done:
            raise NetworkError(f"{self._api} stream ended before the response finished")
        store_id = self._response_id if self._store else ""
        content: list[AssistantContent] = []
        calls = False
        signed = False
        for item in self._items.values():  # in the order of their blocks
            if item.kind == "message":
                text = item.text()
                if text:
                    content.append(TextContent(text))
            elif item.kind == "function_call":
                calls = True
                text = item.text()
                if item.done and item.status in (None, "completed"):
                    arguments, raw = parse_tool_arguments(text)
                else:  # cut off before its end: never run it
                    arguments, raw = {}, text
                content.append(ToolCall(item.call_id, item.name, arguments, raw))
            else:
                signature = self._reasoning_signature(item, store_id)
                thinking = item.text()
                if signature is not None or thinking:
                    signed = signed or signature is not None
                    content.append(ThinkingContent(thinking, signature))
        if store_id and not signed:
            content.append(ThinkingContent("", _dumps({"response_id": store_id})))
        if self._incomplete is not None:
            stop = StopReason.REFUSAL if self._incomplete == "content_filter" else StopReason.LENGTH
        elif calls:
            stop = StopReason.TOOL_USE
        elif self._refused:
            stop = StopReason.REFUSAL
        else:
            stop = StopReason.STOP
        return AssistantMessage(
            tuple(content),
            stop,
            model=self._model_id or self._model.id,
            provider=self._model.provider,
            usage=self._usage or Usage(),
        )

    @staticmethod
    def _reasoning_signature(item: _Item, store_id: str) -> str | None:
        if not item.done or not item.id:
            return None  # cut off: nothing the API would take back
        signature: dict[str, Any] = {"id": item.id}
        if item.encrypted is not None:
            signature["encrypted_content"] = item.encrypted
        if item.summary is not None and len(item.summary) > 1:
            signature["summary"] = [len(part) for part in item.summary]
        if store_id:
            signature["response_id"] = store_id
        return _dumps(signature)


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --------------------------------------------------------------------------- provider


class OpenAIResponsesProvider(OpenAIEndpoint):
    """A model behind OpenAI's Responses API (``POST /v1/responses``), streamed.

    See the module documentation for how the history, reasoning and the stream
    are mapped. Failures are retried per ``retry``; see
    :class:`~agentloop.providers._http.HTTPProvider`. On cancellation the
    request is dropped at once (a retry's wait too) and :class:`trio.Cancelled`
    propagates; nothing of the cancelled call is returned.

    Example::

        provider = OpenAIResponsesProvider("gpt-5.4")          # OPENAI_API_KEY
        chained = OpenAIResponsesProvider("gpt-5.4", store=True)
        agent = Agent(provider, thinking_level=ThinkingLevel.MEDIUM)

    Args:
        model: A :class:`ModelConfig` (its ``api`` must be
            ``"openai-responses"``), or a model id for
            :meth:`ModelConfig.openai_responses`.
        api_key: The key to send; overrides the model's. By default the model's
            key, else its ``api_key_env`` variable (``OPENAI_API_KEY``).
        store: ``False`` (the default): stateless. The API stores nothing
            (``store: false``), the whole history is sent each time, and
            reasoning goes back encrypted. ``True``: the API stores each
            response (``store: true``) and each request continues the last
            one (``previous_response_id``), sending only the history after it.
        retry, client, timeout, rng, idle_timeout, request_timeout: As for
            :class:`HTTPProvider`.

    :meth:`stream` raises :class:`ProviderError` when the API fails and
    retrying did not help or cannot: a status error, a ``response.failed`` or
    an ``error`` event (classified by its code: rate limit, overload, server
    error, context overflow, bad request...), or a stream cut off before the
    response finished (:class:`NetworkError`).

    Raises:
        ValueError: the model is not a Responses API model, or it needs an API
            key and none was given or found; a timeout is not positive.
    """

    api_name = "OpenAI"
    path = "/responses"

    def __init__(
        self,
        model: ModelConfig | str = "gpt-5.4",
        *,
        api_key: str | Secret | None = None,
        store: bool = False,
        **options: Unpack[HTTPOptions],
    ) -> None:
        config = resolve_model(
            model,
            api_key,
            ModelConfig.openai_responses,
            "openai-responses",
            "OpenAIResponsesProvider",
        )
        super().__init__(config, **options)
        self.store = store

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The Responses API request for ``request``; see the module docstring."""
        model = self.model
        compat = model.compat
        previous, items = _input(request.messages, self.store)
        body: dict[str, Any] = {"model": model.id, "input": items, "stream": True}
        body["store"] = self.store
        if previous is not None:
            body["previous_response_id"] = previous
        if request.system_prompt:
            body["instructions"] = request.system_prompt
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": dict(tool.parameters),
                    "strict": False,
                }
                for tool in request.tools
            ]
        body["max_output_tokens"] = (
            model.max_tokens if request.max_tokens is None else request.max_tokens
        )
        reasons = compat.reasoning_effort and request.thinking is not ThinkingLevel.OFF
        if reasons:
            body["reasoning"] = {"effort": self.effort(request.thinking), "summary": "auto"}
        elif request.temperature is not None:
            body["temperature"] = request.temperature
        if compat.reasoning_effort and not self.store:
            body["include"] = ["reasoning.encrypted_content"]
        if request.output is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": request.output.name,
                    "schema": dict(request.output.schema),
                    "strict": request.output.strict,
                }
            }
        return body

    def parser(self) -> _ResponsesStreamParser:
        """A fresh parser for one response stream."""
        return _ResponsesStreamParser(
            self.model, self.api_name, store=self.store, secrets=self.secrets()
        )
