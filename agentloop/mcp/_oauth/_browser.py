"""The browser step: the default ``authorize``, and the handshake deadline it stops."""

from __future__ import annotations

import contextlib
import logging
import math
import socket
import sys
import webbrowser
from collections.abc import Iterator
from contextvars import ContextVar
from urllib.parse import parse_qsl, urlsplit

import trio

from ..._tool import format_duration
from ..._visible import visible_line
from .._base import McpAuthError, public

__all__ = [
    "REDIRECT_HOST",
    "authorize_in_browser",
    "free_port",
    "pausable_deadline",
    "person_waits",
]

log = logging.getLogger("agentloop.mcp")

REDIRECT_HOST = "127.0.0.1"
_MAX_REQUEST = 16 * 1024  # bytes of the redirect's HTTP request the listener reads

# ------------------------------------------------------------------ the browser step


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((REDIRECT_HOST, 0))
        return int(probe.getsockname()[1])


_PAGE = (
    "<!doctype html><meta charset=utf-8><title>agentloop</title>"
    "<p style='font:16px sans-serif;margin:3em'>{}</p>"
)


@public
async def authorize_in_browser(
    url: str, *, open_browser: bool = True, give_up_after: float = 300.0
) -> dict[str, str]:
    """Send the user to ``url`` and wait for the authorization server's redirect.

    Listens on the ``redirect_uri`` of ``url`` (``http://127.0.0.1:PORT/...``)
    first, then prints the URL to stderr and, with ``open_browser``, opens it
    in the browser. Returns the query of the first request to the redirect
    path that carries a ``code`` or an ``error``; other requests (a favicon)
    get a 404. This is the default ``authorize`` of :class:`OAuth`.

    Raises:
        McpAuthError: ``url`` has no ``redirect_uri`` on 127.0.0.1, its port
            cannot be listened on, or no redirect came within ``give_up_after`` seconds.

    Cancellation: the listener is closed; nothing is left running.
    """
    query = dict(parse_qsl(urlsplit(url).query))
    redirect = urlsplit(query.get("redirect_uri", ""))
    if redirect.scheme != "http" or redirect.hostname not in (REDIRECT_HOST, "localhost"):
        raise McpAuthError(
            f"the authorization URL's redirect_uri is not on http://{REDIRECT_HOST}: "
            f"{query.get('redirect_uri')!r}"
        )
    try:
        listeners = await trio.open_tcp_listeners(redirect.port or 80, host=REDIRECT_HOST)
    except OSError as error:
        raise McpAuthError(
            f"cannot listen for the OAuth redirect on {REDIRECT_HOST}:{redirect.port}: "
            f"{error.strerror or error}"
        ) from error
    answer: dict[str, str] = {}
    path = redirect.path or "/"

    async def serve(stream: trio.SocketStream) -> None:
        async with stream:
            with trio.move_on_after(10):
                found = await _answer_redirect(stream, path)
                if found is not None and not answer:
                    answer.update(found)
                    nursery.cancel_scope.cancel()

    with trio.move_on_after(give_up_after) as waited:
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, serve, listeners)
            print(
                f"Authorize agentloop in your browser: {visible_line(url)}",
                file=sys.stderr,
                flush=True,
            )
            if open_browser:
                nursery.start_soon(trio.to_thread.run_sync, _open, url)
    if waited.cancelled_caught and not answer:
        raise McpAuthError(
            f"no answer from the browser within {format_duration(give_up_after)} "
            f"(the redirect to {REDIRECT_HOST}:{redirect.port} never came)"
        )
    return answer


def _open(url: str) -> None:
    try:
        webbrowser.open(url)
    except Exception as error:  # no browser: the URL is printed
        log.debug("cannot open a browser: %s", type(error).__name__)


async def _answer_redirect(stream: trio.SocketStream, path: str) -> dict[str, str] | None:
    """Read one HTTP request; answer it; its query if it is the redirect."""
    data = b""
    while b"\r\n\r\n" not in data and len(data) < _MAX_REQUEST:
        chunk = await stream.receive_some(4096)
        if not chunk:
            break
        data += chunk
    line = data.split(b"\r\n", 1)[0].decode("latin-1")
    parts = line.split(" ")
    target = urlsplit(parts[1]) if len(parts) == 3 and parts[0] == "GET" else None
    query = dict(parse_qsl(target.query)) if target is not None else {}
    if target is None or target.path != path or not ({"code", "error"} & query.keys()):
        await _respond(stream, "404 Not Found", "Not found.")
        return None
    if "error" in query:
        await _respond(stream, "200 OK", "Authorization was refused. You can close this tab.")
    else:
        await _respond(stream, "200 OK", "agentloop is authorized. You can close this tab.")
    return query


async def _respond(stream: trio.SocketStream, status: str, text: str) -> None:
    body = _PAGE.format(text).encode("utf-8")
    head = (
        f"HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\nCache-Control: no-store\r\n\r\n"
    )
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        await stream.send_all(head.encode("latin-1") + body)


# ------------------------------------------------------------------ the handshake deadline

#: The cancel scope whose deadline bounds a connection's handshake, if its owner set one.
_HANDSHAKE: ContextVar[trio.CancelScope | None] = ContextVar("mcp_handshake", default=None)


@contextlib.contextmanager
def pausable_deadline(scope: trio.CancelScope) -> Iterator[None]:
    """Let the OAuth flow stop ``scope``'s deadline while a person authorizes.

    A connection's handshake has a deadline (``connect_timeout``) meant for
    the server; a person in a browser takes longer. Inside this block, the
    browser step moves the deadline away and, once done, puts back what was
    left of it.
    """
    token = _HANDSHAKE.set(scope)
    try:
        yield
    finally:
        _HANDSHAKE.reset(token)


@contextlib.contextmanager
def person_waits() -> Iterator[None]:
    scope = _HANDSHAKE.get()
    if scope is None or math.isinf(scope.deadline):
        yield
        return
    left = scope.deadline - trio.current_time()
    scope.deadline = math.inf
    try:
        yield
    finally:
        if math.isinf(scope.deadline):
            scope.deadline = trio.current_time() + max(left, 0.0)
