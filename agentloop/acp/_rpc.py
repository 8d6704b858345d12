"""JSON-RPC 2.0 over newline-delimited JSON, on trio streams (ACP's stdio transport).

One message per line, UTF-8, no embedded newlines (``json.dumps`` escapes them).
Each request that comes in is handled in a task of its own, so a long
``session/prompt`` never blocks a ``session/cancel`` or the answer to a request
the agent sent; notifications are handled in order, in the reading task.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .._errors import AgentloopError

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "RESOURCE_NOT_FOUND",
    "Connection",
    "RpcError",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: ACP's "resource not found" (an unknown session, say).
RESOURCE_NOT_FOUND = -32002

#: The longest line read (an editor may embed big files in a prompt).
MAX_LINE = 64 * 1024 * 1024


class RpcError(AgentloopError):
    """A JSON-RPC error: raised by a handler (sent as the error response), or the
    peer's error response to a request we sent."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        """The ``error`` member of a response."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class PeerGone(AgentloopError):
    """The other side closed the connection (end of input, or a broken pipe)."""


RequestHandler = Callable[[str, Any], Awaitable[Any]]
NotificationHandler = Callable[[str, Any], Awaitable[None]]


def _no_nan(value: str) -> float:
    raise ValueError(f"not valid JSON: {value}")


class Connection:
    """One JSON-RPC connection: read lines from ``receive``, write lines to ``send``.

    :meth:`serve` reads until the input ends; meanwhile :meth:`request` and
    :meth:`notify` send to the peer. ``on_request(method, params)`` returns the
    result (or raises :class:`RpcError`); ``on_notification(method, params)``
    handles a notification.
    """

    def __init__(
        self,
        receive: trio.abc.ReceiveStream,
        send: trio.abc.SendStream,
        *,
        on_request: RequestHandler,
        on_notification: NotificationHandler,
    ) -> None:
        self._receive = receive
        self._send = send
        self._on_request = on_request
        self._on_notification = on_notification
        self._write_lock = trio.Lock()
        self._next_id = 0
        self._waiting: dict[int, trio.MemorySendChannel[dict[str, Any]]] = {}
        self.closed = trio.Event()

    async def _write(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        async with self._write_lock:
            if self.closed.is_set():
                raise PeerGone("the client is gone")
            try:
                await self._send.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as error:
                self.closed.set()
                raise PeerGone(f"the client is gone: {error}") from error

    async def notify(self, method: str, params: Any) -> None:
        """Send a notification.

        Raises:
            PeerGone: the client is gone.
        """
        await self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its result.

        Raises:
            RpcError: the peer answered with an error.
            PeerGone: the client went away before it answered.
        """
        self._next_id += 1
        request_id = self._next_id
        send, receive = trio.open_memory_channel[dict[str, Any]](1)
        self._waiting[request_id] = send
        try:
            await self._write(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            try:
                response = await receive.receive()
            except trio.EndOfChannel:
                raise PeerGone("the client went away before it answered") from None
        finally:
            self._waiting.pop(request_id, None)
        error = response.get("error")
        if error is not None:
            if not isinstance(error, dict):
                raise RpcError(INTERNAL_ERROR, f"a malformed error: {error!r}")
            raise RpcError(
                int(error.get("code", INTERNAL_ERROR)),
                str(error.get("message", "")),
                error.get("data"),
            )
        return response.get("result")

    async def serve(self) -> None:
        """Read and dispatch messages until the input ends; then :attr:`closed` is set
        and requests waiting for an answer raise :class:`PeerGone`."""
        try:
            async with trio.open_nursery() as nursery:
                buffer = bytearray()
                while True:
                    try:
                        chunk = await self._receive.receive_some(65536)
                    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                        chunk = b""
                    if not chunk:
                        break
                    buffer += chunk
                    while (end := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:end])
                        del buffer[: end + 1]
                        await self._dispatch(line, nursery)
                    if len(buffer) > MAX_LINE:
                        buffer.clear()
                        await self._error(None, RpcError(PARSE_ERROR, "a message too long"))
                if buffer.strip():
                    await self._dispatch(bytes(buffer), nursery)
                self.closed.set()
                for channel in list(self._waiting.values()):
                    channel.close()
                nursery.cancel_scope.cancel()
        finally:
            self.closed.set()

    async def _error(self, request_id: Any, error: RpcError) -> None:
        try:
            await self._write({"jsonrpc": "2.0", "id": request_id, "error": error.to_json()})
        except PeerGone:
            pass

    async def _dispatch(self, line: bytes, nursery: trio.Nursery) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line, parse_constant=_no_nan)
        except ValueError as error:
            await self._error(None, RpcError(PARSE_ERROR, f"Parse error: {error}"))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            await self._error(
                message.get("id") if isinstance(message, dict) else None,
                RpcError(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object"),
            )
            return
        method = message.get("method")
        request_id = message.get("id")
        if method is None:  # a response to one of our requests
            waiting = self._waiting.get(request_id) if isinstance(request_id, int) else None
            if waiting is not None:
                waiting.send_nowait(message)
            else:
                print(f"agentloop acp: a response to no request: {line[:200]!r}", file=sys.stderr)
            return
        if not isinstance(method, str) or (
            "id" in message
            and not (
                isinstance(request_id, str)
                or (isinstance(request_id, int | float) and not isinstance(request_id, bool))
            )
        ):
            await self._error(request_id, RpcError(INVALID_REQUEST, "Invalid Request"))
            return
        if isinstance(request_id, float) and not math.isfinite(request_id):
            await self._error(None, RpcError(INVALID_REQUEST, "Invalid Request"))
            return
        params = message.get("params")
        if "id" not in message:
            try:
                await self._on_notification(method, params)
            except RpcError as error:
                print(f"agentloop acp: {method}: {error.message}", file=sys.stderr)
            return
        nursery.start_soon(self._answer, request_id, method, params)

    async def _answer(self, request_id: Any, method: str, params: Any) -> None:
        try:
            result = await self._on_request(method, params)
        except RpcError as error:
            await self._error(request_id, error)
            return
        except PeerGone:
            return
        except Exception as error:  # a bug of ours: said, and the server goes on
            print(f"agentloop acp: {method} failed: {error!r}", file=sys.stderr)
            await self._error(
                request_id, RpcError(INTERNAL_ERROR, f"{type(error).__name__}: {error}")
            )
            return
        try:
            await self._write({"jsonrpc": "2.0", "id": request_id, "result": result})
        except PeerGone:
            pass
