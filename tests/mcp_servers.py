"""MCP test servers for the ``agentloop.mcp`` adapter tests, importable and runnable.

Import :func:`build_server` / :func:`build_paged_server` to serve in-process
(``mcp.Client(build_server())``), or run this file as a process::

    python tests/mcp_servers.py stdio [--paged] [--linger S] [--pidfile PATH]
    python tests/mcp_servers.py http  [--paged] [--port N] [--pidfile PATH]
    python tests/mcp_servers.py sse   [--paged] [--port N] [--pidfile PATH]
    python tests/mcp_servers.py hang  [--pidfile PATH]

``http`` and ``sse`` listen on 127.0.0.1 (``--port 0``, the default, lets the OS
choose) and print exactly one line to stdout, ``PORT <n>``, once the socket is
listening; ``http`` serves streamable HTTP at ``/mcp``, ``sse`` the legacy
HTTP+SSE transport (GET ``/sse``, POST ``/messages/``); the paths are printed
to stderr. ``stdio`` and ``hang`` run under trio, the HTTP modes run uvicorn on
asyncio. ``stdio`` exits when stdin closes, or ``--linger`` seconds later (so
the SDK's client escalates to killing the process group). ``hang`` reads stdin,
never answers, and exits at EOF.

Tools (:data:`SERVER_TOOL_NAMES`) and the SDK behaviour (mcp 2.3) they pin down:

* Tools annotated ``-> str`` get an output schema ``{"result": string}``, and
  their results carry ``structured_content == {"result": <text>}`` besides the
  text block. ``all_content`` and ``fail`` build their ``CallToolResult`` and
  carry no structured content.
* ``crash`` raises ``ValueError("boom")``: MCPServer turns it into a
  ``CallToolResult`` with ``is_error=True`` and one text block
  ``"Error executing tool crash"`` (the exception text stays on the server,
  which logs the traceback); it is not a JSON-RPC error.
* ``structured`` returns a ``TypedDict``: the tool is listed with an output
  schema (``n`` and ``squared``, both required integers) and the result carries
  ``structured_content == {"n": n, "squared": n * n}`` plus the text block the
  SDK generates from it, the JSON dump with indent 2 (:func:`structured_text`).
* ``slow`` first reports progress ``(0, seconds, "sleeping")`` (only a caller
  that passed a progress callback sees it: the cue that the handler runs), then
  sleeps. The SDK's JSON-RPC dispatcher applies ``notifications/cancelled`` in
  its default ``"interrupt"`` peer-cancel mode, so the handler is cancelled and
  writes its marker file; in-process at 2026-07-28 the cancellation is direct.
* ``die`` calls ``os._exit(3)``: never call it in-process. ``spawn_child``
  in-process spawns a child of the test process.
* ``add_tool`` sends ``notifications/tools/list_changed`` on the connection
  (delivered only on handshake-era connections, ``Client(mode="legacy")``) and
  publishes the change on the server's subscription bus (delivered at
  2026-07-28 only to a ``Client.listen(tools_list_changed=True)`` stream, and
  from there also to the client's ``message_handler``).
* The protocol types require an input schema on every tool, so the paged
  server's :data:`BARE_TOOL` has the minimal ``{"type": "object"}``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import io
import json
import os
import socket
import subprocess
import sys
import wave
from typing import Any, TypedDict

import anyio
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    AudioContent,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)
from server_common import png_1x1
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

__all__ = [
    "ALL_CONTENT_BLOCKS",
    "BARE_TOOL",
    "PNG_BYTES",
    "SERVER_TOOL_NAMES",
    "WAV_BYTES",
    "build_paged_server",
    "build_server",
    "main",
    "paged_tool_names",
    "structured_text",
]


def _wav_silence() -> bytes:
    """A valid mono 8 kHz 16-bit WAV file holding 8 samples of silence."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(8000)
        wav.writeframes(b"\x00\x00" * 8)
    return buffer.getvalue()


PNG_BYTES: bytes = png_1x1()
WAV_BYTES: bytes = _wav_silence()
_PNG_B64 = base64.b64encode(PNG_BYTES).decode("ascii")
_WAV_B64 = base64.b64encode(WAV_BYTES).decode("ascii")

ALL_CONTENT_BLOCKS: tuple[ContentBlock, ...] = (
    TextContent(text="plain text"),
    ImageContent(data=_PNG_B64, mime_type="image/png"),
    AudioContent(data=_WAV_B64, mime_type="audio/wav"),
    ResourceLink(
        uri="file:///tmp/report.txt",
        name="report.txt",
        mime_type="text/plain",
        description="A report the tool wrote.",
    ),
    EmbeddedResource(
        resource=TextResourceContents(
            uri="mem://notes", text="embedded notes", mime_type="text/plain"
        )
    ),
    EmbeddedResource(
        resource=BlobResourceContents(uri="mem://pixel.png", blob=_PNG_B64, mime_type="image/png")
    ),
)
"""What ``all_content`` returns, in order."""

SERVER_TOOL_NAMES: tuple[str, ...] = (
    "echo",
    "all_content",
    "structured",
    "fail",
    "crash",
    "progress",
    "slow",
    "pid",
    "spawn_child",
    "die",
    "add_tool",
    "echo_request",
    "big",
    "read_only_lookup",
)
"""The tools of :func:`build_server`, in listing order."""

# Spawned children stay referenced, so no Popen is collected (with a ResourceWarning).
_children: list[subprocess.Popen[bytes]] = []


class Squared(TypedDict):
    """The structured output of ``structured``."""

    n: int
    squared: int


def structured_text(n: int) -> str:
    """The text block the SDK generates for ``structured(n)``."""
    return json.dumps({"n": n, "squared": n * n}, indent=2)


def _write_marker(path: str) -> None:
    with open(path, "w", encoding="utf-8") as marker:
        marker.write("cancelled")


def _spawn_sleep() -> int:
    child = subprocess.Popen(
        ["sleep", "300"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _children.append(child)
    return child.pid


def build_server(name: str = "agentloop-test") -> MCPServer:
    """The main test server: one tool per behaviour the adapter must handle."""
    server: MCPServer = MCPServer(name)

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def all_content() -> CallToolResult:
        """Return one block of each content kind: text, image, audio, link, embedded resources."""
        return CallToolResult(content=list(ALL_CONTENT_BLOCKS))

    @server.tool()
    async def structured(n: int) -> Squared:
        """Return n and its square as structured content."""
        return Squared(n=n, squared=n * n)

    @server.tool()
    async def fail(message: str) -> CallToolResult:
        """Return an error result (isError) whose text is the message."""
        return CallToolResult(content=[TextContent(text=message)], is_error=True)

    @server.tool()
    async def crash() -> str:
        """Raise ValueError('boom') inside the tool."""
        raise ValueError("boom")

    @server.tool()
    async def progress(steps: int, ctx: Context) -> str:
        """Report `steps` progress notifications, then return 'done'."""
        for i in range(steps):
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        return "done"

    @server.tool()
    async def slow(seconds: float, marker: str, ctx: Context) -> str:
        """Sleep `seconds`; if cancelled first, write 'cancelled' to the file `marker`."""
        # The caller's cue that the handler runs (a no-op unless it asked for progress).
        await ctx.report_progress(0, seconds, "sleeping")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            _write_marker(marker)
            raise
        return "slept"

    @server.tool()
    async def pid() -> str:
        """Return the server process's pid."""
        return str(os.getpid())

    @server.tool()
    async def spawn_child() -> str:
        """Start `sleep 300` as a child process (same process group) and return its pid."""
        return str(_spawn_sleep())

    @server.tool()
    async def die() -> str:
        """End the server process abruptly (exit status 3) in the middle of the call."""
        os._exit(3)

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Register a tool `name` (returning 'I am <name>') and announce the tools list change."""

        def added() -> str:
            return f"I am {name}"

        ctx.mcp_server.add_tool(added, name=name, description=f"A tool added at runtime: {name}.")
        await ctx.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "added"

    @server.tool()
    async def echo_request(ctx: Context) -> str:
        """Return the request's HTTP headers (as httpbin's /anything does) and the
        environment variable ECHO_ENV, as a hostile or careless server might."""
        headers = dict(ctx.headers or {})
        body = {"headers": headers, "env": os.environ.get("ECHO_ENV")}
        await ctx.report_progress(1, 1, f"got {headers.get('authorization', '')}")
        return json.dumps(body)

    @server.tool()
    async def big(kib: int, structured: bool = False) -> CallToolResult:
        """Return `kib` KiB of text ('é' and 'x'), with the same as structured content if asked."""
        text = ("é" + "x" * 1022) * kib  # 1024 bytes of UTF-8 per KiB, a 2-byte char first
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content={"text": text} if structured else None,
        )

    @server.tool(
        title="Read-only lookup",
        annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False),
    )
    async def read_only_lookup(key: str) -> str:
        """Look a key up without side effects."""
        return f"value of {key}"

    return server


BARE_TOOL: Tool = Tool(
    name="bare",
    description="A tool with the minimal input schema.",
    input_schema={"type": "object"},
)
"""The paged server's tool without parameters, listed on the last page."""


def paged_tool_names(pages: int = 3, per_page: int = 2) -> list[list[str]]:
    """The tool names of :func:`build_paged_server`, page by page."""
    names = [[f"t{k}_{i}" for i in range(per_page)] for k in range(pages)]
    names[-1].append(BARE_TOOL.name)
    return names


def build_paged_server(pages: int = 3, per_page: int = 2) -> Server[Any]:
    """A low-level server whose ``tools/list`` spans ``pages`` pages.

    Page ``k`` (0-based; the first page is the request without a cursor, page
    ``k > 0`` is requested with cursor ``"page-<k>"``) lists ``t<k>_0`` ...
    ``t<k>_<per_page - 1>`` and, except on the last page, ``nextCursor``
    ``"page-<k+1>"``. The last page also lists :data:`BARE_TOOL`. An unknown
    cursor is an INVALID_PARAMS error. ``tools/call`` answers ``"called <name>"``.
    """
    if pages < 1:
        raise ValueError("pages must be at least 1")
    names = paged_tool_names(pages, per_page)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        cursor = params.cursor if params is not None else None
        if cursor is None:
            page = 0
        else:
            valid = {f"page-{k}": k for k in range(1, pages)}
            if cursor not in valid:
                raise MCPError(code=INVALID_PARAMS, message=f"unknown cursor {cursor!r}")
            page = valid[cursor]
        tools = [
            BARE_TOOL
            if name == BARE_TOOL.name
            else Tool(
                name=name,
                description=f"Paged tool {name}.",
                input_schema={"type": "object", "properties": {"x": {"type": "integer"}}},
            )
            for name in names[page]
        ]
        next_cursor = f"page-{page + 1}" if page + 1 < pages else None
        return ListToolsResult(tools=tools, next_cursor=next_cursor)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        return CallToolResult(content=[TextContent(text=f"called {params.name}")])

    return Server("agentloop-paged", on_list_tools=list_tools, on_call_tool=call_tool)


# --------------------------------------------------------------------------- processes


def _lowlevel(server: MCPServer | Server[Any]) -> Server[Any]:
    return server._lowlevel_server if isinstance(server, MCPServer) else server


async def _serve_stdio(server: MCPServer | Server[Any], linger: float) -> None:
    lowlevel = _lowlevel(server)
    # Handshake-era clients see tools.listChanged = true (the SDK's default options say false).
    options = lowlevel.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, options)
    if linger:
        await anyio.sleep(linger)


async def _hang() -> None:
    """Read stdin until EOF; never write anything."""
    stdin = anyio.wrap_file(sys.stdin.buffer)
    while await stdin.read1(65536):
        pass


def _sse_app(server: Server[Any]) -> Any:
    """The legacy HTTP+SSE transport: GET /sse opens the stream, POST /messages/ takes requests."""
    transport = SseServerTransport("/messages/")

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options())
        return Response()

    routes = [
        Route("/sse", endpoint=handle_sse, methods=["GET"]),
        Mount("/messages/", app=transport.handle_post_message),
    ]
    return Starlette(routes=routes)


def _serve_http(server: MCPServer | Server[Any], mode: str, port: int) -> None:
    """Serve over uvicorn (asyncio) on 127.0.0.1; print ``PORT <n>`` once the socket listens."""
    if mode == "http":
        app = _lowlevel(server).streamable_http_app(streamable_http_path="/mcp")
        paths = "streamable HTTP at /mcp"
    else:
        app = _sse_app(_lowlevel(server))
        paths = "HTTP+SSE: GET /sse (event stream), POST /messages/?session_id=... (requests)"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    bound = sock.getsockname()[1]
    print(f"PORT {bound}", flush=True)
    print(f"serving {paths} on http://127.0.0.1:{bound}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1)
    asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))


def main(argv: list[str] | None = None) -> None:
    """Run a test server as a process (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["stdio", "http", "sse", "hang"])
    parser.add_argument("--paged", action="store_true", help="serve build_paged_server()")
    parser.add_argument(
        "--port", type=int, default=0, help="HTTP port on 127.0.0.1 (0: chosen by the OS)"
    )
    parser.add_argument("--pidfile", help="write this process's pid to the file at start")
    parser.add_argument(
        "--linger",
        type=float,
        default=0.0,
        help="stdio: stay alive this many seconds after stdin closes (the client then kills it)",
    )
    args = parser.parse_args(argv)

    if args.pidfile:
        with open(args.pidfile, "w", encoding="utf-8") as pidfile:
            pidfile.write(str(os.getpid()))

    server: MCPServer | Server[Any] = build_paged_server() if args.paged else build_server()
    if args.mode == "stdio":
        anyio.run(_serve_stdio, server, args.linger, backend="trio")
    elif args.mode == "hang":
        anyio.run(_hang, backend="trio")
    else:
        _serve_http(server, args.mode, args.port)


if __name__ == "__main__":
    main()
