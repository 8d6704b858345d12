"""The texts the terminal agent shows: the slash commands', and hints after a model error."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from .._secrets import redact_url
from .._tool import AgentTool, Permissions
from .._words import plural
from ..session import SessionInfo

__all__ = [
    "ANY_DIRECTORY",
    "COMMANDS",
    "choose_session",
    "error_hint",
    "help_lines",
    "permission_lines",
    "session_lines",
    "tool_lines",
]

#: The commands, with what they do.
COMMANDS: dict[str, str] = {
    "/help": "show this help",
    "/tools": "list the agent's tools",
    "/permissions": "show which tool calls run, and which are asked about",
    "/save": "say where this session is saved",
    "/sessions": "list this directory's saved sessions, newest first (--any-directory: all)",
    "/resume ID": "continue a saved session of this directory (--any-directory: of any)",
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
        "Ctrl-C stops the run; a second Ctrl-C, or Ctrl-C at an empty prompt, quits.",
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


ANY_DIRECTORY = "--any-directory"
"""The flag that lets the session listing and resuming reach other directories' sessions."""


def _session_line(info: SessionInfo, current: Path | None) -> str:
    when = info.modified.astimezone().strftime("%Y-%m-%d %H:%M")
    mark = " (this one)" if current is not None and info.path == current else ""
    count = plural(info.messages, "message")
    return f"  {info.session_id}  {when}  {count:>12}  {info.title}{mark}"


def session_lines(
    sessions: Sequence[SessionInfo],
    current: Path | None,
    *,
    here: Path,
    any_directory: bool = False,
) -> list[str]:
    """The text of ``/sessions`` and ``--sessions``: one line per session, newest first.

    Only the sessions started in ``here``, then a line saying how many other
    directories have, unless ``any_directory``: then every session, under the
    directory it was started in (``here`` first, then each other directory in
    the order of its newest session, then the sessions that do not say).
    """
    mine = [info for info in sessions if info.cwd == here]
    if not any_directory:
        lines = [_session_line(info, current) for info in mine]
        if not mine:
            lines = [f"No saved sessions in {here} yet."]
        others = len(sessions) - len(mine)
        if others:
            lines.append(
                f"({plural(others, 'more session')} in other directories: "
                f"add {ANY_DIRECTORY} to list them)"
            )
        return lines
    if not sessions:
        return ["No saved sessions yet."]
    groups: dict[Path | None, list[SessionInfo]] = {here: mine} if mine else {}
    for info in sessions:
        if info.cwd is not None and info.cwd != here:
            groups.setdefault(info.cwd, []).append(info)
    unknown = [info for info in sessions if info.cwd is None]
    if unknown:
        groups[None] = unknown
    lines = []
    for directory, found in groups.items():
        if directory is None:
            lines.append("In an unknown directory (recorded by an older agentloop):")
        else:
            lines.append(f"In {directory}{' (this directory)' if directory == here else ''}:")
        lines += [_session_line(info, current) for info in found]
    return lines


def choose_session(
    sessions: Sequence[SessionInfo],
    session_id: str,
    *,
    here: Path,
    any_directory: bool,
    listing: str,
) -> SessionInfo:
    """The session to resume, of ``sessions`` (newest first).

    ``session_id`` names it (its id, or the start of only one id); ``""``
    means the latest. Only the sessions started in ``here`` count, unless
    ``any_directory``. ``listing`` is the command that lists sessions
    (``agentloop --sessions``, ``/sessions``), for the messages.

    Raises:
        LookupError: no such session, several, or one of another directory;
            the message says what to do.
    """
    mine = [info for info in sessions if info.cwd == here]
    if not session_id:
        found = list(sessions) if any_directory else mine
        if found:
            return found[0]
        others = f" ({listing} {ANY_DIRECTORY} lists the sessions of other directories)"
        raise LookupError(
            f"there is no saved session of {here} to resume: run agentloop without "
            f"--resume to start one{others if sessions else ''}"
        )
    exact = [info for info in sessions if info.session_id == session_id]
    matches = exact or [info for info in sessions if info.session_id.startswith(session_id)]
    if not any_directory:
        here_only = [info for info in matches if info.cwd == here]
        if not here_only and len(matches) == 1:
            raise LookupError(_elsewhere(matches[0], here))
        if not here_only and matches:
            raise LookupError(
                f"no session of {here} starts with {session_id!r}, but "
                f"{plural(len(matches), 'session')} of other directories do: add "
                f"{ANY_DIRECTORY} and more of the id ({listing} {ANY_DIRECTORY} lists them)"
            )
        matches = here_only
    if not matches:
        raise LookupError(
            f"no saved session {session_id!r} ({listing} lists the sessions of {here}; "
            f"add {ANY_DIRECTORY} for every directory)"
        )
    if len(matches) > 1:
        names = ", ".join(info.session_id for info in matches)
        raise LookupError(
            f"several sessions start with {session_id!r}: {names} (give more of the id)"
        )
    return matches[0]


def _elsewhere(info: SessionInfo, here: Path) -> str:
    """Why the session ``info``, of another directory, is not resumed without the flag."""
    if info.cwd is None:
        return (
            f"session {info.session_id} does not say which directory it belongs to (it "
            f"was recorded by an older agentloop): add {ANY_DIRECTORY} to continue it in {here}"
        )
    there = shlex.quote(str(info.cwd))
    return (
        f"session {info.session_id} belongs to {info.cwd}, not {here}: continue it there "
        f"(cd {there} && agentloop --resume {info.session_id}), or add {ANY_DIRECTORY} "
        f"to continue it in {here}"
    )


_KEY_VARIABLES = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
}
_STATUS = re.compile(r"\bAPI error (\d{3})\b")


def error_hint(
    message: str,
    *,
    provider: str,
    base_url: str | None = None,
    api_key_env: str | None = None,
    base_url_env: tuple[str, str] | None = None,
) -> str | None:
    """What to do after a model call failed with ``message``, or None if nothing useful.

    ``provider`` is the provider of ``--model`` (``anthropic``, ``openai``...);
    ``base_url`` and ``api_key_env`` are the options given; ``base_url_env``
    the variable that moved the API's root and its value (``OPENAI_BASE_URL``...).
    """
    variable = _KEY_VARIABLES.get(provider)
    if variable is None:  # the demo, a script: nothing to check
        return None
    base_url = None if base_url is None else redact_url(base_url)
    status = _STATUS.search(message)
    code = int(status.group(1)) if status else None
    if message.startswith("cannot connect to "):
        if base_url is not None:
            return f"Is the server at {base_url} running? Start it, or check --base-url."
        if base_url_env is not None:
            variable, url = base_url_env
            return f"Is the server at {redact_url(url)} running? Start it, or check {variable}."
        return "Check your network connection (and any proxy settings), then try again."
    if code in (401, 403):
        if api_key_env is not None:
            return f"Check the API key in {api_key_env}."
        if base_url is not None:
            return (
                f"If the server needs an API key, set {variable} or name its variable with "
                "--api-key-env."
            )
        return f"Check the API key in {variable} (or name another variable with --api-key-env)."
    if code == 404:
        if base_url is not None:
            return (
                "Check the model's name on that server (--model openai:NAME) and --base-url "
                "(it often ends in /v1)."
            )
        return f"Check the model's name in --model {provider}:MODEL."
    if "insufficient_quota" in message:
        return "The account has no credit left: check its plan and billing."
    if "(gave up after " in message:
        return "The API kept failing; try again in a while."
    return None
