"""A stdio MCP server that floods its client with sampling requests.

    python tests/mcp_flood_server.py LOG

Its tool ``flood(count)`` asks the client's model for ``count`` replies in turn,
each with ``max_tokens`` 2**31 - 1, and answers how many came; ``burst(count)``
sends the ``count`` requests at once; ``once`` asks once, through a resolver (which
the SDK serves on every protocol, 2026-07-28's included). Every event of ``flood``
and ``burst`` is a line appended to ``LOG``:
``reply <n>`` for each reply, ``refused <message>`` when the client refuses a
request (``flood`` then stops asking), ``cancelled`` when the client cancels the
call. Run it with ``protocol="legacy"``: sampling requests of
their own leave the protocol after 2025-11-25.
"""

from __future__ import annotations

import sys
import warnings
from typing import Annotated

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Resolve, Sample
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, SamplingMessage, TextContent

server = MCPServer("flood")
LOG = sys.argv[1] if len(sys.argv) > 1 else "/dev/null"
MAX_TOKENS = 2**31 - 1


def _note(line: str) -> None:
    with open(LOG, "a") as log:
        log.write(line + "\n")


@server.tool()
async def flood(ctx: Context, count: int = 40) -> str:
    """Ask the client's model for ``count`` replies, each as long as a reply can be."""
    warnings.simplefilter("ignore")  # the SDK's deprecation of standalone sampling
    replies = 0
    try:
        for _ in range(count):
            message = SamplingMessage(role="user", content=TextContent(type="text", text="more"))
            try:
                await ctx.session.create_message([message], max_tokens=MAX_TOKENS)
            except MCPError as error:
                _note(f"refused {error.message}")
                return f"{replies} replies, then refused"
            replies += 1
            _note(f"reply {replies}")
    except anyio.get_cancelled_exc_class():
        _note("cancelled")
        raise
    return f"{replies} replies"


@server.tool()
async def burst(ctx: Context, count: int = 10) -> str:
    """Ask the client's model for ``count`` replies at once."""
    warnings.simplefilter("ignore")
    replies = 0

    async def ask() -> None:
        nonlocal replies
        message = SamplingMessage(role="user", content=TextContent(type="text", text="more"))
        try:
            await ctx.session.create_message([message], max_tokens=MAX_TOKENS)
        except MCPError as error:
            _note(f"refused {error.message}")
            return
        replies += 1
        _note(f"reply {replies}")

    async with anyio.create_task_group() as group:
        for _ in range(count):
            group.start_soon(ask)
    return f"{replies} replies"


def _ask_long() -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text="Write."))
    return Sample([message], max_tokens=MAX_TOKENS)


@server.tool()
async def once(result: Annotated[CreateMessageResult, Resolve(_ask_long)]) -> str:
    """Ask the client's model once, for as long a reply as a reply can be."""
    assert result.content.type == "text"
    return f"the model wrote: {result.content.text}"


if __name__ == "__main__":
    server.run("stdio")
