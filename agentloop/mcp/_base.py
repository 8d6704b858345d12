"""The part of :mod:`agentloop.mcp` that does not need the MCP SDK: its errors and limits.

Importing the SDK takes a few hundred milliseconds (it loads its servers'
transports too), so ``import agentloop.mcp`` leaves it until a connection or
an MCP tool needs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._errors import AgentloopError
from .._tool import ToolError

__all__ = [
    "DEFAULT_MAX_RESULT_BYTES",
    "McpAuthError",
    "McpConnectionError",
    "McpRequestError",
    "all_pages",
    "public",
]

_T = TypeVar("_T")

#: Bytes of text (UTF-8) one result may put into the context.
DEFAULT_MAX_RESULT_BYTES = 100_000
#: The most pages of a listing read; a server that pages on past it is cut off.
MAX_PAGES = 1000


def public(value: _T) -> _T:
    """Give a public class or function its public home, ``agentloop.mcp``, as trio and httpx do.

    Tracebacks, ``repr`` and pickles then name ``agentloop.mcp.McpConnection``,
    where users import it from, not the private module that defines it.
    """
    value.__module__ = "agentloop.mcp"
    return value


async def all_pages(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    """Every page of a listing: ``fetch(cursor)`` from None on, each page's ``field`` in order.

    Stops at a page without ``next_cursor``, at a cursor seen before (a server
    that pages in a circle), or after :data:`MAX_PAGES` pages.
    """
    listed: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await fetch(cursor)
        listed.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
    return listed


@public
class McpConnectionError(AgentloopError, ConnectionError):
    """The MCP server could not be reached, or did not complete the handshake in time."""


@public
class McpAuthError(McpConnectionError):
    """OAuth with an MCP server failed: discovery, registration, consent, or a token request.

    The message names the server and the step (``OAuth with the MCP server at
    https://x/mcp failed while registering the client: HTTP 400``); it never
    holds a token, a client secret, an authorization code or a PKCE verifier.

    Attributes:
        server: The server's URL, or None.
        step: What the flow was doing (``"authorizing"``...), or None.
    """

    def __init__(self, message: str, *, server: str | None = None, step: str | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.step = step


@public
class McpRequestError(ToolError):
    """An MCP request other than a tool call failed: refused, unanswered, or cut off.

    Raised by the resource and prompt methods of
    :class:`~agentloop.mcp.McpConnection`. The message names the server and
    the method (``MCP server 'docs' refused resources/read 'note://x': ...``),
    with the credentials sent to the server redacted. A :class:`ToolError`,
    so a tool that lets it through shows the model its message.

    Attributes:
        server: The server's name.
        method: The MCP method, such as ``"resources/read"``.
        code: The JSON-RPC error code of the server's refusal, else None.
    """

    def __init__(self, message: str, *, server: str, method: str, code: int | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.method = method
        self.code = code
