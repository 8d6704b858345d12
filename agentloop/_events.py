"""Events: what the loop and its tools report, in order, on the event channel.

Every event is a frozen attrs class that carries the ``loop_id`` of the loop
that sent it. Match on them::

    match event:
        case MessageUpdate(delta=TextDelta(delta=text)):
            print(text, end="")
        case ToolExecutionEnd(tool_name=name, is_error=True):
            print(f"{name} failed")
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, TypeAlias

import attrs

from ._approval import PendingCall, Suspended, subject_pair
from ._types import (
    AssistantMessage,
    Message,
    ToolOutcome,
    ToolResult,
    ToolResultMessage,
    Usage,
    now_ms,
    outcome_field,
)

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "AgentStop",
    "CompactionEnded",
    "CompactionRecord",
    "CompactionStarted",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "OutputUpdate",
    "ProgressMessage",
    "PrunApplied",
    "PrunRecord",
    "StopKind",
    "StreamDelta",
    "StreamRestart",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallDequeued",
    "ToolApprovalDecided",
    "ToolApprovalRequested",
    "ToolCallQueued",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "TurnEnd",
    "TurnStart",
]


# --------------------------------------------------------------------------- deltas


@attrs.frozen(kw_only=True)
class TextDelta:
    """Text appended to the content block at ``index`` of the streaming message."""

    delta: str
    index: int = 0


@attrs.frozen(kw_only=True)
class ThinkingDelta:
    """Reasoning text appended to the thinking block at ``index``."""

    delta: str
    index: int = 0


@attrs.frozen(kw_only=True)
class ToolCallDelta:
    """A chunk of a tool call's JSON arguments, as streamed (not parseable on its own).

    ``tool_call_id`` and ``name`` identify the call; providers send them with
    every chunk once known.
    """

    delta: str
    index: int = 0
    tool_call_id: str = ""
    name: str = ""


@attrs.frozen(kw_only=True)
class StreamRestart:
    """The model call failed and is being retried: what streamed so far is void.

    The partial message starts over empty. ``attempt`` is the attempt about to
    start (2 for the first retry), after waiting ``delay`` seconds; ``error``
    says what failed. Only the attempt that succeeds enters the history.
    """

    attempt: int
    delay: float
    error: str
    index: int = 0


StreamDelta: TypeAlias = TextDelta | ThinkingDelta | ToolCallDelta | StreamRestart


# --------------------------------------------------------------------------- events


@attrs.frozen(kw_only=True)
class AgentEvent:
    """Base class of every event. ``loop_id`` names the loop that sent it."""

    loop_id: str


@attrs.frozen(kw_only=True)
class AgentStart(AgentEvent):
    """The run began. The first event of a run."""

    parent_loop_id: str | None = None
    timestamp: int = attrs.field(factory=now_ms)


class StopKind(enum.Enum):
    """Why a run ended (:attr:`AgentStop.kind`)."""

    COMPLETED = "completed"  #: the model was done and no follow-up was queued
    ABORTED = "aborted"  #: ``abort()``, the abort scope, or the caller cancelled
    ERROR = "error"  #: the model's API failed (after its retries)
    MAX_TURNS = "max_turns"  #: ``ExecutionLimits.max_turns``
    MAX_TOKENS = "max_tokens"  #: ``ExecutionLimits.max_total_tokens``
    MAX_DURATION = "max_duration"  #: ``ExecutionLimits.max_duration``
    MAX_COST = "max_cost"  #: ``ExecutionLimits.max_cost``
    MAX_REQUESTS = "max_requests"  #: ``ExecutionLimits.max_requests``
    VETOED = "vetoed"  #: ``before_loop`` or ``before_turn`` returned False
    OUTPUT_FAILED = "output_failed"  #: no valid structured output within ``Output.retries``
    DEADLINE = "deadline"  #: ``Schedule.run_timeout`` or ``turn_timeout`` passed
    #: tool calls wait for decisions: ``AgentEnd.pending``, then ``Agent.resume(decisions)``
    AWAITING_APPROVAL = "awaiting_approval"


@attrs.frozen(kw_only=True)
class AgentStop:
    """Why a run ended, as data: ``kind``, a sentence, and the error if one ended it.

    >>> AgentStop(kind=StopKind.MAX_TURNS, message="Max turns reached (3/3)").kind.value
    'max_turns'
    """

    kind: StopKind = attrs.field(kw_only=False)
    message: str = attrs.field(default="", kw_only=False)
    error: str | None = None

    @property
    def completed(self) -> bool:
        """Whether the run ended because the model was done."""
        return self.kind is StopKind.COMPLETED


@attrs.frozen(kw_only=True)
class AgentEnd(AgentEvent):
    """The run ended: always the last event, after an abort too.

    ``messages`` are the messages this run added to the history, in their final
    form; ``usage`` sums the run's model calls, and ``usage_by_model`` splits it
    by the model that answered (``AssistantMessage.model``: several with a
    ``FallbackProvider``); ``stop_reason`` says why it ended (a limit, an
    abort, an error...), so code need not read it off the history's text.
    ``output`` is the typed final answer of an agent with an ``output_type``
    (see :class:`~agentloop.Output`), set only when the run completed; else
    ``None``. A run stopped to wait for decisions on tool calls
    (``StopKind.AWAITING_APPROVAL``) carries where it stopped in ``suspended``;
    :attr:`pending` lists the calls.
    """

    messages: tuple[Message, ...]
    usage: Usage
    timestamp: int = attrs.field(factory=now_ms)
    stop_reason: AgentStop = attrs.field(factory=lambda: AgentStop(StopKind.COMPLETED))
    usage_by_model: dict[str, Usage] = attrs.field(factory=dict)
    output: Any = None
    suspended: Suspended | None = None

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """The tool calls that wait for a decision (empty unless the run awaits approval)."""
        return () if self.suspended is None else self.suspended.pending


@attrs.frozen(kw_only=True)
class OutputUpdate(AgentEvent):
    """The structured answer so far, as the model streams it (agents with an ``output_type``).

    ``partial`` is the JSON read so far with its open brackets closed and a
    string value cut where the stream is: ``{"name": "Li"}`` on the way to
    ``{"name": "Lima", "population": 10000000}``. It is plain JSON data, not
    yet checked; the checked, typed value is ``AgentEnd.output``. Sent after
    the ``MessageUpdate`` whose piece changed it; past the answer's first 4 KB,
    only once the text since the last update paid for parsing it again (about
    each time it grew by a quarter), and a last one before ``MessageEnd`` shows
    the whole answer.
    """

    partial: Any


@attrs.frozen(kw_only=True)
class TurnStart(AgentEvent):
    """A turn began: one model call and the tool calls it asks for."""

    turn_index: int
    timestamp: int = attrs.field(factory=now_ms)


@attrs.frozen(kw_only=True)
class TurnEnd(AgentEvent):
    """A turn ended. ``message`` is the turn's assistant message in its final form."""

    turn_index: int
    message: AssistantMessage
    tool_results: tuple[ToolResultMessage, ...]
    usage: Usage
    timestamp: int = attrs.field(factory=now_ms)


@attrs.frozen(kw_only=True)
class MessageStart(AgentEvent):
    """A message began. For an assistant message, streaming starts after this."""

    message: Message


@attrs.frozen(kw_only=True, eq=False, repr=False)
class MessageUpdate(AgentEvent):
    """A piece of the assistant message arrived.

    ``message`` is the message streamed so far; its tool calls hold ``{}`` as
    arguments until the message ends. ``delta`` is the new piece.

    The loop builds ``message`` the first time it is read (and keeps it), so a
    consumer that only reads ``delta`` does not pay for copying the whole text
    at every piece. ``message=`` may be given an :class:`AssistantMessage` or a
    function that returns one.
    """

    _message: AssistantMessage | Callable[[], AssistantMessage] = attrs.field(alias="message")
    delta: StreamDelta

    @property
    def message(self) -> AssistantMessage:
        """The assistant message streamed so far."""
        message = self._message
        if not isinstance(message, AssistantMessage):
            message = message()
            object.__setattr__(self, "_message", message)
        return message

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, MessageUpdate)
        return (self.loop_id, self.message, self.delta) == (
            other.loop_id,
            other.message,
            other.delta,
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return (
            f"MessageUpdate(loop_id={self.loop_id!r}, message={self.message!r}, "
            f"delta={self.delta!r})"
        )


@attrs.frozen(kw_only=True)
class MessageEnd(AgentEvent):
    """A message is complete and was added to the history, in this order."""

    message: Message


@attrs.frozen(kw_only=True)
class ToolExecutionStart(AgentEvent):
    """A tool call began."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]


@attrs.frozen(kw_only=True)
class ToolApprovalRequested(AgentEvent):
    """A tool call needs approval (a permission ``ask``): the approver is asked, or,
    with ``Permissions(approver=DEFER)`` (``deferred``), the call waits for a decision
    (an approver that answers ``DEFER`` is asked first: ``deferred`` is False).
    ``reason`` says what asked, ``rule`` is the ``ask`` rule's text, ``subject``
    what the call touches (``("command", "make test")``), if its tool says."""

    tool_call_id: str
    tool_name: str
    args: dict[str, Any]
    reason: str
    rule: str | None = None
    deferred: bool = False
    subject: tuple[str, str] | None = attrs.field(default=None, converter=subject_pair)


@attrs.frozen(kw_only=True)
class ToolApprovalDecided(AgentEvent):
    """A tool call that needed approval was decided: ``approved``, with the
    ``arguments`` it runs with, or refused for ``reason`` (what the model reads).
    ``by`` is ``"approver"`` (answered during the run) or ``"decision"`` (a
    decision given to resume the run; a Temporal run's approval timeout is one)."""

    tool_call_id: str
    tool_name: str
    approved: bool
    arguments: dict[str, Any]
    reason: str | None = None
    by: str = "approver"


@attrs.frozen(kw_only=True)
class ToolExecutionUpdate(AgentEvent):
    """A running tool reported a partial result (for people; never sent to the model)."""

    tool_call_id: str
    tool_name: str
    partial_result: ToolResult


@attrs.frozen(kw_only=True)
class ToolExecutionEnd(AgentEvent):
    """A tool call ended with ``result``; ``is_error`` says whether it failed, and
    ``outcome`` how (a :class:`~agentloop.ToolOutcome` in agreement with it)."""

    tool_call_id: str
    tool_name: str
    result: ToolResult
    is_error: bool
    child_loop_id: str | None = None
    outcome: ToolOutcome = outcome_field()  # noqa: RUF009 - an attrs.field, with its checks


@attrs.frozen(kw_only=True)
class ToolCallQueued(AgentEvent):
    """A call cannot start yet: it waits for the budget or for a conflicting call.

    Sent after its ``ToolExecutionStart``; ``reason`` says what it waits for
    (``"waiting for the budget (50 calls running)"``, ``"waiting for
    write_file (call_3): both use /src/a.py"``). :class:`ToolCallDequeued`
    follows when it starts, unless it is cancelled first (its
    ``ToolExecutionEnd`` then says so).
    """

    tool_call_id: str
    tool_name: str
    reason: str


@attrs.frozen(kw_only=True)
class ToolCallDequeued(AgentEvent):
    """A queued call starts running, after waiting ``waited`` seconds."""

    tool_call_id: str
    tool_name: str
    waited: float


@attrs.frozen(kw_only=True)
class ProgressMessage(AgentEvent):
    """A running tool reported a line of progress text."""

    tool_call_id: str
    tool_name: str
    text: str


@attrs.frozen(kw_only=True)
class PrunRecord:
    """What one context pruning removed: the messages' timestamps, their tokens, the memo."""

    pruned_timestamps: tuple[int, ...]
    tokens_removed: int
    memo: str | None = None


@attrs.frozen(kw_only=True)
class PrunApplied(AgentEvent):
    """Messages were pruned from the working context (see the ``prun`` tool)."""

    record: PrunRecord
    messages_removed: int
    timestamp: int = attrs.field(factory=now_ms)


def _timestamps(value: Any) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class CompactionRecord:
    """What one compaction changed in the working context, by message timestamp.

    Attributes:
        truncated_timestamps: Tool results whose text was cut to its first and
            last lines (at most ``tool_output_max_lines`` lines and
            ``tool_output_max_chars`` characters per block).
        removed_timestamps: Messages taken out of the working context.
        note: The text that stands where the removed messages were (after the
            last of them): a summary, a notice, or both. ``None``: nothing does.
    """

    truncated_timestamps: tuple[int, ...] = attrs.field(default=(), converter=_timestamps)
    tool_output_max_lines: int = 50
    tool_output_max_chars: int = 5000
    removed_timestamps: tuple[int, ...] = attrs.field(default=(), converter=_timestamps)
    note: str | None = None


@attrs.frozen(kw_only=True)
class CompactionStarted(AgentEvent):
    """The working context passed its threshold; compaction begins.

    ``estimated_tokens`` is the estimate of the whole request (system prompt,
    tools and messages), ``message_count`` the messages in the working context.
    """

    estimated_tokens: int
    message_count: int
    context_window: int
    timestamp: int = attrs.field(factory=now_ms)


@attrs.frozen(kw_only=True)
class CompactionEnded(AgentEvent):
    """Compaction is done; ``record`` says what changed.

    ``summary_error`` is set when the summarizer failed and the built-in
    summary was used instead.
    """

    record: CompactionRecord
    messages_before: int
    messages_after: int
    estimated_tokens_before: int
    estimated_tokens_after: int
    summary_error: str | None = None
    timestamp: int = attrs.field(factory=now_ms)
