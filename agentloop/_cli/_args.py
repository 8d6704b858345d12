"""The command line: options, parsed into an :class:`Options` value."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from .. import __version__
from .._approval import Approve, Decision, Deny
from .._text import loads
from ._settings import (
    OUTPUT_FORMATS,
    OutputFormat,
    PermissionSettings,
    SandboxSettings,
    Settings,
)

__all__ = ["Options", "apply_settings", "parse_args"]

_DESCRIPTION = """\
A coding agent in your terminal. Without a prompt, it starts an interactive
session in the directory; with one (-p PROMPT, or the words of the prompt), it
runs that prompt and exits."""

_EPILOG = """\
models:
  anthropic[:MODEL]        Claude (key: ANTHROPIC_API_KEY, or --api-key-env)
  openai[:MODEL]           OpenAI, or any compatible server with --base-url
  openai-responses[:MODEL] OpenAI through the Responses API (key: OPENAI_API_KEY)
  demo                     the offline demo: a scripted fix of a scratch project
  scripted:FILE            replay the turns of a JSON script (for tests)
Without --model: Anthropic if ANTHROPIC_API_KEY is set, else OpenAI if
OPENAI_API_KEY is set, else the offline demo.

output formats (with -p, or with decisions):
  text          the final answer on stdout, the run on stderr (the default)
  json          one JSON object at the end: result, stop_reason, usage, session_id...
  stream-json   every event as a line of JSON, as it happens; last, the json object
The exit status says how the run ended: 0 completed, 1 an error, 3 a limit
(--max-turns), 4 calls await approval (--defer-approvals), 130 stopped
(Ctrl-C); 2 is a usage or settings error.

approvals without a terminal:
  -p PROMPT --defer-approvals      a call that needs approval is not asked: the
                                   run stops (status 4) and lists the calls
  --resume ID --approve CALL_ID    then decide each pending call, and the run
     --deny CALL_ID[=REASON]       goes on: --approve CALL_ID='{"arg": ...}'
     --approve-all --deny-all      runs it with those arguments; --approve-all
                                   and --deny-all decide the calls not named

Settings: ~/.config/agentloop/settings.toml (or $XDG_CONFIG_HOME/agentloop/, or
$AGENTLOOP_HOME/), then .agentloop/settings.toml at the top of the project;
the command line overrides both. What a project's file would allow beyond
yours applies only in a folder you trusted: an interactive session asks once
(and asks again when the file changes); with -p it is left out, with a warning,
unless --trust is given.

Sessions are saved under $AGENTLOOP_HOME/sessions (default:
$XDG_DATA_HOME/agentloop/sessions, or ~/.local/share/agentloop/sessions). Each
belongs to the directory it was started in: --sessions and --resume see that
directory's only, unless --any-directory is given."""


@attrs.frozen(kw_only=True)
class Options:
    """What the command line asked for.

    Attributes:
        prompt: The one prompt to run, or None for an interactive session.
        directory: The directory the agent works in (resolved).
        model: ``provider[:model]``, or None to choose by the API keys set.
        base_url: An OpenAI-compatible server's URL (with ``openai:MODEL``).
        api_key_env: The environment variable holding the API key.
        mcp_config: An ``mcpServers`` JSON file whose servers' tools to add.
        openapi: OpenAPI documents (files or URLs) whose operations to add as tools.
        openapi_base_url: The API's URL, for documents that name none.
        resume: None: a new session; ``""``: continue the latest; else that session's id.
        any_directory: ``--resume`` and ``--sessions`` reach the sessions of
            every directory, not only those started in ``directory``.
        sessions: List the saved sessions and exit.
        output_format: With a prompt: ``text``, ``json`` or ``stream-json``;
            None: not given (text, unless the settings say otherwise).
        max_turns: Stop a run after this many turns (None: no limit).
        permissions: Permission rules from the settings files.
        sandbox: The ``[sandbox]`` settings, when a settings file has them
            (``--sandbox`` and ``--auto`` turn it on).
        sandbox_flag: ``"on"`` for ``--sandbox``, ``"auto"`` for ``--auto``.
        settings_sources: The settings files read, in the order they apply.
        trust: ``--trust``: the project's settings apply in full, for this run,
            whether the folder is trusted or not.
        defer_approvals: ``--defer-approvals``: a call that needs approval is
            not asked; the run stops awaiting approval (exit status 4).
        decisions: ``--approve`` and ``--deny``: the decisions on the resumed
            session's pending calls, in the order given.
        decide_rest: ``--approve-all`` or ``--deny-all``: the decision on the
            pending calls ``decisions`` leaves out; None: none.
    """

    prompt: str | None = None
    directory: Path = attrs.field(factory=Path.cwd)
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    mcp_config: Path | Mapping[str, Any] | None = None
    openapi: tuple[str, ...] = ()
    openapi_base_url: str | None = None
    resume: str | None = None
    any_directory: bool = False
    sessions: bool = False
    output_format: OutputFormat | None = None
    max_turns: int | None = None
    permissions: PermissionSettings = attrs.field(factory=PermissionSettings)
    sandbox: SandboxSettings | None = None
    sandbox_flag: Literal["on", "auto"] | None = None
    settings_sources: tuple[Path, ...] = ()
    trust: bool = False
    defer_approvals: bool = False
    decisions: tuple[Decision, ...] = ()
    decide_rest: Literal["approve", "deny"] | None = None

    @property
    def format(self) -> OutputFormat:
        """The output format: ``output_format``, else ``text``."""
        return self.output_format or "text"

    @property
    def deciding(self) -> bool:
        """Whether the command line decides the resumed session's pending calls."""
        return bool(self.decisions) or self.decide_rest is not None

    @property
    def one_shot(self) -> bool:
        """Whether this runs once and exits (a prompt, or decisions), not interactively."""
        return self.prompt is not None or self.deciding


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m agentloop``."""
    parser = argparse.ArgumentParser(
        prog="agentloop",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "words", nargs="*", metavar="PROMPT", help="a prompt to run (the same as -p PROMPT)"
    )
    parser.add_argument("-p", "--prompt", help="run this prompt, print the run, and exit")
    parser.add_argument(
        "-C",
        "--directory",
        type=Path,
        default=None,
        help="work in this directory (default: the current one)",
    )
    parser.add_argument(
        "-m", "--model", metavar="PROVIDER[:MODEL]", help="the model (see 'models' below)"
    )
    parser.add_argument(
        "--base-url", metavar="URL", help="an OpenAI-compatible server (with --model openai:MODEL)"
    )
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="the environment variable holding the API key"
    )
    parser.add_argument(
        "--mcp-config", type=Path, metavar="FILE", help="add the tools of these MCP servers"
    )
    parser.add_argument(
        "--openapi",
        action="append",
        default=[],
        metavar="URL_OR_FILE",
        help="add the operations of this OpenAPI document as tools (repeatable)",
    )
    parser.add_argument(
        "--openapi-base-url", metavar="URL", help="the URL of the API of --openapi documents"
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="continue the latest session of the directory, or the session ID",
    )
    parser.add_argument(
        "--sessions", action="store_true", help="list the directory's saved sessions and exit"
    )
    parser.add_argument(
        "--output-format",
        choices=OUTPUT_FORMATS,
        default=None,
        help="with -p: print the run as text (default), one JSON object, or JSON lines",
    )
    parser.add_argument(
        "--max-turns",
        type=_positive,
        default=None,
        metavar="N",
        help="stop a run after N turns (exit status 3)",
    )
    parser.add_argument(
        "--sandbox",
        action="store_true",
        help="run commands in the sandbox: they may write only under the directory and "
        "the temporary one, read only those and the system's directories, and not use the "
        "network, unless your settings say otherwise (Linux, Landlock)",
    )
    parser.add_argument(
        "--auto",
        action="store_true",
        help="--sandbox, and sandboxed commands run without asking (unsandboxed ones still ask)",
    )
    parser.add_argument(
        "--trust",
        action="store_true",
        help="apply the project's settings (.agentloop/settings.toml) in full for this run, "
        "even where the folder is not trusted (for scripts and CI; nothing is remembered)",
    )
    parser.add_argument(
        "--defer-approvals",
        action="store_true",
        help="with -p: a call that needs approval is not asked; the run stops and lists the "
        "calls (exit status 4): decide them with --resume ID --approve/--deny",
    )
    parser.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="CALL_ID[=ARGS]",
        help="with --resume: run the pending call CALL_ID (with ARGS, a JSON object: with "
        "those arguments) (repeatable)",
    )
    parser.add_argument(
        "--deny",
        action="append",
        default=[],
        metavar="CALL_ID[=REASON]",
        help="with --resume: refuse the pending call CALL_ID; the model reads REASON (repeatable)",
    )
    parser.add_argument(
        "--approve-all",
        action="store_true",
        help="with --resume: run every pending call --approve and --deny do not name",
    )
    parser.add_argument(
        "--deny-all",
        action="store_true",
        help="with --resume: refuse every pending call --approve and --deny do not name",
    )
    parser.add_argument("--version", action="version", version=f"agentloop {__version__}")
    parser.add_argument(
        "--any-directory",
        action="store_true",
        help="let --resume and --sessions reach the sessions of other directories",
    )
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of 1 or more, got {text!r}")
    return value


def _approval(text: str) -> Approve:
    """``--approve CALL_ID[=ARGS]``; ValueError: ARGS is not a JSON object."""
    call_id, _, edited = text.partition("=")
    arguments = None
    if edited:
        try:
            arguments = loads(edited)
        except ValueError as error:
            raise ValueError(f"--approve {text}: the arguments are not JSON: {error}") from None
        if not isinstance(arguments, dict):
            raise ValueError(f"--approve {text}: the arguments must be a JSON object")
    return Approve(call_id, arguments)


def _denial(text: str) -> Deny:
    """``--deny CALL_ID[=REASON]``."""
    call_id, _, reason = text.partition("=")
    return Deny(call_id, reason or None)


def _decisions(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[tuple[Decision, ...], Literal["approve", "deny"] | None]:
    """The decisions of ``--approve``, ``--deny``, ``--approve-all``, ``--deny-all``."""
    decisions: list[Decision] = []
    try:
        decisions += [_approval(text) for text in args.approve]
    except ValueError as error:
        parser.error(str(error))
    decisions += [_denial(text) for text in args.deny]
    for decision in decisions:
        if not decision.tool_call_id:
            flag = "--approve" if isinstance(decision, Approve) else "--deny"
            parser.error(
                f"{flag} needs the id of a pending call (agentloop --resume ID lists them)"
            )
    if args.approve_all and args.deny_all:
        parser.error("give --approve-all or --deny-all, not both")
    rest: Literal["approve", "deny"] | None = (
        "approve" if args.approve_all else "deny" if args.deny_all else None
    )
    return tuple(decisions), rest


def parse_args(argv: Sequence[str] | None = None) -> Options:
    """Parse the command line; on a usage error, print it and exit with status 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.prompt is not None and args.words:
        parser.error("give the prompt once: either -p PROMPT or the words of the prompt")
    prompt: str | None = args.prompt if args.prompt is not None else " ".join(args.words) or None
    if prompt is not None and not prompt.strip():
        parser.error(
            "the prompt is empty: give the text to run, or no prompt at all for an "
            "interactive session"
        )
    directory = (args.directory or Path.cwd()).resolve()
    if not directory.is_dir():
        parser.error(f"not a directory: {directory} (give -C an existing directory to work in)")
    if args.base_url is not None:
        model = args.model or ""
        if model.split(":", 1)[0] != "openai" or ":" not in model or not model.split(":", 1)[1]:
            parser.error("--base-url needs --model openai:MODEL (the model's name on that server)")
    if args.openapi_base_url is not None and not args.openapi:
        parser.error("--openapi-base-url needs --openapi URL_OR_FILE (the API's document)")
    if args.sessions and (prompt is not None or args.resume is not None):
        parser.error(
            "--sessions lists the sessions and exits: give it without "
            + ("a prompt" if prompt is not None else "--resume")
        )
    decisions, rest = _decisions(parser, args)
    deciding = bool(decisions) or rest is not None
    if deciding and args.resume is None:
        parser.error(
            "--approve, --deny, --approve-all and --deny-all go with --resume [ID] (the "
            "session whose calls await approval)"
        )
    if deciding and prompt is not None:
        parser.error(
            "give a prompt or decisions (--approve, --deny...), not both: the decided run "
            "goes on by itself"
        )
    if args.defer_approvals and prompt is None and not deciding:
        parser.error(
            "--defer-approvals goes with a prompt (-p PROMPT) or with decisions (--resume ID "
            "--approve ...): an interactive session asks"
        )
    if args.output_format not in (None, "text") and prompt is None and not deciding:
        parser.error(
            f"--output-format {args.output_format} goes with a prompt (-p PROMPT): an "
            "interactive session is shown as text"
        )
    if args.any_directory and not args.sessions and args.resume is None:
        parser.error(
            "--any-directory goes with --resume or --sessions (it lets them reach the "
            "sessions of other directories)"
        )
    return Options(
        prompt=prompt,
        directory=directory,
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        mcp_config=args.mcp_config,
        openapi=tuple(args.openapi),
        openapi_base_url=args.openapi_base_url,
        resume=args.resume,
        any_directory=args.any_directory,
        sessions=args.sessions,
        output_format=args.output_format,
        max_turns=args.max_turns,
        sandbox_flag="auto" if args.auto else "on" if args.sandbox else None,
        trust=args.trust,
        defer_approvals=args.defer_approvals,
        decisions=decisions,
        decide_rest=rest,
    )


def apply_settings(options: Options, settings: Settings) -> Options:
    """The command line's options, with the settings where it gives none.

    ``--model`` takes the model, its ``--base-url`` and ``--api-key-env`` from
    the command line; without it, they come from the file that names a model
    (``--api-key-env`` still wins). ``--mcp-config`` and ``--output-format``
    replace the settings' ``mcp_servers`` and ``output_format``; an
    ``output_format`` in a file is for runs with a prompt (or decisions) only.
    """
    sandbox, permissions = settings.sandbox, settings.permissions
    if options.sandbox_flag is not None:
        # The flags turn the sandbox on, with the settings' [sandbox] keys if any.
        sandbox = attrs.evolve(sandbox or SandboxSettings(), enabled=True)
    if options.sandbox_flag == "auto":
        permissions = attrs.evolve(permissions, sandboxed="allow")
    changes: dict[str, Any] = {
        "permissions": permissions,
        "sandbox": sandbox,
        "settings_sources": settings.sources,
    }
    if options.model is None and settings.model is not None:
        changes["model"] = settings.model
        changes["base_url"] = settings.base_url
        changes["api_key_env"] = options.api_key_env or settings.api_key_env
    if options.mcp_config is None and settings.mcp_servers is not None:
        changes["mcp_config"] = settings.mcp_servers
    if options.output_format is None and settings.output_format is not None and options.one_shot:
        changes["output_format"] = settings.output_format
    return attrs.evolve(options, **changes)
