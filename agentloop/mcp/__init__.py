"""MCP servers' tools as agentloop tools.

Connect to a server, and its tools are agent tools::

    from agentloop.mcp import StdioServer, open_mcp

    async with open_mcp(StdioServer("uvx", ["mcp-server-time"]), prefix="time") as time:
        agent = Agent(provider, tools=[*time.tools])
        await agent.run("What time is it in Lima?")

Or open every server of an ``mcpServers`` configuration file at once::

    async with open_mcp_servers("mcp.json") as servers:
        agent = Agent(provider, tools=servers.tools)

Needs the MCP SDK: ``pip install 'agentloop[mcp]'``. The SDK is slow to
import (a few hundred milliseconds), so it loads with the first connection, or
the first use of :class:`McpConnection` or :class:`McpToolAdapter`.
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any

try:
    if importlib.util.find_spec("mcp") is None:
        raise ModuleNotFoundError("No module named 'mcp'", name="mcp")
except ModuleNotFoundError as _error:  # pragma: no cover - tested in a subprocess
    if _error.name not in ("mcp", "mcp.types"):
        raise
    raise ImportError(
        "agentloop.mcp needs the MCP SDK, which is not installed: "
        "pip install 'agentloop[mcp]' (or: pip install 'mcp>=2.3')"
    ) from _error

from ._base import McpConnectionError as McpConnectionError
from ._open import McpServers as McpServers
from ._open import open_mcp as open_mcp
from ._open import open_mcp_servers as open_mcp_servers
from ._servers import HttpServer as HttpServer
from ._servers import McpServerSpec as McpServerSpec
from ._servers import SseServer as SseServer
from ._servers import StdioServer as StdioServer
from ._servers import load_mcp_config as load_mcp_config

if TYPE_CHECKING:
    from ._adapter import McpToolAdapter as McpToolAdapter
    from ._connection import McpConnection as McpConnection

__all__ = [
    "HttpServer",
    "McpConnection",
    "McpConnectionError",
    "McpServerSpec",
    "McpServers",
    "McpToolAdapter",
    "SseServer",
    "StdioServer",
    "load_mcp_config",
    "open_mcp",
    "open_mcp_servers",
]


_LAZY = ("McpConnection", "McpToolAdapter")


def __getattr__(name: str) -> Any:
    """The names that need the MCP SDK, imported on first access (PEP 562)."""
    value: Any
    if name == "McpConnection":
        from ._connection import McpConnection as value
    elif name == "McpToolAdapter":
        from ._adapter import McpToolAdapter as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
