"""``agentloop acp``: the terminal's coding agent, set up per ACP session.

Each session is set up as the terminal agent is in that directory (see
``agentloop._cli._setup``): the settings files (the project's, with folder
trust), ``AGENTS.md``, the model, the built-in tools (sandboxed as the mode
says), OpenAPI and MCP tools (the settings', ``--mcp-config``'s and the
client's), the permission policy, and the session's file under the sessions'
directory (so ``session/load`` and ``agentloop --resume`` find it).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from .._agent import Agent
from .._instructions import project_instructions
from .._loop import ExecutionLimits
from .._stdio import protocol_stdio
from .._tool import AgentTool
from ..acp import AcpMode, AcpSession, ClientFiles, ClientTerminal, Diffing
from ..session import new_session_path
from ..tools import BashTool, Workspace
from ._args import Options, apply_settings, parse_args
from ._models import ModelError, choose_model
from ._render import Screen, make_console
from ._sessions import SessionLog
from ._settings import Settings, SettingsError
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

__all__ = ["MODES", "TerminalSetup", "main"]

MODES = (
    AcpMode("ask", "Ask", "Asks before it edits files or runs commands"),
    AcpMode(
        "sandboxed",
        "Sandboxed",
        "Commands run in the sandbox (writes only in the project); still asks",
    ),
    AcpMode("auto", "Auto", "Commands run in the sandbox without asking; edits still ask"),
)
_FLAGS: dict[str, Any] = {"ask": None, "sandboxed": "on", "auto": "auto"}


class TerminalSetup:
    """The :class:`~agentloop.acp.AcpAgentSetup` of ``agentloop acp``.

    Args:
        options: The command line (its directory is replaced by each session's).
        environ: The environment (API keys, settings' location).
    """

    modes: Sequence[AcpMode] = MODES

    def __init__(self, options: Options, environ: Mapping[str, str]) -> None:
        self.options = options
        self.environ = environ
        self.default_mode = {"on": "sandboxed", "auto": "auto"}.get(
            options.sandbox_flag or "", "ask"
        )
        self.screen = Screen(make_console(sys.stderr))

    def new_session_id(self) -> str:
        """A new session file's name (without ``.jsonl``): its id."""
        return new_session_path().stem

    def _options(self, session: AcpSession, settings: Settings) -> Options:
        base = attrs.evolve(self.options, directory=session.cwd)
        return apply_settings(attrs.evolve(base, sandbox_flag=_FLAGS[session.mode]), settings)

    def _builtin(self, session: AcpSession, options: Options) -> list[AgentTool]:
        """The built-in tools, sandboxed as ``options`` say; file edits keep their diffs."""
        tools, note = builtin_tools(session.cwd, options.sandbox)
        if note is not None:
            self.screen.line(note)
        offered = session.client_capabilities
        fs = offered.get("fs")
        fs = fs if isinstance(fs, dict) else {}
        if fs.get("readTextFile") and fs.get("writeTextFile"):
            files = ClientFiles(session.request, session.session_id)
            for tool in tools:  # they share one workspace
                if isinstance(getattr(tool, "workspace", None), Workspace):
                    tool.workspace.files = files  # type: ignore[attr-defined]
        if offered.get("terminal") is True:
            runner = ClientTerminal(session.request, session.session_id)
            tools = [  # the client's terminal: its sandbox is the client's business
                BashTool(tool.workspace, runner=runner) if isinstance(tool, BashTool) else tool
                for tool in tools
            ]
        return [
            Diffing(tool, tool.workspace, session.diffs)  # type: ignore[attr-defined]
            if tool.name in ("edit_file", "write_file")
            else tool
            for tool in tools
        ]

    async def new_session(self, session: AcpSession) -> Agent:
        """Set up the agent of a new session in ``session.cwd`` (see the module docstring).

        Raises:
            SetupError: the settings, the model or the tools cannot be used.
        """
        screen = self.screen
        options = attrs.evolve(self.options, directory=session.cwd)
        try:
            settings = await trio.to_thread.run_sync(
                lambda: settle_settings(options, self.environ, stdout=sys.stderr)
            )
            options = self._options(session, settings)
            choice = choose_model(
                self.environ,
                model=options.model,
                base_url=options.base_url,
                api_key_env=options.api_key_env,
            )
        except (SettingsError, ModelError) as error:
            raise SetupError(str(error)) from error
        if choice.demo:
            raise SetupError(
                "no model: set ANTHROPIC_API_KEY or OPENAI_API_KEY, or give --model "
                "(the offline demo is for the terminal)"
            )
        aclose = getattr(choice.provider, "aclose", None)
        if aclose is not None:
            session.stack.push_async_callback(_shielded, aclose)
        screen.line(choice.note)
        instructions = await trio.to_thread.run_sync(project_instructions, session.cwd)
        if instructions is not None:
            screen.line(instructions_note(instructions))
        extra: list[AgentTool] = await openapi_tools(options.openapi, options.openapi_base_url)
        servers: dict[str, Any] = {}
        for config in (options.mcp_config, session.mcp_servers):
            if isinstance(config, Mapping):
                servers.update(config.get("mcpServers") or {})
            elif config is not None:
                extra += await mcp_tools(config, session.stack, screen, roots=[session.cwd])
        if servers:
            extra += await mcp_tools(
                {"mcpServers": servers}, session.stack, screen, roots=[session.cwd]
            )
        tools = self._builtin(session, options)
        log = SessionLog(screen, directory=session.cwd, model=choice.label)
        log.path = new_session_path().parent / f"{session.session_id}.jsonl"
        session.stack.callback(log.close)
        limits = None if options.max_turns is None else ExecutionLimits(max_turns=options.max_turns)
        try:
            agent = Agent(
                choice.provider,
                system_prompt=system_prompt(session.cwd, instructions),
                tools=[*tools, *extra],
                permissions=make_permissions(session.approver, settings=options.permissions),
                journal=log.record,
                limits=limits,
            )
        except (TypeError, ValueError) as error:
            raise SetupError(f"cannot use these tools together: {error}") from error
        session.state.update(settings=settings, extra=extra, log=log)
        return agent

    async def set_mode(self, session: AcpSession, agent: Agent) -> None:
        """Apply the session's mode: the sandbox of ``bash``, and whether it asks."""
        options = self._options(session, session.state["settings"])
        tools = self._builtin(session, options)
        agent.tools = [*tools, *session.state["extra"]]
        agent.config = attrs.evolve(
            agent.config,
            permissions=make_permissions(session.approver, settings=options.permissions),
        )

    async def load_session(self, session: AcpSession, agent: Agent, session_id: str) -> None:
        """Load the saved session ``session_id`` (of any directory) into ``agent``.

        Raises:
            LookupError: there is no such session, or it cannot be read.
        """
        log: SessionLog = session.state["log"]
        try:
            await log.resume(agent, session_id, any_directory=True, listing="agentloop --sessions")
        except SetupError as error:
            raise LookupError(str(error)) from None
        if agent.pending:
            raise LookupError(
                f"session {session_id}: calls await approval; decide them with agentloop "
                f"--resume {session_id} first"
            )

    def journal(self, session: AcpSession) -> None:
        """Start recording the session (its file is made at its first prompt)."""
        session.state["log"].open()


async def _shielded(aclose: Any) -> None:
    with trio.move_on_after(5, shield=True):
        await aclose()


async def _serve(setup: TerminalSetup) -> None:
    from ..acp import serve_acp

    async with protocol_stdio() as (receive, send):
        await serve_acp(setup, receive, send)


def main(argv: Sequence[str]) -> int:
    """``agentloop acp [OPTIONS]``: serve the coding agent over ACP on stdin/stdout.

    The options are the terminal agent's (``--model``, ``--sandbox``, ``--auto``,
    ``--trust``, ``--mcp-config``...), without a prompt. Returns 0 when the client
    closes the connection, 2 on a usage error.
    """
    options = parse_args(list(argv))
    if options.one_shot or options.resume is not None or options.sessions:
        print(
            "agentloop acp: a prompt, --resume and --sessions are the client's to give",
            file=sys.stderr,
        )
        return 2
    try:
        trio.run(_serve, TerminalSetup(options, os.environ))
    except KeyboardInterrupt:
        return 130
    return 0
