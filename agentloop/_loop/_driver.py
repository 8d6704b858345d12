"""The trio driver: carries the loop core's actions out with nurseries, scopes and channels.

And the two low-level entry points, :func:`agent_loop` and
:func:`agent_loop_continue`. Who calls whom::

    agent_loop ─▶ TrioDriver.run ─▶ LoopCore.start / turns / finish   (generators)
                        │                 │ yields an action
                        │◀────────────────┘
                        ├─ AgentEvent ─▶ the memory channel (waits for the consumer)
                        ├─ CallHook   ─▶ the hook, plain or async
                        ├─ AskModel   ─▶ provider.stream(request, on_delta)
                        │                    on_delta ─▶ LoopCore.delta ─▶ the channel
                        ├─ RunCalls   ─▶ a nursery: run_tool_call per call
                        │                    ─▶ LoopCore.call_ended (driven in the call's task)
                        └─ Compact    ─▶ compact(context, ...)

The rules are the core's; this module decides nothing about the conversation.
"""

from __future__ import annotations

import inspect
import logging
import math
import os
from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Any

import trio

from .. import _telemetry, _trace_context
from .._approval import ApprovalError, Decision, Deny, Suspended, check_decisions
from .._context import AgentContext, compact
from .._events import (
    AgentEvent,
    AgentStop,
    MessageEnd,
    StopKind,
    StreamDelta,
    StreamRestart,
    TurnEnd,
    TurnStart,
)
from .._tool import (
    NO_CLAIM,
    AgentTool,
    Scheduler,
    Ticket,
    ToolCancelled,
    ToolContext,
    ToolEntry,
    ToolError,
    ToolResult,
    ToolTimeout,
    current_scheduler,
    describe_exception,
    format_duration,
    use_scheduler,
)
from .._types import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolOutcome,
    ToolResultMessage,
    UserMessage,
)
from .._util import HookFailure, raise_single, require_trio, single_leaf
from ..providers import ProviderError
from ._config import AgentLoopConfig
from ._core import DEADLINE_TEXT, TURN_DEADLINE_TEXT, LoopCore, copy_arguments, user_messages
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
)

__all__ = [
    "TrioDriver",
    "agent_loop",
    "agent_loop_continue",
    "ask_approver",
    "check_not_waiting",
    "resume_of",
    "run_tool_call",
]

log = logging.getLogger("agentloop.loop")

#: Scheduler passes a flush waits at most for the consumer to catch up.
_FLUSH_PASSES = 4


async def run_tool_call(
    tool: AgentTool,
    call: ToolCall,
    timeout: float | None,  # noqa: ASYNC109 - the call's own deadline, on its own scope
    *,
    loop_id: str | None = None,
    on_update: Any = None,
    on_progress: Any = None,
    on_usage: Any = None,
    on_request: Any = None,
) -> tuple[ToolResult, ToolOutcome]:
    """Run one tool call under trio: ``(result, outcome)``, never an ``Exception``.

    The call runs in its own cancel scope whose deadline is ``timeout``; a
    timeout becomes :class:`ToolTimeout`, the scope cancelled by the tool a
    :class:`ToolCancelled`, a :class:`ToolError` its message (and its
    ``outcome``), any other ``Exception`` its type and message (``ERROR``).
    ``BaseException``\\ s (``Cancelled`` from outside, ``KeyboardInterrupt``, a
    hook's failure) propagate.
    """
    deadline = math.inf if timeout is None else trio.current_time() + timeout
    scope = trio.CancelScope(deadline=deadline)
    ctx = ToolContext(
        call.id, call.name, scope, on_update, on_progress, loop_id, on_usage, on_request
    )
    result: ToolResult | None = None
    error: BaseException | None = None
    try:
        with scope:
            result = await tool.execute(copy_arguments(call.arguments), ctx)
    except* Exception as group:
        error = single_leaf(group) or group
    if scope.cancel_called and (scope.cancelled_caught or error is not None):
        if timeout is not None and trio.current_time() >= deadline:
            error = ToolTimeout(timeout)
        elif scope.cancelled_caught:
            error = ToolCancelled()
    if error is None and not isinstance(result, ToolResult):
        error = ToolError(
            f"Tool {call.name!r} returned {type(result).__name__}, expected a ToolResult"
        )
    if error is None:
        assert isinstance(result, ToolResult)
        return result, ToolOutcome.OK
    if isinstance(error, ToolError):
        failure = ToolResult(
            (TextContent(str(error)),), details=error.details, child_loop_id=error.child_loop_id
        )
        outcome = error.outcome  # a subclass's own outcome: an error one, or ERROR
        return failure, outcome if outcome.is_error else ToolOutcome.ERROR
    log.debug("tool %r raised", call.name, exc_info=error)
    return ToolResult.text(describe_exception(error)), ToolOutcome.ERROR


class _Reporter:
    """A running call's ``on_update`` and ``on_progress``: they go through the core."""

    __slots__ = ("driver", "state")

    def __init__(self, driver: TrioDriver, state: CallState) -> None:
        self.driver = driver
        self.state = state

    async def update(self, partial: ToolResult) -> None:
        if not isinstance(partial, ToolResult):
            raise TypeError(f"on_update takes a ToolResult, got {type(partial).__name__}")
        try:
            await self.driver.drive(self.driver.core.update(self.state, partial))
        except Exception as error:
            # A hook's exception, wrapped to pass through the tool's code as itself.
            raise HookFailure(error) from error
        await self.driver.flush()  # the consumer sees the update before the tool goes on

    async def progress(self, text: str) -> None:
        await self.driver.emit(self.driver.core.progress(self.state, text))
        await self.driver.flush()


#: The run whose tool calls run in this task: a loop started inside one of them (a
#: sub-agent's) counts its spending there and passes its limits too.
_enclosing: ContextVar[LoopCore | None] = ContextVar("agentloop_enclosing_run", default=None)


class TrioDriver:
    """Runs a :class:`~._core.LoopCore` under trio, sending its events to ``send_channel``.

    Internal: use :func:`agent_loop` or :class:`~agentloop.Agent`.
    """

    __slots__ = (
        "_deadline",
        "_journal",
        "_model_span",
        "_nowait",
        "_queued",
        "_receiver_gone",
        "_run_deadline",
        "_send",
        "_tel",
        "_traced_calls",
        "_turn_timeout",
        "abort_scope",
        "agent_name",
        "core",
        "scheduler",
    )

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        send_channel: trio.MemorySendChannel[AgentEvent],
        *,
        loop_id: str | None = None,
        parent_loop_id: str | None = None,
        abort_scope: trio.CancelScope | None = None,
        agent_name: str | None = None,
    ) -> None:
        self.core = LoopCore(
            context,
            config,
            loop_id=loop_id or os.urandom(16).hex(),
            parent_loop_id=parent_loop_id,
            now=trio.current_time,
            enclosing=_enclosing.get(),
        )
        self.abort_scope = abort_scope if abort_scope is not None else trio.CancelScope()
        self._send = send_channel
        # A memory channel takes an event without a trip through the scheduler.
        self._nowait = isinstance(send_channel, trio.MemorySendChannel)
        self._queued = False  # events queued since the consumer last had a chance to run
        self._journal = config.journal
        self._receiver_gone = False
        self.scheduler: Scheduler | None = None  # the tree's, found when the run starts
        schedule = config.schedule
        self._turn_timeout = None if schedule is None else schedule.turn_timeout
        self._run_deadline = math.inf
        self._deadline = trio.CancelScope()  # the run's deadline, and each turn's
        loop_id = self.core.loop_id
        self.agent_name = agent_name or _name_of(loop_id)
        self._tel: _telemetry.Telemetry | None = None  # tracing, read when the run starts
        self._model_span: Any = None
        self._traced_calls: set[str] = set()

    @property
    def ending(self) -> bool:
        """Whether ``AgentEnd`` is being (or was) sent: the run is over but for after_loop."""
        return self.core.ending

    async def run(self, prompts: Sequence[UserMessage]) -> tuple[Message, ...]:
        """Run to the end; the messages the run added. Raises what the run raised."""
        tel = self._tel = _telemetry.current
        if tel is None:
            return await self._run(prompts)
        core = self.core
        span = tel.run_started(core.loop_id, self.agent_name, core.parent_loop_id)
        try:
            messages = await self._run(prompts)
        except BaseException as error:
            kind = StopKind.ABORTED if isinstance(error, trio.Cancelled) else StopKind.ERROR
            text = describe_exception(error)
            tel.run_ended(span, AgentStop(kind, text, error=text), core.usage)
            raise
        tel.run_ended(span, core.stop, core.usage)
        return messages

    async def _run(self, prompts: Sequence[UserMessage]) -> tuple[Message, ...]:
        core = self.core
        # The agent tree shares one scheduler: a sub-agent's loop finds its parent's.
        scheduler = current_scheduler()
        token = _enclosing.set(core)  # for the loops its tool calls start
        with use_scheduler(scheduler or Scheduler(core.config.schedule)) as self.scheduler:
            try:
                # One pass of the scheduler first: tasks started with this run (a sub-agent's
                # watcher, say) are in place before the run does anything.
                await trio.lowlevel.checkpoint()
                if not await self.drive(core.start(prompts)):
                    return ()
                schedule = core.config.schedule
                if schedule is not None and schedule.run_timeout is not None:
                    # From when the run started: a run resumed after awaiting approval
                    # has the time it ran before the stop counted, not the wait.
                    self._run_deadline = core.started_at + schedule.run_timeout
                    self._deadline.deadline = self._run_deadline
                with self.abort_scope, self._deadline:
                    await self.drive(core.turns())
                deadline: AgentStop | None = None
                text = DEADLINE_TEXT
                if self._deadline.cancelled_caught:
                    deadline, text = self._deadline_passed()
                messages: tuple[Message, ...] = await self.drive(
                    core.finish(self.abort_scope.cancelled_caught, deadline, text)
                )
                return messages
            except BaseException as error:
                core.interrupted(isinstance(error, trio.Cancelled), describe_exception(error))
                raise
            finally:
                _enclosing.reset(token)

    def _deadline_passed(self) -> tuple[AgentStop, str]:
        """Which deadline passed: the run's, or the turn's."""
        schedule = self.core.config.schedule
        assert schedule is not None
        if trio.current_time() >= self._run_deadline:
            assert schedule.run_timeout is not None
            message = f"Deadline reached ({format_duration(schedule.run_timeout)})"
            return AgentStop(StopKind.DEADLINE, message), DEADLINE_TEXT
        assert schedule.turn_timeout is not None
        message = f"Turn deadline reached ({format_duration(schedule.turn_timeout)})"
        return AgentStop(StopKind.DEADLINE, message), TURN_DEADLINE_TEXT

    async def drive(self, phase: Phase) -> Any:
        """Carry out a phase's actions until it returns; return what it returns."""
        outcome: Any = None
        try:
            while True:
                action = phase.send(outcome)
                if isinstance(action, AgentEvent):
                    if self._turn_timeout is not None:
                        self._time_turn(action)
                    if self._tel is not None:
                        self._trace_event(action)
                    await self.emit(action)
                    outcome = None
                elif isinstance(action, CallHook):
                    await self.flush()
                    outcome = action.hook(*action.args)
                    if inspect.isawaitable(outcome):
                        outcome = await outcome
                else:
                    outcome = await self._perform(action)
        except StopIteration as stop:
            return stop.value

    def _trace_event(self, event: AgentEvent) -> None:
        """A tool call answered without running (refused, skipped, vetoed...): its span."""
        if type(event) is MessageEnd and isinstance(event.message, ToolResultMessage):
            message = event.message
            if message.tool_call_id in self._traced_calls:
                self._traced_calls.discard(message.tool_call_id)
            elif self._tel is not None:
                core = self.core
                name = message.tool_name
                known = core.registry.get(name) is not None or (
                    core.output is not None and core.output.name == name
                )
                self._tel.tool_not_run(message, self._call_of(message.tool_call_id), known)

    def _call_of(self, call_id: str) -> ToolCall | None:
        turn = self.core.turn
        if turn is not None:
            for state in turn.calls:
                if state.call.id == call_id:
                    return state.call
        return None

    def _time_turn(self, event: AgentEvent) -> None:
        """A turn starts: its deadline is the nearer of the run's and its own; it ends:
        the run's again."""
        if type(event) is TurnStart:
            assert self._turn_timeout is not None
            turn = self.core.turn_began + self._turn_timeout
            self._deadline.deadline = min(self._run_deadline, turn)
        elif type(event) is TurnEnd:
            self._deadline.deadline = self._run_deadline

    async def emit(self, event: AgentEvent) -> None:
        """Queue an event; wait only while the consumer is behind. A closed receiver is ignored.

        While the channel has room the event is queued without a trip through
        trio's scheduler (a cancel point all the same, so an abort lands here as
        in ``send``); :meth:`flush` lets the consumer take what was queued
        before the loop does anything the consumer could see happen.
        """
        if self._journal is not None:
            self._journal(event)  # before anything else happens: a crash keeps it
        if self._receiver_gone:
            await trio.lowlevel.checkpoint()
            return
        send = self._send
        if self._nowait:
            await trio.lowlevel.checkpoint_if_cancelled()
            try:
                send.send_nowait(event)
                self._queued = True
                return
            except trio.WouldBlock:
                pass
            except trio.BrokenResourceError:
                self._receiver_gone = True
                return
        self._queued = False
        try:
            await send.send(event)
        except trio.BrokenResourceError:
            self._receiver_gone = True

    async def flush(self) -> None:
        """Let the consumer take the events queued so far.

        Passes through the scheduler until the consumer has taken them all and
        waits for more (trio runs the tasks of a pass in either order), at most
        a few passes: a consumer busy elsewhere slows the loop only when the
        buffer is full, as with ``send``.
        """
        if not self._queued:
            return
        self._queued = False
        statistics = self._send.statistics
        for _ in range(_FLUSH_PASSES):
            await trio.lowlevel.checkpoint()
            now = statistics()
            if now.current_buffer_used == 0 and (
                now.tasks_waiting_receive > 0 or now.open_receive_channels == 0
            ):
                return

    async def _on_delta(self, delta: StreamDelta) -> None:
        """Send the update for a streamed piece."""
        core = self.core
        if self._tel is not None and type(delta) is StreamRestart:
            assert isinstance(delta, StreamRestart)
            self._tel.model_retried(self._model_span, delta.attempt, delta.delay, delta.error)
        await self.emit(core.delta(delta))
        if core.output_update is not None:
            update, core.output_update = core.output_update, None
            await self.emit(update)

    async def _perform(self, action: object) -> Any:
        if action is CHECKPOINT:
            self._queued = False
            await trio.lowlevel.checkpoint()
            return None
        if not isinstance(action, RunCalls):  # a tool's first wait lets the consumer in
            await self.flush()
        if isinstance(action, AskModel):
            if self._tel is not None:
                return await self._ask_traced(action, self._tel)
            try:
                return await self.core.config.provider.stream(action.request, self._on_delta)
            except ProviderError as error:
                return ModelFailed(str(error))
        if isinstance(action, RunCalls):
            calls = action.calls
            # Places are taken in the order of the model's calls, before any runs:
            # who waits for whom does not depend on the order tasks are scheduled in.
            places = [self._place(state, entry) for state, entry, _ in calls]
            try:
                for (state, _, _), place in zip(calls, places, strict=True):
                    if isinstance(place, _Place) and place.reason is not None:
                        await self.emit(self.core.queued(state, place.reason))
                if len(calls) == 1:
                    await self._call(*calls[0], places[0])
                else:
                    async with trio.open_nursery() as nursery:
                        for (state, entry, timeout), place in zip(calls, places, strict=True):
                            nursery.start_soon(self._call, state, entry, timeout, place)
            finally:
                for place in places:  # the places of calls cancelled before they ran
                    if isinstance(place, _Place):
                        place.scheduler.release(place.ticket)
            return None
        if isinstance(action, AskApprover):
            return await ask_approver(action)
        if isinstance(action, Compact):
            core = self.core
            return await compact(
                core.context,
                action.config,
                provider=core.config.provider,
                overhead=action.overhead,
                measured=action.measured,
            )
        raise AssertionError(f"unknown action {action!r}")  # pragma: no cover

    async def _ask_traced(
        self, action: AskModel, tel: _telemetry.Telemetry
    ) -> AssistantMessage | ModelFailed:
        provider = self.core.config.provider
        span = self._model_span = tel.model_started(provider, action.request)
        try:
            with _trace_context.reading_response() as response:
                message = await provider.stream(action.request, self._on_delta)
        except ProviderError as error:
            tel.model_ended(span, None, error)
            return ModelFailed(str(error))
        except BaseException as error:
            tel.model_ended(span, None, error)
            raise
        finally:
            self._model_span = None
        tel.model_ended(span, message, None, response)
        return message

    def _place(self, state: CallState, entry: ToolEntry) -> _Place | ToolResult | None:
        """The call's place with the scheduler (taken, or queued), or the failure of its
        ``resources``, or None for a call that needs no place."""
        scheduler = self.scheduler
        if scheduler is None:
            return None
        claim = NO_CLAIM
        if entry.resources is not None:
            try:
                claim = entry.claim(state.call.arguments)
            except Exception as error:
                return ToolResult.text(f"Cannot schedule the call: {describe_exception(error)}")
        if not claim.budget and claim.trivial:
            return None
        call = state.call
        ticket = Ticket(call.name, call.id, self.core.loop_id, claim)
        return _Place(scheduler, ticket, scheduler.try_start(ticket))

    async def _call(
        self,
        state: CallState,
        entry: ToolEntry,
        timeout: float | None,  # noqa: ASYNC109 - passed to run_tool_call
        place: _Place | ToolResult | None,
    ) -> None:
        if isinstance(place, ToolResult):
            await self.drive(self.core.call_ended(state, place, ToolOutcome.ERROR))
            return
        tel = self._tel
        if tel is None:
            result, outcome = await self._execute(state, entry, timeout, place)
        else:  # in the call's span: a sub-agent's run nests under it
            span = tel.tool_started(state.call)
            self._traced_calls.add(state.call.id)
            try:
                result, outcome = await self._execute(state, entry, timeout, place)
            except BaseException as error:
                tel.tool_ended(span, None, ToolOutcome.ERROR, error)
                raise
            tel.tool_ended(span, result, outcome, None)
        await self.drive(self.core.call_ended(state, result, outcome))

    async def _execute(
        self,
        state: CallState,
        entry: ToolEntry,
        timeout: float | None,  # noqa: ASYNC109 - passed to run_tool_call
        place: _Place | None,
    ) -> tuple[ToolResult, ToolOutcome]:
        """Wait for the call's place if it queued, run it, give the place back."""
        if place is not None and place.reason is not None:
            # (ToolCallQueued is sent.) Waiting is cancelled like the call itself (an
            # abort, a deadline); the call then gets its result from the core's settling.
            since = trio.current_time()
            await place.scheduler.wait(place.ticket)
            await self.emit(self.core.dequeued(state, trio.current_time() - since))
        try:
            reporter = _Reporter(self, state)
            return await run_tool_call(
                entry.tool,
                state.call,
                timeout,
                loop_id=self.core.loop_id,
                on_update=reporter.update,
                on_progress=reporter.progress,
                on_usage=self.core.count_tool_usage,
                on_request=self.core.count_tool_request,
            )
        finally:
            if place is not None:
                place.scheduler.release(place.ticket)


def _name_of(loop_id: str) -> str:
    """An agent's name from its run's loop id: ``"support.3"`` is agent ``support``."""
    base, _, number = loop_id.rpartition(".")
    return base if base and number.isdigit() else loop_id


class _Place:
    """A call's ticket with the tree's scheduler; ``reason`` is why it waits (None: it runs)."""

    __slots__ = ("reason", "scheduler", "ticket")

    def __init__(self, scheduler: Scheduler, ticket: Ticket, reason: str | None) -> None:
        self.scheduler = scheduler
        self.ticket = ticket
        self.reason = reason


async def ask_approver(action: AskApprover) -> object:
    """What the approver answers, within its timeout; an exception it raises or a
    timeout is a :class:`~agentloop.Deny` saying so (the run goes on)."""
    request = action.request
    timeout = math.inf if action.timeout is None else action.timeout
    try:
        with trio.move_on_after(timeout):
            answer = action.approver(request)
            if inspect.isawaitable(answer):
                answer = await answer
            return answer
    except Exception as error:
        return Deny(request.tool_call_id, f"the approver failed: {describe_exception(error)}")
    return Deny(
        request.tool_call_id,
        f"no decision within the approval timeout ({format_duration(timeout)})",
    )


async def _run(driver: TrioDriver, prompts: Sequence[UserMessage]) -> tuple[Message, ...]:
    try:
        return await driver.run(prompts)
    except (BaseExceptionGroup, HookFailure) as error:
        raise_single(error)


async def agent_loop(
    prompts: Sequence[UserMessage | str],
    context: AgentContext,
    config: AgentLoopConfig,
    send_channel: trio.MemorySendChannel[AgentEvent],
    *,
    loop_id: str | None = None,
    parent_loop_id: str | None = None,
    abort_scope: trio.CancelScope | None = None,
    agent_name: str | None = None,
) -> tuple[Message, ...]:
    """Run the loop on ``context`` with new ``prompts``; send every event to ``send_channel``.

    The prompts and every message of the run are appended to
    ``context.messages`` as they happen. ``send_channel`` is closed when the
    function returns or raises. If the receiver is closed early, the run goes
    on without sending.

    Args:
        prompts: The user messages that start the run (``str`` is accepted).
        context: The conversation; its history is sent to the model.
        config: The model, tools strategy, limits, queues and hooks.
        send_channel: Where events go. Its buffer bounds how far the loop runs
            ahead of the consumer.
        loop_id: Names this run in its events (default: a random hex id).
        parent_loop_id: The loop that started this one, for sub-agents.
        abort_scope: Cancel it to abort the run softly: the loop stops at once,
            gives every tool call a result, marks the turn ``ABORTED`` and still
            sends ``AgentEnd``.
        agent_name: Names the agent in traces (default: ``loop_id`` without its
            run number).

    Returns:
        The messages this run added to the history.

    Raises:
        ValueError: ``prompts`` is empty, two tools share a name, or a tool's
            schema is invalid.
        Exception: whatever a hook or the provider raised (other than a
            :class:`~agentloop.providers.ProviderError`), as itself.
        TrioRequiredError: called outside trio (under asyncio, say).

    Cancellation: cancelling the caller's scope stops the run at once. The
    history is still left whole (the turn is marked ``ABORTED``; every tool
    call has a result), but no more events are sent.
    """
    with send_channel:  # closed synchronously: see Agent._drive
        require_trio("agent_loop()")
        messages = user_messages(prompts, "prompts")
        if not messages:
            raise ValueError("agent_loop needs at least one prompt")
        check_not_waiting(context.suspended)
        driver = TrioDriver(
            context,
            config,
            send_channel,
            loop_id=loop_id,
            parent_loop_id=parent_loop_id,
            abort_scope=abort_scope,
            agent_name=agent_name,
        )
        return await _run(driver, messages)


async def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    send_channel: trio.MemorySendChannel[AgentEvent],
    *,
    loop_id: str | None = None,
    parent_loop_id: str | None = None,
    abort_scope: trio.CancelScope | None = None,
    agent_name: str | None = None,
    decisions: Iterable[Decision] | None = None,
) -> tuple[Message, ...]:
    """Run the loop on ``context`` as it is, without a new prompt.

    For a history that ends with a user message or with tool results: the
    model is asked to continue from there. For a run that stopped to await
    approval (``context.suspended``): ``decisions`` decide each pending call
    (an :class:`~agentloop.Approve` or a :class:`~agentloop.Deny`), the
    approved calls run, every call of that reply gets its result in order, and
    the run goes on. Arguments, events, cancellation and errors are as for
    :func:`agent_loop`.

    Raises:
        ApprovalError: calls await approval and ``decisions`` does not decide
            each exactly once (or names other calls), or decisions are given
            where no call waits; nothing runs.
        ValueError: the history is empty, or ends with an assistant message
            (there is nothing for the model to answer).
    """
    with send_channel:
        require_trio("agent_loop_continue()")
        resume = resume_of(context, decisions)
        if resume is None:
            if not context.messages:
                raise ValueError("agent_loop_continue needs a history; it is empty")
            if isinstance(context.messages[-1], AssistantMessage):
                raise ValueError(
                    "agent_loop_continue needs a history that ends with a user message or "
                    "tool results; it ends with an assistant message"
                )
        driver = TrioDriver(
            context,
            config,
            send_channel,
            loop_id=loop_id,
            parent_loop_id=parent_loop_id,
            abort_scope=abort_scope,
            agent_name=agent_name,
        )
        if resume is not None:
            driver.core.resume_with(*resume)
        return await _run(driver, ())


def check_not_waiting(suspended: Suspended | None) -> None:
    """Raise RuntimeError if calls await approval: a new prompt cannot come first."""
    if suspended is not None:
        ids = ", ".join(repr(call.tool_call_id) for call in suspended.pending)
        raise RuntimeError(
            f"tool calls {ids} await approval: decide them with resume(decisions) first "
            "(or reset() to drop the conversation)"
        )


def resume_of(
    context: AgentContext, decisions: Iterable[Decision] | None
) -> tuple[Suspended, dict[str, Decision]] | None:
    """The stop to go on from and its checked decisions, or None if no call awaits
    approval.

    Raises:
        ApprovalError: as :func:`agent_loop_continue` says.
    """
    chosen = [] if decisions is None else list(decisions)
    suspended = context.suspended
    if suspended is None:
        if chosen:
            ids = ", ".join(repr(getattr(d, "tool_call_id", d)) for d in chosen)
            raise ApprovalError(f"no call awaits approval (decisions for {ids}); nothing ran")
        return None
    return suspended, check_decisions(suspended.pending, chosen)
