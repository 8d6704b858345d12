"""Many agents in one process: throughput and memory, against a hand-written trio loop.

``K`` agents run at once in one ``trio.run``. Each has the conversation of
``loop_overhead.py``: a scripted model that waits ``--delay`` seconds (50 ms)
and then streams a sentence word by word and one ``echo`` tool call, the tool
runs, and so on for ``--turns`` turns (the last one text only); a consumer task
per agent drains its events. The hand-written side runs the same conversation
through the hand-written loop of ``loop_overhead.py`` (same events, checked
there), with the same delay.

It prints, for each ``K``: turns per second of wall time for both (and their
ratio: agentloop / hand-written, higher is better), and memory per agent: the
peak of ``tracemalloc`` while the ``K`` agents run, minus what was allocated
before they started, divided by ``K`` (a separate run, since tracing slows
everything down).

    python benchmarks/many_agents.py --agents 1000,10000

Targets (issue 14): at K=10,000, at least 0.9x the hand-written turns/s and at
most 25 KiB per agent.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from _cli import positive
from loop_overhead import (
    ARGUMENTS,
    CHUNK_SIZE,
    FINAL,
    PROMPT,
    SENTENCE,
    USAGE,
    EchoTool,
    Event,
    FakeModel,
    Message,
    hand_loop,
)

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply

RATIO_TARGET = 0.9
MEMORY_TARGET_KIB = 25.0


def make_agent(turns: int, delay: float) -> al.Agent:
    # One scripted turn repeated, as the hand-written model's script repeats its strings.
    step = reply(SENTENCE, call("echo", ARGUMENTS), usage=USAGE)
    script = [step] * (turns - 1)
    script.append(reply(FINAL, usage=USAGE))
    return al.Agent(
        ScriptedProvider(script, chunk_size=CHUNK_SIZE, delay=delay),
        tools=[EchoTool()],
        limits=al.ExecutionLimits(max_turns=None, max_total_tokens=None, max_duration=None),
    )


async def run_agentloop(agent: al.Agent) -> None:
    async with agent.prompt(PROMPT) as events:
        async for _event in events:
            pass


class SlowModel(FakeModel):
    """The hand-written loop's model, waiting ``delay`` seconds before each reply."""

    def __init__(self, script: Any, delay: float) -> None:
        super().__init__(script)
        self.delay = delay

    async def stream(self, history: list[Message], emit: Callable[[Any], Awaitable[None]]) -> Any:
        await trio.sleep(self.delay)
        return await super().stream(history, emit)


def make_model(turns: int, delay: float) -> SlowModel:
    script: list[Any] = [(SENTENCE, ("echo", ARGUMENTS)) for _ in range(turns - 1)]
    script.append((FINAL, None))
    return SlowModel(script, delay)


async def run_hand(model: SlowModel) -> None:
    send, receive = trio.open_memory_channel[Event](16)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hand_loop, model, PROMPT, send)
        async with receive:
            async for _event in receive:
                pass


async def run_many(kind: str, count: int, turns: int, delay: float) -> float:
    """Run ``count`` agents at once; return the wall time in seconds."""
    if kind == "agentloop":
        agents = [make_agent(turns, delay) for _ in range(count)]
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(run_agentloop, agent)
    else:
        models = [make_model(turns, delay) for _ in range(count)]
        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for model in models:
                nursery.start_soon(run_hand, model)
    return time.perf_counter() - start


def timed(kind: str, count: int, turns: int, delay: float) -> float:
    gc.collect()
    return trio.run(run_many, kind, count, turns, delay)


def memory_per_agent(kind: str, count: int, turns: int, delay: float) -> float:
    """KiB per agent: the traced peak while ``count`` agents run (objects included)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        trio.run(run_many, kind, count, turns, delay)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return (peak - before) / count / 1024


def main(counts: list[int], turns: int, delay: float, repeat: int) -> None:
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print(f"trio {trio.__version__}, agentloop {al.__version__}")
    print(f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(
        f"{turns} turns per agent (a tool call in each but the last), model delay "
        f"{delay * 1000:.0f} ms, best of {repeat}"
    )
    timed("agentloop", 10, turns, delay)  # warm up: imports, caches
    timed("hand", 10, turns, delay)
    header = (
        "     K | agentloop turns/s | hand-written turns/s | ratio | "
        "agentloop KiB/agent | hand-written KiB/agent"
    )
    print()
    print(header)
    print("-" * len(header))
    verdicts: list[str] = []
    for count in counts:
        a_best = min(timed("agentloop", count, turns, delay) for _ in range(repeat))
        h_best = min(timed("hand", count, turns, delay) for _ in range(repeat))
        a_rate, h_rate = count * turns / a_best, count * turns / h_best
        a_mem = memory_per_agent("agentloop", count, turns, delay)
        h_mem = memory_per_agent("hand", count, turns, delay)
        ratio = a_rate / h_rate
        print(
            f"{count:>6} | {a_rate:>17,.0f} | {h_rate:>20,.0f} | {ratio:>4.2f}x | "
            f"{a_mem:>19.1f} | {h_mem:>22.1f}"
        )
        verdicts.append(
            f"K={count}: throughput {ratio:.2f}x the hand-written loop "
            f"({'meets' if ratio >= RATIO_TARGET else 'MISSES'} the {RATIO_TARGET}x target), "
            f"{a_mem:.1f} KiB per agent ({'meets' if a_mem <= MEMORY_TARGET_KIB else 'MISSES'} "
            f"the {MEMORY_TARGET_KIB:.0f} KiB target)"
        )
    print()
    for line in verdicts:
        print(line)


def parse_counts(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"agent counts must be >= 1: {text!r}")
    return values


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Many agents in one process: turns/s and memory against a hand-written loop."
    )
    parser.add_argument(
        "--agents", type=parse_counts, default=[1000, 10000], help="K values (default 1000,10000)"
    )
    parser.add_argument("--turns", type=positive, default=10, help="turns per agent (default 10)")
    parser.add_argument(
        "--delay-ms", type=positive, default=50, help="model delay per turn (default 50)"
    )
    parser.add_argument("--repeat", type=positive, default=1, help="timed runs; best is shown")
    args = parser.parse_args(argv)
    main(args.agents, args.turns, args.delay_ms / 1000, args.repeat)


if __name__ == "__main__":
    cli()
