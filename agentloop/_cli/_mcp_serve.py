"""``agentloop mcp-serve``: the terminal's coding agent, served as an MCP server.

The agent is the one an ``agentloop -p PROMPT`` run gets (the same settings
files, model choice, tools, sandbox, permission rules, project instructions and
``--mcp-config`` servers: :mod:`._setup`), one per conversation of the
``run_agent`` tool (:mod:`agentloop.mcp._serve`). A call that asks for approval
is asked of the MCP client (elicitation) when it can be asked, else refused.
Over stdio (the default) nothing but the protocol goes to standard output;
notes and errors go to standard error.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import attrs
import trio

from .._agent import Agent
from .._approval import DEFER
from .._instructions import project_instructions
from .._loop import ExecutionLimits
from .._secrets import redact_urls
from .._tool import AgentTool
from .._util import raise_single
from .._visible import visible
from ..tools import hide_process_credentials
from ._args import Options, _positive, apply_settings
from ._models import ModelChoice, ModelError, choose_model
from ._render import Screen, make_console
from ._settings import SettingsError
from ._setup import (
    SetupError,
    builtin_tools,
    instructions_note,
    make_permissions,
    mcp_tools,
    system_prompt,
)
from ._trust import settle_settings

__all__ = ["mcp_serve_main"]

_DESCRIPTION = """\
Serve the coding agent as an MCP server: one tool, run_agent(prompt,
conversation_id?), runs it on a prompt in the directory (a new conversation, or
the one an earlier answer named). Over stdio by default; --http HOST:PORT serves
streamable HTTP at http://HOST:PORT/mcp. Calls that need approval are asked of
the MCP client when it supports elicitation, else refused."""


def _address(text: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (127.0.0.1:8000), got {text!r}")
    return host.strip("[]"), int(port)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentloop mcp-serve", description=_DESCRIPTION)
    parser.add_argument(
        "--http", type=_address, metavar="HOST:PORT", help="serve streamable HTTP, not stdio"
    )
    parser.add_argument("-C", "--directory", type=Path, default=None, help="work in this directory")
    parser.add_argument("-m", "--model", metavar="PROVIDER[:MODEL]", help="the model")
    parser.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server")
    parser.add_argument("--api-key-env", metavar="NAME", help="the variable holding the API key")
    parser.add_argument("--mcp-config", type=Path, metavar="FILE", help="add these MCP servers")
    parser.add_argument(
        "--max-turns", type=_positive, default=None, metavar="N", help="stop a run after N turns"
    )
    parser.add_argument("--sandbox", action="store_true", help="run commands in the sandbox")
    parser.add_argument(
        "--auto", action="store_true", help="--sandbox, and sandboxed commands run without asking"
    )
    parser.add_argument("--trust", action="store_true", help="apply the project's settings in full")
    return parser


def mcp_serve_main(argv: Sequence[str]) -> int:
    """Run ``agentloop mcp-serve``; return the exit status (0, or 2: a usage or setup error)."""
    args = _parser().parse_args(argv)
    directory = (args.directory or Path.cwd()).resolve()
    if not directory.is_dir():
        print(f"agentloop: not a directory: {directory}", file=sys.stderr)
        return 2
    options = Options(
        prompt="",  # not interactive: nothing is asked on the terminal
        directory=directory,
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        mcp_config=args.mcp_config,
        max_turns=args.max_turns,
        sandbox_flag="auto" if args.auto else "on" if args.sandbox else None,
        trust=args.trust,
    )
    try:
        settings = settle_settings(options, os.environ, stdout=sys.stderr)
        options = apply_settings(options, settings)
        choice = choose_model(
            os.environ,
            model=options.model,
            base_url=options.base_url,
            api_key_env=options.api_key_env,
            paced=False,
        )
    except (SettingsError, ModelError) as error:
        print(f"agentloop: {visible(redact_urls(str(error)))}", file=sys.stderr)
        return 2
    try:
        return trio.run(_serve, options, choice, args.http)
    except BaseExceptionGroup as group:
        raise_single(group)
    except KeyboardInterrupt:
        return 130


async def _serve(options: Options, choice: ModelChoice, http: tuple[str, int] | None) -> int:
    from ..mcp import serve_agent

    key = options.api_key_env
    hide_process_credentials(also=[key] if key else ())
    screen = Screen(make_console(sys.stderr))
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
            extra: list[AgentTool] = []
            if options.mcp_config is not None:
                extra = await mcp_tools(options.mcp_config, stack, screen, roots=[root])
        except SetupError as error:
            print(f"agentloop: {visible(redact_urls(str(error)))}", file=sys.stderr)
            return 2
        # Without elicitation nobody can answer: asked calls are refused (no approver).
        permissions = attrs.evolve(
            make_permissions(DEFER, settings=options.permissions), approver=None
        )
        limits = None if options.max_turns is None else ExecutionLimits(max_turns=options.max_turns)
        prompt = system_prompt(root, instructions)

        def agent() -> Agent:
            """A conversation's agent, with tools of its own."""
            tools, _ = builtin_tools(root, options.sandbox)
            return Agent(
                choice.provider,
                system_prompt=prompt,
                tools=[*tools, *extra],
                permissions=permissions,
                limits=limits,
            )

        async with trio.open_nursery() as nursery:
            url = await nursery.start(partial(serve_agent, agent, http=http))
            if url is not None:
                screen.line(f"agentloop: serving MCP at {url}")
    return 0
