"""The cost of scheduling tool calls: agentloop's Scheduler against a bare trio.CapacityLimiter.

Two measurements, each on ``--calls`` tool calls (1,000 by default) with a budget
of ``--budget`` (50):

1. **the primitive**: ``--calls`` tasks, each taking a place, doing the work (one
   ``trio.sleep(0)``: a checkpoint), and giving it back, through
   ``Scheduler.try_start``/``wait``/``release`` with ``Schedule(max_concurrent=budget)``
   against ``async with trio.CapacityLimiter(budget)``. Then the same with claims:
   each call reads one of 20 keys, and one in ten writes it instead, which a
   ``CapacityLimiter`` cannot express (shown for its cost only).
2. **through agents**: a root agent whose model starts ``--agents`` sub-agents (10),
   each of whose models asks for ``calls / agents`` tool calls in one reply, with
   ``Schedule(max_concurrent=budget)`` against no schedule. The difference per call
   is what the budget costs inside a real run. Under trio's ``MockClock`` with the
   autojump: no wall-clock sleeps.

Before timing, each side is checked: every call ran once, the budget was never
exceeded, and (with claims) no writer ran beside a reader of its key.

Run it with ``python benchmarks/scheduling.py [--calls 1000 --budget 50 --repeat 7]``.
It prints µs per call (the median of the repeats, each the best of three runs) and
the ratio.
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.lowlevel
import trio.testing

import agentloop as al
from agentloop._tool._schedule import Claim, Scheduler, Ticket
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import SubAgentTool


class Gauge:
    """How many calls ran, and the most at once."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0
        self.done = 0
        self.writers: dict[str, int] = {}
        self.readers: dict[str, int] = {}
        self.clashes = 0

    def enter(self, claim: Claim | None = None) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)
        if claim is not None:
            for key in claim.writes:
                if self.writers.get(key) or self.readers.get(key):
                    self.clashes += 1
                self.writers[key] = self.writers.get(key, 0) + 1
            for key in claim.reads:
                if self.writers.get(key):
                    self.clashes += 1
                self.readers[key] = self.readers.get(key, 0) + 1

    def leave(self, claim: Claim | None = None) -> None:
        self.now -= 1
        self.done += 1
        if claim is not None:
            for key in claim.writes:
                self.writers[key] -= 1
            for key in claim.reads:
                self.readers[key] -= 1


def claim_for(index: int) -> Claim:
    key = f"key{index % 20}"
    return Claim(writes={key}) if index % 10 == 0 else Claim(reads={key})


# --------------------------------------------------------------------------- the primitive


async def with_limiter(calls: int, budget: int, gauge: Gauge) -> None:
    limiter = trio.CapacityLimiter(budget)

    async def one() -> None:
        async with limiter:
            gauge.enter()
            await trio.lowlevel.checkpoint()
            gauge.leave()

    async with trio.open_nursery() as nursery:
        for _ in range(calls):
            nursery.start_soon(one)


async def with_scheduler(calls: int, budget: int, gauge: Gauge, claims: bool = False) -> None:
    scheduler = Scheduler(al.Schedule(max_concurrent=budget))

    async def one(index: int) -> None:
        claim = claim_for(index) if claims else Claim()
        ticket = Ticket("work", f"c{index}", "bench", claim)
        if scheduler.try_start(ticket) is not None:
            await scheduler.wait(ticket)
        try:
            gauge.enter(claim)
            await trio.lowlevel.checkpoint()
            gauge.leave(claim)
        finally:
            scheduler.release(ticket)

    async with trio.open_nursery() as nursery:
        for index in range(calls):
            nursery.start_soon(one, index)


# --------------------------------------------------------------------------- through agents


def make_tree(
    calls: int,
    agents: int,
    gauge: Gauge,
    schedule: al.Schedule | None,
    limiter: trio.CapacityLimiter | None = None,
) -> al.Agent:
    @al.tool
    async def work(n: int) -> str:
        """Do a little work."""
        if limiter is None:
            gauge.enter()
            await trio.lowlevel.checkpoint()
            gauge.leave()
        else:
            async with limiter:
                gauge.enter()
                await trio.lowlevel.checkpoint()
                gauge.leave()
        return "ok"

    per_agent = calls // agents
    kids = [
        SubAgentTool(
            f"kid{a}",
            ScriptedProvider(
                [reply(*[call("work", {"n": i}) for i in range(per_agent)]), reply("done")]
            ),
            tools=[work],
            max_turns=5,
        )
        for a in range(agents)
    ]
    root = ScriptedProvider(
        [reply(*[call(f"kid{a}", {"task": "work"}) for a in range(agents)]), reply("all done")]
    )
    settings: dict[str, Any] = {} if schedule is None else {"schedule": schedule}
    return al.Agent(root, tools=kids, **settings)


async def run_limited_tree(calls: int, agents: int, budget: int, gauge: Gauge) -> None:
    await run_tree(make_tree(calls, agents, gauge, None, trio.CapacityLimiter(budget)))


async def run_tree(agent: al.Agent) -> None:
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.AgentEnd):
                assert event.stop_reason.completed, event.stop_reason


# --------------------------------------------------------------------------- timing


def timed(main: Callable[[], Awaitable[None]], mock: bool = False) -> float:
    gc.collect()
    clock = trio.testing.MockClock(autojump_threshold=0) if mock else None
    start = time.perf_counter()
    trio.run(main, clock=clock)
    return time.perf_counter() - start


def median_us(
    make: Callable[[Gauge], Callable[[], Awaitable[None]]], calls: int, repeat: int, mock: bool
) -> float:
    """µs per call: the median of the repeats, each the best of three runs (this machine's
    other work adds noise, never takes it away)."""
    samples = []
    for _ in range(repeat):
        best = math.inf
        for _ in range(3):
            best = min(best, timed(make(Gauge()), mock))
        samples.append(best)
    return statistics.median(samples) / calls * 1e6


def check(name: str, gauge: Gauge, calls: int, budget: int) -> None:
    assert gauge.done == calls, f"{name}: {gauge.done} of {calls} calls ran"
    assert gauge.peak <= budget, f"{name}: {gauge.peak} at once, over {budget}"
    assert gauge.clashes == 0, f"{name}: {gauge.clashes} conflicting calls ran together"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=50)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    calls, budget, agents, repeat = options.calls, options.budget, options.agents, options.repeat
    calls -= calls % agents

    # The gates: every call ran, the budget held, no conflicting calls together.
    for name, make in [
        ("limiter", lambda g: lambda: with_limiter(calls, budget, g)),
        ("scheduler", lambda g: lambda: with_scheduler(calls, budget, g)),
        ("scheduler+claims", lambda g: lambda: with_scheduler(calls, budget, g, True)),
    ]:
        gauge = Gauge()
        trio.run(make(gauge))
        check(name, gauge, calls, budget)
    for name, schedule in [("tree", None), ("tree+budget", al.Schedule(max_concurrent=budget))]:
        gauge = Gauge()
        trio.run(lambda: run_tree(make_tree(calls, agents, gauge, schedule)))  # noqa: B023
        check(name, gauge, calls, budget if schedule else calls)
        if schedule is not None:
            assert gauge.peak == budget, f"the budget was never full ({gauge.peak})"
    gauge = Gauge()
    trio.run(run_limited_tree, calls, agents, budget, gauge)
    check("tree+limiter", gauge, calls, budget)

    limiter = median_us(lambda g: lambda: with_limiter(calls, budget, g), calls, repeat, False)
    scheduler = median_us(lambda g: lambda: with_scheduler(calls, budget, g), calls, repeat, False)
    claimed = median_us(
        lambda g: lambda: with_scheduler(calls, budget, g, True), calls, repeat, False
    )
    bare_tree = median_us(
        lambda g: lambda: run_tree(make_tree(calls, agents, g, None)), calls, repeat, True
    )
    limited_tree = median_us(
        lambda g: lambda: run_limited_tree(calls, agents, budget, g), calls, repeat, True
    )
    budget_tree = median_us(
        lambda g: lambda: run_tree(make_tree(calls, agents, g, al.Schedule(max_concurrent=budget))),
        calls,
        repeat,
        True,
    )

    print(f"{calls} tool calls, budget {budget}, median of {repeat} runs")
    print()
    print(f"{'measurement':<58} | {'µs/call':>8} | ratio")
    print("-" * 80)
    name = "trio.CapacityLimiter(budget): acquire, checkpoint, release"
    print(f"{name:<58} | {limiter:8.2f} | 1.00x")
    print(
        f"{'agentloop Scheduler, the same work':<58} | {scheduler:8.2f} | "
        f"{scheduler / limiter:.2f}x"
    )
    print(
        f"{'agentloop Scheduler, 20 keys read, 1 in 10 written':<58} | {claimed:8.2f} | "
        f"{claimed / limiter:.2f}x"
    )
    print(f"{f'agent tree ({agents} sub-agents), no schedule':<58} | {bare_tree:8.2f} |")
    print(
        f"{f'agent tree, its tools share a trio.CapacityLimiter({budget})':<58} | "
        f"{limited_tree:8.2f} | 1.00x"
    )
    print(
        f"{f'agent tree, Schedule(max_concurrent={budget})':<58} | "
        f"{budget_tree:8.2f} | {budget_tree / limited_tree:.2f}x"
    )
    print()
    print(
        f"scheduling cost per call: {scheduler - limiter:+.2f} µs over a bare CapacityLimiter; "
        f"{budget_tree - limited_tree:+.2f} µs in a whole agent tree (with its queued and "
        "dequeued events)"
    )


if __name__ == "__main__":
    main()
