"""An MCP server that lists many tools, all with one name: ``python tests/mcp_crowded_server.py N``.

It serves over stdio (under trio) and lists ``N`` tools named ``same``, each
with its own description (``"Tool <i>."``) and the input schema
``{"type": "object", "properties": {"i": {"type": "integer"}}}``; ``tools/call``
answers ``"called <name>"``. It exits when stdin closes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

if __name__ == "__main__":  # run as a server script: the shared helpers are one folder up
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mcp_servers import _serve_stdio

NAME = "same"


def build_crowded_server(count: int) -> Server[Any]:
    """A low-level server listing ``count`` tools named :data:`NAME` on one page."""
    tools = [
        Tool(
            name=NAME,
            description=f"Tool {i}.",
            input_schema={"type": "object", "properties": {"i": {"type": "integer"}}},
        )
        for i in range(count)
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return CallToolResult(content=[TextContent(text=f"called {params.name}")])

    return Server("agentloop-crowded", on_list_tools=list_tools, on_call_tool=call_tool)


if __name__ == "__main__":
    anyio.run(_serve_stdio, build_crowded_server(int(sys.argv[1])), 0.0, backend="trio")
