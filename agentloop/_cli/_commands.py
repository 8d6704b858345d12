"""The slash commands' texts: help, tools, permissions, sessions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from .._permissions import Permissions
from .._tool import AgentTool
from ..session import SessionInfo

__all__ = ["COMMANDS", "help_lines", "permission_lines", "session_lines", "tool_lines"]

#: The commands, with what they do.
COMMANDS: dict[str, str] = {
    "/help": "show this help",
    "/tools": "list the agent's tools",
    "/permissions": "show which tool calls run, and which are asked about",
    "/save": "say where this session is saved",
    "/sessions": "list the saved sessions, newest first",
    "/resume ID": "load a saved session into the agent and continue it",
    "/later TEXT": "during a run: send TEXT when the agent is done (a follow-up)",
    "/quit": "leave (so does Ctrl-D at the prompt)",
}


def help_lines() -> list[str]:
    """The text of ``/help``."""
    width = max(len(name) for name in COMMANDS)
    lines = ["Type a prompt and press Enter. Commands:"]
    lines += [f"  {name.ljust(width)}  {what}" for name, what in COMMANDS.items()]
    lines += [
        "While the agent works, a line you type is sent to it at the next tool call",
        "boundary (steering). Start a line with // to send text that begins with /.",
        "Ctrl-C stops the run; a second Ctrl-C, or Ctrl-C at the prompt, quits.",
    ]
    return lines


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tool_lines(tools: Iterable[AgentTool]) -> list[str]:
    """The text of ``/tools``: each tool's name and the first line of its description."""
    tools = list(tools)
    if not tools:
        return ["The agent has no tools."]
    width = max(len(tool.name) for tool in tools)
    lines = []
    for tool in tools:
        first = next((line.strip() for line in tool.description.splitlines() if line.strip()), "")
        lines.append(f"  {tool.name.ljust(width)}  {_shorten(first, 80)}")
    return lines


def permission_lines(policy: Permissions) -> list[str]:
    """The text of ``/permissions``: the policy's rules."""

    def rules(found: Sequence[object]) -> str:
        return ", ".join(str(rule) for rule in found) or "(none)"

    return [
        f"  allow: {rules(policy.allow)}",
        f"  ask:   {rules(policy.ask)}",
        f"  deny:  {rules(policy.deny)}",
        f"  any other tool: {policy.default}",
        "Asked calls wait for your answer: y runs the call; anything else refuses it.",
    ]


def session_lines(sessions: Sequence[SessionInfo], current: Path | None) -> list[str]:
    """The text of ``/sessions``: one line per session, newest first."""
    if not sessions:
        return ["No saved sessions yet."]
    lines = []
    for info in sessions:
        when = info.modified.astimezone().strftime("%Y-%m-%d %H:%M")
        mark = " (this one)" if current is not None and info.path == current else ""
        count = f"{info.messages} message{'' if info.messages == 1 else 's'}"
        lines.append(f"  {info.session_id}  {when}  {count:>12}  {info.title}{mark}")
    return lines
