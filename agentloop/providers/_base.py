"""The provider contract: a model request, streamed deltas, and the final message."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from .._events import StreamDelta
from .._text import loads
from .._types import AssistantMessage, Message
from ._errors import ProviderError
from ._model import ThinkingLevel

__all__ = [
    "Emit",
    "ModelRequest",
    "OutputFormat",
    "Provider",
    "ProviderError",
    "ToolDefinition",
    "parse_tool_arguments",
]


@attrs.frozen
class ToolDefinition:
    """The half of a tool the model sees: its name, description and JSON Schema."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@attrs.frozen
class OutputFormat:
    """A JSON-schema answer format (structured output, native mode).

    The model's reply text must be JSON matching ``schema`` (always an object).
    ``strict`` says the schema meets OpenAI's strict rules (every object closed,
    every property required), so the provider may ask for strict decoding.
    """

    name: str
    schema: Mapping[str, Any]
    strict: bool = False


@attrs.frozen(kw_only=True)
class ModelRequest:
    """Everything one model call is given.

    ``messages`` is a read-only snapshot of the history; it does not change
    after the call, so providers and test doubles may keep it. ``max_tokens``
    of None means the model's default; ``thinking`` is how much to reason;
    ``output``, when set, asks for a JSON answer in that format (providers
    without a JSON-schema mode ignore it; the loop checks the answer anyway).
    """

    system_prompt: str
    messages: Sequence[Message]
    tools: tuple[ToolDefinition, ...] = ()
    max_tokens: int | None = None
    temperature: float | None = None
    thinking: ThinkingLevel = ThinkingLevel.OFF
    output: OutputFormat | None = None


Emit: TypeAlias = Callable[[StreamDelta], Awaitable[None]]


@runtime_checkable
class Provider(Protocol):
    """A model behind a streaming API.

    ``stream`` sends ``request`` to the model, awaits ``emit(delta)`` for each
    piece as it arrives, and returns the complete :class:`AssistantMessage`.
    Awaiting ``emit`` is how a slow consumer slows the stream down.

    Failures the model or its API report (rate limits, overload, a refused
    request) are raised as :class:`ProviderError`; the loop turns them into an
    assistant message with ``StopReason.ERROR``. Any other exception is a bug
    and leaves the run as itself. On cancellation, ``stream`` stops at its next
    checkpoint and lets :class:`trio.Cancelled` propagate.
    """

    async def stream(self, request: ModelRequest, emit: Emit) -> AssistantMessage: ...


def parse_tool_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Parse a tool call's streamed arguments into ``(arguments, raw_arguments)``.

    Empty text means no arguments: ``({}, None)``. Text that is a JSON object
    gives ``(object, None)``. Anything else (malformed, cut off, not an object)
    gives ``({}, text)``, so the loop can tell the model exactly what it sent.

    >>> parse_tool_arguments('{"path": "a.txt"}')
    ({'path': 'a.txt'}, None)
    >>> parse_tool_arguments('{"path": "a.t')
    ({}, '{"path": "a.t')
    """
    if not text.strip():
        return {}, None
    try:
        value = loads(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text
