"""MCP servers' tools as agentloop tools.

Connect to a server, and its tools are agent tools::

    from agentloop.mcp import McpConfig, StdioServer, open_mcp

    async with open_mcp(StdioServer("uvx", ["mcp-server-time"]), McpConfig(prefix="time")) as time:
        agent = Agent(provider, tools=[*time.tools])
        await agent.run("What time is it in Lima?")

Or open every server of an ``mcpServers`` configuration file at once (each
server's tools prefixed with its name)::

    async with open_mcp_servers("mcp.json", McpConfig(call_timeout=60)) as servers:
        agent = Agent(provider, tools=servers.tools)

The options of a connection are one value, :class:`McpConfig`, which
:func:`open_mcp`, :func:`open_mcp_servers` and :class:`McpConnection` take alike.

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

from ._base import McpAuthError as McpAuthError
from ._base import McpConnectionError as McpConnectionError
from ._base import McpRequestError as McpRequestError
from ._config import McpConfig as McpConfig
from ._open import McpServers as McpServers
from ._open import open_mcp as open_mcp
from ._open import open_mcp_servers as open_mcp_servers
from ._request_values import Elicitation as Elicitation
from ._request_values import ElicitationAnswer as ElicitationAnswer
from ._request_values import McpLogMessage as McpLogMessage
from ._request_values import McpRoot as McpRoot
from ._sampling import McpSampling as McpSampling
from ._sampling import ModelPreferences as ModelPreferences
from ._sampling import SamplingRequest as SamplingRequest
from ._servers import HttpServer as HttpServer
from ._servers import McpServerSpec as McpServerSpec
from ._servers import SseServer as SseServer
from ._servers import StdioServer as StdioServer
from ._servers import load_mcp_config as load_mcp_config

if TYPE_CHECKING:
    from ._adapter import McpToolAdapter as McpToolAdapter
    from ._connection import McpConnection as McpConnection
    from ._oauth import OAuth as OAuth
    from ._oauth import authorize_in_browser as authorize_in_browser
    from ._oauth import default_token_store as default_token_store
    from ._resource_tools import McpResourceTool as McpResourceTool
    from ._resource_values import McpPrompt as McpPrompt
    from ._resource_values import McpPromptArgument as McpPromptArgument
    from ._resource_values import McpResource as McpResource
    from ._resource_values import McpResourceContents as McpResourceContents
    from ._resource_values import McpResourceTemplate as McpResourceTemplate
    from ._serve import ServeOptions as ServeOptions
    from ._serve_io import serve_agent as serve_agent

__all__ = [
    "Elicitation",
    "ElicitationAnswer",
    "HttpServer",
    "McpAuthError",
    "McpConfig",
    "McpConnection",
    "McpConnectionError",
    "McpLogMessage",
    "McpPrompt",
    "McpPromptArgument",
    "McpRequestError",
    "McpResource",
    "McpResourceContents",
    "McpResourceTemplate",
    "McpResourceTool",
    "McpRoot",
    "McpSampling",
    "McpServerSpec",
    "McpServers",
    "McpToolAdapter",
    "ModelPreferences",
    "OAuth",
    "SamplingRequest",
    "ServeOptions",
    "SseServer",
    "StdioServer",
    "authorize_in_browser",
    "default_token_store",
    "load_mcp_config",
    "open_mcp",
    "open_mcp_servers",
    "serve_agent",
]


_RESOURCE_VALUES = (
    "McpPrompt",
    "McpPromptArgument",
    "McpResource",
    "McpResourceContents",
    "McpResourceTemplate",
)
_LAZY = (
    *_RESOURCE_VALUES,
    "McpResourceTool",
    "McpConnection",
    "McpToolAdapter",
    "OAuth",
    "authorize_in_browser",
    "default_token_store",
    "ServeOptions",
    "serve_agent",
)


def __getattr__(name: str) -> Any:
    """The names that need the MCP SDK, imported on first access (PEP 562)."""
    value: Any
    if name == "McpConnection":
        from ._connection import McpConnection as value
    elif name == "McpToolAdapter":
        from ._adapter import McpToolAdapter as value
    elif name == "McpResourceTool":
        from ._resource_tools import McpResourceTool as value
    elif name in _RESOURCE_VALUES:
        from . import _resource_values

        value = getattr(_resource_values, name)
    elif name == "ServeOptions":
        from ._serve import ServeOptions as value
    elif name == "serve_agent":
        from ._serve_io import serve_agent as value
    elif name in ("OAuth", "authorize_in_browser", "default_token_store"):
        from . import _oauth

        value = getattr(_oauth, name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
