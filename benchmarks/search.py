"""How long the search tool takes on a large tree, against ripgrep's own command line.

For a few patterns (a literal, a regex, a case-insensitive literal), on one tree
(default: the site-packages of the running Python; ``--path`` to choose), the
script times:

1. ``rg --json ...``: the exact command line ``SearchTool`` runs, its output
   read to the end and dropped (what the tool cannot go below);
2. ``rg -n``: plain ripgrep as a person types it (multi-threaded, unsorted,
   its own ignore and binary rules): a reference point;
3. ``SearchTool`` with ripgrep: ``execute()`` from start to result;
4. ``SearchTool`` with the Python engine (``rg`` hidden: ``PATH`` emptied).

Both tool runs use ``max_results=1000`` (the largest allowed); a pattern with
more matches than that stops early, and the table marks it. Before timing, the
script checks that both engines give the same output. See benchmarks/README.md.

Run it with ``python benchmarks/search.py``::

    python benchmarks/search.py --path ~/src/linux --repeat 3

It prints the median and min over the repeats and each median's ratio to the
``rg --json`` command line, then whether the tool with rg is within 1.25x of
that command line. Without ``rg`` on ``PATH`` only the Python engine is timed.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sysconfig
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio
from _cli import positive

import agentloop as al
from agentloop.tools._listing import ListFilesTool
from agentloop.tools._search import SearchTool
from agentloop.tools._search._rg import _rg_argv, _top_venvs

PATTERNS: list[tuple[str, str, bool]] = [  # (label, pattern, case_sensitive)
    ("literal", "def __init_subclass__", True),
    ("regex", r"class \w+Error\(\w*Exception\)", True),
    ("case-insensitive", "deprecationwarning", False),
]
MAX_RESULTS = 1000
OVERHEAD_TARGET = 1.25  # SearchTool with rg against its own rg command line
NOISE = 1.2  # a median further than this above its min: the timings are noisy


def context() -> al.ToolContext:
    return al.ToolContext(tool_call_id="bench", tool_name="search", cancel_scope=trio.CancelScope())


@contextmanager
def no_rg() -> Iterator[None]:
    """Hide rg from shutil.which, as on a machine without it."""
    saved = os.environ.get("PATH")
    os.environ["PATH"] = ""
    try:
        yield
    finally:
        if saved is None:
            del os.environ["PATH"]
        else:
            os.environ["PATH"] = saved


def run_tool(root: Path, pattern: str, case_sensitive: bool) -> al.ToolResult:
    params: dict[str, Any] = {
        "pattern": pattern,
        "case_sensitive": case_sensitive,
        "max_results": MAX_RESULTS,
    }

    async def once() -> al.ToolResult:
        return await SearchTool(root, time_limit=300).execute(params, context())

    return trio.run(once)


def timed(fn: Callable[[], object]) -> float:
    """Milliseconds one call of ``fn`` takes."""
    start = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1e6


def tree_size(root: Path) -> tuple[int, int]:
    """(files, bytes) of what the tools see under ``root``."""

    async def listing() -> al.ToolResult:
        tool = ListFilesTool(root, max_results=10**9, time_limit=300)
        return await tool.execute({"max_depth": 10**6}, context())

    result = trio.run(listing)
    paths = result.text_content.rsplit("\n\n", 1)[0].splitlines()
    size = 0
    for path in paths:
        try:
            size += (root / path).stat().st_size
        except OSError:
            pass
    return int(result.details["files"]), size


def main(root: Path, repeat: int) -> None:
    rg = shutil.which("rg")
    rg_version = "no ripgrep"
    if rg is not None:
        rg_version = subprocess.run(
            [rg, "--version"], capture_output=True, text=True, check=True
        ).stdout.split("\n")[0]
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print(f"trio {trio.__version__}, agentloop {al.__version__}, {rg_version}")
    print(f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs")
    files, size = tree_size(root)
    print(f"tree: {root} ({files} files the tools see, {size / 1e6:.1f} MB)")
    print(f"repeats: {repeat}; tool runs with max_results={MAX_RESULTS}")
    if rg is None:
        print("rg is not on PATH: only the Python engine is timed")

    variants: list[tuple[str, str, Callable[[], object]]] = []  # (pattern label, variant, fn)
    matches: dict[str, str] = {}
    for label, pattern, case_sensitive in PATTERNS:
        with no_rg():
            python_result = run_tool(root, pattern, case_sensitive)
        details = python_result.details
        matches[label] = f"{details['matches']}{'+' if details['truncated'] else ''}"
        if rg is not None:
            rg_result = run_tool(root, pattern, case_sensitive)
            assert rg_result.text_content == python_result.text_content, label
            argv = _rg_argv(
                rg,
                pattern,
                ".",
                case_sensitive=case_sensitive,
                context=0,
                include=None,
                venvs=_top_venvs(root, ""),
            )
            plain = [rg, "-n", *([] if case_sensitive else ["-i"]), "-e", pattern, "--", "."]

            def command(args: list[str] = argv) -> object:
                return subprocess.run(args, cwd=root, stdout=subprocess.PIPE, check=False)

            def plain_command(args: list[str] = plain) -> object:
                return subprocess.run(args, cwd=root, stdout=subprocess.PIPE, check=False)

            def tool_rg(p: str = pattern, c: bool = case_sensitive) -> object:
                return run_tool(root, p, c)

            variants += [
                (label, "rg --json (the tool's command)", command),
                (label, "rg -n (plain)", plain_command),
                (label, "SearchTool, rg", tool_rg),
            ]

        def tool_python(p: str = pattern, c: bool = case_sensitive) -> object:
            with no_rg():
                return run_tool(root, p, c)

        variants.append((label, "SearchTool, Python engine", tool_python))
    if rg is not None:
        print("both engines give the same output for every pattern")

    for _, _, fn in variants:  # warm up: page cache, imports, regex caches
        fn()
    samples: dict[tuple[str, str], list[float]] = {(p, v): [] for p, v, _ in variants}
    for repetition in range(repeat):
        order = variants if repetition % 2 == 0 else variants[::-1]
        for label, variant, fn in order:
            samples[label, variant].append(timed(fn))

    print()
    header = (
        f"{'pattern':<17} | {'variant':<31} | {'median ms':>9} | {'min ms':>8} "
        f"| {'vs rg --json':>12} | matches"
    )
    print(header)
    print("-" * len(header))
    noisy = False
    for label, _, _ in PATTERNS:
        base = samples.get((label, "rg --json (the tool's command)"))
        for (pattern_label, variant), times in samples.items():
            if pattern_label != label:
                continue
            median = statistics.median(times)
            noisy = noisy or median > NOISE * min(times)
            ratio = f"{median / statistics.median(base):>11.2f}x" if base else f"{'-':>12}"
            print(
                f"{label:<17} | {variant:<31} | {median:>9.1f} | {min(times):>8.1f} "
                f"| {ratio} | {matches[label]}"
            )
    print()
    print("matches: matching lines; + means more than max_results (the tool stopped early)")
    if rg is not None:
        worst = max(
            statistics.median(samples[label, "SearchTool, rg"])
            / statistics.median(samples[label, "rg --json (the tool's command)"])
            for label, _, _ in PATTERNS
        )
        verdict = "within" if worst <= OVERHEAD_TARGET else "NOT within"
        print(
            f"overhead: SearchTool with rg is {verdict} the {OVERHEAD_TARGET}x target of its "
            f"rg command (worst median ratio {worst:.2f}x)"
        )
    if noisy:
        print(
            f"warning: some medians are more than {NOISE}x their min: the timings are noisy "
            "(was the machine busy?); rerun on an idle machine, or with a larger --repeat"
        )


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Time SearchTool (rg and Python engines) against ripgrep's command line."
    )
    parser.add_argument(
        "--path",
        type=Path,
        default=Path(sysconfig.get_paths()["purelib"]),
        help="the tree to search (default: this Python's site-packages)",
    )
    parser.add_argument("--repeat", type=positive, default=7, help="timed runs (default: 7)")
    args = parser.parse_args(argv)
    root = args.path.expanduser().resolve()
    if not root.is_dir():
        parser.error(f"not a directory: {root}")
    main(root, args.repeat)


if __name__ == "__main__":
    cli()
