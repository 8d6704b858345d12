"""The terminal agent behind ``python -m agentloop`` and the ``agentloop`` command.

Modules: ``_args`` (the command line), ``_models`` (which model), ``_setup``
(tools, permissions, system prompt), ``_render`` (events on the screen),
``_input`` (terminal lines under trio), ``_commands`` (slash commands' texts)
and ``_app`` (the loop that ties them together).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import trio

from .._util import raise_single
from ._app import App
from ._args import Options, parse_args
from ._models import ModelChoice, ModelError, choose_model, demo_workspace
from ._render import Renderer, Screen, make_console

__all__ = [
    "App",
    "ModelChoice",
    "ModelError",
    "Options",
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


def _run(app: App) -> int:
    try:
        return trio.run(app.run)
    except BaseExceptionGroup as group:  # rich's SystemExit on a closed pipe, say
        raise_single(group)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the terminal agent; return the exit status (2: a usage error, 130: Ctrl-C)."""
    options = parse_args(argv)
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
        print(f"agentloop: {error}", file=sys.stderr)
        return 2
    screen = Screen(make_console(sys.stdout), input_is_terminal=_is_terminal(0))
    app = App(options, choice, screen)
    try:
        return _run(app)
    except KeyboardInterrupt:  # before the interrupt watcher started, or after it ended
        screen.end_line()
        return 130
