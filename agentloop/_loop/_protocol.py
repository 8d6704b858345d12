"""The contract between the loop core and a driver: everything that crosses between them.

The core (:class:`~._core.LoopCore`) holds the rules of a run and does no I/O;
a driver carries out what it asks: the trio driver (:mod:`._driver`) in
process, the Temporal workflow (:mod:`agentloop.temporal`) with each model
request and tool call an activity. This module is what they share, and all
they share: the actions a phase of the core yields, the handle of a tool call,
what a run has counted, and the one function that builds a model request.
Like the core, it loads no trio.

A phase of the core is a generator (:data:`Phase`): it yields an
:data:`Action`, and the driver sends back the action's outcome:

=====================  ==============================================  =================
action                 the driver...                                   and sends back
=====================  ==============================================  =================
an :class:`AgentEvent` delivers it to the consumer                     ``None``
:class:`CallHook`      calls ``hook(*args)`` (a plain or async          what it returned
                       function: hooks, queues, the permission check)
:class:`AskModel`      streams the request; gives each delta to         the message, or a
                       :meth:`LoopCore.delta` and delivers the event    :class:`ModelFailed`
:class:`RunCalls`      runs the calls (at once if several), each        ``None``
                       under its own timeout, and feeds each outcome
                       to :meth:`LoopCore.call_ended`
:class:`AskApprover`   asks the approver, within its timeout; an        an ``Approve``,
                       exception or a timeout is a ``Deny`` with why    ``Deny`` or ``DEFER``
                       (``_approval.answer_of`` reads its answer)
:class:`Compact`       compacts the context (may ask a summarizer)      the outcome
:data:`CHECKPOINT`     lets other tasks run                             ``None``
=====================  ==============================================  =================

The phases, and what else a driver calls on the core::

    if (yield from core.start(prompts)):     # before_loop, AgentStart, the prompts
        yield from core.turns()             # abortable: the driver's abort scope
    yield from core.finish(aborted)          # settle an abort, AgentEnd, after_loop

    core.interrupted(cancelled, why)         # the driver stopped: make the history whole
    core.delta(delta) -> MessageUpdate       # during AskModel, per streamed piece
    core.call_ended(state, result, outcome)  # a phase: ToolExecutionEnd, after hook
    core.update(state, partial)              # a phase: a running call's partial result
    core.progress / queued / dequeued        # the events of a running call
    core.count_tool_usage / count_tool_request   # what a tool pays for, asks for
    core.counts() -> RunCounts; core.carry(counts)   # a run continued elsewhere
    core.resume_with(suspended, decisions)   # before start(): go on from a stop that
                                             # awaited approval (AgentEnd.suspended)

A tool call's outcome is data (:class:`~agentloop.ToolOutcome`): a driver sends
it back with the result, as :func:`._driver.run_tool_call` gives it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs

from .._context import CompactionConfig
from .._events import AgentEvent
from .._provider import ModelRequest, ToolDefinition
from .._tool import ToolEntry, ToolResult
from .._types import Message, ToolCall, ToolOutcome, Usage

if TYPE_CHECKING:
    from .._tool import PermissionRequest
    from ._config import AgentLoopConfig
    from ._output import Output

__all__ = [
    "CHECKPOINT",
    "Action",
    "AskApprover",
    "AskModel",
    "CallHook",
    "CallState",
    "Compact",
    "ModelFailed",
    "Phase",
    "RunCalls",
    "RunCounts",
    "model_request",
    "offered_tools",
]


# --------------------------------------------------------------------------- actions


@attrs.frozen(slots=True)
class AskApprover:
    """Put ``request`` to ``approver``, allowing it ``timeout`` seconds (None: no limit)."""

    approver: Callable[..., Any]
    request: PermissionRequest
    timeout: float | None


@attrs.frozen(slots=True)
class CallHook:
    """Call ``hook(*args)`` (plain or async) and send back what it returns."""

    hook: Callable[..., Any]
    args: tuple[Any, ...]


@attrs.frozen(slots=True)
class AskModel:
    """Stream ``request`` from the model; send back the message or :class:`ModelFailed`."""

    request: ModelRequest


@attrs.frozen(slots=True)
class ModelFailed:
    """The model's API failed (a ProviderError, after its retries): why."""

    message: str


@attrs.frozen(slots=True)
class RunCalls:
    """Run these calls (their checks passed), each with its timeout; send back ``None``.

    For each, the driver builds the tool's context, runs ``execute`` under the
    timeout and feeds the result and its outcome to :meth:`LoopCore.call_ended`,
    driving the generator it returns in the call's own task.
    """

    calls: tuple[tuple[CallState, ToolEntry, float | None], ...]


@attrs.frozen(slots=True)
class Compact:
    """Compact the working context; send back the :class:`~._context.CompactionOutcome`."""

    config: CompactionConfig
    overhead: int
    measured: int | None


class _Checkpoint:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CHECKPOINT"


#: Let other tasks run (trio's ``checkpoint``); send back ``None``.
CHECKPOINT: Final = _Checkpoint()

Action: TypeAlias = (
    AgentEvent | CallHook | AskApprover | AskModel | RunCalls | Compact | _Checkpoint
)
#: What a phase of the core is: it yields actions, is sent their outcomes.
Phase: TypeAlias = Generator[Action, Any, Any]


# --------------------------------------------------------------------------- a call's handle


class CallState:
    """One tool call of the current turn: the ledger's entry, and a driver's handle.

    A driver reads ``call`` and hands the state back to the core
    (:meth:`LoopCore.call_ended`, :meth:`LoopCore.update`...); the rest is the
    core's bookkeeping.
    """

    __slots__ = (
        "after_hook_due",
        "appended",
        "call",
        "ended",
        "outcome",
        "result",
        "started",
    )

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.started = False  # ToolExecutionStart sent
        self.ended = False  # ToolExecutionEnd sent (or not due: vetoed)
        self.result: ToolResult | None = None
        self.outcome = ToolOutcome.OK  # set with result
        self.appended = False  # its result message is in the history
        self.after_hook_due = False  # before_tool_execution allowed it; after hook not run


# --------------------------------------------------------------------------- what a run counts


@attrs.frozen
class RunCounts:
    """What a run's limits have counted: turns, usage and tokens, and when it started.

    A run continued elsewhere (a Temporal run's next execution) carries it as
    JSON: :func:`agentloop.serialization.to_dict` and ``from_dict``.
    """

    turn_index: int
    turns_done: int
    usage: Usage
    tokens_used: int
    started_at: float
    requests: int = 0
    usage_by_model: dict[str, Usage] = attrs.field(factory=dict)


# --------------------------------------------------------------------------- the model request


def offered_tools(
    definitions: tuple[ToolDefinition, ...], output: Output[Any] | None
) -> tuple[ToolDefinition, ...]:
    """The tools a request offers: the agent's, and a structured output's final-result tool."""
    return definitions if output is None else output.request_tools(definitions)


def model_request(
    config: AgentLoopConfig,
    system_prompt: str,
    messages: Sequence[Message],
    definitions: tuple[ToolDefinition, ...],
) -> ModelRequest:
    """The request of a run's next model call: the one place it is built.

    ``messages`` is the conversation as the model sees it (the working
    context), ``definitions`` the agent's tools
    (:attr:`~._registry.ToolRegistry.definitions`). Both drivers send what this
    returns: the trio driver through :class:`LoopCore`, the Temporal workflow
    through its model activity.
    """
    output = config.output_type
    return ModelRequest(
        system_prompt=system_prompt,
        messages=messages,
        tools=definitions if output is None else output.request_tools(definitions),
        max_tokens=config.max_tokens,
        temperature=config.temperature,
        thinking=config.thinking_level,
        output=None if output is None else output.request_format,
    )
