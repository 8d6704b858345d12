"""The part of :mod:`agentloop.mcp` that does not need the MCP SDK: its error and limits.

Importing the SDK takes a few hundred milliseconds (it loads its servers'
transports too), so ``import agentloop.mcp`` leaves it until a connection or
an MCP tool needs it.
"""

from __future__ import annotations

from .._errors import AgentloopError

__all__ = ["DEFAULT_MAX_RESULT_BYTES", "McpConnectionError"]

#: Bytes of text (UTF-8) one result may put into the context.
DEFAULT_MAX_RESULT_BYTES = 100_000


class McpConnectionError(AgentloopError, ConnectionError):
    """The MCP server could not be reached, or did not complete the handshake in time."""
