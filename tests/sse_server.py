"""A real HTTP/1.1 server on 127.0.0.1 for provider tests: scripted SSE replies.

Each request gets the next :class:`Reply`: a status, headers, and a body sent
as HTTP chunks, one per item of ``chunks`` (so tests control the cut points).
``drop_after=n`` closes the connection after ``n`` chunks, mid-body, the way a
dying server or a broken network does. Every request is recorded.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio


@attrs.define
class Reply:
    """What the server sends for one request."""

    chunks: list[bytes]
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=lambda: {"content-type": "text/event-stream"})
    drop_after: int | None = None


@attrs.define
class ServedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    429: "Too Many Requests",
    500: "Internal Server Error",
    529: "Overloaded",
}


@attrs.define
class SSEServer:
    """The server's state: the replies left and the requests seen."""

    replies: list[Reply]
    requests: list[ServedRequest] = attrs.field(factory=list)
    url: str = ""

    async def handle(self, stream: trio.SocketStream) -> None:
        try:
            request = await _read_request(stream)
            if request is None:
                return
            self.requests.append(request)
            reply = self.replies[len(self.requests) - 1]
            head = [f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}"]
            head += [f"{name}: {value}" for name, value in reply.headers.items()]
            head += ["transfer-encoding: chunked", "connection: close", "", ""]
            await stream.send_all("\r\n".join(head).encode())
            for position, chunk in enumerate(reply.chunks):
                if reply.drop_after is not None and position >= reply.drop_after:
                    return  # close mid-body: no terminating chunk
                if chunk:
                    await stream.send_all(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await stream.send_all(b"0\r\n\r\n")
        except trio.BrokenResourceError:
            pass  # the client went away: fine
        finally:
            await stream.aclose()


async def _read_request(stream: trio.SocketStream) -> ServedRequest | None:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        body += chunk
    return ServedRequest(method, path, headers, body)


@asynccontextmanager
async def serve(*replies: Reply) -> AsyncIterator[SSEServer]:
    """Run a server that answers with ``replies`` in turn; stop it on exit."""
    server = SSEServer(list(replies))
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, server.handle, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        server.url = f"http://127.0.0.1:{port}"
        try:
            yield server
        finally:
            nursery.cancel_scope.cancel()
