"""Where :func:`serve_agent` serves: this process's stdin and stdout, or HTTP.

stdio: newline-delimited JSON-RPC on the process's standard input and output,
read and written by trio (``trio.lowlevel.FdStream``) on duplicates of the two
descriptors. While it serves, descriptor 0 reads the null device and
descriptor 1 writes to standard error, so nothing else (a ``print``, a
command the agent runs) can read the client's messages or write on the wire.
A line that is not JSON gets a JSON-RPC parse error (-32700), JSON that is no
JSON-RPC message an invalid-request error (-32600); the server goes on. The
server ends when standard input ends (the client closed it, or went away):
the runs going on are aborted first.

HTTP: the MCP SDK's streamable HTTP application, served by Hypercorn's trio
worker (uvicorn runs only on asyncio).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.server.runner import serve_loop
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .._stdio import protocol_stdio
from ._base import public
from ._serve import AgentFactory, ServeOptions, build_server

__all__ = ["serve_agent"]

logger = logging.getLogger("agentloop.mcp.serve")

#: The longest line read from standard input; past it, the line is a parse error.
MAX_LINE = 64 * 1024 * 1024


@public
async def serve_agent(
    factory: AgentFactory,
    *,
    http: tuple[str, int] | None = None,
    path: str = "/mcp",
    options: ServeOptions | None = None,
    task_status: trio.TaskStatus[str | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the agents of ``factory`` as an MCP server, until the client leaves.

    One tool (``run_agent``, see :mod:`agentloop.mcp._serve`) runs an agent of
    ``factory`` on a prompt. Without ``http``, it serves on this process's
    standard input and output and returns when standard input ends; with
    ``http=(host, port)`` (port 0: any free one), it serves streamable HTTP at
    ``path`` until cancelled. ``task_status.started`` gets the HTTP URL (None
    for stdio) once it serves.

    Raises:
        OSError: the HTTP address cannot be listened on.
        ImportError: HTTP is asked and Hypercorn is not installed.

    Cancellation: the runs going on are aborted (each tool call gets its
    result, bash's process group is killed), then the server stops.
    """
    server = build_server(factory, options)
    if http is None:
        await serve_stdio(server, task_status=task_status)
    else:
        host, port = http
        await serve_http(server, host, port, path=path, task_status=task_status)


async def serve_stdio(
    server: Server[Any], *, task_status: trio.TaskStatus[str | None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Serve ``server`` on this process's stdin and stdout (see the module)."""
    async with _stdio_streams() as (read_stream, write_stream):
        task_status.started(None)
        await serve_loop(
            server,
            read_stream,
            write_stream,
            lifespan_state={},
            init_options=server.create_initialization_options(),
        )


@contextlib.asynccontextmanager
async def _stdio_streams() -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with protocol_stdio() as (reader, writer), trio.open_nursery() as nursery:
        nursery.start_soon(_read_lines, reader, read_send, write_send.clone())
        nursery.start_soon(_write_lines, writer, write_receive, nursery.cancel_scope)
        yield read_receive, write_send
        nursery.cancel_scope.cancel()


async def _read_lines(
    reader: trio.lowlevel.FdStream,
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Each line of ``reader`` as a message; a line that is none gets an error reply."""
    buffer = bytearray()
    async with messages, replies:
        while True:
            try:
                chunk = await reader.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                break
            start = len(buffer)
            buffer += chunk
            while (end := buffer.find(b"\n", start)) >= 0:
                line = bytes(buffer[:end])
                del buffer[: end + 1]
                start = 0
                await _take(line, messages, replies)
            if len(buffer) > MAX_LINE:
                buffer.clear()
                await replies.send(_error_reply(None, types.PARSE_ERROR, "Parse error"))
        if buffer.strip():
            await _take(bytes(buffer), messages, replies)


async def _take(
    line: bytes,
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    replies: MemoryObjectSendStream[SessionMessage],
) -> None:
    if not line.strip():
        return
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError:
        try:
            data = json.loads(line)
        except ValueError:
            await replies.send(_error_reply(None, types.PARSE_ERROR, "Parse error"))
            return
        found = data.get("id") if isinstance(data, dict) else None
        request_id = found if isinstance(found, str | int) and not isinstance(found, bool) else None
        await replies.send(_error_reply(request_id, types.INVALID_REQUEST, "Invalid Request"))
        return
    await messages.send(SessionMessage(message))


def _error_reply(request_id: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
        )
    )


async def _write_lines(
    writer: trio.lowlevel.FdStream,
    messages: MemoryObjectReceiveStream[SessionMessage],
    scope: trio.CancelScope,
) -> None:
    """Each message on a line of ``writer``; a client that is gone ends the serving."""
    async with messages:
        async for message in messages:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await writer.send_all(data.encode("utf-8") + b"\n")
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                logger.debug("standard output is closed: the client is gone")
                scope.cancel()
                return


async def serve_http(
    server: Server[Any],
    host: str,
    port: int,
    *,
    path: str = "/mcp",
    task_status: trio.TaskStatus[str | None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``server`` over streamable HTTP at ``http://host:port/path``, until cancelled."""
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve
    except ImportError as error:  # pragma: no cover - hypercorn comes with agentloop[mcp]
        raise ImportError(
            "serving MCP over HTTP needs Hypercorn: pip install 'agentloop[mcp]'"
        ) from error
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.graceful_timeout = 1.0
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(_hypercorn, serve, app, config)
        task_status.started(binds[0].rstrip("/") + path)


async def _hypercorn(
    serve: Any, app: Any, config: Any, *, task_status: trio.TaskStatus[list[str]]
) -> None:
    await serve(app, config, task_status=task_status)
