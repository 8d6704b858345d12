"""MCP servers' tools as agentloop tools.

Connect to a server, and its tools are agent tools::

    from agentloop.mcp import StdioServer, open_mcp

    async with open_mcp(StdioServer("uvx", ["mcp-server-time"]), prefix="time") as time:
        agent = Agent(provider, tools=[*time.tools])
        await agent.run("What time is it in Lima?")

Or open every server of an ``mcpServers`` configuration file at once::

    async with open_mcp_servers("mcp.json") as servers:
        agent = Agent(provider, tools=servers.tools)

Needs the MCP SDK: ``pip install 'agentloop[mcp]'``.
"""

from __future__ import annotations

try:
    import mcp as _mcp  # noqa: F401
except ModuleNotFoundError as _error:  # pragma: no cover - tested in a subprocess
    if _error.name not in ("mcp", "mcp.types"):
        raise
    raise ImportError(
        "agentloop.mcp needs the MCP SDK, which is not installed: "
        "pip install 'agentloop[mcp]' (or: pip install 'mcp>=2.3')"
    ) from _error

from ._adapter import McpToolAdapter as McpToolAdapter
from ._connection import McpConnection as McpConnection
from ._connection import McpConnectionError as McpConnectionError
from ._open import McpServers as McpServers
from ._open import open_mcp as open_mcp
from ._open import open_mcp_servers as open_mcp_servers
from ._servers import HttpServer as HttpServer
from ._servers import McpServerSpec as McpServerSpec
from ._servers import SseServer as SseServer
from ._servers import StdioServer as StdioServer
from ._servers import load_mcp_config as load_mcp_config

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
