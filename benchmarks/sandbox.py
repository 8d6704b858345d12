"""What the Landlock sandbox costs a command: a sandboxed ``true`` against an unsandboxed one.

The script times, ``--repeat`` times each (the median and the minimum):

1. ``bash -c true`` started with ``subprocess.run``: the floor;
2. the same through the sandbox's launcher (``python -I -S _landlock.py ... --
   bash -c true``), which is what ``BashTool(sandbox=...)`` runs;
3. the same, restricted in a ``preexec_fn`` between fork and exec instead: the
   faster design the tool does not use (Python code after ``fork`` in a process
   with threads may deadlock; trio runs worker threads);
4. ``BashTool.execute({"command": "true"})`` without a sandbox, and
5. with one: the cost as an agent sees it.

Run it with ``python benchmarks/sandbox.py [--repeat N]``. It prints a table with
each median's ratio to its unsandboxed counterpart, then the added milliseconds
per command. Without Landlock it says so and times the unsandboxed rows only.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import trio
from _cli import positive

import agentloop as al
from agentloop.tools import BashTool, Sandbox, _landlock, sandbox_status


def timed(action: Callable[[], object], repeat: int) -> list[float]:
    action()  # warm up: caches, the first import
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append((time.perf_counter() - start) * 1000)
    return times


def run(argv: list[str], root: str, **options: object) -> None:
    done = subprocess.run(argv, cwd=root, capture_output=True, check=False, **options)  # type: ignore[call-overload]
    if done.returncode != 0:
        raise SystemExit(f"{argv[:3]}... failed: {done.stderr!r}")


def tool_runner(tool: BashTool) -> Callable[[], object]:
    async def once() -> None:
        ctx = al.ToolContext("id", "bash", trio.CancelScope())
        result = await tool.execute({"command": "true"}, ctx)
        if result.details["exit_code"] != 0:
            raise SystemExit(f"bash failed: {result.text_content}")

    return lambda: trio.run(once)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=positive, default=50, help="runs per row")
    args = parser.parse_args()
    status = sandbox_status()
    print(f"Python {sys.version.split()[0]}; sandbox: {status}")
    with tempfile.TemporaryDirectory() as directory:
        root = str(Path(directory).resolve())
        sandbox = Sandbox()
        plain = ["bash", "-c", "true"]
        rows: list[tuple[str, list[float], str | None]] = [
            ("bash -c true (subprocess)", timed(lambda: run(plain, root), args.repeat), None)
        ]
        if status.available:
            wrapped = sandbox.wrap(plain, root)
            rows.append(
                (
                    "  through the launcher",
                    timed(lambda: run(wrapped, root), args.repeat),
                    "bash -c true (subprocess)",
                )
            )
            rules = sandbox.rules(root)
            fs, abi = _landlock.fs_rights(status.abi), status.abi
            scoped = _landlock.scopes(abi) & ~_landlock.SCOPE_ABSTRACT_UNIX_SOCKET

            def restrict() -> None:
                _landlock.restrict(fs, 0, scoped, rules)

            rows.append(
                (
                    "  restricted in preexec_fn",
                    timed(lambda: run(plain, root, preexec_fn=restrict), args.repeat),
                    "bash -c true (subprocess)",
                )
            )
        rows.append(("BashTool, no sandbox", timed(tool_runner(BashTool(root)), args.repeat), None))
        if status.available:
            rows.append(
                (
                    "BashTool, sandboxed",
                    timed(tool_runner(BashTool(root, sandbox=sandbox)), args.repeat),
                    "BashTool, no sandbox",
                )
            )
    medians = {label: statistics.median(times) for label, times, _ in rows}
    print(f"{'case':32} | {'median ms':>9} | {'min ms':>7} | ratio")
    print(f"{'-' * 32}-|-{'-' * 9}-|-{'-' * 7}-|------")
    for label, times, base in rows:
        ratio = f"{medians[label] / medians[base]:.1f}x" if base else "1.0x"
        print(f"{label:32} | {medians[label]:9.2f} | {min(times):7.2f} | {ratio}")
    for label, _, base in rows:
        if base is not None:
            print(f"{label.strip()}: +{medians[label] - medians[base]:.1f} ms per command")


if __name__ == "__main__":
    main()
