"""What agentloop.mcp adds to an MCP tool call: the adapter against the SDK's own client.

One server, the ``echo`` tool of ``tests/mcp_servers.py``, called ``--calls`` times
in a row, three ways, over each transport:

- **sdk**: ``mcp.Client.call_tool("echo", ...)``, the SDK's client, nothing else;
- **connection**: ``McpConnection.call_tool`` (the connection check, the SDK call);
- **adapter**: ``McpToolAdapter.execute`` with a ``ToolContext``, as the loop calls
  it: the progress hand-over channel and its task, the connection, the content
  mapping into a ``ToolResult``.

Transports: ``in-process`` (the SDK's direct in-process path, no serialization),
``stdio`` (a real subprocess, JSON lines over pipes). Before timing, each way's
answer is checked: the same text for the same input. Then ``--concurrent`` calls at
once on one connection, the adapter against the SDK, show that calls overlap.

Run it with ``python benchmarks/mcp_calls.py`` (needs the ``mcp`` extra)::

    python benchmarks/mcp_calls.py --calls 2000 --repeat 5

It prints the median microseconds per call and the adapter's ratio to the SDK.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
from _cli import positive
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from agentloop import ToolContext, ToolResult
from agentloop.mcp import McpConnection, McpToolAdapter, StdioServer, open_mcp

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))
from mcp_servers import build_server  # noqa: E402

SERVER_SCRIPT = str(TESTS / "mcp_servers.py")

Call = Callable[[str], Awaitable[str]]


def sdk_call(client: Client) -> Call:
    async def call(text: str) -> str:
        result = await client.call_tool("echo", {"text": text})
        return "".join(getattr(block, "text", "") for block in result.content)

    return call


def connection_call(connection: McpConnection) -> Call:
    async def call(text: str) -> str:
        result = await connection.call_tool("echo", {"text": text})
        return "".join(getattr(block, "text", "") for block in result.content)

    return call


def adapter_call(adapter: McpToolAdapter) -> Call:
    async def call(text: str) -> str:
        ctx = ToolContext(
            tool_call_id="bench", tool_name=adapter.name, cancel_scope=trio.CancelScope()
        )
        result: ToolResult = await adapter.execute({"text": text}, ctx)
        return result.text_content

    return call


async def per_call(call: Call, calls: int) -> float:
    """Microseconds per call, ``calls`` calls one after another."""
    start = time.perf_counter()
    for i in range(calls):
        await call(str(i))
    return (time.perf_counter() - start) / calls * 1e6


async def concurrent(call: Call, calls: int) -> float:
    """Microseconds per call, ``calls`` calls started at once."""
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(calls):
            nursery.start_soon(call, str(i))
    return (time.perf_counter() - start) / calls * 1e6


async def check(ways: dict[str, Call]) -> None:
    for name, call in ways.items():
        got = await call("héllo ✓")
        if got != "héllo ✓":
            raise SystemExit(f"{name} answered {got!r}, not the text it was sent")


Row = tuple[str, str, str, float]  # transport, sequential / concurrent, way, µs per call


async def measure(
    transport: str, sdk_target: Any, server: Any, args: argparse.Namespace
) -> list[Row]:
    rows: list[Row] = []
    async with Client(sdk_target) as client, open_mcp(server, name="bench") as connection:
        adapter = connection.tools[0]
        ways = {
            "sdk": sdk_call(client),
            "connection": connection_call(connection),
            "adapter": adapter_call(adapter),
        }
        await check(ways)
        for name, call in ways.items():
            await per_call(call, max(1, args.calls // 10))  # warm up
            times = [await per_call(call, args.calls) for _ in range(args.repeat)]
            rows.append((transport, "sequential", name, statistics.median(times)))
        for name in ways:
            times = [await concurrent(ways[name], args.concurrent) for _ in range(args.repeat)]
            rows.append((transport, "concurrent", name, statistics.median(times)))
    return rows


async def main(args: argparse.Namespace) -> None:
    rows = await measure("in-process", build_server(), build_server(), args)
    stdio = [sys.executable, SERVER_SCRIPT, "stdio"]
    rows += await measure(
        "stdio",
        StdioServerParameters(command=stdio[0], args=stdio[1:]),
        StdioServer(stdio[0], stdio[1:]),
        args,
    )
    sdk = {(transport, how): micros for transport, how, way, micros in rows if way == "sdk"}
    print(
        f"echo over agentloop.mcp and the SDK's client: {args.calls} calls one after another "
        f"(sequential), {args.concurrent} at once (concurrent); median of {args.repeat} timings"
    )
    print(f"{'transport':<12} {'calls':<12} {'way':<12} {'µs/call':>9} {'vs sdk':>7}")
    for transport, how, way, micros in rows:
        ratio = micros / sdk[(transport, how)]
        print(f"{transport:<12} {how:<12} {way:<12} {micros:>9.1f} {ratio:>6.2f}x")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=positive, default=1000, help="calls per timing")
    parser.add_argument("--repeat", type=positive, default=5, help="timings per way")
    parser.add_argument("--concurrent", type=positive, default=50, help="calls at once")
    return parser.parse_args(argv)


if __name__ == "__main__":
    trio.run(main, parse_args())
