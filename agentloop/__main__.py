"""``python -m agentloop "<prompt>"``: run an agent in the current directory.

For now the model is agentloop's offline demo model, which follows a fixed
plan with two real tools (list the directory, count lines). Streamed text,
tool calls, their progress and their results are printed as they happen.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import trio

from . import _events as ev
from ._agent import Agent
from ._demo import CountLines, ListDirectory, demo_provider
from ._types import AssistantMessage, StopReason

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


async def _run(prompt: str, root: Path, out: TextIO) -> int:
    out.write("agentloop: using the offline demo model (no model provider configured).\n\n")
    agent = Agent(
        demo_provider(paced=out.isatty()),  # pace for people watching, not for pipes
        system_prompt="You are a helpful assistant working in the user's directory.",
        tools=[ListDirectory(root), CountLines(root)],
    )
    printer = Printer(out)
    async with agent.prompt(prompt) as events:
        async for event in events:
            printer.show(event)
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
