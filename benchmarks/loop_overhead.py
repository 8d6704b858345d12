"""Per-turn overhead of agentloop's loop against a hand-written trio loop doing the same work.

Both loops run the same conversation: ``N`` turns in which a scripted model
streams a short sentence word by word and one ``echo`` tool call as 8-character
chunks of JSON, the tool runs and its result goes back into the history, then a
final text-only turn. Every event goes through a bounded ``trio`` memory
channel to a consumer task that drains it. The hand-written loop is what a
competent trio programmer would write without a framework; it sends the same
events in the same order (checked before timing). See benchmarks/README.md.

Run it with ``python benchmarks/loop_overhead.py`` (or ``nox -s bench``)::

    python benchmarks/loop_overhead.py --turns 20,100,1000 --repeat 7

It prints microseconds per turn (median and min over the repeats) for each
loop, their ratio, and whether agentloop is within its targets: at most 1.3x
the hand-written loop, and flat as the history grows (its µs/turn at the
largest turn count within 1.25x of that at the smallest).
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import os
import platform
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import jsonschema
import trio
from _cli import positive

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply

SENTENCE = "Let me echo this short sentence back now."  # 8 words
FINAL = "All done, the echo tool worked fine."
PROMPT = "Echo a few things, please."
ARGUMENTS = {"text": "hello from the benchmark"}
USAGE = al.Usage(input=10, output=10, total_tokens=20)
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
# How the ScriptedProvider splits text (each word with the whitespace around it) and tool-call
# JSON (chunks of its default chunk_size); the hand-written fake model does the same.
WORD = re.compile(r"\s*\S+\s*|\s+")
CHUNK_SIZE: int = inspect.signature(ScriptedProvider).parameters["chunk_size"].default

RATIO_TARGET = 1.3
FLAT_TARGET = 1.25
NOISE = 1.2  # a median further than this above its min: the timings are noisy


# --------------------------------------------------------------------------- agentloop


class EchoTool:
    """The minimal AgentTool: returns its ``text`` argument."""

    name = "echo"
    label = "Echo"
    description = "Return the text it is given."
    parameters_schema = SCHEMA

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        return al.ToolResult.text(params["text"])


def make_agent(turns: int) -> al.Agent:
    script = [reply(SENTENCE, call("echo", ARGUMENTS), usage=USAGE) for _ in range(turns)]
    script.append(reply(FINAL, usage=USAGE))
    return al.Agent(
        ScriptedProvider(script, chunk_size=CHUNK_SIZE),
        tools=[EchoTool()],
        limits=al.ExecutionLimits(max_turns=None, max_total_tokens=None, max_duration=None),
    )


# The channel size agentloop uses unless told otherwise; the hand-written loop uses the same.
DEFAULT_BUFFER: int = inspect.signature(al.Agent).parameters["event_buffer_size"].default


async def run_agentloop(agent: al.Agent) -> int:
    """Run one prompt to the end, draining the events; return how many arrived."""
    count = 0
    async with agent.prompt(PROMPT) as events:
        async for _event in events:
            count += 1
    return count


KINDS = {
    al.AgentStart: "agent_start",
    al.AgentEnd: "agent_end",
    al.TurnStart: "turn_start",
    al.TurnEnd: "turn_end",
    al.MessageStart: "message_start",
    al.MessageUpdate: "message_update",
    al.MessageEnd: "message_end",
    al.ToolExecutionStart: "tool_start",
    al.ToolExecutionEnd: "tool_end",
}


async def agentloop_kinds(turns: int) -> list[str]:
    """The kinds of the events of a real agentloop run, in order."""
    kinds: list[str] = []
    async with make_agent(turns).prompt(PROMPT) as events:
        async for event in events:
            kinds.append(KINDS.get(type(event), type(event).__name__))
    return kinds


def per_turn(kinds: list[str]) -> list[int]:
    """How many events each turn has, from its turn_start to its turn_end."""
    counts: list[int] = []
    for kind in kinds:
        if kind == "turn_start":
            counts.append(0)
        if counts:
            counts[-1] += 1
    return counts


# --------------------------------------------------------------------------- hand-written


class Event:
    """One event: a kind and its payload."""

    __slots__ = ("data", "kind")

    def __init__(self, kind: str, data: Any) -> None:
        self.kind = kind
        self.data = data


class Delta:
    """A streamed piece: text, or a chunk of a tool call's JSON arguments."""

    __slots__ = ("call_id", "index", "name", "text")

    def __init__(self, text: str, index: int, call_id: str = "", name: str = "") -> None:
        self.text = text
        self.index = index
        self.call_id = call_id
        self.name = name


class ToolUse:
    """A tool call in an assistant message."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self, id: str, name: str, arguments: dict[str, Any]) -> None:
        self.id = id
        self.name = name
        self.arguments = arguments


class Message:
    """A history message: role, content blocks (str or ToolUse), and the rest."""

    __slots__ = ("call_id", "content", "is_error", "role", "stop_reason", "timestamp", "usage")

    def __init__(
        self,
        role: str,
        content: list[Any],
        *,
        stop_reason: str = "",
        usage: tuple[int, int] = (0, 0),
        call_id: str = "",
        is_error: bool = False,
    ) -> None:
        self.role = role
        self.content = content
        self.stop_reason = stop_reason
        self.usage = usage
        self.call_id = call_id
        self.is_error = is_error
        self.timestamp = time.time_ns() // 1_000_000


class FakeModel:
    """Streams the same deltas as the ScriptedProvider: words of text, JSON in chunks."""

    def __init__(self, script: list[tuple[str, tuple[str, dict[str, Any]] | None]]) -> None:
        self.script = script
        self.position = 0
        self.next_call_id = 1

    async def stream(
        self, history: list[Message], emit: Callable[[Delta], Awaitable[None]]
    ) -> Message:
        text, tool_call = self.script[self.position]
        self.position += 1
        await trio.lowlevel.checkpoint()
        for word in WORD.findall(text):
            await emit(Delta(word, 0))
        content: list[Any] = [text]
        if tool_call is not None:
            name, arguments = tool_call
            call_id = f"call_{self.next_call_id}"
            self.next_call_id += 1
            raw = json.dumps(arguments)
            for start in range(0, len(raw), CHUNK_SIZE):
                await emit(Delta(raw[start : start + CHUNK_SIZE], 1, call_id, name))
            content.append(ToolUse(call_id, name, json.loads(raw)))
        stop_reason = "stop" if tool_call is None else "tool_use"
        return Message("assistant", content, stop_reason=stop_reason, usage=(10, 10))


def make_model(turns: int) -> FakeModel:
    script: list[tuple[str, tuple[str, dict[str, Any]] | None]] = [
        (SENTENCE, ("echo", ARGUMENTS)) for _ in range(turns)
    ]
    script.append((FINAL, None))
    return FakeModel(script)


async def echo(arguments: dict[str, Any]) -> str:
    return str(arguments["text"])


TOOLS: dict[str, tuple[Callable[[dict[str, Any]], Awaitable[str]] | None, Any]] = {
    "echo": (echo, jsonschema.Draft202012Validator(SCHEMA)),  # compiled once
}
NO_RESULT = Message("tool", [])  # a placeholder, replaced by each call's result


async def run_tool(
    send: trio.MemorySendChannel[Event], tool_use: ToolUse, results: list[Message], position: int
) -> None:
    """Validate the arguments, run the tool, send its start and end events, store the result."""
    tool, validator = TOOLS.get(tool_use.name, (None, None))
    if tool is None:
        output, is_error = f"Tool not found: {tool_use.name}", True
    elif not validator.is_valid(tool_use.arguments):
        errors = validator.iter_errors(tool_use.arguments)
        output, is_error = "Invalid arguments: " + "; ".join(e.message for e in errors), True
    else:
        output, is_error = "", False
    await send.send(Event("tool_start", tool_use))
    if tool is not None and not is_error:
        try:
            output = await tool(tool_use.arguments)
        except Exception as error:
            output, is_error = f"{type(error).__name__}: {error}", True
    result = Message("tool", [output], call_id=tool_use.id, is_error=is_error)
    results[position] = result
    await send.send(Event("tool_end", result))


async def hand_loop(
    model: FakeModel, prompt: str, send: trio.MemorySendChannel[Event], direct: bool = False
) -> None:
    """A minimal agent loop: stream a reply, run its tool calls in a nursery, repeat.

    ``direct``: await a lone tool call instead of starting a task for it, as
    agentloop itself does.
    """
    async with send:
        history: list[Message] = []
        total_input = total_output = 0
        await send.send(Event("agent_start", None))
        pending = [Message("user", [prompt])]
        history.extend(pending)

        async def on_delta(delta: Delta) -> None:
            await send.send(Event("message_update", delta))

        turn = 0
        while True:
            await send.send(Event("turn_start", turn))
            for message in pending:
                await send.send(Event("message_start", message))
                await send.send(Event("message_end", message))
            pending = []
            await send.send(Event("message_start", None))
            assistant = await model.stream(history, on_delta)
            history.append(assistant)
            await send.send(Event("message_end", assistant))
            total_input += assistant.usage[0]
            total_output += assistant.usage[1]
            calls = [block for block in assistant.content if isinstance(block, ToolUse)]
            results: list[Message] = [NO_RESULT] * len(calls)
            if direct and len(calls) == 1:
                await run_tool(send, calls[0], results, 0)
            elif calls:
                async with trio.open_nursery() as nursery:
                    for position, tool_use in enumerate(calls):
                        nursery.start_soon(run_tool, send, tool_use, results, position)
            for result in results:
                history.append(result)
                await send.send(Event("message_start", result))
                await send.send(Event("message_end", result))
            await send.send(Event("turn_end", (assistant, results)))
            turn += 1
            if not calls:
                break
        await send.send(Event("agent_end", (history, total_input, total_output)))


async def run_hand(model: FakeModel, buffer_size: int, direct: bool = False) -> int:
    """Run the hand-written loop with a consumer task draining its events; return the count."""
    send, receive = trio.open_memory_channel[Event](buffer_size)
    count = 0
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hand_loop, model, PROMPT, send, direct)
        async with receive:
            async for _event in receive:
                count += 1
    return count


async def hand_kinds(turns: int, buffer_size: int, direct: bool) -> list[str]:
    """The kinds of the events of a hand-written run, in order."""
    send, receive = trio.open_memory_channel[Event](buffer_size)
    kinds: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hand_loop, make_model(turns), PROMPT, send, direct)
        async with receive:
            async for event in receive:
                kinds.append(event.kind)
    return kinds


# --------------------------------------------------------------------------- timing


async def time_agentloop(turns: int, runs: int) -> tuple[float, int]:
    """Time ``runs`` back-to-back runs of ``turns`` turns; return µs per turn and events per run."""
    agents = [make_agent(turns) for _ in range(runs)]
    counts: list[int] = []
    gc.collect()
    start = time.perf_counter_ns()
    for agent in agents:
        counts.append(await run_agentloop(agent))
    elapsed = time.perf_counter_ns() - start
    assert len(set(counts)) == 1, counts
    return elapsed / 1000 / (turns * runs), counts[0]


async def time_hand(turns: int, runs: int, buffer_size: int, direct: bool) -> tuple[float, int]:
    """The same for the hand-written loop."""
    models = [make_model(turns) for _ in range(runs)]
    counts: list[int] = []
    gc.collect()
    start = time.perf_counter_ns()
    for model in models:
        counts.append(await run_hand(model, buffer_size, direct))
    elapsed = time.perf_counter_ns() - start
    assert len(set(counts)) == 1, counts
    return elapsed / 1000 / (turns * runs), counts[0]


def paired_ratio(numerators: list[float], denominators: list[float]) -> float:
    """The median of the ratios of samples taken in the same repeat: slow spells cancel out."""
    return statistics.median(a / b for a, b in zip(numerators, denominators, strict=True))


async def main(turn_counts: list[int], repeat: int, min_turns: int, direct: bool) -> None:
    buffer_size = DEFAULT_BUFFER
    print(f"Python {platform.python_version()} ({platform.python_implementation()})")
    print(f"trio {trio.__version__}, agentloop {al.__version__}")
    print(f"machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs")
    tool_run = "awaited directly (--direct)" if direct else "run in a nursery"
    print(
        f"event buffer: {buffer_size}; repeats: {repeat}; samples of >= {min_turns} turns; "
        f"hand-written tool call {tool_run}"
    )

    # Same events in the same order, before anything is timed.
    agentloop_sequence = await agentloop_kinds(3)
    hand_sequence = await hand_kinds(3, buffer_size, direct)
    assert agentloop_sequence == hand_sequence, (agentloop_sequence, hand_sequence)
    agentloop_turns, hand_turns = per_turn(agentloop_sequence), per_turn(hand_sequence)
    assert agentloop_turns == hand_turns, (agentloop_turns, hand_turns)
    print(
        f"events per turn (first, tool turns..., final): agentloop {agentloop_turns}, "
        f"hand-written {hand_turns}; per 3-turn run: {len(agentloop_sequence)} and "
        f"{len(hand_sequence)}"
    )

    # Warm up both loops once (imports, caches, code paths).
    await run_agentloop(make_agent(20))
    await run_hand(make_model(20), buffer_size, direct)

    # Round-robin: each repeat times every turn count with both loops, in alternating order,
    # so that a slow spell of the machine hits every column alike and paired ratios cancel it.
    agentloop_times: dict[int, list[float]] = {turns: [] for turns in turn_counts}
    hand_times: dict[int, list[float]] = {turns: [] for turns in turn_counts}
    events: dict[int, int] = {}
    for repetition in range(repeat):
        for turns in turn_counts:
            runs = -(-min_turns // turns)  # short runs are timed in batches: less noise
            if repetition % 2 == 0:
                a_us, a_events = await time_agentloop(turns, runs)
                h_us, h_events = await time_hand(turns, runs, buffer_size, direct)
            else:
                h_us, h_events = await time_hand(turns, runs, buffer_size, direct)
                a_us, a_events = await time_agentloop(turns, runs)
            assert a_events == h_events, (turns, a_events, h_events)
            assert events.setdefault(turns, a_events) == a_events
            agentloop_times[turns].append(a_us)
            hand_times[turns].append(h_us)

    print()
    header = (
        "turns | agentloop µs/turn (median, min) | hand-written µs/turn (median, min) "
        "| ratio (median) | events/run"
    )
    print(header)
    print("-" * len(header))
    noisy = False
    for turns in turn_counts:
        a_times, h_times = agentloop_times[turns], hand_times[turns]
        a_median, h_median = statistics.median(a_times), statistics.median(h_times)
        noisy = noisy or a_median > NOISE * min(a_times) or h_median > NOISE * min(h_times)
        print(
            f"{turns:>5} | {a_median:>14.1f}, {min(a_times):>14.1f} "
            f"| {h_median:>17.1f}, {min(h_times):>15.1f} "
            f"| {paired_ratio(a_times, h_times):>13.2f}x | {events[turns]:>10}"
        )
    print()

    worst = max(paired_ratio(agentloop_times[t], hand_times[t]) for t in turn_counts)
    verdict = "within" if worst <= RATIO_TARGET else "NOT within"
    print(
        f"overhead: agentloop is {verdict} the {RATIO_TARGET}x target "
        f"(worst median ratio {worst:.2f}x)"
    )
    if len(turn_counts) > 1:
        low, high = turn_counts[0], turn_counts[-1]
        growth = paired_ratio(agentloop_times[high], agentloop_times[low])
        verdict = "flat" if growth <= FLAT_TARGET else "NOT flat"
        print(
            f"history growth: agentloop µs/turn at {high} turns is {growth:.2f}x that at "
            f"{low} turns (median ratio): {verdict} as history grows (target <= {FLAT_TARGET}x)"
        )
    if noisy:
        print(
            f"warning: some medians are more than {NOISE}x their min: the timings are noisy "
            "(was the machine busy?); rerun on an idle machine, or with a larger --repeat"
        )
    await tracing_cost(turn_counts[len(turn_counts) // 2], repeat, min_turns)


async def tracing_cost(turns: int, repeat: int, min_turns: int) -> None:
    """agentloop's µs/turn with tracing off and on (agentloop.otel to the OpenTelemetry SDK)."""
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            SimpleSpanProcessor,
            SpanExporter,
            SpanExportResult,
        )
    except ImportError:
        print("tracing: the OpenTelemetry SDK is not installed; not measured")
        return
    import agentloop.otel

    class Drop(SpanExporter):  # the SDK makes and exports each span; the spans go nowhere
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    runs = -(-min_turns // turns)
    off: list[float] = []
    on: list[float] = []
    for repetition in range(repeat):
        for traced in (repetition % 2 == 0, repetition % 2 == 1):
            if traced:
                agentloop.otel.instrument(tracer_provider=provider)
            try:
                us, _ = await time_agentloop(turns, runs)
            finally:
                agentloop.otel.uninstrument()
            (on if traced else off).append(us)
    off_median, on_median = statistics.median(off), statistics.median(on)
    print()
    print(
        f"tracing at {turns} turns: agentloop µs/turn off {off_median:.1f}, on "
        f"{on_median:.1f} ({paired_ratio(on, off):.2f}x; a run, a chat and a tool span per "
        "turn, to the OpenTelemetry SDK)"
    )


def parse_turns(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of integers: {text!r}") from None
    if not values or any(value < 1 for value in values):
        raise argparse.ArgumentTypeError(f"turn counts must be >= 1: {text!r}")
    return sorted(set(values))


def cli(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Per-turn overhead of agentloop against a hand-written trio loop."
    )
    parser.add_argument(
        "--turns",
        type=parse_turns,
        default=[20, 100, 1000],
        help="comma-separated turn counts (default: 20,100,1000)",
    )
    parser.add_argument(
        "--repeat", type=positive, default=7, help="timed samples per turn count (default: 7)"
    )
    parser.add_argument(
        "--min-turns",
        type=positive,
        default=1000,
        help="a timed sample repeats the run back to back until it covers at least this many "
        "turns, so short runs are not lost in timer noise (default: 1000)",
    )
    parser.add_argument(
        "--direct",
        action="store_true",
        help="the hand-written loop awaits a lone tool call directly instead of starting a "
        "task for it in a nursery (agentloop takes this shortcut itself)",
    )
    args = parser.parse_args(argv)
    trio.run(main, args.turns, args.repeat, args.min_turns, args.direct)


if __name__ == "__main__":
    cli()
