"""The provider contract: what the loop sends a model, and how a model answers.

:class:`ModelRequest` (with its :class:`ToolDefinition` and :class:`OutputFormat`),
:class:`ThinkingLevel` and the :class:`Provider` protocol. Values only: no I/O
and no trio, so the loop core builds requests without loading a provider.
Their public home is :mod:`agentloop.providers`, which re-exports them beside
the providers themselves.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeAlias, runtime_checkable

import attrs

from ._events import StreamDelta
from ._types import AssistantMessage, Message

__all__ = ["Emit", "ModelRequest", "OutputFormat", "Provider", "ThinkingLevel", "ToolDefinition"]


class ThinkingLevel(enum.Enum):
    """How much the model should reason before it answers.

    Each provider maps the level to its own setting: Anthropic to a thinking
    budget or an effort, OpenAI to ``reasoning_effort`` (Chat Completions) or
    ``reasoning.effort`` (Responses). ``OFF`` sends nothing.
    """

    OFF = "off"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"


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
    request) are raised as :class:`~agentloop.providers.ProviderError`; the loop
    turns them into an assistant message with ``StopReason.ERROR``. Any other
    exception is a bug and leaves the run as itself. On cancellation, ``stream``
    stops at its next checkpoint and lets :class:`trio.Cancelled` propagate.
    """

    async def stream(self, request: ModelRequest, emit: Emit) -> AssistantMessage: ...
