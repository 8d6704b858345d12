"""HTTP and SSE servers: the SDK transport with headers, auth and OAuth, and the credentials sent.

Split from :mod:`._connection`, which owns the connection; this is only how one is
made over HTTP, and what of it must never come back from the server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from .._secrets import Redactor, header_secrets, is_secret_name, is_secret_value, url_secrets
from ._oauth import oauth_auth, oauth_secrets
from ._servers import HttpServer, SseServer, StdioServer

__all__ = ["http_transport", "server_secrets"]

_HTTP_TIMEOUT = 30.0  # seconds to connect, send, or wait for a free connection
_HTTP_READ_TIMEOUT = 300.0
_SSE_IDLE_FOREVER = 7 * 24 * 3600.0  # the SSE transport takes no "never"


def server_secrets(server: Any) -> list[str]:
    """The credentials agentloop sends to ``server``, which must never come back.

    HTTP and SSE servers: the secret header values (see
    :func:`~agentloop._secrets.header_secrets`), a basic ``auth``'s header, and
    the URL's credentials (:func:`~agentloop._secrets.url_secrets`: its password,
    a user that looks like a token, secret-looking query values), and with ``oauth``,
    its client secret and private key and the tokens stored for the server
    (tokens fetched later are added to the connection's redactor as they
    come). Stdio servers: the values of ``env`` whose name or value looks
    like a credential.
    """
    found: list[str] = []
    if isinstance(server, HttpServer | SseServer):
        found += header_secrets(server.headers or {})
        header = getattr(server.auth, "_auth_header", None)  # httpx2.BasicAuth
        if isinstance(header, str):
            found += header_secrets({"Authorization": header})
        if server.oauth is not None:
            found += oauth_secrets(server.oauth, server.url)
        found += url_secrets(server.url)
    elif isinstance(server, StdioServer):
        found += [
            value
            for name, value in (server.env or {}).items()
            if is_secret_name(name) or is_secret_value(value)
        ]
    return found


@contextlib.asynccontextmanager
async def http_transport(
    server: HttpServer | SseServer,
    call_timeout: float | None,
    on_session_expired: Callable[[], None],
    redactor: Redactor | None = None,
) -> AsyncIterator[Any]:
    """The SDK transport for an HTTP server, with its headers and auth.

    A 404 answer to a request that carried a session id means the server has
    forgotten the session (it expired, or the server restarted):
    ``on_session_expired`` is called, so the connection starts a new one.
    With ``server.oauth``, the OAuth flow is the auth; the tokens it gets are
    added to ``redactor``.
    """
    # Reads may wait as long as a call may take (the SDK's default is 300 s).
    read = None if call_timeout is None else max(_HTTP_READ_TIMEOUT, call_timeout + 30)
    timeout = httpx2.Timeout(_HTTP_TIMEOUT, read=read)
    auth = server.auth if server.oauth is None else oauth_auth(server.url, server.oauth, redactor)
    if isinstance(server, SseServer):
        async with sse_client(
            server.url,
            headers=server.headers,
            auth=auth,
            timeout=_HTTP_TIMEOUT,
            sse_read_timeout=read if read is not None else _SSE_IDLE_FOREVER,
        ) as streams:
            yield streams
        return

    async def check(response: httpx2.Response) -> None:
        if response.status_code == 404 and "mcp-session-id" in response.request.headers:
            on_session_expired()

    async with create_mcp_http_client(headers=server.headers, auth=auth, timeout=timeout) as http:
        http.event_hooks["response"].append(check)
        async with streamable_http_client(server.url, http_client=http) as streams:
            yield streams
