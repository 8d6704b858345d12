"""A real HTTP/1.1 echo server on 127.0.0.1 for the OpenAPI adapter tests (stdlib only).

Run it as ``python tests/openapi_server.py [--port N]``: it binds 127.0.0.1 (port 0,
the default, lets the OS pick), prints exactly one stdout line ``PORT <n>`` once it
listens, and serves until killed. Every route answers any method (GET, POST, PUT,
PATCH, DELETE, HEAD, OPTIONS, and also TRACE and QUERY); the request body is always
read in full first (by Content-Length, or chunked), so keep-alive connections stay in
sync. HEAD gets the headers of the response without its body.

Routes (matched on the raw path, without the query):

* ``/echo`` and ``/echo/...``: 200 ``application/json``, the request as seen on the
  wire, see :func:`echo_document`; ``/echo/status/<code>`` answers the same with
  that status (an API that quotes the request in its error).
* ``/status/<code>`` (200..599): that status, JSON ``{"error": "status <code>",
  "detail": "x" * 3000}``; 204 and 304 get no body (HTTP forbids one).
* ``/hang``: never answers; the handler thread sleeps until the client disconnects
  (or an hour passes, then closes the connection). Other requests are unaffected.
* ``/big/<n>``: 200 ``text/plain``, exactly ``n`` bytes of repeating ``0123456789``.
* ``/chunked/<n>``: the same body, chunked: no ``Content-Length``.
* ``/image``: 200 ``image/png``, a valid 1x1 PNG (:data:`PNG_BYTES`).
* ``/text``: 200 ``text/plain; charset=utf-8``, :data:`TEXT_BODY`.
* ``/json-array``: 200 ``application/json``, :data:`JSON_ARRAY_BODY`.
* ``/redirect``: 302 to ``/echo/redirected``.
* ``/last``: 200 ``application/json``, the document of the last ``/echo`` request
  (``null`` before the first): what was on the wire, for tests whose tool result
  hides it (credentials are redacted there).
* ``/cookie-set``: 200 with ``Set-Cookie:`` :data:`SET_COOKIE`, JSON ``{"ok": true}``.
* anything else: 404 JSON ``{"error": "no route", "path": <raw path>}``.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import select
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from server_common import png_1x1

__all__ = [
    "BIG_PATTERN",
    "COOKIE_SET_BODY",
    "HANG_LIMIT",
    "JSON_ARRAY_BODY",
    "PNG_BYTES",
    "REDIRECT_LOCATION",
    "SET_COOKIE",
    "STATUS_DETAIL",
    "TEXT_BODY",
    "big_body",
    "echo_document",
    "main",
    "status_body",
]


PNG_BYTES: bytes = png_1x1()
"""The body of ``/image``."""

TEXT_BODY: str = "plain text \u2713"
"""The body of ``/text`` (sent UTF-8 encoded)."""

JSON_ARRAY_BODY: bytes = b'[{"id": 1}, {"id": 2}]'
"""The exact body of ``/json-array``."""

REDIRECT_LOCATION: str = "/echo/redirected"
"""The ``Location`` of ``/redirect`` (relative, as sent)."""

SET_COOKIE: str = "session=abc123; Path=/; HttpOnly"
"""The ``Set-Cookie`` header of ``/cookie-set``."""

COOKIE_SET_BODY: bytes = b'{"ok": true}'
"""The exact body of ``/cookie-set``."""

STATUS_DETAIL: str = "x" * 3000
"""The ``detail`` of every ``/status/<code>`` body."""

BIG_PATTERN: bytes = b"0123456789"
"""``/big/<n>`` repeats this."""

HANG_LIMIT: float = 3600.0
"""Seconds ``/hang`` waits at most before closing the connection unanswered."""

_HANG_POLL = 0.1
_BIG_PIECE = 64_000  # /big/<n> is written in pieces of this size: a multiple of 10
assert _BIG_PIECE % len(BIG_PATTERN) == 0  # every piece starts with "0"
_STATUS_ROUTE = re.compile(r"/status/([0-9]{3})")
_BIG_ROUTE = re.compile(r"/big/([0-9]{1,12})")
_CHUNKED_ROUTE = re.compile(r"/chunked/([0-9]{1,12})")
_NO_BODY_STATUSES = frozenset({204, 304})


def status_body(code: int) -> bytes:
    """The exact body ``/status/<code>`` sends (none for 204 and 304)."""
    if code in _NO_BODY_STATUSES:
        return b""
    return json.dumps({"error": f"status {code}", "detail": STATUS_DETAIL}).encode()


def big_body(n: int) -> bytes:
    """The exact body ``/big/<n>`` sends."""
    return (BIG_PATTERN * (n // len(BIG_PATTERN) + 1))[:n]


def _wire_text(text: str) -> str:
    """``http.server`` decodes the request line and headers as Latin-1; undo that.

    The original bytes are decoded as UTF-8 when they are valid UTF-8 (so a raw
    non-ASCII byte sequence shows as the characters a client meant), else the
    Latin-1 reading stays. ASCII, the usual case, is unchanged either way.
    """
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


def echo_document(
    method: str, target: str, header_items: list[tuple[str, str]], body: bytes
) -> dict[str, Any]:
    """The JSON object ``/echo/...`` answers with.

    ``path`` and ``query`` split the raw request target at its first ``?``, still
    percent-encoded; ``headers`` maps lower-cased names to values, repeats joined
    with ``", "``; ``cookie`` is the raw ``Cookie`` header (repeats joined with
    ``"; "``) or ``None``; ``body`` is the body as UTF-8 text or ``None`` when it is
    not UTF-8; ``body_base64`` is always the base64 of the raw body.
    """
    path, _, query = target.partition("?")
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for name, value in header_items:
        key = name.lower()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if key == "cookie":
            cookies.append(value)
    try:
        text: str | None = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return {
        "method": method,
        "path": path,
        "query": query,
        "headers": headers,
        "cookie": "; ".join(cookies) if cookies else None,
        "content_type": headers.get("content-type"),
        "body": text,
        "body_base64": base64.b64encode(body).decode("ascii"),
    }


_LAST: list[Any] = [None]  # the last /echo document (handlers run in threads; one item)


class _BadRequest(Exception):
    """The request body's framing is malformed."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "agentloop-openapi-echo/1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: the tests read stdout, and stderr noise helps nobody

    # -- request body ---------------------------------------------------------

    def _read_body(self) -> bytes:
        encoding = self.headers.get("Transfer-Encoding", "")
        if "chunked" in encoding.lower():
            return self._read_chunked()
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        if not length.strip().isdigit():
            raise _BadRequest(f"bad Content-Length {length!r}")
        wanted = int(length)
        body = self.rfile.read(wanted)
        if len(body) != wanted:
            raise _BadRequest("body shorter than its Content-Length")
        return body

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self.rfile.readline(65537)
            if not line.endswith(b"\n"):
                raise _BadRequest("bad chunk size line")
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _BadRequest(f"bad chunk size {size_text!r}") from None
            if size == 0:
                break
            data = self.rfile.read(size)
            if len(data) != size or self.rfile.read(2) != b"\r\n":
                raise _BadRequest("truncated chunk")
            parts.append(data)
        while True:  # trailer section, up to the blank line
            line = self.rfile.readline(65537)
            if line in (b"\r\n", b"\n", b""):
                break
        return b"".join(parts)

    # -- responses ------------------------------------------------------------

    def _send(
        self,
        status: int,
        body: bytes = b"",
        content_type: str | None = None,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        for name, value in extra:
            self.send_header(name, value)
        if status not in _NO_BODY_STATUSES:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and status not in _NO_BODY_STATUSES:
            self.wfile.write(body)

    def _send_json(self, status: int, value: Any, extra: tuple[tuple[str, str], ...] = ()) -> None:
        body = json.dumps(value, ensure_ascii=False).encode("utf-8")
        self._send(status, body, "application/json", extra)

    def _send_big(self, n: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(n))
        self.end_headers()
        if self.command == "HEAD":
            return
        piece = big_body(_BIG_PIECE)
        remaining = n
        while remaining:
            step = min(remaining, _BIG_PIECE)
            self.wfile.write(piece[:step])
            remaining -= step

    def _send_chunked(self, n: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.command == "HEAD":
            return
        piece = big_body(_BIG_PIECE)
        remaining = n
        while remaining:
            step = min(remaining, _BIG_PIECE)
            self.wfile.write(b"%x\r\n%s\r\n" % (step, piece[:step]))
            remaining -= step
        self.wfile.write(b"0\r\n\r\n")

    def _hang(self) -> None:
        """Answer nothing; return once the client hangs up or :data:`HANG_LIMIT` passes."""
        self.close_connection = True
        deadline = time.monotonic() + HANG_LIMIT
        sock = self.connection
        while time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], _HANG_POLL)
            if not readable:
                continue
            try:
                peeked = sock.recv(1, socket.MSG_PEEK)
            except OSError:
                return
            if not peeked:
                return  # orderly shutdown by the client
            time.sleep(_HANG_POLL)  # bytes of a pipelined request: ignore, keep hanging

    # -- dispatch -------------------------------------------------------------

    def _handle(self) -> None:
        try:
            body = self._read_body()
        except _BadRequest as error:
            self.close_connection = True
            self._send_json(400, {"error": "bad request", "detail": str(error)})
            return
        target = _wire_text(self.path)
        path = target.partition("?")[0]

        if path == "/echo" or path.startswith("/echo/"):
            header_items = [(name, _wire_text(value)) for name, value in self.headers.items()]
            document = echo_document(self.command, target, header_items, body)
            _LAST[0] = document
            status = re.fullmatch(r"/echo/status/(\d{3})", path)
            self._send_json(int(status.group(1)) if status else 200, document)
        elif path == "/last":
            self._send_json(200, _LAST[0])
        elif match := _STATUS_ROUTE.fullmatch(path):
            code = int(match.group(1))
            if not 200 <= code <= 599:
                self._send_json(400, {"error": "bad request", "detail": f"status {code}"})
            else:
                self._send(code, status_body(code), "application/json")
        elif path == "/hang":
            self._hang()
        elif match := _BIG_ROUTE.fullmatch(path):
            self._send_big(int(match.group(1)))
        elif match := _CHUNKED_ROUTE.fullmatch(path):
            self._send_chunked(int(match.group(1)))
        elif path == "/image":
            self._send(200, PNG_BYTES, "image/png")
        elif path == "/text":
            self._send(200, TEXT_BODY.encode("utf-8"), "text/plain; charset=utf-8")
        elif path == "/json-array":
            self._send(200, JSON_ARRAY_BODY, "application/json")
        elif path == "/redirect":
            self._send(302, extra=(("Location", REDIRECT_LOCATION),))
        elif path == "/cookie-set":
            self._send(200, COOKIE_SET_BODY, "application/json", (("Set-Cookie", SET_COOKIE),))
        else:
            self._send_json(404, {"error": "no route", "path": path})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle
    do_HEAD = do_OPTIONS = do_TRACE = do_QUERY = _handle


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port; 0 lets the OS pick")
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    server.daemon_threads = True
    sys.stdout.write(f"PORT {server.server_address[1]}\n")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
