"""Content blocks, messages, usage and stop reasons.

Every value here is a frozen, slotted attrs class. Sequences are tuples (lists
are accepted and converted). Timestamps are Unix milliseconds.
"""

from __future__ import annotations

import contextvars
import enum
import time
from collections.abc import Callable, Iterable
from typing import Any, ClassVar, TypeAlias, overload

import attrs

__all__ = [
    "ToolResult",
    "AssistantContent",
    "AssistantMessage",
    "Content",
    "ImageContent",
    "Message",
    "StopReason",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultContent",
    "ToolOutcome",
    "ToolResultMessage",
    "Usage",
    "UserContent",
    "UserMessage",
    "now_ms",
]


#: A clock other than the system's for the current context (a workflow's deterministic
#: time, say): a function returning Unix milliseconds. None: the system clock.
clock_ms: contextvars.ContextVar[Callable[[], int] | None] = contextvars.ContextVar(
    "agentloop_clock_ms", default=None
)


def now_ms() -> int:
    """Return the current Unix time in whole milliseconds (from :data:`clock_ms` if set)."""
    clock = clock_ms.get()
    return time.time_ns() // 1_000_000 if clock is None else clock()


# --------------------------------------------------------------------------- content


@attrs.frozen
class TextContent:
    """A block of text.

    >>> TextContent("hello")
    TextContent(text='hello')
    """

    text: str


@attrs.frozen
class ImageContent:
    """An image, as base64-encoded ``data`` with its ``mime_type`` (``"image/png"``)."""

    data: str
    mime_type: str

    def __repr__(self) -> str:
        # Images are large; a repr that prints them all is useless in a traceback.
        return f"ImageContent(mime_type={self.mime_type!r}, data=<{len(self.data)} base64 chars>)"


@attrs.frozen
class ThinkingContent:
    """The model's reasoning. ``signature`` must be sent back unchanged (Anthropic).

    ``redacted`` marks reasoning the API encrypted: ``thinking`` is empty and
    ``signature`` holds the opaque data to send back.
    """

    thinking: str
    signature: str | None = None
    redacted: bool = False


@attrs.frozen
class ToolCall:
    """A request by the model to run the tool ``name`` with ``arguments``.

    ``arguments`` is the parsed JSON object. When the model sent text that is not
    a JSON object (cut off, malformed, an array...), ``arguments`` is ``{}`` and
    ``raw_arguments`` holds the text exactly as sent: the loop then answers the
    call with an :class:`~agentloop.InvalidArgs` result quoting it, instead of
    running the tool with made-up arguments.
    """

    id: str
    name: str
    arguments: dict[str, Any] = attrs.field(factory=dict)
    raw_arguments: str | None = None


Content: TypeAlias = TextContent | ImageContent | ThinkingContent | ToolCall
UserContent: TypeAlias = TextContent | ImageContent
AssistantContent: TypeAlias = TextContent | ThinkingContent | ToolCall
ToolResultContent: TypeAlias = TextContent | ImageContent


# --------------------------------------------------------------------------- usage


class StopReason(enum.Enum):
    """Why an assistant message ended.

    The loop produces ``STOP``, ``LENGTH``, ``TOOL_USE``, ``ERROR`` and
    ``ABORTED``; providers also report ``REFUSAL`` (the model declined, for
    safety reasons) and ``PAUSED`` (the API paused a long turn: the loop asks it
    to go on).

    ``MAX_TURNS``, ``USER_STOP``, ``HANDOFF``, ``GUARD_RAIL`` and
    ``CONTEXT_COMPACTED`` are the Rust original's, kept so that histories and
    code written against it still load; agentloop never produces them, and they
    are deprecated: why a *run* ended is :class:`AgentStop` (``AgentEnd.stop_reason``),
    not a message's stop reason.
    """

    STOP = "stop"
    LENGTH = "length"
    TOOL_USE = "tool_use"
    ERROR = "error"
    ABORTED = "aborted"
    REFUSAL = "refusal"
    MAX_TURNS = "max_turns"
    USER_STOP = "user_stop"
    HANDOFF = "handoff"
    GUARD_RAIL = "guard_rail"
    CONTEXT_COMPACTED = "context_compacted"
    PAUSED = "paused"


@attrs.frozen
class Usage:
    """Token counts for one model call, or a sum of them (``a + b``).

    ``reasoning`` is the part of ``output`` spent thinking. ``cost`` is in US
    dollars, ``0.0`` when the model's prices are unknown.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    reasoning: int = 0
    cost: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            total_tokens=self.total_tokens + other.total_tokens,
            reasoning=self.reasoning + other.reasoning,
            cost=self.cost + other.cost,
        )


ZERO_USAGE = Usage()


# --------------------------------------------------------------------------- messages


def _user_content(value: Iterable[UserContent]) -> tuple[UserContent, ...]:
    return tuple(value)


def _assistant_content(value: Iterable[AssistantContent]) -> tuple[AssistantContent, ...]:
    return tuple(value)


def _result_content(value: Iterable[ToolResultContent]) -> tuple[ToolResultContent, ...]:
    return tuple(value)


class _TextOfUserMessage:
    """``UserMessage.text("hi")`` builds a message; ``message.text`` is its text.

    On the class, ``text`` is the constructor the contract names; on an instance
    it reads like ``AssistantMessage.text`` and ``ToolResultMessage.text``, so
    ``[m.text for m in history]`` gives strings for every kind of message.
    """

    @overload
    def __get__(self, instance: None, owner: type[UserMessage]) -> Callable[[str], UserMessage]: ...
    @overload
    def __get__(self, instance: UserMessage, owner: type[UserMessage]) -> str: ...
    def __get__(
        self, instance: UserMessage | None, owner: type[UserMessage]
    ) -> Callable[[str], UserMessage] | str:
        if instance is None:

            def text(text: str) -> UserMessage:
                """Build a message holding one text block, stamped now."""
                return owner((TextContent(text),))

            return text
        return "\n".join(b.text for b in instance.content if isinstance(b, TextContent))


@attrs.frozen
class UserMessage:
    """A message from the user: a prompt, a steering message or a follow-up.

    ``UserMessage.text("...")`` builds one holding a single text block, stamped
    now; on a message, ``.text`` is its text blocks joined by newlines.

    >>> message = UserMessage.text("List the files")
    >>> message.content
    (TextContent(text='List the files'),)
    >>> message.text
    'List the files'
    """

    content: tuple[UserContent, ...] = attrs.field(converter=_user_content)
    timestamp: int = attrs.field(factory=now_ms)

    text: ClassVar[_TextOfUserMessage] = _TextOfUserMessage()


@attrs.frozen
class AssistantMessage:
    """A model's reply: text, thinking and tool calls, in the order streamed.

    ``error_message`` is set when ``stop_reason`` is ``ERROR`` or ``ABORTED``.
    """

    content: tuple[AssistantContent, ...] = attrs.field(converter=_assistant_content)
    stop_reason: StopReason
    model: str = ""
    provider: str = ""
    usage: Usage = ZERO_USAGE
    timestamp: int = attrs.field(factory=now_ms)
    error_message: str | None = None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls in ``content``, in order."""
        return tuple(block for block in self.content if isinstance(block, ToolCall))

    @property
    def text(self) -> str:
        """The text blocks of ``content``, concatenated."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


class ToolOutcome(enum.Enum):
    """How a tool call ended, as the loop knows it (never read back from the result's text).

    It is on :class:`~agentloop.ToolExecutionEnd` and on the call's
    :class:`ToolResultMessage` in the history. :attr:`is_error` is true for
    every outcome but ``OK`` and ``OUTPUT_ACCEPTED``. A result recorded without
    one (an older session file) reads as ``OK``, or ``ERROR`` if it is an error.
    """

    OK = "ok"  #: the tool ran and returned its result
    ERROR = "error"  #: the tool raised (a ToolError or another exception) or returned no ToolResult
    INVALID_ARGUMENTS = "invalid_arguments"  #: not run: the arguments fail the tool's schema
    NOT_FOUND = "not_found"  #: not run: no tool has that name
    DENIED = "denied"  #: not run: the permission check refused it
    VETOED = "vetoed"  #: not run: ``before_tool_execution`` returned False
    SKIPPED = "skipped"  #: not run: a steering message came first
    TIMED_OUT = "timed_out"  #: it ran past its timeout and was cancelled
    CANCELLED = "cancelled"  #: cancelled: an abort, a deadline, the run's end, or the tool itself
    NOT_RUN = "not_run"  #: not run: the model's reply ended with an error
    OUTPUT_ACCEPTED = "output_accepted"  #: the final-result call (structured output), accepted
    OUTPUT_GIVEN = "output_given"  #: not run: the same reply gave the final result
    NOT_RUN_AGAIN = "not_run_again"  #: session recovery: it had started and may not be repeated
    INTERRUPTED = "interrupted"  #: a loaded session: the process stopped before it ended

    @property
    def is_error(self) -> bool:
        """Whether a result with this outcome is an error result."""
        return self is not ToolOutcome.OK and self is not ToolOutcome.OUTPUT_ACCEPTED


def _outcome_of(holder: Any) -> ToolOutcome:
    return ToolOutcome.ERROR if holder.is_error else ToolOutcome.OK


def _agrees(holder: Any, attribute: attrs.Attribute[ToolOutcome], value: ToolOutcome) -> None:
    if (
        value is not ToolOutcome.OK and value is not ToolOutcome.OUTPUT_ACCEPTED
    ) != holder.is_error:
        raise ValueError(f"outcome {value.value!r} contradicts is_error={holder.is_error}")


def outcome_field() -> Any:
    """The ``outcome`` field of a value that has ``is_error`` before it: a
    :class:`ToolOutcome` that agrees with it, by default ``OK`` or ``ERROR``."""
    return attrs.field(
        kw_only=True, default=attrs.Factory(_outcome_of, takes_self=True), validator=_agrees
    )


@attrs.frozen
class ToolResultMessage:
    """The answer to one :class:`ToolCall`, sent back to the model.

    ``child_loop_id`` names the loop of a sub-agent that produced the result;
    ``outcome`` (keyword only) says how the call ended, in agreement with
    ``is_error``.
    """

    tool_call_id: str
    tool_name: str
    content: tuple[ToolResultContent, ...] = attrs.field(converter=_result_content)
    is_error: bool = False
    timestamp: int = attrs.field(factory=now_ms)
    child_loop_id: str | None = None
    outcome: ToolOutcome = outcome_field()  # noqa: RUF009 - an attrs.field, with its checks

    @property
    def text(self) -> str:
        """The text blocks of ``content``, joined by newlines."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))


Message: TypeAlias = UserMessage | AssistantMessage | ToolResultMessage


@attrs.frozen
class ToolResult:
    """What a tool returns: ``content`` for the model, ``details`` for the application.

    ``details`` is any JSON-compatible value; it is never sent to the model.
    ``child_loop_id`` is set by tools that run a child agent loop.

    >>> ToolResult.text("42 files")
    ToolResult(content=(TextContent(text='42 files'),), details=None, child_loop_id=None)
    """

    content: tuple[ToolResultContent, ...] = attrs.field(converter=_result_content)
    details: Any = None
    child_loop_id: str | None = None

    @classmethod
    def text(cls, text: str, *, details: Any = None) -> ToolResult:
        """Build a result holding one text block."""
        return cls((TextContent(text),), details=details)

    @property
    def text_content(self) -> str:
        """The text blocks of ``content``, joined by newlines."""
        return "\n".join(block.text for block in self.content if isinstance(block, TextContent))
