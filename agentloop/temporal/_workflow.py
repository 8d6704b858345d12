"""The workflow: the loop core driven by Temporal, every piece of I/O an activity."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import attrs
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.exceptions import CancelledError as TemporalCancelled

from .._approval import DEFER, Approve, Decision, Deny, PendingCall, Suspended
from .._context import AgentContext
from .._events import AgentEnd, AgentEvent, TurnEnd
from .._loop import (
    CHECKPOINT,
    AgentLoopConfig,
    AskModel,
    CallHook,
    CallState,
    Hooks,
    LoopCore,
    ModelFailed,
    Phase,
    RunCalls,
    RunCounts,
)
from .._tool import ToolResult, format_duration
from .._types import (
    AssistantMessage,
    Message,
    ToolOutcome,
    ToolResultMessage,
    Usage,
    UserMessage,
    clock_ms,
)
from ..serialization import from_dict, to_dict
from ._activities import HEARTBEAT, HISTORY_MISSING
from ._agents import factory

__all__ = ["APPROVAL_ERROR", "ABORTED_WAITING", "AgentRun", "timeout_reason"]

#: Seconds without a heartbeat after which a running tool call's worker counts as dead.
HEARTBEAT_TIMEOUT = 4 * HEARTBEAT + 1
MODEL_TIMEOUT = timedelta(minutes=10)
DEFAULT_TOOL_TIMEOUT = 3600.0
#: History events after which a run continues as new at its next turn's end (Temporal
#: may suggest it earlier); each run's input can lower it (``continue_after``).
CONTINUE_AFTER = 10_000
_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_attempts=5)

APPROVAL_ERROR = "ApprovalError"
"""The error type of a rejected ``approve`` or ``deny`` Update (its message says why)."""

ABORTED_WAITING = "the run was aborted while awaiting approval"
"""Why the pending calls of a run cancelled while it awaited approval are denied."""


def timeout_reason(seconds: float) -> str:
    """Why a call undecided when a run's approval timeout passed is denied."""
    return f"no decision within the approval timeout ({format_duration(seconds)})"


def _cancelled(error: BaseException) -> bool:
    return isinstance(error, asyncio.CancelledError | TemporalCancelled) or (
        isinstance(error, ActivityError) and isinstance(error.cause, TemporalCancelled)
    )


#: What a workflow takes of the agent's config; every other setting runs user code
#: (hooks, a journal) or I/O (compaction's summaries) and is refused.
_TAKEN = frozenset(
    {
        "provider",  # never called here: each request is an activity
        "strategy",
        "tool_timeout",
        "limits",
        "max_tokens",
        "temperature",
        "thinking_level",
        "permissions",  # its rules; an approver other than DEFER is refused
        "get_steering_messages",  # replaced by the signals
        "get_follow_up_messages",
        "output_type",  # checking and building the answer is deterministic
    }
)
_NO_HOOKS = Hooks()


def _workflow_config(name: str, config: AgentLoopConfig) -> AgentLoopConfig:
    """``config`` if a workflow can run it; else a non-retryable error naming what cannot run.

    A workflow must be deterministic: a hook, an approver or a journal would run
    inside it on every replay, and compaction would ask the model outside an activity.
    The hooks are refused, not run: what a hook does (a log line, a counter, a
    veto read from elsewhere) would happen again at every replay.
    """
    refused: list[str] = []
    if config.hooks != _NO_HOOKS:
        hooks = config.hooks
        given = [field.name for field in attrs.fields(Hooks) if getattr(hooks, field.name)]
        refused.append(f"hooks must be empty (it sets {', '.join(given)})")
    refused += [
        f"{field.name} must be None"
        for field in attrs.fields(AgentLoopConfig)
        if field.name not in _TAKEN
        and field.name != "hooks"
        and getattr(config, field.name) is not None
    ]
    permissions = config.permissions
    if permissions is not None and permissions.approver not in (None, DEFER):
        refused.append("permissions.approver must be None or DEFER")
    if refused:
        raise ApplicationError(
            f"agent {name!r} cannot run on Temporal: {'; '.join(refused)}. They would run "
            "inside the workflow, which must be deterministic: leave them out of its factory",
            non_retryable=True,
        )
    return config


class _ContinueAsNew(Exception):
    """The history is long: go on in a new workflow execution (at a turn's end)."""


class _Abort(Exception):
    """The run was cancelled while it awaited approval: end it once the calls are denied."""


def _rejected(text: str) -> ApplicationError:
    return ApplicationError(text, type=APPROVAL_ERROR, non_retryable=True)


@workflow.defn(name="agentloop.AgentRun")
class AgentRun:
    """One run of a named agent: ``run({"agent", "prompts", "history"})``.

    The agent's hooks, permission approver, journal and compaction would run
    inside the workflow: an agent that sets any is refused (a non-retryable
    error naming them: "hooks must be empty..."); its permission rules apply. Signals ``steer`` and
    ``follow_up`` (a text) queue messages with the semantics of ``Agent.steer``
    / ``Agent.follow_up``; the query ``events``
    (a start index) returns the run's events from there, as JSON. Cancelling
    the workflow aborts the run: the running tool calls are cancelled in their
    workers, every started call gets exactly one result, and the run ends
    normally with the stop reason ``aborted``.

    Approvals: with ``Permissions(approver=DEFER)``, a call an ``ask`` rule
    stops does not end the workflow. The loop stops as in process (its events
    end with an ``AgentEnd`` whose stop is ``awaiting_approval``) and the
    workflow waits, holding no worker, until each pending call is decided by
    the Updates ``approve(call_id, arguments)`` and ``deny(call_id, reason)``
    (the query ``pending`` lists the undecided calls). A decision for a call
    that is not pending, or one already decided, is rejected (error type
    ``ApprovalError``); one given before the run stops is too. Once every call
    is decided the run goes on as ``Agent.resume(decisions)`` does: a second
    ``AgentStart``, the same turn, the decisions in call order, the same
    history. The input's ``approval_timeout`` (seconds) denies the calls still
    undecided when it passes (:func:`timeout_reason`); the wait never counts
    against ``max_duration``. Cancelled while waiting, every pending call is
    denied (:data:`ABORTED_WAITING`), none runs, and the run ends ``aborted``.
    """

    def __init__(self) -> None:
        self._events: list[dict[str, Any]] = []
        self._steering: list[UserMessage] = []
        self._follow_up: list[UserMessage] = []
        self._agent = ""
        self._loop_id = ""
        self._key = ""  # names this run's conversation in the workers' caches
        self._sent: list[Message] = []  # the messages of the last model request
        self._offset = 0  # events sent by earlier executions of this run (continue-as-new)
        self._continue_after = CONTINUE_AFTER
        self._waiting: Suspended | None = None  # the stop whose calls await decisions
        self._decided: dict[str, Decision] = {}
        self._aborting = False  # cancelled while waiting: end after the denials
        self._usage_before = Usage()  # what this run's earlier loops (before a stop) used

    # ``arguments`` is typed Any: the validator, not the data converter, rejects a non-object.
    @workflow.update(name="approve")
    def approve(self, tool_call_id: str, arguments: Any = None) -> None:
        self._decided[tool_call_id] = Approve(tool_call_id, arguments)

    @approve.validator
    def _check_approve(self, tool_call_id: str, arguments: Any = None) -> None:
        if arguments is not None and not isinstance(arguments, dict):
            raise _rejected(f"arguments must be an object or null, got {type(arguments).__name__}")
        self._check_decision(tool_call_id)

    @workflow.update(name="deny")
    def deny(self, tool_call_id: str, reason: str | None = None) -> None:
        self._decided[tool_call_id] = Deny(tool_call_id, reason)

    @deny.validator
    def _check_deny(self, tool_call_id: str, reason: str | None = None) -> None:
        self._check_decision(tool_call_id)

    def _check_decision(self, tool_call_id: str) -> None:
        """Reject a decision that names no pending call, or one decided already."""
        waiting = self._waiting
        if waiting is None:
            raise _rejected(f"no call awaits approval (a decision for {tool_call_id!r})")
        if tool_call_id in self._decided:
            raise _rejected(f"{tool_call_id!r} decided more than once (the first decision stands)")
        if tool_call_id not in waiting.call_ids:
            left = ", ".join(repr(call.tool_call_id) for call in self._undecided())
            raise _rejected(f"no pending call has the id {tool_call_id!r} (pending: {left})")

    @workflow.query(name="pending")
    def pending(self) -> list[dict[str, Any]]:
        return [to_dict(call) for call in self._undecided()]

    def _undecided(self) -> list[PendingCall]:
        waiting = self._waiting
        if waiting is None:
            return []
        return [call for call in waiting.pending if call.tool_call_id not in self._decided]

    @workflow.signal(name="steer")
    def steer(self, text: str) -> None:
        self._steering.append(UserMessage.text(text))

    @workflow.signal(name="follow_up")
    def follow_up(self, text: str) -> None:
        self._follow_up.append(UserMessage.text(text))

    @workflow.query(name="events")
    def events(self, start: int) -> list[dict[str, Any]]:
        # Events from before the last continue-as-new are gone: start at the first kept.
        return self._events[max(start - self._offset, 0) :]

    @workflow.query(name="event_count")
    def event_count(self) -> int:
        return self._offset + len(self._events)

    def _take_steering(self) -> list[UserMessage]:
        # Polled first after the resumed turn: a run cancelled while it waited ends there.
        if self._aborting:
            raise _Abort
        return [self._steering.pop(0)] if self._steering else []

    def _take_follow_up(self) -> list[UserMessage]:
        return [self._follow_up.pop(0)] if self._follow_up else []

    @workflow.run
    async def run(self, spec: dict[str, Any]) -> dict[str, Any]:
        # Every timestamp from the workflow's clock: replaying the run gives the same history.
        clock_ms.set(lambda: int(workflow.time() * 1000))
        self._agent = spec["agent"]
        self._loop_id = workflow.info().workflow_id
        self._key = f"{self._loop_id}/{workflow.info().run_id}"
        agent = factory(self._agent)
        history = [from_dict(message, Message) for message in spec.get("history", [])]
        context = AgentContext(agent.system_prompt, history, agent.tools)
        config = attrs.evolve(
            _workflow_config(self._agent, agent.config),
            get_steering_messages=self._take_steering,
            get_follow_up_messages=self._take_follow_up,
        )
        core = LoopCore(context, config, loop_id=self._loop_id, now=workflow.time)
        prompts = [UserMessage.text(text) for text in spec.get("prompts", [])]
        carried = spec.get("carry")
        self._offset = int(spec.get("events_offset", 0))
        self._continue_after = int(spec.get("continue_after", CONTINUE_AFTER))
        if "usage_before" in spec:
            self._usage_before = from_dict(spec["usage_before"], Usage)
        # Carried from an earlier execution: before any signal this one received already.
        self._steering[:0] = [UserMessage.text(text) for text in spec.get("steering", [])]
        self._follow_up[:0] = [UserMessage.text(text) for text in spec.get("follow_up", [])]
        first = int(spec["first"]) if carried is not None else len(history)
        await self._loop(core, prompts, spec, first, carried)
        while core.suspended is not None:  # calls await approval: wait, then go on
            suspended = core.suspended
            self._usage_before = self._usage_before + core.usage
            decisions = await self._decisions(suspended, spec.get("approval_timeout"))
            core = LoopCore(context, config, loop_id=self._loop_id, now=workflow.time)
            core.resume_with(suspended, decisions)
            await self._loop(core, [], spec, first, None)
        new_messages: Sequence[Message] = core.context.messages[first:]
        end = next(
            from_dict(event, AgentEvent)
            for event in reversed(self._events)
            if event.get("type") == "AgentEnd"
        )
        assert isinstance(end, AgentEnd)
        output = core.output
        return {
            "messages": [to_dict(message) for message in new_messages],
            "stop": to_dict(end.stop_reason),
            "usage": to_dict(self._usage_before + end.usage),
            "output": (
                None if output is None or core.end_output is None else output.dump(core.end_output)
            ),
        }

    async def _loop(
        self,
        core: LoopCore,
        prompts: list[UserMessage],
        spec: dict[str, Any],
        first: int,
        carried: Any,
    ) -> None:
        """Drive one loop of the run from its start to its ``AgentEnd``."""
        aborted = False
        if await self._drive(core, core.start(prompts)):
            if carried is not None:  # a continuation: one AgentStart, counts go on
                del self._events[-1]
                core.carry(from_dict(carried, RunCounts))
            try:
                await self._drive(core, core.turns())
            except _ContinueAsNew:
                workflow.continue_as_new(self._continuation(spec, core, first))
            except _Abort:
                aborted = True
            except BaseException as error:
                if not _cancelled(error):
                    raise
                aborted = True
        await self._drive(core, core.finish(aborted))

    async def _decisions(self, suspended: Suspended, limit: float | None) -> dict[str, Decision]:
        """Wait until every pending call is decided (the ``approve`` and ``deny``
        Updates); the decisions. A call still undecided after ``limit`` seconds is
        denied; cancelled, every call is denied and the run will end aborted."""
        self._waiting = suspended
        self._decided = {}
        try:
            await workflow.wait_condition(
                lambda: not self._undecided(),
                timeout=None if limit is None else timedelta(seconds=float(limit)),
            )
        except TimeoutError:
            assert limit is not None
            for call in self._undecided():
                self._decided[call.tool_call_id] = Deny(call.tool_call_id, timeout_reason(limit))
        except BaseException as error:
            if not _cancelled(error):
                raise
            self._aborting = True
            self._decided = {
                call_id: Deny(call_id, ABORTED_WAITING) for call_id in suspended.call_ids
            }
        decided, self._decided, self._waiting = self._decided, {}, None
        return decided

    def _continuation(self, spec: dict[str, Any], core: LoopCore, first: int) -> dict[str, Any]:
        """The input of the run that goes on from here, in a new workflow execution."""
        following = {
            "agent": self._agent,
            "prompts": [],
            "history": [to_dict(message) for message in core.context.messages],
            "first": first,
            "carry": to_dict(core.counts()),
            "events_offset": self._offset + len(self._events),
            "steering": [message.text for message in self._steering],
            "follow_up": [message.text for message in self._follow_up],
            "continue_after": self._continue_after,
            "usage_before": to_dict(self._usage_before),
        }
        if spec.get("approval_timeout") is not None:
            following["approval_timeout"] = spec["approval_timeout"]
        return following

    def _should_continue_as_new(self, core: LoopCore) -> bool:
        """At a turn's end: is the history long, and will the loop ask the model next?
        (Never at the end of a turn whose calls await approval.)"""
        if core.suspended is not None:
            return False
        info = workflow.info()
        long = (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= self._continue_after
        )
        messages = core.context.messages
        return long and bool(messages) and isinstance(messages[-1], ToolResultMessage)

    async def _drive(self, core: LoopCore, phase: Phase) -> Any:
        outcome: Any = None
        while True:
            try:
                action = phase.send(outcome)
            except StopIteration as stop:
                return stop.value
            outcome = None
            if isinstance(action, AgentEvent):
                self._events.append(to_dict(action))
                if isinstance(action, TurnEnd) and self._should_continue_as_new(core):
                    raise _ContinueAsNew
            elif isinstance(action, CallHook):
                outcome = action.hook(*action.args)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
            elif action is CHECKPOINT:
                pass
            elif isinstance(action, AskModel):
                outcome = await self._ask(action)
            elif isinstance(action, RunCalls):
                await self._run_calls(core, action)
            else:  # pragma: no cover - Compact is refused with the config
                raise AssertionError(f"unknown action {action!r}")

    async def _ask(self, action: AskModel) -> AssistantMessage | ModelFailed:
        messages = list(action.request.messages)
        sent = self._sent
        # Only what is new since the last request, if the history only grew since.
        grew = len(messages) >= len(sent) and all(
            mine is theirs for mine, theirs in zip(sent, messages, strict=False)
        )
        base = len(sent) if grew else 0
        try:
            try:
                result = await self._model(base, messages[base:])
            except ActivityError as error:
                cause = error.cause
                if not (isinstance(cause, ApplicationError) and cause.type == HISTORY_MISSING):
                    raise
                result = await self._model(0, messages)  # another worker: send it all
        except ActivityError as error:
            if _cancelled(error):
                raise
            cause = error.cause
            return ModelFailed(str(cause.message if isinstance(cause, ApplicationError) else cause))
        self._sent = messages
        message = from_dict(result, AssistantMessage)
        assert isinstance(message, AssistantMessage)
        return message

    async def _model(self, base: int, new: list[Message]) -> Any:
        return await workflow.execute_activity(
            "agentloop.model",
            args=[self._agent, self._key, base, [to_dict(message) for message in new]],
            start_to_close_timeout=MODEL_TIMEOUT,
            retry_policy=_RETRY,
            cancellation_type=workflow.ActivityCancellationType.TRY_CANCEL,
        )

    async def _run_calls(self, core: LoopCore, action: RunCalls) -> None:
        async def one(state: CallState, limit: float | None) -> None:
            seconds = limit if limit is not None else DEFAULT_TOOL_TIMEOUT
            answer = await workflow.execute_activity(
                "agentloop.tool",
                args=[self._agent, to_dict(state.call), self._loop_id],
                activity_id=f"tool-{state.call.id}",
                start_to_close_timeout=timedelta(seconds=seconds + 30),
                heartbeat_timeout=timedelta(seconds=HEARTBEAT_TIMEOUT),
                retry_policy=_RETRY,
                cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            result = from_dict(answer["result"], ToolResult)
            assert isinstance(result, ToolResult)
            # What the tool paid for (sampling): the run's, counted once the call ends.
            for model, usage in answer.get("usage", ()):
                core.count_tool_usage(from_dict(usage, Usage), model)
            await self._drive(core, core.call_ended(state, result, _outcome(answer)))

        tasks = [asyncio.ensure_future(one(state, limit)) for state, _entry, limit in action.calls]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            # Aborted: wait until each worker has cancelled its call (or it ended).
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks)
            raise


def _outcome(answer: dict[str, Any]) -> ToolOutcome:
    """A tool activity's outcome (an answer recorded before outcomes: from ``is_error``)."""
    if "outcome" in answer:
        return ToolOutcome(answer["outcome"])
    return ToolOutcome.ERROR if answer["is_error"] else ToolOutcome.OK
