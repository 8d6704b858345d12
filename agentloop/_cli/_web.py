"""``agentloop web``: the terminal's coding agent on a local page (:mod:`agentloop.web._page`).

The agent is set up as the terminal agent is (:mod:`._setup`): the settings
files (with folder trust), ``AGENTS.md``, the model (the offline demo without a
key, on a scratch project of its own), the built-in tools and their sandbox,
OpenAPI and MCP tools, the permission rules. A call that needs approval waits
for the page's buttons. Each conversation is saved as the terminal's sessions
are, so ``agentloop --resume`` continues it, and the page lists the
directory's sessions and resumes them.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from functools import partial
from typing import Any

import trio

from .._agent import Agent
from .._instructions import ProjectInstructions, project_instructions
from .._loop import ExecutionLimits
from .._secrets import redact_urls
from .._tool import AgentTool, Approver
from .._util import raise_single
from .._visible import visible
from ..session import list_sessions
from ..tools import hide_process_credentials
from ._args import Options, apply_settings, parse_args
from ._models import ModelChoice, ModelError, choose_model, demo_workspace
from ._render import Screen, make_console
from ._sessions import SessionLog
from ._settings import SettingsError
from ._setup import (
    SetupError,
    builtin_tools,
    instructions_note,
    make_permissions,
    mcp_tools,
    openapi_tools,
    system_prompt,
)
from ._trust import settle_settings

__all__ = ["WebHost", "web_main"]

_USAGE = "usage: agentloop web [--port N] [terminal agent options]"


class WebHost:
    """The :class:`~agentloop.web.PageHost` of ``agentloop web``: the terminal agent's setup."""

    def __init__(
        self,
        options: Options,
        choice: ModelChoice,
        screen: Screen,
        *,
        extra: Sequence[AgentTool] = (),
        instructions: ProjectInstructions | None = None,
    ) -> None:
        self.options = options
        self.choice = choice
        self.screen = screen
        self.extra = list(extra)
        self.instructions = instructions
        self.label = choice.label
        self.directory = options.directory

    def _session(self, approver: Approver) -> tuple[Agent, SessionLog]:
        options = self.options
        log = SessionLog(self.screen, directory=self.directory, model=self.label)
        tools, _ = builtin_tools(self.directory, options.sandbox)
        limits = None if options.max_turns is None else ExecutionLimits(max_turns=options.max_turns)
        agent = Agent(
            self.choice.provider,
            system_prompt=system_prompt(self.directory, self.instructions),
            tools=[*tools, *self.extra],
            permissions=make_permissions(approver, settings=options.permissions),
            journal=log.record,
            limits=limits,
        )
        return agent, log

    def new_session(self, approver: Approver) -> Any:
        """A new conversation, saved from its first prompt on."""
        from ..web import PageSession

        agent, log = self._session(approver)
        return PageSession(agent, lambda: log.session_id, log.open, log.close)

    async def sessions(self) -> list[dict[str, Any]]:
        """The sessions started in the directory, newest first."""
        found = await trio.to_thread.run_sync(list_sessions)
        return [
            {
                "id": info.session_id,
                "title": info.title,
                "messages": info.messages,
                "modified": info.modified.isoformat(timespec="seconds"),
            }
            for info in found
            if info.cwd == self.directory
        ]

    async def resume(self, session_id: str, approver: Approver) -> Any:
        """The directory's session ``session_id`` in a new agent, recorded to its file.

        Raises:
            LookupError: no such session, or it cannot be read.
        """
        from ..web import PageSession

        agent, log = self._session(approver)
        try:
            await log.resume(agent, session_id, any_directory=False, listing="the page's list")
        except SetupError as error:
            log.close()
            raise LookupError(str(error)) from None
        return PageSession(agent, lambda: log.session_id, log.open, log.close)


def _port(argv: list[str]) -> tuple[int, list[str]] | str:
    """``--port N`` taken out of ``argv``; the problem, as a sentence, when it is wrong."""
    rest: list[str] = []
    port = 0
    words = iter(argv)
    for word in words:
        if word == "--port" or word.startswith("--port="):
            value = word.partition("=")[2] if "=" in word else next(words, "")
            if not value.isdigit() or not 0 < int(value) < 65536:
                return f"--port needs a port number (1-65535), got {value!r}"
            port = int(value)
        else:
            rest.append(word)
    return port, rest


async def _serve(options: Options, choice: ModelChoice, port: int, screen: Screen) -> int:
    from ..web import serve_page

    key = options.api_key_env
    hide_process_credentials(also=[key] if key else ())
    root = options.directory
    screen.line(choice.note)
    instructions = await trio.to_thread.run_sync(project_instructions, root)
    if instructions is not None:
        screen.line(instructions_note(instructions))
    async with contextlib.AsyncExitStack() as stack:
        try:
            _, note = builtin_tools(root, options.sandbox)
            if note is not None:
                screen.line(note)
            extra: list[AgentTool] = await openapi_tools(options.openapi, options.openapi_base_url)
            if options.mcp_config is not None:
                extra += await mcp_tools(options.mcp_config, stack, screen, roots=[root])
        except SetupError as error:
            print(f"agentloop: {visible(redact_urls(str(error)))}", file=sys.stderr)
            return 2
        host = WebHost(options, choice, screen, extra=extra, instructions=instructions)
        async with trio.open_nursery() as nursery:
            url = await nursery.start(partial(serve_page, host, port=port))
            print(f"agentloop: the page is at {url}", flush=True)
            print("agentloop: open it in a browser on this machine; Ctrl-C stops.", flush=True)
    return 0


def web_main(argv: Sequence[str]) -> int:
    """``agentloop web [--port N] [OPTIONS]``: serve the agent on a local page.

    The options are the terminal agent's (``--model``, ``--sandbox``,
    ``--auto``, ``--trust``, ``--mcp-config``, ``-C``...), without a prompt.
    Prints the page's URL (with its secret token) and serves until Ctrl-C.
    Returns 0, 2 on a usage or setup error, 130 on Ctrl-C.
    """
    taken = _port(list(argv))
    if isinstance(taken, str):
        print(f"{_USAGE}\nagentloop web: {taken}", file=sys.stderr)
        return 2
    port, rest = taken
    options = parse_args(rest)
    if options.one_shot or options.resume is not None or options.sessions:
        print(
            "agentloop web: a prompt, --resume and --sessions are the page's to give",
            file=sys.stderr,
        )
        return 2
    try:
        options = apply_settings(options, settle_settings(options, os.environ, stdout=sys.stderr))
        choice = choose_model(
            os.environ,
            model=options.model,
            base_url=options.base_url,
            api_key_env=options.api_key_env,
            paced=True,
        )
        options, choice = demo_workspace(options, choice)
    except (SettingsError, ModelError) as error:
        print(f"agentloop: {visible(redact_urls(str(error)))}", file=sys.stderr)
        return 2
    screen = Screen(make_console(sys.stderr))
    try:
        return trio.run(_serve, options, choice, port, screen)
    except BaseExceptionGroup as group:
        raise_single(group)
    except KeyboardInterrupt:
        return 130
    except OSError as error:
        print(f"agentloop web: cannot serve: {error}", file=sys.stderr)
        return 2
