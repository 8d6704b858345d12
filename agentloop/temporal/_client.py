"""Starting, steering and following runs; building a worker; calling asyncio code from trio."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any, TypeVar

import attrs
import trio
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from .._approval import ApprovalError, PendingCall
from .._events import AgentEvent, AgentStop
from .._loop import as_output
from .._types import Message, Usage
from ..serialization import from_dict, to_dict
from ._activities import model_activity, tool_activity
from ._agents import AgentFactory, register
from ._workflow import APPROVAL_ERROR, AgentRun

__all__ = [
    "AsyncioThread",
    "RunResult",
    "approve",
    "deny",
    "event_count",
    "events",
    "follow_up",
    "make_worker",
    "pending",
    "run_result",
    "start_run",
    "steer",
]

T = TypeVar("T")


@attrs.frozen
class RunResult:
    """How a Temporal run ended: the messages it added, why it stopped, its usage.

    ``output`` is the structured answer of an agent with an ``output_type``:
    built as that type when ``run_result`` is given it, else its JSON data.
    """

    messages: tuple[Message, ...]
    stop: AgentStop
    usage: Usage
    output: Any = None


def make_worker(
    client: Client,
    task_queue: str,
    agents: Mapping[str, AgentFactory],
    *,
    max_concurrent_activities: int = 100,
    sticky_timeout: float = 10.0,
) -> Worker:
    """A worker that runs the agents ``agents`` names (factories) on ``task_queue``.

    Activities run in a pool of ``max_concurrent_activities`` threads, each
    under its own ``trio.run``. ``sticky_timeout`` is how many seconds a run's
    next workflow step waits for the worker that ran its last one before any
    worker takes it (Temporal's ``sticky_queue_schedule_to_start_timeout``):
    lower, a dead worker's runs move on sooner; higher, fewer replays under
    load. Run it with ``await worker.run()`` (asyncio).

    Raises:
        TypeError: a factory is not callable.
    """
    register(agents)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[AgentRun],
        activities=[model_activity, tool_activity],
        activity_executor=concurrent.futures.ThreadPoolExecutor(max_concurrent_activities),
        max_concurrent_activities=max_concurrent_activities,
        workflow_runner=UnsandboxedWorkflowRunner(),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky_timeout),
    )


async def start_run(
    client: Client,
    agent: str,
    *prompts: str,
    id: str,
    task_queue: str,
    history: tuple[Message, ...] = (),
    continue_after: int | None = None,
    approval_timeout: timedelta | None = None,
) -> WorkflowHandle[Any, Any]:
    """Start a run of the agent named ``agent`` with ``prompts``; its workflow handle.

    ``history`` is the conversation so far (empty for a new one). The run's
    workflow id is ``id``; a second start with a running id fails (Temporal's
    ``WorkflowAlreadyStartedError``). The run continues as new (a fresh
    workflow history, nothing lost) at the end of a turn once its history
    holds ``continue_after`` events (default 10,000) or Temporal suggests it.
    The handle follows the run across those executions.

    An agent with ``Permissions(approver=DEFER)`` waits for :func:`approve` or
    :func:`deny` on each call that needs approval; with ``approval_timeout``,
    the calls still undecided when it has passed (from the stop) are denied
    ("no decision within the approval timeout (...)") and the run goes on.
    """
    spec: dict[str, Any] = {
        "agent": agent,
        "prompts": list(prompts),
        "history": [to_dict(message) for message in history],
    }
    if continue_after is not None:
        spec["continue_after"] = continue_after
    if approval_timeout is not None:
        spec["approval_timeout"] = approval_timeout.total_seconds()
    await client.start_workflow(AgentRun.run, spec, id=id, task_queue=task_queue)
    return client.get_workflow_handle(id)  # the latest execution, whichever it is


async def run_result(handle: WorkflowHandle[Any, Any], output_type: Any = None) -> RunResult:
    """Wait for the run to end; what it added, why it stopped, its usage, its output.

    With ``output_type`` (the agent's, or an :class:`~agentloop.Output`), the
    structured answer is built as that type; without, it is its JSON data.
    A cancelled run ends normally (stop reason ``aborted``), so this returns.

    Raises:
        ValueError: ``output_type`` is given and the answer does not match it.
    """
    data = await handle.result()
    output = data.get("output")
    spec = as_output(output_type)
    if spec is not None and output is not None:
        output = spec.load(output)
    return RunResult(
        tuple(from_dict(message, Message) for message in data["messages"]),
        from_dict(data["stop"], AgentStop),
        from_dict(data["usage"], Usage),
        output,
    )


async def steer(handle: WorkflowHandle[Any, Any], text: str) -> None:
    """Queue a steering message, as ``Agent.steer`` does."""
    await handle.signal("steer", text)


async def follow_up(handle: WorkflowHandle[Any, Any], text: str) -> None:
    """Queue a follow-up message, as ``Agent.follow_up`` does."""
    await handle.signal("follow_up", text)


async def approve(
    handle: WorkflowHandle[Any, Any], tool_call_id: str, arguments: dict[str, Any] | None = None
) -> None:
    """Approve the pending call ``tool_call_id`` (with ``arguments``: run it with those).

    Returns once the run has recorded the decision; the run goes on when every
    pending call is decided. Edited arguments are checked against the tool's
    schema when the call runs, as ``Approve`` is in process.

    Raises:
        ApprovalError: no pending call has that id (the run is not waiting, or
            it names another call) or it is decided already; nothing changed.
    """
    await _decide(handle, "approve", tool_call_id, arguments)


async def deny(
    handle: WorkflowHandle[Any, Any], tool_call_id: str, reason: str | None = None
) -> None:
    """Deny the pending call ``tool_call_id``; the model reads
    ``"Permission denied: <reason>"`` (a default reason when it is None).

    Returns once the run has recorded the decision.

    Raises:
        ApprovalError: as :func:`approve`.
    """
    await _decide(handle, "deny", tool_call_id, reason)


async def _decide(handle: WorkflowHandle[Any, Any], update: str, *args: Any) -> None:
    try:
        await handle.execute_update(update, args=list(args))
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type == APPROVAL_ERROR:
            raise ApprovalError(cause.message) from None
        raise


async def pending(handle: WorkflowHandle[Any, Any]) -> tuple[PendingCall, ...]:
    """The calls the run waits for a decision on, in the reply's order (none while it runs)."""
    data = await handle.query("pending")
    return tuple(from_dict(call, PendingCall) for call in data)


async def events(handle: WorkflowHandle[Any, Any], start: int = 0) -> list[AgentEvent]:
    """The run's events from index ``start`` on (poll with the count read so far).

    Indexes go on across continue-as-new; the events of earlier executions are
    gone, so a reader further behind gets those of the current one.
    """
    data = await handle.query("events", start)
    return [from_dict(event, AgentEvent) for event in data]


async def event_count(handle: WorkflowHandle[Any, Any]) -> int:
    """How many events the run has sent so far (across continue-as-new)."""
    count: int = await handle.query("event_count")
    return count


class AsyncioThread:
    """An asyncio event loop in a thread of its own, for calling asyncio code from trio.

    The Temporal client is asyncio; a trio program runs it here::

        with AsyncioThread() as bridge:
            client = await bridge.run(Client.connect, "127.0.0.1:7233")
            handle = await bridge.run(start_run, client, "coder", "Go", id="r1",
                                      task_queue="agents")
            result = await bridge.run(run_result, handle)

    Objects made on the loop (the client, handles) are used on it: pass them
    back through :meth:`run`. Cancelling the trio caller cancels the asyncio task.
    """

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="agentloop-asyncio", daemon=True
        )
        self._thread.start()

    async def run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Await ``fn(*args, **kwargs)`` on the asyncio loop; its result, or what it raised."""
        future = asyncio.run_coroutine_threadsafe(_call(fn, args, kwargs), self._loop)
        try:
            return await trio.to_thread.run_sync(future.result, abandon_on_cancel=True)
        except trio.Cancelled:
            future.cancel()
            raise

    def close(self) -> None:
        """Stop the loop and its thread."""
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def __enter__(self) -> AsyncioThread:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


async def _call(fn: Callable[..., Awaitable[T]], args: Any, kwargs: Any) -> T:
    return await fn(*args, **kwargs)
