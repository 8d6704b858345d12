"""What the Landlock sandbox costs a command: a sandboxed ``true`` against an unsandboxed one.

The script times, ``--repeat`` times each, round-robin (the median and the minimum):

1. ``bash -c true`` started with ``subprocess.run``: the floor;
2. the same through the sandbox's launcher (``python -I -S _landlock.py ... --
   bash -c true``) with Landlock alone (``Sandbox(protect=())``);
3. the same with the protected paths (``Sandbox()``, in a root that has
   ``.git/hooks``, ``.git/config`` and ``.agentloop``: a mount namespace and
   four mounts), which is what ``BashTool(sandbox=Sandbox())`` runs;
4. the same with ``network=False`` too (the seccomp filter);
5. Landlock alone, restricted in a ``preexec_fn`` between fork and exec instead:
   the faster design the tool does not use (Python code after ``fork`` in a
   process with threads may deadlock; trio runs worker threads);
6. ``BashTool.execute({"command": "true"})`` without a sandbox, and
7. with ``Sandbox()``: the cost as an agent sees it.

Run it with ``python benchmarks/sandbox.py [--repeat N]``. It prints a table with
each median's ratio to its unsandboxed counterpart, then the added milliseconds
per command. Without Landlock it says so and times the unsandboxed rows only.
"""

from __future__ import annotations

import argparse
import functools
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


def timed(actions: list[Callable[[], object]], repeat: int) -> list[list[float]]:
    """Each action's times, in milliseconds: run round-robin, so that what else the
    machine does falls on every case alike."""
    for action in actions:
        action()  # warm up: caches, the first import
    times: list[list[float]] = [[] for _ in actions]
    for _ in range(repeat):
        for action, kept in zip(actions, times, strict=True):
            start = time.perf_counter()
            action()
            kept.append((time.perf_counter() - start) * 1000)
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
    print(f"Python {sys.version.split()[0]}; sandbox: {Sandbox().status()}")
    with tempfile.TemporaryDirectory() as directory:
        root = str(Path(directory).resolve())
        for made in (".git/hooks", ".agentloop"):
            (Path(root) / made).mkdir(parents=True)
        (Path(root) / ".git" / "config").write_text("")
        plain = ["bash", "-c", "true"]
        floor, tool = "bash -c true (subprocess)", "BashTool, no sandbox"
        # (label, action, the label it is compared with)
        cases: list[tuple[str, Callable[[], object], str | None]] = [
            (floor, lambda: run(plain, root), None)
        ]
        if status.available:
            for label, confined in [
                ("  through the launcher", Sandbox(protect=())),
                ("  + protected paths", Sandbox()),
                ("  + network off (seccomp)", Sandbox(network=False)),
            ]:
                if not confined.status().available:  # network=False: Landlock ABI 4
                    continue
                wrapped = confined.wrap(plain, root)
                cases.append((label, functools.partial(run, wrapped, root), floor))
            rules = Sandbox(protect=()).rules(root)
            fs, abi = _landlock.fs_rights(status.abi), status.abi
            scoped = _landlock.scopes(abi) & ~_landlock.SCOPE_ABSTRACT_UNIX_SOCKET

            def restrict() -> None:
                _landlock.restrict(fs, 0, scoped, rules)

            cases.append(
                (
                    "  restricted in preexec_fn",
                    lambda: run(plain, root, preexec_fn=restrict),
                    floor,
                )
            )
        cases.append((tool, tool_runner(BashTool(root)), None))
        if status.available:
            sandboxed = tool_runner(BashTool(root, sandbox=Sandbox()))
            cases.append(("BashTool, sandboxed", sandboxed, tool))
        measured = timed([action for _, action, _ in cases], args.repeat)
        rows = [(label, kept, base) for (label, _, base), kept in zip(cases, measured, strict=True)]
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
