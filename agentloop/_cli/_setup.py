"""What the agent is given: its tools, its permission policy, its system prompt."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import trio

from .._errors import AgentloopError
from .._permissions import Approver, PermissionRequest, Permissions
from .._tool import AgentTool
from ..openapi import OpenApiConfig, OpenApiError, OpenApiToolAdapter
from ._render import Screen, summarize_args

__all__ = [
    "ASKING_TOOLS",
    "READ_ONLY_TOOLS",
    "SetupError",
    "describe_request",
    "make_permissions",
    "mcp_tools",
    "openapi_tools",
    "system_prompt",
]

#: Tools that only read: they run without asking.
READ_ONLY_TOOLS = ("read_file", "list_files", "search")
#: Tools that change things or run commands: each call is asked about.
ASKING_TOOLS = ("bash", "write_file", "edit_file")


class SetupError(AgentloopError):
    """The agent cannot be set up as asked; the message says why, for the user."""


def system_prompt(root: Path) -> str:
    """The system prompt of the terminal agent working in ``root``."""
    return (
        f"You are a coding agent working in the directory {root}, at the user's request. "
        "Use the tools to look at the files and run commands before you answer; paths are "
        "relative to that directory. Be concise. When you change something, say what you "
        "changed."
    )


def make_permissions(approver: Approver, *, also_allowed: Iterable[str] = ()) -> Permissions:
    """The policy: read-only tools run, ``bash``/``write_file``/``edit_file`` ask, others ask."""
    return Permissions(
        allow=[*READ_ONLY_TOOLS, *also_allowed],
        ask=list(ASKING_TOOLS),
        default="ask",
        approver=approver,
    )


def describe_request(request: PermissionRequest) -> str:
    """A call as the user is asked about it: ``bash(ls -la)``, ``write_file(notes.txt)``."""
    if request.subject is not None:
        return f"{request.tool_name}({request.subject[1]})"
    return f"{request.tool_name}({summarize_args(request.arguments)})"


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


async def mcp_tools(
    config: Path, stack: contextlib.AsyncExitStack, screen: Screen
) -> list[AgentTool]:
    """The tools of the MCP servers of an ``mcpServers`` file, open until ``stack`` closes.

    A server that cannot be connected is reported on ``screen`` and left out.

    Raises:
        SetupError: the MCP SDK is missing, or the file cannot be read or used.
    """
    try:
        from ..mcp import open_mcp_servers
    except ImportError as error:
        raise SetupError(f"--mcp-config: {error}") from error
    try:
        servers = await stack.enter_async_context(open_mcp_servers(config, required=False))
    except OSError as error:
        raise SetupError(f"--mcp-config {config}: {error.strerror or error}") from error
    except ValueError as error:
        raise SetupError(f"--mcp-config {config}: {error}") from error
    for name, why in servers.errors.items():
        screen.error(f"agentloop: MCP server {name!r} is left out: {why}")
    return list(servers.tools)
