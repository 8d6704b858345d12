"""The loop core: the rules of a run, with no I/O and no trio.

Like h11 and h2, the core is told what happened and answers what to do next.
Its phases are generators: each yields an *action* and is sent its outcome.
What crosses between the core and a driver (the actions, a call's handle,
what a run counts, the model request) is the contract of :mod:`._protocol`,
which also shows how a driver runs the three phases.

The core owns every rule: limits and when the run stops (and why), the
exactly-one-result ledger (each tool call of a reply gets one result, however
the run ends, and its :class:`~agentloop.ToolOutcome`), steering and
follow-up, the strategies' order and skip rules, the argument checks and the
hooks' verdicts, when to prune and compact. A driver owns time, tasks and
cancellation: the trio driver (:mod:`._driver`) runs a loop in process; the
Temporal workflow runs the same core with each model request and tool call
an activity.

When a phase cannot go on (the driver was cancelled, a hook raised),
:meth:`LoopCore.interrupted` makes the history whole, synchronously.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import attrs

from .._approval import (
    DEFER,
    Approve,
    Decision,
    Deferred,
    Deny,
    PendingCall,
    Suspended,
    answer_of,
    not_approved,
)
from .._context import AgentContext, MessageView, PrunQueue, context_window_of
from .._events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    AgentStop,
    CompactionEnded,
    CompactionStarted,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    OutputUpdate,
    ProgressMessage,
    PrunApplied,
    StopKind,
    StreamDelta,
    StreamRestart,
    TextDelta,
    ToolApprovalDecided,
    ToolApprovalRequested,
    ToolCallDelta,
    ToolCallDequeued,
    ToolCallQueued,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
)
from .._scrub import scrub_delta, scrub_message, scrub_result
from .._text import scrub
from .._tool import (
    AgentTool,
    Batched,
    Sequential,
    ToolEntry,
    ToolError,
    ToolNotFound,
    ToolRegistry,
    ToolResult,
    check_arguments,
    tool_traits,
)
from .._types import (
    ZERO_USAGE,
    AssistantContent,
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolOutcome,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._config import AgentLoopConfig
from ._output import Output, PartialJSON
from ._protocol import (
    CHECKPOINT,
    AskApprover,
    AskModel,
    CallHook,
    CallState,
    Compact,
    ModelFailed,
    Phase,
    RunCalls,
    RunCounts,
    model_request,
    offered_tools,
)
from ._stream import PartialMessage

if TYPE_CHECKING:
    from .._tool import PermissionRequest

__all__ = [
    "DEADLINE_TEXT",
    "TURN_DEADLINE_TEXT",
    "LoopCore",
    "check_output_name",
    "check_setup",
    "copy_arguments",
    "prun_queue_of",
    "user_messages",
]

# What the model is told for a call the loop answers itself (its outcome says what
# happened: the texts are for the model, never read back).
SKIPPED_TEXT: Final = "Skipped due to queued user message."
VETOED_TEXT: Final = "Tool execution skipped by before_tool_execution hook."
ABORTED_TEXT: Final = "Cancelled: the run was aborted."
ENDED_TEXT: Final = "Cancelled: the run ended before this tool call finished."
DEADLINE_TEXT: Final = "Cancelled: the run's deadline passed."
TURN_DEADLINE_TEXT: Final = "Cancelled: the turn's deadline passed."
NOT_RUN_TEXT: Final = "Not executed: the model's reply ended with an error."
OUTPUT_ACCEPTED_TEXT: Final = "Final result accepted."
OUTPUT_GIVEN_TEXT: Final = "Not executed: the final result was given in the same reply."

_FAILED_STOPS = (StopReason.ERROR, StopReason.ABORTED)
_COMPLETED = AgentStop(StopKind.COMPLETED)
_NO_OUTPUT: Final = object()


def check_output_name(registry: ToolRegistry, output: Output[Any]) -> None:
    """Raise ValueError if a tool has the final-result tool's name."""
    if output.mode == "tool" and registry.get(output.name) is not None:
        raise ValueError(
            f"a tool is named {output.name!r}, the name of the final-result tool; "
            "give the tool another name or the output another: Output(..., name=...)"
        )


# --------------------------------------------------------------------------- the ledger


class _Turn:
    """The turn in progress: from TurnStart until TurnEnd is sent."""

    __slots__ = ("assistant", "calls", "index", "partial", "results", "waiting")

    def __init__(self, index: int) -> None:
        self.index = index
        self.partial: PartialMessage | None = None  # while the model streams
        self.assistant: AssistantMessage | None = None  # once in the history
        self.calls: list[CallState] = []
        self.results: list[ToolResultMessage] = []
        self.waiting: list[PendingCall] = []  # calls deferred for a decision


class _AfterHook:
    """An after_tool_execution call owed to a call that an interruption ended."""

    __slots__ = ("state",)

    def __init__(self, state: CallState) -> None:
        self.state = state


def user_messages(values: Iterable[object], what: str) -> list[UserMessage]:
    """``values`` (str or UserMessage) as scrubbed user messages; TypeError for others."""
    messages: list[UserMessage] = []
    for value in values:
        if isinstance(value, str):
            messages.append(scrub_message(UserMessage.text(value)))
        elif isinstance(value, UserMessage):
            messages.append(scrub_message(value))
        else:
            raise TypeError(f"{what} must be str or UserMessage, got {type(value).__name__}")
    return messages


def _with_unique_call_ids(message: AssistantMessage, loop_id: str, turn: int) -> AssistantMessage:
    """``message``, with an id for each tool call that has none or repeats one.

    Results are matched to calls by id; some servers send empty or repeated ids.
    """
    calls = message.tool_calls
    ids = [call.id for call in calls]
    if all(ids) and len(set(ids)) == len(ids):
        return message
    seen: set[str] = set()
    content: list[AssistantContent] = []
    for position, block in enumerate(message.content):
        if isinstance(block, ToolCall):
            if not block.id or block.id in seen:
                block = attrs.evolve(block, id=f"{loop_id}-{turn}-{position}")
            seen.add(block.id)
        content.append(block)
    return attrs.evolve(message, content=tuple(content))


class RunSetup(NamedTuple):
    """What a run's tools and configuration make, checked once: see :func:`check_setup`."""

    registry: ToolRegistry
    prun_queue: PrunQueue | None
    context_window: int  # 0 without compaction


def check_setup(tools: Iterable[AgentTool], config: AgentLoopConfig) -> RunSetup:
    """The run's tools by name, their prun queue, and the context window compaction
    measures against: the one check of a run's setup, made by the loop core for each
    run, and ahead of time by ``Agent`` and ``SubAgentTool`` so that a mistake fails
    where it is made, not at the first prompt.

    Raises:
        ValueError, TypeError: a tool is invalid or two share a name (as
            :class:`ToolRegistry` says), the prun tools share no queue, a tool has
            the final-result tool's name, or compaction is set for a model whose
            context window is unknown.
    """
    tools = tuple(tools)
    registry = ToolRegistry(tools)
    prun_queue = prun_queue_of(tools)
    if config.output_type is not None:
        check_output_name(registry, config.output_type)
    window = 0
    if config.compaction is not None:
        window = context_window_of(config.compaction, config.provider)
    return RunSetup(registry, prun_queue, window)


def prun_queue_of(tools: Iterable[object]) -> PrunQueue | None:
    """The queue the run's prun tools share, if it has any; ValueError if they share none."""
    queues: dict[int, PrunQueue] = {}
    for tool in tools:
        queue = tool_traits(tool).prun_queue
        if queue is not None:
            queues[id(queue)] = queue
    if len(queues) > 1:
        raise ValueError(
            "the prun tools must share one PrunQueue (build them with "
            "agentloop.tools.prun_tools()), so that their requests keep their order"
        )
    return next(iter(queues.values()), None)


# --------------------------------------------------------------------------- the core


class LoopCore:
    """The rules of one run over ``context``; see the module docstring.

    Args:
        context: The conversation; the run appends to it as it goes.
        config: The run's settings and hooks (the provider is the driver's).
        loop_id: Names the run in its events.
        parent_loop_id: The loop that started this one (sub-agents).
        now: Seconds on a monotonic clock (the driver's), for ``max_duration``.
        enclosing: The run whose tool call runs this one (a sub-agent's parent),
            if any. What this run spends counts in that run's usage too, and each
            of its model requests first passes that run's limits (and its
            enclosing run's, up the tree): a budget holds for a whole tree.

    Raises:
        ValueError, TypeError: as :class:`ToolRegistry` does for bad tools, or
            the prun tools share no queue.
    """

    __slots__ = (
        "_cost_carried",
        "_now",
        "_output_errors",
        "_output_failures",
        "_output_reader",
        "_output_shown",
        "_owed",
        "_requests",
        "_resume",
        "_started_at",
        "_tokens_used",
        "_turn_began",
        "_turn_index",
        "_turns_done",
        "_unannounced",
        "_usage_by_model",
        "config",
        "context",
        "context_window",
        "enclosing",
        "end_output",
        "ending",
        "hooks",
        "loop_id",
        "measured",
        "new_messages",
        "output",
        "output_update",
        "output_value",
        "parent_loop_id",
        "pending",
        "prun_queue",
        "registry",
        "stop",
        "suspended",
        "turn",
        "usage",
    )

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        *,
        loop_id: str,
        parent_loop_id: str | None = None,
        now: Callable[[], float],
        enclosing: LoopCore | None = None,
    ) -> None:
        self.enclosing = enclosing
        self.context = context
        self.config = config
        self.hooks = config.hooks
        self.registry, self.prun_queue, self.context_window = check_setup(context.tools, config)
        self.output: Output[Any] | None = config.output_type
        self.output_value: Any = _NO_OUTPUT  # the accepted answer
        self.end_output: Any = None  # AgentEnd.output
        self.output_update: OutputUpdate | None = None  # for the driver, after a delta
        self._output_failures = 0
        self._output_errors: dict[str, str] = {}  # final-result call id -> what is wrong
        self._output_reader: tuple[str, PartialJSON] | None = None  # (call id or "", reader)
        self._output_shown: Any = _NO_OUTPUT  # the partial value of the last OutputUpdate
        self.loop_id = loop_id
        self.parent_loop_id = parent_loop_id
        self._now = now
        self.new_messages: list[Message] = []
        self.usage = Usage()
        self._usage_by_model: dict[str, Usage] = {}
        self._requests = 0
        self.turn: _Turn | None = None
        self.pending: list[UserMessage] = []  # polled, not yet in the history
        # Events describing history already changed (and after hooks owed with them).
        self._owed: list[AgentEvent | _AfterHook] = []
        self._unannounced: list[UserMessage] = []
        self._turn_index = 0
        self._turn_began = 0.0
        self._turns_done = 0
        self._tokens_used = 0
        self._started_at = 0.0
        self.ending = False  # AgentEnd is being (or was) sent
        self.stop = _COMPLETED  # why the run ends; the last word is AgentEnd's
        self.suspended: Suspended | None = None  # where the run stopped to await approval
        self._resume: tuple[Suspended, dict[str, Decision]] | None = None
        self._cost_carried = 0.0  # what the run spent before it stopped to await approval
        # The last request sent and its size as the model counted it (compaction's gauge).
        self.measured: tuple[MessageView, int] | None = None

    @property
    def started_at(self) -> float:
        """When the run started, on the driver's clock (:meth:`start` sets it); for a run
        resumed after awaiting approval, as if it had not stopped: the wait is left out."""
        return self._started_at

    @property
    def turn_began(self) -> float:
        """When the current turn began, on the driver's clock (set before its
        ``TurnStart``); for a turn resumed after awaiting approval, as if it had not
        stopped."""
        return self._turn_began

    # ----------------------------------------------------------------- plumbing

    def _add(self, message: Message) -> None:
        self.context.append(message)
        self.new_messages.append(message)

    def _settle_owed(self, *items: AgentEvent | _AfterHook) -> Phase:
        """Deliver events for a history change already made (an abort re-sends what is left)."""
        owed = self._owed
        owed.extend(items)
        hook = self.hooks.after_tool_execution
        while owed:
            item = owed[0]
            if isinstance(item, _AfterHook):
                del owed[0]  # at most once, even if the driver is cancelled meanwhile
                if hook is not None:
                    call = item.state.call
                    yield CallHook(hook, (call.name, call.id, item.state.outcome.is_error))
            else:
                yield item
                del owed[0]  # dropped only once delivered

    def _announce(self, message: Message) -> Phase:
        loop_id = self.loop_id
        return self._settle_owed(
            MessageStart(loop_id=loop_id, message=message),
            MessageEnd(loop_id=loop_id, message=message),
        )

    def _poll(self, source: Callable[..., Any] | None) -> Phase:
        if source is None:
            yield CHECKPOINT
            return []
        messages = user_messages((yield CallHook(source, ())), "queued messages")
        self.pending.extend(messages)
        return messages

    def _poll_steering(self) -> Phase:
        return self._poll(self.config.get_steering_messages)

    # ----------------------------------------------------------------- the phases

    def start(self, prompts: Sequence[UserMessage]) -> Phase:
        """before_loop, ``AgentStart``, the prompts into the history. Returns False if vetoed
        (``AgentEnd`` has then been sent: the run is over)."""
        before_loop = self.hooks.before_loop
        if (
            before_loop is not None
            and (yield CallHook(before_loop, (self.context.view(),))) is False
        ):
            self.stop = AgentStop(StopKind.VETOED, "before_loop returned False")
            if self._resume is not None:  # nothing was decided: the calls still wait
                self.suspended = self._resume[0]
            yield from self._send_end()
            return False
        self._started_at = self._now()
        if self._resume is not None:
            waited = self._resume[0]
            self._turn_index = waited.turn_index + 1
            self._turns_done = waited.turns_done
            self._requests = waited.requests
            self._tokens_used = waited.tokens_used
            self._cost_carried = waited.cost
            self._started_at -= waited.elapsed  # the wait is not counted
        yield AgentStart(loop_id=self.loop_id, parent_loop_id=self.parent_loop_id)
        for prompt in prompts:
            prompt = self.context.stamp(prompt)
            self._add(prompt)
            self._unannounced.append(prompt)
        return True

    def finish(
        self, aborted: bool, deadline: AgentStop | None = None, call_text: str = DEADLINE_TEXT
    ) -> Phase:
        """Settle an abort or a passed ``deadline`` (its calls answered ``call_text``),
        send ``AgentEnd``, run after_loop. Returns the run's new messages."""
        if deadline is not None:
            self.stop = deadline
            yield from self._settle_owed(
                *self.settle(StopReason.ABORTED, deadline.message, call_text)
            )
        elif aborted:
            self.stop = AgentStop(StopKind.ABORTED, "the run was aborted")
            yield from self._settle_owed(*self.settle(StopReason.ABORTED, "Aborted", ABORTED_TEXT))
        yield from self._send_end()
        after_loop = self.hooks.after_loop
        if after_loop is not None:
            yield CallHook(after_loop, (tuple(self.new_messages), self.usage))
        return tuple(self.new_messages)

    def _send_end(self) -> Phase:
        # Set first: a consumer may see AgentEnd and leave before it is delivered, and the
        # run is over by then; only after_loop is left, and it must not be cancelled.
        self.ending = True
        self.end_output = (
            None
            if self.output_value is _NO_OUTPUT or self.stop.kind is not StopKind.COMPLETED
            else self.output_value
        )
        yield AgentEnd(
            loop_id=self.loop_id,
            messages=tuple(self.new_messages),
            usage=self.usage,
            stop_reason=self.stop,
            usage_by_model=dict(self._usage_by_model),
            output=self.end_output,
            suspended=self.suspended,
        )

    def turns(self) -> Phase:
        """The turns, until the model is done, a limit is reached, or a hook ends the run."""
        config = self.config
        hooks = self.hooks
        if self._resume is not None:
            yield from self._resume_turn(*self._resume)
        yield from self._poll_steering()
        while True:
            while True:
                limit = self._limit() if self.enclosing is None else self._tree_limit()
                if limit is not None:
                    self.stop = limit
                    stop = self.context.stamp(UserMessage.text(f"[Agent stopped: {limit.message}]"))
                    self._add(stop)
                    yield from self._announce(stop)
                    return
                if (
                    hooks.before_turn is not None
                    and (yield CallHook(hooks.before_turn, (self.context.view(), self._turn_index)))
                    is False
                ):
                    self.stop = AgentStop(StopKind.VETOED, "before_turn returned False")
                    return
                self._turn_began = self._now()
                yield TurnStart(loop_id=self.loop_id, turn_index=self._turn_index)
                turn = self.turn = _Turn(self._turn_index)
                self._turn_index += 1
                yield from self._inject()
                yield from self._maybe_compact()
                assistant = yield from self._stream(turn)
                if assistant.stop_reason in _FAILED_STOPS:
                    self._turns_done += 1
                    self._charge(assistant.usage, assistant.model)
                    for state in turn.calls:
                        yield from self._skip(state, NOT_RUN_TEXT, ToolOutcome.NOT_RUN)
                    yield from self._append_results(turn.calls)
                    if assistant.stop_reason is StopReason.ERROR:
                        error = assistant.error_message or "Unknown error"
                        self.stop = AgentStop(StopKind.ERROR, error, error=error)
                        if hooks.on_error is not None:
                            yield CallHook(hooks.on_error, (error,))
                    else:
                        self.stop = AgentStop(StopKind.ABORTED, "the model's reply was aborted")
                    yield from self._end_turn(turn)
                    return
                # The model call is paid for whatever happens to its tools (an abort, say).
                self._spend(assistant.usage, assistant.model)
                output = self.output
                answered = False
                if turn.calls:
                    if output is not None and output.mode == "tool":
                        answered = yield from self._final_result(turn, output)
                    if not answered:
                        yield from self._run_calls(turn)
                        if turn.waiting:
                            self._turns_done += 1
                            yield from self._suspend(turn)
                            return
                        yield from self._settle_owed(*self._apply_pruns(turn))
                self._turns_done += 1
                yield from self._end_turn(turn)
                if answered:
                    return
                if self._output_errors:
                    self._output_errors.clear()
                    if self._output_failed(output):
                        return
                if self.pending:
                    continue
                yield from self._poll_steering()
                # PAUSED: the API paused a long turn; asking again lets it go on.
                if (
                    not turn.calls
                    and not self.pending
                    and assistant.stop_reason is not StopReason.PAUSED
                ):
                    if output is None:
                        break
                    retry = self._text_answer(assistant, output)
                    if retry is None:
                        return
                    self.pending.append(retry)
            yield from self._poll(config.get_follow_up_messages)
            if not self.pending:
                return

    def count_tool_usage(self, usage: Usage, model: str) -> None:
        """Usage a tool paid for (``ToolContext.count_usage``): the run's, and its limits'
        (and the enclosing runs')."""
        self._spend(usage, model)

    def count_tool_request(self) -> str | None:
        """A model request a tool is about to make for the run (``ToolContext.count_request``).

        Limits are checked before every model request, the run's own and its
        tools': once one is reached, its sentence (the request must not be
        made); else None, and the request counts in ``max_requests``.
        """
        limit = self._tree_limit()
        if limit is not None:
            return limit.message
        self._count_request()
        return None

    def _spend(self, usage: Usage, model: str) -> None:
        """:meth:`_charge` ``usage`` and count its tokens against the limits."""
        if self.enclosing is None:  # the common case, in one step
            self.usage += usage
            by_model = self._usage_by_model
            by_model[model] = by_model.get(model, ZERO_USAGE) + usage
            self._tokens_used += usage.input + usage.output
            return
        self._charge(usage, model)
        self._count_tokens(usage)

    def _charge(self, usage: Usage, model: str) -> None:
        """Add ``usage`` to this run's and the enclosing runs'."""
        core: LoopCore | None = self
        while core is not None:
            core.usage += usage
            by_model = core._usage_by_model
            by_model[model] = by_model.get(model, ZERO_USAGE) + usage
            core = core.enclosing

    def _count_tokens(self, usage: Usage) -> None:
        """Count ``usage``'s tokens against this run's and the enclosing runs' limits."""
        tokens = usage.input + usage.output
        core: LoopCore | None = self
        while core is not None:
            core._tokens_used += tokens
            core = core.enclosing

    def _count_request(self) -> None:
        """A model request for this run: it counts here and in the enclosing runs."""
        core: LoopCore | None = self
        while core is not None:
            core._requests += 1
            core = core.enclosing

    def _tree_limit(self) -> AgentStop | None:
        """The first limit reached by this run or an enclosing run, if any."""
        core: LoopCore | None = self
        while core is not None:
            limit = core._limit()
            if limit is not None:
                return limit
            core = core.enclosing
        return None

    def _limit(self) -> AgentStop | None:
        limits = self.config.limits
        if limits.max_turns is not None and self._turns_done >= limits.max_turns:
            message = f"Max turns reached ({self._turns_done}/{limits.max_turns})"
            return AgentStop(StopKind.MAX_TURNS, message)
        if limits.max_total_tokens is not None and self._tokens_used >= limits.max_total_tokens:
            message = f"Max tokens reached ({self._tokens_used}/{limits.max_total_tokens})"
            return AgentStop(StopKind.MAX_TOKENS, message)
        if limits.max_duration is not None:
            elapsed = self._now() - self._started_at
            if elapsed >= limits.max_duration:
                message = f"Max duration reached ({elapsed:.0f}s/{limits.max_duration:.0f}s)"
                return AgentStop(StopKind.MAX_DURATION, message)
        if limits.max_cost is not None and self.usage.cost + self._cost_carried >= limits.max_cost:
            cost = self.usage.cost + self._cost_carried
            message = f"Max cost reached (${cost:.4f}/${limits.max_cost:.4f})"
            return AgentStop(StopKind.MAX_COST, message)
        if limits.max_requests is not None and self._requests >= limits.max_requests:
            message = f"Max requests reached ({self._requests}/{limits.max_requests})"
            return AgentStop(StopKind.MAX_REQUESTS, message)
        return None

    def _inject(self) -> Phase:
        """Announce the prompts (first turn) and add the queued user messages."""
        while self._unannounced:
            yield from self._announce(self._unannounced.pop(0))
        while self.pending:
            message = self.context.stamp(self.pending.pop(0))
            self._add(message)
            yield from self._announce(message)

    # ----------------------------------------------------------------- the model

    def _stream(self, turn: _Turn) -> Phase:
        config = self.config
        partial = PartialMessage()
        context = self.context
        request = model_request(
            config, context.system_prompt, context.working_context(), self.registry.definitions
        )
        yield MessageStart(loop_id=self.loop_id, message=partial.message())
        turn.partial = partial
        self._output_reader = None
        if self.enclosing is None:
            self._requests += 1
        else:
            self._count_request()
        final = yield AskModel(request)
        if self.output is not None:
            last = self._last_output_update()
            if last is not None:
                yield last
        if isinstance(final, ModelFailed):
            final = partial.interrupted(StopReason.ERROR, final.message)
        if not isinstance(final, AssistantMessage):
            raise TypeError(
                f"{type(config.provider).__name__}.stream returned {type(final).__name__}, "
                "expected an AssistantMessage"
            )
        usage = final.usage
        prompt_tokens = usage.input + usage.cache_read + usage.cache_write
        if final.stop_reason not in _FAILED_STOPS and prompt_tokens > 0:
            assert isinstance(request.messages, MessageView)
            self.measured = (request.messages, prompt_tokens)
        final = scrub_message(final)  # whatever a provider returns must encode again
        assistant = self.context.stamp(_with_unique_call_ids(final, self.loop_id, turn.index))
        self._add(assistant)
        # Register the calls in the same step: from here on they are in the history,
        # and an interruption must answer each of them.
        turn.calls = [CallState(call) for call in assistant.tool_calls]
        turn.assistant = assistant
        yield from self._settle_owed(MessageEnd(loop_id=self.loop_id, message=assistant))
        return assistant

    def delta(self, delta: StreamDelta) -> MessageUpdate:
        """The event for a piece the model streamed (during :class:`AskModel`)."""
        partial = self.turn.partial if self.turn is not None else None
        assert partial is not None, "delta() outside AskModel"
        kind = type(delta)
        if kind is TextDelta:
            assert isinstance(delta, TextDelta)
            if not delta.delta.isascii():  # ASCII is clean
                delta = scrub_delta(delta)
        elif kind is ToolCallDelta:
            assert isinstance(delta, ToolCallDelta)
            if not (
                delta.delta.isascii() and delta.tool_call_id.isascii() and delta.name.isascii()
            ):
                delta = scrub_delta(delta)
        else:
            delta = scrub_delta(delta)
        partial.apply(delta)
        if self.output is not None:
            self._read_output(delta, self.output)
        return MessageUpdate(loop_id=self.loop_id, message=partial.snapshot(), delta=delta)

    # ----------------------------------------------------------------- structured output

    def _final_result(self, turn: _Turn, output: Output[Any]) -> Phase:
        """Check the reply's final-result calls. Returns True if one was accepted: it
        is answered, the reply's other calls are answered without running, the run ends."""
        errors = self._output_errors
        for state in turn.calls:
            if state.call.name != output.name:
                continue
            value, error = output.check(state.call)
            if error is None:
                self.output_value = value
                for other in turn.calls:
                    if other is state:
                        yield from self._start(state)
                        yield from self.call_ended(
                            state,
                            ToolResult.text(OUTPUT_ACCEPTED_TEXT),
                            ToolOutcome.OUTPUT_ACCEPTED,
                        )
                    else:
                        yield from self._skip(other, OUTPUT_GIVEN_TEXT, ToolOutcome.OUTPUT_GIVEN)
                yield from self._append_results(turn.calls)
                return True
            errors[state.call.id] = error
        if errors:
            self._output_failures += 1
        return False

    def _output_failed(self, output: Output[Any] | None, error: str | None = None) -> bool:
        """After a failed answer: end the run if the retries are spent."""
        assert output is not None
        if self._output_failures <= output.retries:
            return False
        if error is None:
            error = "the final result did not match its schema"
        attempts = self._output_failures
        self.stop = AgentStop(
            StopKind.OUTPUT_FAILED,
            f"No valid output after {attempts} attempt{'s' if attempts != 1 else ''}: {error}",
            error=error,
        )
        return True

    def _text_answer(self, assistant: AssistantMessage, output: Output[Any]) -> UserMessage | None:
        """The model answered in text. Native mode: accept it if it parses. Otherwise
        the message asking again, or None when the run ends (answered, or out of retries)."""
        if output.mode == "native":
            value, error = output.parse(assistant.text)
            if error is None:
                self.output_value = value
                return None
            retry = (
                f"Your answer is not valid: {error}. Reply again with only the JSON answer, "
                "matching the schema."
            )
        else:
            error = f"the model answered in text without calling {output.name}"
            retry = f"Give your final answer by calling the {output.name} tool."
        self._output_failures += 1
        if self._output_failed(output, error):
            return None
        return UserMessage.text(retry)

    def _read_output(self, delta: StreamDelta, output: Output[Any]) -> None:
        """Feed a streamed piece of the answer to the partial reader; set output_update."""
        reader = self._output_reader
        if type(delta) is StreamRestart:
            self._output_reader = None
            return
        if output.mode == "tool":
            if type(delta) is not ToolCallDelta:
                return
            assert isinstance(delta, ToolCallDelta)
            if delta.name != output.name:
                return
            key = delta.tool_call_id
        else:
            if type(delta) is not TextDelta:
                return
            key = ""
        if reader is None:
            reader = self._output_reader = (key, PartialJSON())
            self._output_shown = _NO_OUTPUT
        elif reader[0] != key:
            return  # a second final-result call: the first one streams
        assert isinstance(delta, TextDelta | ToolCallDelta)
        partial = reader[1]
        partial.feed(delta.delta)
        if partial.due():  # parsing after each piece would be quadratic: see PartialJSON.due
            self.output_update = self._output_update(partial, output)

    def _last_output_update(self) -> OutputUpdate | None:
        """Once the reply streamed: the update the spaced-out ones left out, if any."""
        reader, output = self._output_reader, self.output
        if reader is None or output is None or not reader[1].changed:
            return None
        return self._output_update(reader[1], output)

    def _output_update(self, partial: PartialJSON, output: Output[Any]) -> OutputUpdate | None:
        """The update for the answer read so far, or None if it shows nothing new."""
        value = partial.value()
        if value is None or value == self._output_shown:
            return None
        self._output_shown = value
        return OutputUpdate(loop_id=self.loop_id, partial=output.partial(value))

    # ----------------------------------------------------------------- tool calls

    def _run_calls(self, turn: _Turn) -> Phase:
        """Run the turn's calls by the strategy; steering skips the ones not started."""
        strategy = self.config.strategy
        states = turn.calls
        if isinstance(strategy, Sequential):
            units = [[state] for state in states]
        elif isinstance(strategy, Batched):
            size = strategy.size
            units = [states[i : i + size] for i in range(0, len(states), size)]
        else:
            units = [states]
        for position, unit in enumerate(units):
            yield from self._run_unit(unit)
            steering = yield from self._poll_steering()
            if steering:
                skipped = [state for rest in units[position + 1 :] for state in rest]
                for state in skipped:
                    yield from self._skip(state, SKIPPED_TEXT, ToolOutcome.SKIPPED)
                yield from self._append_ready()
                return

    def _run_unit(self, unit: list[CallState]) -> Phase:
        """Check a unit's calls in order, run them together, record results in order."""
        runnable: list[tuple[CallState, ToolEntry, float | None]] = []
        tool_timeout = self.config.tool_timeout
        for state in unit:
            entry = yield from self._preflight(state)
            if entry is not None:
                timeout = entry.timeout if entry.timeout is not None else tool_timeout
                runnable.append((state, entry, timeout))
        if runnable:
            yield RunCalls(tuple(runnable))
        yield from self._append_ready()

    def _preflight(self, state: CallState) -> Phase:
        """Steps up to ToolExecutionStart. Returns the entry to run, or None."""
        call = state.call
        entry = self.registry.get(call.name)
        if entry is None and call.id in self._output_errors:
            assert self.output is not None
            yield from self._start(state)
            text = (
                f"Invalid output: {self._output_errors[call.id]}. "
                f"Call {self.output.name} again with the corrected answer."
            )
            yield from self.call_ended(state, ToolResult.text(text), ToolOutcome.INVALID_ARGUMENTS)
            return None
        turn = self.turn
        cut_off = (
            turn is not None
            and turn.assistant is not None
            and turn.assistant.stop_reason is StopReason.LENGTH
        )
        problem: ToolError | None = (
            ToolNotFound(call.name)
            if entry is None
            else check_arguments(call, entry.validator, cut_off=cut_off)
        )
        if problem is not None or entry is None:
            assert problem is not None
            yield from self._start(state)
            yield from self.call_ended(state, ToolResult.text(str(problem)), problem.outcome)
            return None
        permissions = self.config.permissions
        if permissions is not None:
            found = permissions.assess(
                entry.tool, call.name, call.id, copy_arguments(call.arguments)
            )
            if isinstance(found, str):
                yield from self._deny(state, found)
                return None
            if found is not None:
                approver = permissions.approver
                asks = None if isinstance(approver, Deferred) else approver
                yield ToolApprovalRequested(
                    loop_id=self.loop_id,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    args=call.arguments,
                    reason=found.reason,
                    rule=None if found.rule is None else str(found.rule),
                    deferred=asks is None,
                    subject=found.subject,
                )
                answer: Approve | Deny | Deferred = DEFER
                if asks is not None:
                    answer = yield AskApprover(asks, found, permissions.approval_timeout)
                    answer = answer_of(found, answer)
                if answer is DEFER:
                    assert self.turn is not None
                    self.turn.waiting.append(_pending_of(found))
                    return None
                assert not isinstance(answer, Deferred)
                if not (yield from self._decide(state, entry, answer, "approver")):
                    return None
        return (yield from self._admit(state, entry))

    def _deny(self, state: CallState, reason: str) -> Phase:
        """The call is refused: it is not run, and the model reads why."""
        yield from self._start(state)
        result = ToolResult.text(f"Permission denied: {reason}")
        yield from self.call_ended(state, result, ToolOutcome.DENIED)

    def _decide(self, state: CallState, entry: ToolEntry, decision: Decision, by: str) -> Phase:
        """Apply a decision on a call that needed approval; True if the call may run.

        Edited arguments replace the call's (the history keeps the model's) and
        are checked against the tool's schema like any call's.
        """
        call = decided = state.call
        reason: str | None = None
        if isinstance(decision, Deny):
            reason = decision.reason or not_approved(call.name, None)
        elif decision.arguments is not None:
            call = state.call = attrs.evolve(call, arguments=copy_arguments(decision.arguments))
        yield ToolApprovalDecided(
            loop_id=self.loop_id,
            tool_call_id=call.id,
            tool_name=call.name,
            approved=reason is None,
            arguments=call.arguments,
            reason=reason,
            by=by,
        )
        if reason is not None:
            yield from self._deny(state, reason)
            return False
        if call is not decided:  # edited: checked like any call's arguments
            problem = check_arguments(call, entry.validator, cut_off=False)
            if problem is not None:
                yield from self._start(state)
                yield from self.call_ended(state, ToolResult.text(str(problem)), problem.outcome)
                return False
        return True

    def _admit(self, state: CallState, entry: ToolEntry) -> Phase:
        """before_tool_execution, then ToolExecutionStart. Returns the entry to run, or None."""
        call = state.call
        hooks = self.hooks
        hook = hooks.before_tool_execution
        # Hooks and tools get copies: the arguments also live in the history and in events.
        if (
            hook is not None
            and (yield CallHook(hook, (call.name, call.id, copy_arguments(call.arguments))))
            is False
        ):
            state.result, state.outcome = ToolResult.text(VETOED_TEXT), ToolOutcome.VETOED
            state.ended = True
            return None
        state.after_hook_due = hooks.after_tool_execution is not None
        yield from self._start(state)
        return entry

    def _start(self, state: CallState) -> Phase:
        yield self._start_event(state)
        state.started = True

    def _start_event(self, state: CallState) -> ToolExecutionStart:
        call = state.call
        return ToolExecutionStart(
            loop_id=self.loop_id, tool_call_id=call.id, tool_name=call.name, args=call.arguments
        )

    def call_ended(self, state: CallState, result: ToolResult, outcome: ToolOutcome) -> Phase:
        """A call ended with ``result`` and ``outcome``: ``ToolExecutionEnd``, then its
        after hook if one is due."""
        result = scrub_result(result)  # tools may return text that cannot be encoded
        state.result, state.outcome = result, outcome
        yield self._end_event(state)
        state.ended = True
        if state.after_hook_due:
            state.after_hook_due = False
            hook = self.hooks.after_tool_execution
            if hook is not None:
                call = state.call
                yield CallHook(hook, (call.name, call.id, outcome.is_error))

    def _end_event(self, state: CallState) -> ToolExecutionEnd:
        result = state.result
        assert result is not None
        call = state.call
        return ToolExecutionEnd(
            loop_id=self.loop_id,
            tool_call_id=call.id,
            tool_name=call.name,
            result=result,
            is_error=state.outcome.is_error,
            child_loop_id=result.child_loop_id,
            outcome=state.outcome,
        )

    def update(self, state: CallState, partial: ToolResult) -> Phase:
        """A running call's partial result: its update hooks and ``ToolExecutionUpdate``."""
        if not isinstance(partial, ToolResult):
            raise TypeError(f"on_update takes a ToolResult, got {type(partial).__name__}")
        partial = scrub_result(partial)
        call = state.call
        text = partial.text_content
        hooks = self.hooks
        before = hooks.before_tool_execution_update
        if before is not None and (yield CallHook(before, (call.name, call.id, text))) is False:
            yield CHECKPOINT
            return
        yield ToolExecutionUpdate(
            loop_id=self.loop_id, tool_call_id=call.id, tool_name=call.name, partial_result=partial
        )
        after = hooks.after_tool_execution_update
        if after is not None:
            yield CallHook(after, (call.name, call.id, text))

    def queued(self, state: CallState, reason: str) -> ToolCallQueued:
        """The event for a call that waits for the budget or a conflicting call."""
        call = state.call
        return ToolCallQueued(
            loop_id=self.loop_id, tool_call_id=call.id, tool_name=call.name, reason=reason
        )

    def dequeued(self, state: CallState, waited: float) -> ToolCallDequeued:
        """The event for a queued call that starts."""
        call = state.call
        return ToolCallDequeued(
            loop_id=self.loop_id, tool_call_id=call.id, tool_name=call.name, waited=waited
        )

    def progress(self, state: CallState, text: str) -> ProgressMessage:
        """The event for a line of progress a running call reported."""
        call = state.call
        return ProgressMessage(
            loop_id=self.loop_id, tool_call_id=call.id, tool_name=call.name, text=scrub(str(text))
        )

    def _skip(self, state: CallState, text: str, outcome: ToolOutcome) -> Phase:
        yield from self._start(state)
        yield from self.call_ended(state, ToolResult.text(text), outcome)

    def _result_message(self, state: CallState) -> ToolResultMessage:
        """Append the call's result to the history (synchronously) and return the message."""
        assert state.result is not None
        message = ToolResultMessage(
            state.call.id,
            state.call.name,
            state.result.content,
            is_error=state.outcome.is_error,
            timestamp=self.context.next_timestamp(),
            child_loop_id=state.result.child_loop_id,
            outcome=state.outcome,
        )
        self._add(message)
        assert self.turn is not None
        self.turn.results.append(message)
        state.appended = True
        return message

    def _append_results(self, states: Iterable[CallState]) -> Phase:
        for state in states:
            yield from self._announce(self._result_message(state))

    def _append_ready(self) -> Phase:
        """Append the turn's results in the order of its calls, up to the first call
        still without one (a running or pending call holds back those after it)."""
        turn = self.turn
        assert turn is not None
        for state in turn.calls:
            if state.appended:
                continue
            if state.result is None:
                return
            yield from self._announce(self._result_message(state))

    # ----------------------------------------------------------------- approvals

    def resume_with(self, suspended: Suspended, decisions: dict[str, Decision]) -> None:
        """Before :meth:`start`: the run goes on from ``suspended`` (a stop that awaited
        approval) with ``decisions``, one for each pending call (checked by
        :func:`~agentloop._approval.check_decisions`)."""
        self._resume = (suspended, decisions)

    def _suspend(self, turn: _Turn) -> Phase:
        """Calls wait for decisions: hold back the results made so far, end the turn
        and the run, and say where it stopped (``AgentEnd.suspended``)."""
        held = tuple(
            ToolResultMessage(
                state.call.id,
                state.call.name,
                state.result.content,
                is_error=state.outcome.is_error,
                timestamp=0,  # stamped when it joins the history
                child_loop_id=state.result.child_loop_id,
                outcome=state.outcome,
            )
            for state in turn.calls
            if not state.appended and state.result is not None
        )
        waiting = tuple(turn.waiting)
        # Steering taken during the turn cannot join the history before the pending
        # calls' results: it waits with them, and joins after them on resume.
        queued = tuple(self.pending)
        self.pending.clear()
        self.suspended = Suspended(
            pending=waiting,
            results=held,
            turn_index=turn.index,
            turns_done=self._turns_done,
            requests=self._requests,
            tokens_used=self._tokens_used,
            cost=self.usage.cost + self._cost_carried,
            elapsed=self._now() - self._started_at,
            turn_elapsed=self._now() - self._turn_began,
            queued=queued,
        )
        self.context.suspended = self.suspended
        names = ", ".join(f"{call.tool_name} ({call.tool_call_id})" for call in waiting)
        self.stop = AgentStop(StopKind.AWAITING_APPROVAL, f"Awaiting approval: {names}")
        yield from self._end_turn(turn)

    def _resume_turn(self, suspended: Suspended, decisions: dict[str, Decision]) -> Phase:
        """The turn a stop for approval left open: the decided calls run (or are
        refused), then every result joins the history in the order of the calls."""
        self._resume = None
        messages = self.context.messages
        position = len(messages) - 1
        while position >= 0 and isinstance(messages[position], ToolResultMessage):
            position -= 1
        assistant = messages[position] if position >= 0 else None
        waiting_ids = set(suspended.call_ids)
        if not isinstance(assistant, AssistantMessage) or not waiting_ids <= {
            call.id for call in assistant.tool_calls
        }:
            raise ValueError("the history does not end with the reply whose calls await approval")
        answered = {
            message.tool_call_id: message
            for message in messages[position + 1 :]
            if isinstance(message, ToolResultMessage)
        }
        self.context.suspended = None
        turn = self.turn = _Turn(suspended.turn_index)
        turn.assistant = assistant
        self._turn_began = self._now() - suspended.turn_elapsed
        yield TurnStart(loop_id=self.loop_id, turn_index=turn.index)
        held = {message.tool_call_id: message for message in suspended.results}
        turn.calls = [CallState(call) for call in assistant.tool_calls]
        for state in turn.calls:
            done = answered.get(state.call.id)
            if done is not None:  # in the history already
                state.result = ToolResult(done.content, child_loop_id=done.child_loop_id)
                state.outcome = done.outcome
                state.started = state.ended = state.appended = True
                turn.results.append(done)
                continue
            message = held.get(state.call.id)
            if message is not None:
                state.result = ToolResult(message.content, child_loop_id=message.child_loop_id)
                state.outcome = message.outcome
                state.started = state.ended = True
        self.pending[:0] = suspended.queued  # after this turn's results, as they would have
        waiting = {call.tool_call_id: call for call in suspended.pending}
        # Every decision first, in the calls' order: each is on record (a journal) before
        # any approved call runs, so a crash loses none. Then the approved calls run by
        # the strategy, as _run_unit runs a reply's.
        approved: list[tuple[CallState, ToolEntry]] = []
        for state in turn.calls:
            decision = decisions.get(state.call.id)
            if decision is None:
                continue
            if isinstance(decision, Deny) and not decision.reason:
                pending = waiting.get(state.call.id)
                subject = None if pending is None else pending.subject
                decision = Deny(decision.tool_call_id, not_approved(state.call.name, subject))
            entry = self.registry.get(state.call.name)
            if entry is None:
                yield from self._start(state)
                problem = ToolNotFound(state.call.name)
                yield from self.call_ended(state, ToolResult.text(str(problem)), problem.outcome)
                continue
            if (yield from self._decide(state, entry, decision, "decision")):
                approved.append((state, entry))
        strategy = self.config.strategy
        if isinstance(strategy, Sequential):
            units = [[item] for item in approved]
        elif isinstance(strategy, Batched):
            size = strategy.size
            units = [approved[i : i + size] for i in range(0, len(approved), size)]
        else:
            units = [approved] if approved else []
        yield from self._append_ready()
        tool_timeout = self.config.tool_timeout
        for unit in units:
            runnable: list[tuple[CallState, ToolEntry, float | None]] = []
            for state, entry in unit:
                admitted = yield from self._admit(state, entry)
                if admitted is not None:
                    timeout = entry.timeout if entry.timeout is not None else tool_timeout
                    runnable.append((state, entry, timeout))
            if runnable:
                yield RunCalls(tuple(runnable))
            yield from self._append_ready()
        for state in turn.calls:  # a call the decisions left out cannot stay unanswered
            if state.result is None:
                yield from self._deny(state, "no decision was given for this call")
        yield from self._append_ready()
        yield from self._settle_owed(*self._apply_pruns(turn))
        yield from self._end_turn(turn)

    # ----------------------------------------------------------------- context

    def _apply_pruns(self, turn: _Turn) -> list[AgentEvent | _AfterHook]:
        """Apply the waiting prun requests, in order; return their events. Synchronous."""
        if self.prun_queue is None:
            return []
        events: list[AgentEvent | _AfterHook] = []
        order = {state.call.id: position for position, state in enumerate(turn.calls)}
        requests = self.prun_queue.take_all()  # calls may finish in any order: use the model's
        requests.sort(key=lambda request: order.get(request.tool_call_id or "", len(order)))
        for request in requests:
            record = self.context.prun(request, keep=turn.assistant)
            events.append(
                PrunApplied(
                    loop_id=self.loop_id,
                    record=record,
                    messages_removed=len(record.pruned_timestamps),
                )
            )
        return events

    def _overhead(self) -> int:
        """Estimated tokens of the request besides its messages: system prompt and tools."""
        definitions = [
            {"name": d.name, "description": d.description, "parameters": d.parameters}
            for d in offered_tools(self.registry.definitions, self.output)
        ]
        text = self.context.system_prompt + json.dumps(definitions, ensure_ascii=False)
        return self.context.token_estimator(UserMessage.text(text))

    def _maybe_compact(self) -> Phase:
        compaction = self.config.compaction
        if compaction is None:
            return
        overhead = self._overhead()
        measured = None
        if self.measured is not None:
            measured = self.context.measured_tokens(*self.measured)
        estimated = measured or overhead + self.context.working_tokens()
        if estimated <= compaction.threshold * self.context_window:
            return
        count = len(self.context.working_context())
        hook = self.hooks.before_compaction_start
        if hook is not None and (yield CallHook(hook, (estimated, count))) is False:
            return
        yield CompactionStarted(
            loop_id=self.loop_id,
            estimated_tokens=estimated,
            message_count=count,
            context_window=self.context_window,
        )
        outcome = yield Compact(compaction, overhead, measured)
        yield from self._settle_owed(
            CompactionEnded(
                loop_id=self.loop_id,
                record=outcome.record,
                messages_before=outcome.messages_before,
                messages_after=outcome.messages_after,
                estimated_tokens_before=outcome.tokens_before,
                estimated_tokens_after=outcome.tokens_after,
                summary_error=outcome.summary_error,
            )
        )
        after = self.hooks.after_compaction_end
        if after is not None:
            yield CallHook(after, (outcome.tokens_before, outcome.tokens_after))

    def _end_turn(self, turn: _Turn) -> Phase:
        assert turn.assistant is not None
        yield self._turn_end(turn)
        self.turn = None
        after_turn = self.hooks.after_turn
        if after_turn is not None:
            yield CallHook(after_turn, (self.context.view(), turn.assistant.usage))

    def _turn_end(self, turn: _Turn) -> TurnEnd:
        assert turn.assistant is not None
        return TurnEnd(
            loop_id=self.loop_id,
            turn_index=turn.index,
            message=turn.assistant,
            tool_results=tuple(turn.results),
            usage=turn.assistant.usage,
        )

    # ----------------------------------------------------------------- interruption

    def counts(self) -> RunCounts:
        """What the limits count so far, to carry into a continuation of this run."""
        return RunCounts(
            self._turn_index,
            self._turns_done,
            self.usage,
            self._tokens_used,
            self._started_at,
            self._requests,
            dict(self._usage_by_model),
        )

    def carry(self, counts: RunCounts) -> None:
        """Go on counting from ``counts`` (after :meth:`start`): a run continued elsewhere."""
        self._turn_index = counts.turn_index
        self._turns_done = counts.turns_done
        self.usage = counts.usage
        self._tokens_used = counts.tokens_used
        self._started_at = counts.started_at
        self._requests = counts.requests
        self._usage_by_model = dict(counts.usage_by_model)

    def interrupted(self, cancelled: bool, description: str) -> None:
        """The run stops where it is (the driver was cancelled, or ``description``
        failed): make the history whole. Synchronous; sends nothing."""
        if cancelled:
            self.stop = AgentStop(StopKind.ABORTED, "the run was cancelled")
            self.settle(StopReason.ABORTED, "Cancelled", ENDED_TEXT)
        else:
            self.stop = AgentStop(StopKind.ERROR, description, error=description)
            self.settle(StopReason.ERROR, description, ENDED_TEXT)

    def settle(
        self, stop_reason: StopReason, error_message: str, call_text: str
    ) -> list[AgentEvent | _AfterHook]:
        """Make the history whole after an interruption; return what says so.

        Synchronous, so it completes even when the run is being cancelled. Every
        message the run took (prompts, queued messages) ends up in the history;
        the turn in progress gets its assistant message (marked ``stop_reason``)
        and every one of its tool calls gets exactly one result. Idempotent.
        """
        loop_id = self.loop_id
        events = list(self._owed)
        self._owed.clear()
        for prompt in self._unannounced:
            events += [
                MessageStart(loop_id=loop_id, message=prompt),
                MessageEnd(loop_id=loop_id, message=prompt),
            ]
        self._unannounced.clear()
        turn, self.turn = self.turn, None
        if turn is not None:
            old = turn.assistant
            turn_events = self._settle_turn(turn, stop_reason, error_message, call_text)
            new = turn.assistant
            if old is not None and new is not None and new is not old:
                # A MessageEnd still owed for the replaced message now describes its final form.
                events = [
                    MessageEnd(loop_id=loop_id, message=new)
                    if isinstance(event, MessageEnd) and event.message is old
                    else event
                    for event in events
                ]
            events += turn_events
        for message in self.pending:
            message = self.context.stamp(message)
            self._add(message)
            events += [
                MessageStart(loop_id=loop_id, message=message),
                MessageEnd(loop_id=loop_id, message=message),
            ]
        self.pending.clear()
        return events

    def _settle_turn(
        self, turn: _Turn, stop_reason: StopReason, error_message: str, call_text: str
    ) -> list[AgentEvent | _AfterHook]:
        loop_id = self.loop_id
        events: list[AgentEvent | _AfterHook] = []
        if turn.assistant is None:
            if turn.partial is None:
                turn.partial = PartialMessage()
                events.append(MessageStart(loop_id=loop_id, message=turn.partial.message()))
            message = self.context.stamp(turn.partial.interrupted(stop_reason, error_message))
            self._add(message)
            turn.assistant = message
            events.append(MessageEnd(loop_id=loop_id, message=message))
        elif stop_reason is StopReason.ABORTED:
            old = turn.assistant
            if old.stop_reason not in _FAILED_STOPS:
                new = AssistantMessage(
                    old.content,
                    StopReason.ABORTED,
                    model=old.model,
                    provider=old.provider,
                    usage=old.usage,
                    timestamp=old.timestamp,
                    error_message=error_message,
                )
                self._replace(old, new)
                turn.assistant = new
        for state in turn.calls:
            if state.result is None:
                state.result, state.outcome = ToolResult.text(call_text), ToolOutcome.CANCELLED
            if not state.ended:
                if not state.started:
                    events.append(self._start_event(state))
                events.append(self._end_event(state))
                state.started = state.ended = True
            if state.after_hook_due:  # run after its end event, if the run goes on
                state.after_hook_due = False
                events.append(_AfterHook(state))
        self.turn = turn  # _result_message records into the current turn
        for state in turn.calls:
            if not state.appended:
                answer = self._result_message(state)
                events += [
                    MessageStart(loop_id=loop_id, message=answer),
                    MessageEnd(loop_id=loop_id, message=answer),
                ]
        events += self._apply_pruns(turn)
        self.turn = None
        events.append(self._turn_end(turn))
        return events

    def _replace(self, old: Message, new: Message) -> None:
        self.context.replace(old, new)
        for position in range(len(self.new_messages) - 1, -1, -1):
            if self.new_messages[position] is old:
                self.new_messages[position] = new
                break


def _pending_of(request: PermissionRequest) -> PendingCall:
    return PendingCall(
        tool_call_id=request.tool_call_id,
        tool_name=request.tool_name,
        arguments=request.arguments,
        reason=request.reason,
        rule=None if request.rule is None else str(request.rule),
        subject=request.subject,
    )


def copy_arguments(value: Any) -> Any:
    """A deep copy of JSON-like arguments (much faster than copy.deepcopy)."""
    if isinstance(value, dict):
        return {key: copy_arguments(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_arguments(item) for item in value]
    return value
