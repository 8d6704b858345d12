"""A wide turn and an abort under load: agentloop against bare trio doing the same work.

1. **100 parallel sleeps.** One model reply with ``--calls`` tool calls (100), each
   sleeping ``--sleep-ms`` (50 ms); the time from ``agent.prompt()`` to ``AgentEnd``
   (the model's reply streamed, every call validated, run, answered and announced)
   beside a bare ``trio`` nursery running the same sleeps.
2. **Abort under load.** The same 100 calls sleeping 10 minutes, plus a ``bash``
   command whose children sleep too; once all have started, ``agent.abort()``: the
   time from the abort to ``AgentEnd`` (every call answered, the process group
   killed and reaped), beside cancelling a bare nursery of the same sleeps and the
   same subprocess. It checks that every call got a result and no process is left.

    python benchmarks/parallel_tools.py --repeat 20

Targets (issue 14): the wide turn at most 60 ms; the abort at most 5 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import tempfile
import time
from typing import Any

import trio
from _cli import positive

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import BashTool

WIDE_TARGET_MS = 60.0
ABORT_TARGET_MS = 5.0
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"seconds": {"type": "number"}},
    "required": ["seconds"],
    "additionalProperties": False,
}
#: A command with children: two background sleeps and a foreground one.
BASH_COMMAND = "sleep 600 & sleep 600 & sleep 600"


class SleepTool:
    name = "sleep"
    label = "Sleep"
    description = "Sleep for a while."
    parameters_schema = SCHEMA

    def __init__(self) -> None:
        self.started = 0

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.started += 1
        await trio.sleep(params["seconds"])
        return al.ToolResult.text("slept")


def agent(calls: int, seconds: float, root: str | None = None) -> tuple[al.Agent, SleepTool]:
    tool = SleepTool()
    requests = [call("sleep", {"seconds": seconds}, id=f"c{i}") for i in range(calls)]
    tools: list[Any] = [tool]
    if root is not None:
        requests.append(call("bash", {"command": BASH_COMMAND}, id="bash"))
        tools.append(BashTool(root, exclusive=False))  # it runs beside the sleeps
    model = ScriptedProvider([reply(*requests), reply("done")])
    return al.Agent(model, tools=tools), tool


async def wide_agentloop(calls: int, seconds: float) -> float:
    a, _ = agent(calls, seconds)
    start = time.perf_counter()
    async with a.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.AgentEnd):
                elapsed = time.perf_counter() - start
    results = [m for m in a.messages if isinstance(m, al.ToolResultMessage)]
    assert len(results) == calls
    assert not any(r.is_error for r in results)
    return elapsed


async def wide_bare(calls: int, seconds: float) -> float:
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(calls):
            nursery.start_soon(trio.sleep, seconds)
    return time.perf_counter() - start


async def abort_agentloop(calls: int, root: str) -> float:
    a, tool = agent(calls, 600.0, root)
    elapsed = 0.0
    group: list[int] = []
    async with a.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionStart) and event.tool_name == "bash":
                # Wait until every sleep runs and bash has started its children.
                while tool.started < calls or not group:
                    await trio.sleep(0.005)
                    group = _bash_group(root)
                await trio.sleep(0.05)
                start = time.perf_counter()
                a.abort()
            if isinstance(event, al.AgentEnd):
                elapsed = time.perf_counter() - start
    results = [m for m in a.messages if isinstance(m, al.ToolResultMessage)]
    assert len(results) == calls + 1, len(results)
    assert all(r.is_error for r in results)
    left = [pid for pid in group if _alive(pid)]
    assert not left, f"processes left: {left}"
    return elapsed


def _bash_group(root: str) -> list[int]:
    """The processes of bash commands run in ``root`` (their cwd), sleeps included."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cwd = os.readlink(f"/proc/{entry}/cwd")
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    argv = cmdline.read()
            except OSError:
                continue
            if cwd == root and argv.startswith((b"sleep", b"bash")):
                pids.append(int(entry))
    return pids if len(pids) >= 4 else []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


async def abort_bare(calls: int) -> float:
    process = await trio.lowlevel.open_process(
        ["bash", "-c", BASH_COMMAND], start_new_session=True, stdin=subprocess.DEVNULL
    )
    elapsed = 0.0

    async def sleeper(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        await trio.sleep(600)

    async with trio.open_nursery() as nursery:
        for _ in range(calls):
            await nursery.start(sleeper)
        await trio.sleep(0.05)
        start = time.perf_counter()
        nursery.cancel_scope.cancel()
    with trio.CancelScope(shield=True):
        os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
    elapsed = time.perf_counter() - start
    return elapsed


def table(rows: list[tuple[str, list[float], list[float], float]]) -> None:
    header = "case | agentloop ms (median, min) | bare trio ms (median, min) | target"
    print(header)
    print("-" * len(header))
    for name, ours, bare, target in rows:
        a, b = statistics.median(ours) * 1000, statistics.median(bare) * 1000
        verdict = "meets" if a <= target else "MISSES"
        print(
            f"{name} | {a:.1f}, {min(ours) * 1000:.1f} | {b:.1f}, {min(bare) * 1000:.1f} | "
            f"<= {target:.0f} ms: {verdict}"
        )


async def main(calls: int, sleep_ms: int, repeat: int) -> None:
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print(f"trio {trio.__version__}, agentloop {al.__version__}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs")
    print(f"{calls} parallel calls; wide turn: each sleeps {sleep_ms} ms; best of {repeat}")
    seconds = sleep_ms / 1000
    await wide_agentloop(calls, seconds)  # warm up
    wide = [await wide_agentloop(calls, seconds) for _ in range(repeat)]
    bare = [await wide_bare(calls, seconds) for _ in range(repeat)]
    with tempfile.TemporaryDirectory() as directory:
        root = await trio.to_thread.run_sync(os.path.realpath, directory)
        aborts = [await abort_agentloop(calls, root) for _ in range(repeat)]
    bare_aborts = [await abort_bare(calls) for _ in range(repeat)]
    print()
    table(
        [
            (f"{calls} calls x {sleep_ms} ms, prompt to AgentEnd", wide, bare, WIDE_TARGET_MS),
            (
                f"abort(): {calls} calls + bash with children, to AgentEnd",
                aborts,
                bare_aborts,
                ABORT_TARGET_MS,
            ),
        ]
    )


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A wide parallel turn and an abort under load.")
    parser.add_argument("--calls", type=positive, default=100, help="parallel calls (100)")
    parser.add_argument("--sleep-ms", type=positive, default=50, help="each call's sleep (50)")
    parser.add_argument("--repeat", type=positive, default=10, help="samples (10)")
    args = parser.parse_args(argv)
    trio.run(main, args.calls, args.sleep_ms, args.repeat)


if __name__ == "__main__":
    cli()
