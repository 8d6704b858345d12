"""Structured output against ordinary tool arguments: the same bytes, streamed the same way.

A model streams one JSON answer of ``--sizes`` (100 KB, 1 MB and 10 MB by default)
in pieces of ``--chunk`` characters, and the run is timed from the prompt to
``AgentEnd``, every event drained:

- **arguments** (the baseline): the JSON is the arguments of a call to an
  ordinary tool whose schema is the answer's; the tool returns ``"ok"`` and the
  model's next (tiny) reply ends the run;
- **tool mode**: the JSON is the arguments of the final-result call of an agent
  whose ``output_type`` is that schema (``Output(schema)``): the answer is read
  as it streams (``OutputUpdate`` events), checked, and the run ends;
- **native mode**: the same with ``mode="native"``: the JSON comes as the
  reply's text.

The answer is an object holding a list of records (numbers, short strings with
escapes and non-ASCII text, a nested list, a long note), so it has many
brackets and strings. The output type is the JSON Schema itself, so no typed
value is built: what differs from the baseline is reading the answer as it
streams and checking it once. Before timing, each mode's run is checked to end
with the answer whole (arguments parsed, ``AgentEnd.output`` equal to it).

Run it with ``python benchmarks/structured_output.py``::

    python benchmarks/structured_output.py --sizes 0.1,1,10 --chunk 256 --repeat 3

It prints seconds per run (median over the repeats) for each size and mode,
each mode's ratio to the baseline (target: within 2x), how many
``OutputUpdate`` events the run sent, and µs per KB, which stays flat when the
cost is linear in the size.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
from typing import Any

import trio
from _cli import positive

import agentloop as al
from agentloop.providers import ModelRequest

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "records": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer"},
                    "name": {"type": "string"},
                    "score": {"type": "number"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "note": {"type": "string"},
                },
                "required": ["id", "name", "score", "tags", "note"],
            },
        }
    },
    "required": ["records"],
}
USAGE = al.Usage(input=10, output=10, total_tokens=20)
RATIO_TARGET = 2.0
MODES = ("arguments", "tool mode", "native mode")


def answer(size: int) -> tuple[dict[str, Any], str]:
    """An answer whose JSON text is about ``size`` characters, and that text."""
    record = {
        "id": 0,
        "name": 'Café "Lima" №',
        "score": 0.5,
        "tags": ["coast", "capital", "[not a bracket]"],
        "note": "A line of text\nwith a newline, a tab\t and some more words. " * 3,
    }
    each = len(json.dumps(record, ensure_ascii=False)) + 2
    records = [{**record, "id": i, "score": i / 7} for i in range(max(1, size // each))]
    value = {"records": records}
    return value, json.dumps(value, ensure_ascii=False)


class Chunked:
    """A model that streams ``text`` in pieces of ``chunk`` characters: as a call's
    arguments to ``tool``, or (``tool=None``) as the reply's text; then says "done"."""

    provider_name = "bench"

    def __init__(self, text: str, chunk: int, tool: str | None) -> None:
        self.text = text
        self.chunk = chunk
        self.tool = tool
        self.calls = 0

    async def stream(self, request: ModelRequest, emit: Any) -> al.AssistantMessage:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        if self.calls > 1:
            await emit(al.TextDelta(delta="done", index=0))
            return al.AssistantMessage(
                (al.TextContent("done"),), al.StopReason.STOP, model="bench", usage=USAGE
            )
        text, chunk = self.text, self.chunk
        if self.tool is None:
            for start in range(0, len(text), chunk):
                await emit(al.TextDelta(delta=text[start : start + chunk], index=0))
            return al.AssistantMessage(
                (al.TextContent(text),), al.StopReason.STOP, model="bench", usage=USAGE
            )
        for start in range(0, len(text), chunk):
            await emit(
                al.ToolCallDelta(
                    delta=text[start : start + chunk], index=0, tool_call_id="c1", name=self.tool
                )
            )
        arguments, raw = al.providers.parse_tool_arguments(text)
        return al.AssistantMessage(
            (al.ToolCall("c1", self.tool, arguments, raw),),
            al.StopReason.TOOL_USE,
            model="bench",
            usage=USAGE,
        )


class Put:
    """The baseline's tool: takes the answer as its arguments."""

    name = "put"
    label = "Put"
    description = "Store the records."
    parameters_schema = SCHEMA

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        return al.ToolResult.text("ok")


LIMITS = al.ExecutionLimits(max_turns=None, max_total_tokens=None, max_duration=None)


def make_agent(mode: str, text: str, chunk: int) -> al.Agent:
    if mode == "arguments":
        return al.Agent(Chunked(text, chunk, "put"), tools=[Put()], limits=LIMITS)
    native = mode == "native mode"
    output = al.Output(SCHEMA, mode="native" if native else "tool")
    return al.Agent(
        Chunked(text, chunk, None if native else output.name), output_type=output, limits=LIMITS
    )


async def run(agent: al.Agent) -> tuple[float, al.AgentEnd, int]:
    """Seconds from the prompt to AgentEnd; the AgentEnd; how many OutputUpdates came."""
    updates = 0
    end: al.AgentEnd | None = None
    gc.collect()
    started = time.perf_counter()
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.OutputUpdate):
                updates += 1
            elif isinstance(event, al.AgentEnd):
                end = event
    elapsed = time.perf_counter() - started
    assert end is not None
    return elapsed, end, updates


def check(mode: str, value: dict[str, Any], agent: al.Agent, end: al.AgentEnd) -> None:
    """The run ended with the answer whole."""
    assert end.stop_reason.kind is al.StopKind.COMPLETED, end.stop_reason
    if mode == "arguments":
        assistant = agent.messages[1]
        assert isinstance(assistant, al.AssistantMessage)
        assert assistant.tool_calls[0].arguments == value
    else:
        assert end.output == value


async def main(sizes: list[float], chunk: int, repeat: int) -> None:
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print(f"trio {trio.__version__}, agentloop {al.__version__}")
    print(f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"pieces of {chunk} characters; repeats: {repeat}; seconds are medians")
    answers = {size: answer(int(size * 1_000_000)) for size in sizes}
    for size, (value, text) in answers.items():  # correctness first, and a warm-up
        for mode in MODES:
            agent = make_agent(mode, text, chunk)
            _, end, _ = await run(agent)
            check(mode, value, agent, end)
        if size == sizes[0]:
            break

    times: dict[tuple[float, str], list[float]] = {}
    updates: dict[tuple[float, str], int] = {}
    for repetition in range(repeat):
        for size, (value, text) in answers.items():
            order = MODES if repetition % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                agent = make_agent(mode, text, chunk)
                elapsed, end, count = await run(agent)
                check(mode, value, agent, end)
                times.setdefault((size, mode), []).append(elapsed)
                updates[size, mode] = count

    print()
    header = (
        "size MB | arguments s | tool mode s (x args, updates) | native mode s (x args, updates) "
        "| µs/KB: args, tool, native"
    )
    print(header)
    print("-" * len(header))
    worst = 0.0
    per_kb: dict[str, list[float]] = {mode: [] for mode in MODES}
    for size, (_, text) in answers.items():
        median = {mode: statistics.median(times[size, mode]) for mode in MODES}
        base = median["arguments"]
        cells = []
        for mode in MODES[1:]:
            ratio = median[mode] / base
            worst = max(worst, ratio)
            cells.append(f"{median[mode]:>7.3f} ({ratio:4.2f}x, {updates[size, mode]:>5})")
        kb = len(text.encode("utf-8")) / 1000
        for mode in MODES:
            per_kb[mode].append(median[mode] * 1e6 / kb)
        print(
            f"{size:>7g} | {base:>11.3f} | {cells[0]:>29} | {cells[1]:>31} | "
            + ", ".join(f"{per_kb[mode][-1]:.0f}" for mode in MODES)
        )
    print()
    verdict = "within" if worst <= RATIO_TARGET else "OVER"
    print(f"structured output: at most {worst:.2f}x the arguments ({verdict} {RATIO_TARGET}x)")
    growth = {mode: max(values) / min(values) for mode, values in per_kb.items()}
    print(
        "µs/KB largest over smallest (1.0 = linear): "
        + ", ".join(f"{mode} {value:.2f}" for mode, value in growth.items())
    )


def sizes_arg(text: str) -> list[float]:
    try:
        sizes = [float(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not sizes or any(size <= 0 for size in sizes):
        raise argparse.ArgumentTypeError(f"sizes must be > 0: {text!r}")
    return sizes


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--sizes", type=sizes_arg, default=[0.1, 1.0, 10.0], help="answer sizes in MB"
    )
    parser.add_argument("--chunk", type=positive, default=256, help="characters per piece")
    parser.add_argument("--repeat", type=positive, default=3)
    arguments = parser.parse_args()
    trio.run(main, arguments.sizes, arguments.chunk, arguments.repeat)
