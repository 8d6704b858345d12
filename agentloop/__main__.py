"""``python -m agentloop "<prompt>"``: run an agent in the current directory.

The model is Anthropic's when ``ANTHROPIC_API_KEY`` is set, else OpenAI's when
``OPENAI_API_KEY`` is set, else agentloop's offline demo model, which follows a
fixed plan. The agent has two read-only tools (list the directory, count
lines). Streamed text, thinking, tool calls, their progress and results, and
retries are printed as they happen.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import trio

from . import _events as ev
from ._agent import Agent
from ._demo import CountLines, ListDirectory, demo_provider
from ._types import AssistantMessage, StopReason
from .providers import AnthropicProvider, OpenAIProvider, Provider

__all__ = ["main"]


def _summary(args: dict[str, Any], limit: int = 60) -> str:
    text = ", ".join(f"{key}={json.dumps(value)}" for key, value in args.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Printer:
    """Renders events as plain text on a stream."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.in_text = False

    def _line(self, text: str) -> None:
        if self.in_text:
            self.out.write("\n")
            self.in_text = False
        self.out.write(text + "\n")
        self.out.flush()

    def show(self, event: ev.AgentEvent) -> None:
        match event:
            case ev.MessageUpdate(delta=ev.TextDelta(delta=text)):
                self.out.write(text)
                self.out.flush()
                self.in_text = True
            case ev.MessageUpdate(delta=ev.ThinkingDelta(delta=text)):
                dim, plain = ("\x1b[2m", "\x1b[0m") if self.out.isatty() else ("", "")
                self.out.write(f"{dim}{text}{plain}")
                self.out.flush()
                self.in_text = True
            case ev.MessageUpdate(
                delta=ev.StreamRestart(attempt=attempt, delay=delay, error=error)
            ):
                self._line(f"  ↻ {error}; retrying in {delay:g}s (attempt {attempt})")
            case ev.ToolExecutionStart(tool_name=name, args=args):
                self._line(f"→ {name}({_summary(args)})")
            case ev.ProgressMessage(text=text):
                self._line(f"  … {text}")
            case ev.ToolExecutionUpdate(partial_result=partial):
                self._line(f"  · {partial.text_content}")
            case ev.ToolExecutionEnd(tool_name=name, result=result, is_error=is_error):
                first = result.text_content.splitlines()[0] if result.text_content else ""
                more = len(result.text_content.splitlines()) - 1
                tail = f" (+{more} lines)" if more > 0 else ""
                self._line(f"{'✗' if is_error else '✓'} {name}: {first}{tail}")
            case ev.MessageEnd(message=AssistantMessage(stop_reason=StopReason.ERROR) as message):
                self._line(f"error: {message.error_message}")
            case ev.AgentEnd(usage=usage, messages=messages):
                turns = sum(isinstance(m, AssistantMessage) for m in messages)
                self._line(f"[{turns} turns, {usage.input} tokens in, {usage.output} tokens out]")
            case _:
                pass


def choose_model(environ: Mapping[str, str], *, paced: bool) -> tuple[Provider, str]:
    """The provider to use, by which API key is set, and a line saying which it is."""
    if key := environ.get("ANTHROPIC_API_KEY"):
        anthropic = AnthropicProvider(api_key=key)
        return anthropic, f"agentloop: using Anthropic model {anthropic.model.id}."
    if key := environ.get("OPENAI_API_KEY"):
        openai = OpenAIProvider(api_key=key)
        return openai, f"agentloop: using OpenAI model {openai.model.id}."
    note = "agentloop: using the offline demo model (no ANTHROPIC_API_KEY or OPENAI_API_KEY set)."
    return demo_provider(paced=paced), note  # pace for people watching, not for pipes


async def _run(prompt: str, root: Path, out: TextIO) -> int:
    provider, note = choose_model(os.environ, paced=out.isatty())
    out.write(f"{note}\n\n")
    agent = Agent(
        provider,
        system_prompt="You are a helpful assistant working in the user's directory.",
        tools=[ListDirectory(root), CountLines(root)],
    )
    printer = Printer(out)
    try:
        async with agent.prompt(prompt) as events:
            async for event in events:
                printer.show(event)
    finally:
        aclose = getattr(provider, "aclose", None)
        if aclose is not None:
            with trio.move_on_after(5, shield=True):
                await aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run the command line; return the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m agentloop", description="Run an agent in a directory."
    )
    parser.add_argument("prompt", nargs="+", help="what to ask the agent")
    parser.add_argument(
        "-C", "--directory", type=Path, default=Path.cwd(), help="work in this directory"
    )
    options = parser.parse_args(argv)
    root = options.directory.resolve()
    if not root.is_dir():
        parser.error(f"not a directory: {root}")
    try:
        return trio.run(_run, " ".join(options.prompt), root, sys.stdout)
    except KeyboardInterrupt:
        sys.stdout.write("\ninterrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
