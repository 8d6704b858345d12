"""Test doubles shared by the test modules: real tools with observable behaviour."""

from __future__ import annotations

from typing import Any

import attrs
import trio

import agentloop as al
from agentloop.testing import EventRecorder

TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}
ANY_SCHEMA: dict[str, Any] = {"type": "object"}


@attrs.define(eq=False)
class Echo:
    """Returns its ``text`` argument upper-cased."""

    name: str = "echo"
    label: str = "Echo"
    description: str = "Echo text back in capitals."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: TEXT_SCHEMA)
    calls: list[dict[str, Any]] = attrs.field(factory=list)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.calls.append(params)
        await trio.lowlevel.checkpoint()
        return al.ToolResult.text(params["text"].upper())


@attrs.define(eq=False)
class Sleeper:
    """Sleeps ``seconds`` (default 10) and records how it ended: done or cancelled."""

    name: str = "sleep"
    label: str = "Sleep"
    description: str = "Sleep a while."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)
    timeout: float | None = None
    seconds: float = 10.0
    outcomes: list[tuple[str, str]] = attrs.field(factory=list)  # (call id, "done"|"cancelled")
    started: list[str] = attrs.field(factory=list)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.started.append(ctx.tool_call_id)
        try:
            await trio.sleep(params.get("seconds", self.seconds))
        except trio.Cancelled:
            self.outcomes.append((ctx.tool_call_id, "cancelled"))
            raise
        self.outcomes.append((ctx.tool_call_id, "done"))
        return al.ToolResult.text(f"slept {params.get('seconds', self.seconds)}")


@attrs.define(eq=False)
class Raiser:
    """Raises the exception it was built with."""

    error: BaseException
    name: str = "raiser"
    label: str = "Raiser"
    description: str = "Always fails."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        await trio.lowlevel.checkpoint()
        raise self.error


@attrs.define(eq=False)
class Steerer:
    """Steers the agent it is given while it runs, then returns."""

    agent: al.Agent | None = None
    message: str = "change of plan"
    name: str = "steerer"
    label: str = "Steerer"
    description: str = "Queues a steering message."
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: ANY_SCHEMA)

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        assert self.agent is not None
        self.agent.steer(self.message)
        await trio.lowlevel.checkpoint()
        return al.ToolResult.text("steered")


class LoggingChannel:
    """A send channel for agent_loop that logs each event as the loop sends it.

    Hooks logging into the same list give the exact loop-side order of hooks and
    events, which the consumer's view (another task) cannot.
    """

    def __init__(
        self, inner: trio.MemorySendChannel[al.AgentEvent], log: list[str], describe: Any = None
    ) -> None:
        self.inner = inner
        self.log = log
        self.describe = describe or (lambda event: type(event).__name__)

    async def send(self, event: al.AgentEvent) -> None:
        line = self.describe(event)
        if line is not None:
            self.log.append(line)
        await self.inner.send(event)

    def __enter__(self) -> LoggingChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.close()


async def run_recorded(agent: al.Agent, *prompts: str) -> EventRecorder:
    """Run ``agent`` and record every event."""
    recorder = EventRecorder()
    async with agent.prompt(*prompts) as events:
        await recorder.consume(events)
    return recorder


def texts(messages: Any) -> list[tuple[str, str]]:
    """(kind, text) for each message: a compact view of a history for exact assertions."""
    out: list[tuple[str, str]] = []
    for message in messages:
        if isinstance(message, al.UserMessage):
            out.append(("user", "".join(getattr(b, "text", "") for b in message.content)))
        elif isinstance(message, al.AssistantMessage):
            calls = ",".join(f"{c.name}#{c.id}" for c in message.tool_calls)
            out.append(
                (
                    f"assistant:{message.stop_reason.value}",
                    message.text + (f"[{calls}]" if calls else ""),
                )
            )
        else:
            flag = "error" if message.is_error else "ok"
            out.append((f"result:{flag}", f"{message.tool_call_id}={message.text}"))
    return out


def in_call_order(lines: list[str]) -> list[str]:
    """The offline demo's lines with its two parallel reads' results in call order.

    The demo reads calc.py and test_calc.py in one reply; they run side by side, so
    their ``✓`` lines come in the order the reads ended, which varies.
    """
    out = list(lines)
    for i in range(len(out) - 1):
        if out[i].startswith("✓ read_file: [test_calc.py") and out[i + 1].startswith(
            "✓ read_file: [calc.py"
        ):
            out[i], out[i + 1] = out[i + 1], out[i]
    return out
