"""The activities: one model request, one tool call, each under trio in a worker thread."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from .._events import StreamDelta
from .._loop import ToolRegistry, model_request, run_tool_call
from .._tool import ToolNotFound, ToolResult, tool_traits
from .._types import AssistantMessage, Message, ToolCall, ToolOutcome, Usage
from .._util import raise_single
from .._words import plural
from ..providers import ProviderError
from ..serialization import from_dict, to_dict
from ..session import NOT_RUN_AGAIN
from ._agents import factory

__all__ = ["HEARTBEAT", "HISTORY_MISSING", "model_activity", "tool_activity"]

T = TypeVar("T")

log = logging.getLogger("agentloop.temporal")

HEARTBEAT = 0.5
"""Seconds between two heartbeats of a running tool call."""


#: The conversations this worker was sent lately, by run key: a request sends only what
#: is new since the run's last request here. Bounded; a run not found resends it all.
_HISTORIES: collections.OrderedDict[str, list[Message]] = collections.OrderedDict()
_HISTORIES_KEPT = 256
_HISTORIES_LOCK = threading.Lock()

HISTORY_MISSING = "HistoryMissing"
"""The error type of a model request whose earlier messages this worker does not have."""


def _history(key: str, base: int, new: list[dict[str, Any]]) -> tuple[Message, ...]:
    """The run's messages: the ``base`` this worker has for ``key``, then ``new``.

    Raises ApplicationError ``HistoryMissing`` when it does not have exactly ``base``.
    """
    added = [from_dict(message, Message) for message in new]
    with _HISTORIES_LOCK:
        known = _HISTORIES.pop(key, []) if base else []
        if len(known) != base:
            log.debug("%s: this worker lacks the first %d messages; asking for them all", key, base)
            raise ApplicationError(
                f"this worker does not have the first {plural(base, 'message')} of {key}",
                type=HISTORY_MISSING,
                non_retryable=True,
            )
        known.extend(added)
        _HISTORIES[key] = known
        while len(_HISTORIES) > _HISTORIES_KEPT:
            _HISTORIES.popitem(last=False)
        return tuple(known)


@activity.defn(name="agentloop.model", no_thread_cancel_exception=True)
def model_activity(
    agent_name: str, key: str, base: int, messages: list[dict[str, Any]]
) -> dict[str, Any]:
    """Ask the agent's model for the next message; the message as JSON.

    The conversation is the first ``base`` messages this worker was sent for
    the run ``key`` (none if ``base`` is 0), then ``messages``: the payload
    grows with what is new, not with the whole history.

    Raises ApplicationError (not retried) ``HistoryMissing`` when this worker
    lacks those ``base`` messages (the workflow then sends them all), and one
    named after the error for a ``ProviderError`` (the provider retried
    already; the workflow turns it into an error reply, as the loop does).
    """
    agent = factory(agent_name)
    config = agent.config
    request = model_request(
        config, agent.system_prompt, _history(key, base, messages), _definitions(agent)
    )

    async def ignore(delta: StreamDelta) -> None:
        pass

    async def ask() -> AssistantMessage:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_heartbeat, nursery.cancel_scope)
            try:
                return await config.provider.stream(request, ignore)
            finally:
                nursery.cancel_scope.cancel()

    try:
        message = _trio_run(ask)
    except ProviderError as error:
        raise ApplicationError(str(error), type=type(error).__name__, non_retryable=True) from None
    if activity.is_cancelled():
        raise CancelledError("the model request was cancelled")
    return to_dict(message)  # type: ignore[no-any-return]


@activity.defn(name="agentloop.tool", no_thread_cancel_exception=True)
def tool_activity(agent_name: str, call: dict[str, Any], loop_id: str) -> dict[str, Any]:
    """Run one tool call of the agent; ``{"result": ToolResult, "is_error": bool, "outcome":
    ToolOutcome, "usage": [[model, Usage], ...]}`` as JSON (``usage``: what the tool paid
    for, ``count_usage``).

    A second attempt (the worker running the first died: its heartbeats
    stopped) runs the tool again only if it is ``replay_safe``; any other
    gets the ``NOT_RUN_AGAIN`` error result. When Temporal cancels the
    activity, the call's cancel scope is cancelled and the activity ends
    cancelled.
    """
    agent = factory(agent_name)
    tool_call = from_dict(call, ToolCall)
    tool = next((tool for tool in agent.tools if tool.name == tool_call.name), None)
    if tool is None:
        return _answer(ToolResult.text(str(ToolNotFound(tool_call.name))), ToolOutcome.NOT_FOUND)
    traits = tool_traits(tool)
    attempt = activity.info().attempt
    if attempt > 1:
        log.info(
            "tool call %s of %r: attempt %d (the worker of the last one was lost); %s",
            tool_call.id,
            tool_call.name,
            attempt,
            "replay-safe, run again" if traits.replay_safe else "not run again",
        )
        if not traits.replay_safe:
            return _answer(ToolResult.text(NOT_RUN_AGAIN), ToolOutcome.NOT_RUN_AGAIN)
    timeout = traits.timeout if traits.timeout is not None else agent.config.tool_timeout

    async def progress(text: str) -> None:
        activity.heartbeat(text)

    paid: list[list[Any]] = []  # the workflow counts it in the run when the call ends

    def count(usage: Usage, model: str) -> None:
        paid.append([model, to_dict(usage)])

    async def run() -> tuple[ToolResult, ToolOutcome] | None:
        outcome: tuple[ToolResult, ToolOutcome] | None = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_heartbeat, nursery.cancel_scope)
            outcome = await run_tool_call(
                tool, tool_call, timeout, loop_id=loop_id, on_progress=progress, on_usage=count
            )
            nursery.cancel_scope.cancel()
        return outcome

    outcome = _trio_run(run)
    if outcome is None or activity.is_cancelled():
        raise CancelledError("the tool call was cancelled")
    return {**_answer(*outcome), "usage": paid}


_DEFINITIONS: dict[int, tuple[object, tuple[Any, ...]]] = {}


def _definitions(agent: Any) -> tuple[Any, ...]:
    """The agent's tool definitions, built once per tools tuple (agents live per worker)."""
    tools = agent.tools
    known = _DEFINITIONS.get(id(tools))
    if known is None or known[0] is not tools:
        known = _DEFINITIONS[id(tools)] = (tools, ToolRegistry(tools).definitions)
    return known[1]


def _trio_run(main: Callable[[], Awaitable[T]]) -> T:
    """``trio.run(main)``, raising the one exception a group stands for as itself."""
    try:
        return trio.run(main)
    except BaseExceptionGroup as group:
        raise_single(group)


def _answer(result: ToolResult, outcome: ToolOutcome) -> dict[str, Any]:
    return {"result": to_dict(result), "is_error": outcome.is_error, "outcome": outcome.value}


async def _heartbeat(scope: trio.CancelScope) -> None:
    """Heartbeat until cancelled; cancel ``scope`` when Temporal cancels the activity."""
    while True:
        await trio.sleep(HEARTBEAT)
        activity.heartbeat()
        if activity.is_cancelled():
            scope.cancel()
            return
