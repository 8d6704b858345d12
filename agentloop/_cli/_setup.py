"""What the agent is given: its tools, its permission policy, its system prompt."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from .._approval import Deferred, PendingCall
from .._errors import AgentloopError
from .._instructions import ProjectInstructions
from .._text import loads
from .._tool import AgentTool, Approver, PermissionRequest, Permissions
from .._visible import visible_line
from ..openapi import OpenApiConfig, OpenApiError, OpenApiToolAdapter
from ..tools import DEFAULT_PROTECT, Sandbox, default_tools
from ._render import Screen, summarize_args
from ._settings import PermissionSettings, SandboxSettings, user_settings_path

__all__ = [
    "SetupError",
    "builtin_tools",
    "describe_call",
    "describe_request",
    "instructions_note",
    "make_permissions",
    "mcp_tools",
    "oauth_by_default",
    "openapi_tools",
    "program_paths",
    "system_prompt",
]

#: Tools that only read: they run without asking.
READ_ONLY_TOOLS = ("read_file", "list_files", "search")
#: Tools that change things or run commands: each call is asked about.
ASKING_TOOLS = ("bash", "write_file", "edit_file")


class SetupError(AgentloopError):
    """The agent cannot be set up as asked; the message says why, for the user."""


def system_prompt(root: Path, instructions: ProjectInstructions | None = None) -> str:
    """The system prompt of the terminal agent working in ``root``, with the project's
    instructions (``AGENTS.md``...) after it when there are some."""
    prompt = (
        f"You are a coding agent working in the directory {root}, at the user's request. "
        "Use the tools to look at the files and run commands before you answer; paths are "
        "relative to that directory. Be concise. When you change something, say what you "
        "changed."
    )
    if instructions is None or not instructions.text:
        return prompt
    return (
        f"{prompt}\n\nThe project's instructions follow, from its instruction files; "
        "follow them unless the user asks otherwise.\n\n" + instructions.text
    )


def instructions_note(instructions: ProjectInstructions) -> str:
    """The line that says which instruction files the agent read, and which it left out."""

    def name(path: Path) -> str:
        try:
            return path.relative_to(instructions.root).as_posix()
        except ValueError:
            return str(path)

    if instructions.files:
        note = "agentloop: project instructions from " + ", ".join(map(name, instructions.files))
    else:
        note = "agentloop: no project instructions read"
    if instructions.truncated:
        note += f"; cut at the size limit (the files hold {instructions.size} bytes)"
    if instructions.skipped:
        left = ", ".join(f"{name(path)} ({why})" for path, why in instructions.skipped)
        note += f"; left out: {left}"
    return visible_line(note + ".")


def program_paths(environ: Mapping[str, str]) -> tuple[str, ...]:
    """What commands read besides the system's directories to run at all: the
    directories on ``PATH`` (the user's programs: ``~/.local/bin``, ``~/.cargo/bin``...;
    not the home directory itself nor one above it) and git's configuration
    (``~/.gitconfig``, ``~/.config/git``: git stops when it cannot read them)."""
    home = os.path.realpath(environ.get("HOME") or os.path.expanduser("~"))
    paths: list[str] = []
    for entry in environ.get("PATH", "").split(os.pathsep):
        if not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if real == home or home.startswith(real.rstrip(os.sep) + os.sep) or real == os.sep:
            continue
        paths.append(entry)
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    paths += [os.path.join(home, ".gitconfig"), os.path.join(config, "git")]
    return tuple(dict.fromkeys(paths))


def builtin_tools(
    root: Path, sandbox: SandboxSettings | None, environ: Mapping[str, str] | None = None
) -> tuple[list[AgentTool], str | None]:
    """The built-in tools working in ``root``, and a line to show about the sandbox, if any.

    With the settings' ``[sandbox] enabled = true`` (or ``--sandbox``, ``--auto``),
    ``bash`` (and the search tool's ripgrep) run their commands in a
    :class:`~agentloop.tools.Sandbox` made of the other keys, and the line says
    where they may write, and whether they may read everything and use the
    network. With ``read = "restricted"``, commands may also read
    :func:`program_paths` (of ``environ``, default ``os.environ``). Where this
    system cannot enforce it, the commands run unconfined (they are still asked
    about), and the line says why. When a writable path holds the user's
    configuration directory (its trusted folders, its settings), that directory
    stays read-only, as the project's own configuration does.
    """
    if sandbox is None or not sandbox.enabled:
        return list(default_tools(root)), None
    environ = os.environ if environ is None else environ
    readable = sandbox.readable
    if sandbox.read == "restricted":
        readable = (*readable, *program_paths(environ))
    protect: tuple[str, ...] = DEFAULT_PROTECT
    config = user_settings_path(environ).parent.resolve()
    if any(config.is_relative_to(Path(path).expanduser().resolve()) for path in sandbox.write):
        protect = (*protect, str(config))
    confined = Sandbox(
        write=sandbox.write,
        read=sandbox.read,
        readable=readable,
        network=sandbox.network,
        protect=protect,
    )
    status = confined.status()
    if status.available:
        note = "agentloop: " + confined.describe().replace("Commands run", "commands run", 1)
    else:
        note = (
            f"agentloop: the sandbox is {status}: commands run without it (they are still "
            "asked about)"
        )
    return list(default_tools(root, sandbox=confined)), note


def make_permissions(
    approver: Approver | Deferred,
    *,
    also_allowed: Iterable[str] = (),
    settings: PermissionSettings | None = None,
) -> Permissions:
    """The policy: read-only tools run, ``bash``/``write_file``/``edit_file`` ask, others ask.

    ``settings`` (the settings files' ``[permissions]``) add their rules and may
    change the default; with ``sandboxed``, a command that runs in the sandbox gets
    that answer instead of the question (``--auto``: ``"allow"``). ``bash``,
    ``write_file`` and ``edit_file`` keep asking unless an ``allow`` rule of the
    settings names the tool (``bash(git *)``): then their calls that no rule
    matches get the default.
    """
    settings = settings or PermissionSettings()
    named = {rule.partition("(")[0].strip() for rule in settings.allow}
    if settings.sandboxed is not None:
        # bash is left to the policy's last two steps: a sandboxed command gets
        # ``sandboxed``, an unsandboxed one the default (which asks, unless changed).
        named.add("bash")
    return Permissions(
        allow=[*READ_ONLY_TOOLS, *also_allowed, *settings.allow],
        ask=[*settings.ask, *(tool for tool in ASKING_TOOLS if tool not in named)],
        deny=list(settings.deny),
        default=settings.default or "ask",
        sandboxed=settings.sandboxed,
        approver=approver,
    )


def describe_request(request: PermissionRequest) -> str:
    """A call as the user is asked about it: ``bash(ls -la)``, ``write_file(notes.txt)``."""
    if request.subject is not None:
        return f"{request.tool_name}({request.subject[1]})"
    return f"{request.tool_name}({summarize_args(request.arguments)})"


def describe_call(call: PendingCall) -> str:
    """A call that awaits approval as the user is asked about it (as :func:`describe_request`)."""
    if call.subject is not None:
        return f"{call.tool_name}({call.subject[1]})"
    return f"{call.tool_name}({summarize_args(call.arguments)})"


async def openapi_tools(sources: Sequence[str], base_url: str | None) -> list[AgentTool]:
    """The operations of each OpenAPI document (a URL or a file) as tools.

    Raises:
        SetupError: a document cannot be read, fetched or used.
    """
    config = OpenApiConfig(base_url=base_url)
    tools: list[AgentTool] = []
    for source in sources:
        try:
            if source.startswith(("http://", "https://")):
                found = await OpenApiToolAdapter.from_url(source, config)
            else:
                found = await trio.to_thread.run_sync(OpenApiToolAdapter.from_file, source, config)
        except OSError as error:
            raise SetupError(f"--openapi {source}: {error.strerror or error}") from error
        except OpenApiError as error:
            hint = ""
            if base_url is None and "base_url" in str(error):
                hint = " (--openapi-base-url URL gives it)"
            raise SetupError(f"--openapi {source}: {error}{hint}") from error
        tools += found
    return tools


def oauth_by_default(config: Path | Mapping[str, Any]) -> Mapping[str, Any]:
    """An ``mcpServers`` configuration whose URL servers sign in with OAuth when asked.

    A server with a ``url`` and no ``oauth`` entry gets ``"oauth": true`` unless
    it sends its own ``Authorization`` header: the flow starts only if the server
    answers 401, so servers that need no sign-in are unaffected, and the ones that
    do work with no configuration (the browser opens, the tokens are kept).

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON.
    """
    if isinstance(config, Path):
        try:
            parsed = loads(config.read_text(encoding="utf-8"))
        except ValueError as error:
            raise ValueError(f"{config} is not valid JSON: {error}") from error
    else:
        parsed = config
    servers = parsed.get("mcpServers") if isinstance(parsed, Mapping) else None
    if not isinstance(servers, Mapping):
        return parsed  # type: ignore[no-any-return]  # load_mcp_config says what is wrong
    changed = {}
    for name, entry in servers.items():
        if isinstance(entry, Mapping) and "url" in entry and "oauth" not in entry:
            headers = entry.get("headers")
            names = {str(k).lower() for k in headers} if isinstance(headers, Mapping) else set()
            if "authorization" not in names:
                entry = {**entry, "oauth": True}
        changed[name] = entry
    return {**parsed, "mcpServers": changed}


async def mcp_tools(
    config: Path | Mapping[str, Any],
    stack: contextlib.AsyncExitStack,
    screen: Screen,
    *,
    sampling: tuple[Any, Permissions] | None = None,
    **client: Any,
) -> list[AgentTool]:
    """The tools of the MCP servers of an ``mcpServers`` file, open until ``stack`` closes.

    ``config`` is the file's path, or the servers of the settings' ``[mcp_servers]``
    (``{"mcpServers": {...}}``). A server that cannot be connected is reported
    on ``screen`` and left out. ``sampling`` is the model that answers servers'
    sampling requests and the permissions asked first; ``client`` goes to
    ``open_mcp_servers`` (``elicitation``, ``roots``).

    Raises:
        SetupError: the MCP SDK is missing, or the file cannot be read or used.
    """
    what = "--mcp-config" if isinstance(config, Path) else "mcp_servers (settings)"
    where = f"{what} {config}" if isinstance(config, Path) else what
    try:
        from ..mcp import McpConfig, McpSampling, open_mcp_servers
    except ImportError as error:
        raise SetupError(f"{what}: {error}") from error
    if sampling is not None:
        provider, permissions = sampling
        # A server's max_tokens is capped: a reply costs at most this (each asked first).
        client["sampling"] = McpSampling(provider, permissions=permissions, max_tokens=4096)
    try:
        with_oauth = await trio.to_thread.run_sync(oauth_by_default, config)
        servers = await stack.enter_async_context(
            open_mcp_servers(with_oauth, McpConfig(**client), required=False)
        )
    except OSError as error:
        raise SetupError(f"{where}: {error.strerror or error}") from error
    except ValueError as error:
        raise SetupError(f"{where}: {error}") from error
    for name, why in servers.errors.items():
        screen.error(f"agentloop: MCP server {name!r} is left out: {why}")
    return list(servers.tools)
