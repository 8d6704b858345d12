"""The terminal agent behind ``python -m agentloop`` and the ``agentloop`` command.

Modules: ``_args`` (the command line), ``_settings`` (the settings files),
``_widening`` and ``_trust`` (what of a project's settings applies: folder
trust), ``_models`` (which model), ``_demo`` (the offline demo's project and
scripted model), ``_setup`` (tools, permissions, system prompt), ``_render``
(events on the screen), ``_output`` (JSON output for scripts), ``_input`` and
``_editor`` (terminal lines under trio; the line editor), ``_approvals`` (what a
run asks the user), ``_elicit`` (an MCP server's form, field by field),
``_sessions`` (the session's file), ``_commands`` (slash commands' texts) and
``_app`` (the loop that ties them together).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import trio

from .._secrets import redact_urls
from .._util import raise_single
from .._visible import visible
from ._app import App
from ._args import apply_settings, parse_args
from ._models import ModelError, choose_model, demo_workspace
from ._output import AnswerOutput, JsonOutput
from ._render import Renderer, Screen, make_console
from ._settings import SettingsError
from ._trust import settle_settings

__all__ = [
    "App",
    "Renderer",
    "Screen",
    "choose_model",
    "main",
    "make_console",
    "parse_args",
]


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _same_terminal(first: int, second: int) -> bool:
    """Whether the file descriptors ``first`` and ``second`` are the same terminal."""
    try:
        return (
            os.isatty(first)
            and os.isatty(second)
            and os.path.samestat(os.fstat(first), os.fstat(second))
        )
    except OSError:
        return False


def _run(app: App) -> int:
    try:
        return trio.run(app.run)
    except BaseExceptionGroup as group:  # rich's SystemExit on a closed pipe, say
        raise_single(group)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the terminal agent; return the exit status.

    0: done; 1: the run ended in an error; 2: a usage or settings error; 3: the
    run stopped at a limit; 4: the run stopped, calls await approval
    (``--defer-approvals``); 130: stopped with Ctrl-C.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["acp"]:  # the agent for editors, over ACP on stdin/stdout
        from ._acp import main as acp_main

        return acp_main(args[1:])
    if args[:1] == ["mcp-serve"]:  # the agent for other agents, as an MCP server
        from ._mcp_serve import mcp_serve_main

        return mcp_serve_main(args[1:])
    if args[:1] == ["web"]:  # the agent on a local page, in a browser
        from ._web import web_main

        return web_main(args[1:])
    options = parse_args(args)
    try:
        options = apply_settings(options, settle_settings(options, os.environ))
    except SettingsError as error:
        print(f"agentloop: {visible(redact_urls(str(error)))}", file=sys.stderr)
        return 2
    try:
        choice = choose_model(
            os.environ,
            model=options.model,
            base_url=options.base_url,
            api_key_env=options.api_key_env,
            paced=sys.stdout.isatty(),
        )
        options, choice = demo_workspace(options, choice)  # the demo: on a scratch project
    except ModelError as error:
        print(f"agentloop: {visible(redact_urls(str(error)))}", file=sys.stderr)
        return 2
    output = answer = None
    if options.one_shot and options.format != "text":
        output = JsonOutput(options.format, sys.stdout)  # and everything else on stderr
    elif options.one_shot and not _same_terminal(1, 2):
        # The final answer alone on stdout; the run is shown on stderr as it goes.
        answer = AnswerOutput(sys.stdout, terminal=_is_terminal(1))
    screen = Screen(
        make_console(sys.stdout if output is None and answer is None else sys.stderr),
        input_is_terminal=_is_terminal(0),
    )
    app = App(options, choice, screen, output=output, answer=answer)
    try:
        return _run(app)
    except KeyboardInterrupt:  # before the interrupt watcher started, or after it ended
        screen.end_line()
        return 130
