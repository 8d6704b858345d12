"""Smoke tests of the MCP test servers and launchers, driven by the raw SDK ``Client``.

They pin down what the adapter tests can rely on: every tool's exact result, the
SDK's behaviour around it (crashes, cancellation, dead servers, process
cleanup), and each launcher (in-process, stdio, streamable HTTP, SSE).

``mode="auto"`` (the ``Client`` default) speaks the 2026-07-28 protocol to these
servers; ``mode="legacy"`` forces the 2025-11-25 ``initialize`` handshake.
"""

from __future__ import annotations

import base64
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.client.sse import sse_client
from mcp.client.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
    ToolListChangedNotification,
)
from mcp_fixtures import (
    kill_quietly,
    process_alive,
    serve_http,
    stdio_command,
    stdio_params,
    wait_for_file,
    wait_until_dead,
)
from mcp_servers import (
    PNG_BYTES,
    SERVER_TOOL_NAMES,
    WAV_BYTES,
    build_paged_server,
    build_server,
    paged_tool_names,
    structured_text,
)

MODES = pytest.mark.parametrize("mode", ["auto", "legacy"])
BOUND = 20.0  # generous bound on anything that should take milliseconds


def text_of(result: CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, TextContent)
    return block.text


class Recorder:
    """A ``message_handler`` that records what it receives and can wait for a kind."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self._changed = trio.Event()

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, kind: type) -> Any:
        while True:
            for message in self.messages:
                if isinstance(message, kind):
                    return message
            await self._changed.wait()


# --------------------------------------------------------------------------- in-process


@MODES
async def test_lists_exactly_the_tools(mode: str) -> None:
    async with Client(build_server(), mode=mode) as client:
        tools = (await client.list_tools()).tools
    assert [tool.name for tool in tools] == list(SERVER_TOOL_NAMES)
    echo = tools[0]
    assert echo.description == "Return the text unchanged."
    assert echo.input_schema["properties"] == {"text": {"title": "Text", "type": "string"}}
    assert echo.input_schema["required"] == ["text"]
    # A `-> str` tool gets an output schema wrapping the value in {"result": ...}.
    assert echo.output_schema is not None
    assert echo.output_schema["properties"] == {"result": {"title": "Result", "type": "string"}}


@MODES
async def test_echo(mode: str) -> None:
    async with Client(build_server(), mode=mode) as client:
        result = await client.call_tool("echo", {"text": "hello"})
    assert result.content == [TextContent(text="hello")]
    assert result.structured_content == {"result": "hello"}
    assert result.is_error is False


@MODES
async def test_all_content_returns_every_block_kind(mode: str) -> None:
    async with Client(build_server(), mode=mode) as client:
        result = await client.call_tool("all_content", {})
    assert result.is_error is False
    assert result.structured_content is None
    text, image, audio, link, embedded_text, embedded_blob = result.content

    assert isinstance(text, TextContent)
    assert text.type == "text"
    assert text.text == "plain text"

    assert isinstance(image, ImageContent)
    assert image.type == "image"
    assert image.mime_type == "image/png"
    png = base64.b64decode(image.data)
    assert png == PNG_BYTES
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert png[12:16] == b"IHDR"
    assert struct.unpack(">II", png[16:24]) == (1, 1)

    assert isinstance(audio, AudioContent)
    assert audio.type == "audio"
    assert audio.mime_type == "audio/wav"
    wav = base64.b64decode(audio.data)
    assert wav == WAV_BYTES
    assert wav[:4] == b"RIFF"
    assert wav[8:12] == b"WAVE"

    assert isinstance(link, ResourceLink)
    assert link.type == "resource_link"
    assert link.uri == "file:///tmp/report.txt"
    assert link.name == "report.txt"
    assert link.mime_type == "text/plain"
    assert link.description == "A report the tool wrote."

    assert isinstance(embedded_text, EmbeddedResource)
    assert embedded_text.type == "resource"
    assert embedded_text.resource == TextResourceContents(
        uri="mem://notes", text="embedded notes", mime_type="text/plain"
    )

    assert isinstance(embedded_blob, EmbeddedResource)
    assert embedded_blob.type == "resource"
    blob = embedded_blob.resource
    assert isinstance(blob, BlobResourceContents)
    assert blob.uri == "mem://pixel.png"
    assert blob.mime_type == "image/png"
    assert base64.b64decode(blob.blob) == PNG_BYTES


@MODES
async def test_structured(mode: str) -> None:
    async with Client(build_server(), mode=mode) as client:
        (tool,) = [t for t in (await client.list_tools()).tools if t.name == "structured"]
        result = await client.call_tool("structured", {"n": 7})
    assert tool.output_schema is not None
    assert tool.output_schema["type"] == "object"
    assert tool.output_schema["required"] == ["n", "squared"]
    assert result.structured_content == {"n": 7, "squared": 49}
    assert result.content == [TextContent(text=structured_text(7))]
    assert structured_text(7) == '{\n  "n": 7,\n  "squared": 49\n}'
    assert result.is_error is False


@MODES
async def test_fail_is_an_error_result(mode: str) -> None:
    async with Client(build_server(), mode=mode) as client:
        result = await client.call_tool("fail", {"message": "it went wrong"})
    assert result.is_error is True
    assert result.content == [TextContent(text="it went wrong")]
    assert result.structured_content is None


@MODES
async def test_crash_becomes_an_error_result_without_the_message(mode: str) -> None:
    async with Client(build_server(), mode=mode) as client:
        result = await client.call_tool("crash", {})
    assert result.is_error is True
    assert result.content == [TextContent(text="Error executing tool crash")]
    assert result.structured_content is None


@MODES
async def test_progress_notifications(mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(build_server(), mode=mode) as client:
        result = await client.call_tool("progress", {"steps": 3}, progress_callback=on_progress)
    assert text_of(result) == "done"
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


async def cancel_slow(client: Client, marker: Path) -> None:
    """Call ``slow``, wait until the handler runs (its first progress), then cancel the call."""
    started = trio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        assert (progress, total, message) == (0, 60, "sleeping")
        started.set()

    async with trio.open_nursery() as nursery:
        call_scope = trio.CancelScope()

        async def call() -> None:
            with call_scope:
                await client.call_tool(
                    "slow", {"seconds": 60, "marker": str(marker)}, progress_callback=on_progress
                )
            assert call_scope.cancelled_caught

        nursery.start_soon(call)
        with trio.fail_after(BOUND):
            await started.wait()
        assert not await trio.Path(marker).exists()
        call_scope.cancel()


@MODES
async def test_slow_sees_the_cancellation(mode: str, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with Client(build_server(), mode=mode) as client:
        await cancel_slow(client, marker)
        if mode == "auto":
            # The in-process 2026 path cancels the handler directly, before the call returns.
            assert marker.read_text() == "cancelled"
        assert await wait_for_file(marker, BOUND) == "cancelled"
        # The connection is still usable.
        assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"


async def test_slow_finishes_when_not_cancelled(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with Client(build_server()) as client:
        result = await client.call_tool("slow", {"seconds": 0.01, "marker": str(marker)})
    assert text_of(result) == "slept"
    assert not marker.exists()


async def test_add_tool_notifies_a_legacy_client() -> None:
    recorder = Recorder()
    async with Client(build_server(), mode="legacy", message_handler=recorder) as client:
        assert text_of(await client.call_tool("add_tool", {"name": "newcomer"})) == "added"
        with trio.fail_after(BOUND):
            notification = await recorder.wait_for(ToolListChangedNotification)
        assert notification.method == "notifications/tools/list_changed"
        assert notification.params is None
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == [*SERVER_TOOL_NAMES, "newcomer"]
        assert tools[-1].description == "A tool added at runtime: newcomer."
        assert text_of(await client.call_tool("newcomer", {})) == "I am newcomer"


async def test_add_tool_notifies_a_2026_client_through_listen() -> None:
    """At 2026-07-28 a change notification only reaches a ``subscriptions/listen`` stream."""
    recorder = Recorder()
    async with Client(build_server(), message_handler=recorder) as client:
        assert client.protocol_version == "2026-07-28"
        async with client.listen(tools_list_changed=True) as subscription:
            assert text_of(await client.call_tool("add_tool", {"name": "newcomer"})) == "added"
            with trio.fail_after(BOUND):
                event = await subscription.__anext__()
            assert event == ToolsListChanged()
            # The listen stream's notification also reaches the message handler.
            with trio.fail_after(BOUND):
                notification = await recorder.wait_for(ToolListChangedNotification)
            assert notification.params is not None
            # The SDK numbers subscriptions per process: "listen-<n>".
            assert list(notification.params.meta or {}) == [
                "io.modelcontextprotocol/subscriptionId"
            ]
            subscription_id = notification.params.meta["io.modelcontextprotocol/subscriptionId"]
            assert re.fullmatch(r"listen-[0-9]+", subscription_id)
        tools = (await client.list_tools()).tools
        assert [tool.name for tool in tools] == [*SERVER_TOOL_NAMES, "newcomer"]
        assert text_of(await client.call_tool("newcomer", {})) == "I am newcomer"


@MODES
async def test_read_only_lookup_metadata(mode: str) -> None:
    async with Client(build_server(), mode=mode) as client:
        (tool,) = [t for t in (await client.list_tools()).tools if t.name == "read_only_lookup"]
        result = await client.call_tool("read_only_lookup", {"key": "k"})
    assert tool.title == "Read-only lookup"
    assert tool.annotations == ToolAnnotations(read_only_hint=True, open_world_hint=False)
    assert tool.description == "Look a key up without side effects."
    assert text_of(result) == "value of k"


async def walk_pages(client: Client) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        pages.append([tool.name for tool in page.tools])
        cursor = page.next_cursor
        if cursor is None:
            return pages
        assert cursor == f"page-{len(pages)}"
        assert len(pages) < 10


@MODES
async def test_paged_server(mode: str) -> None:
    async with Client(build_paged_server(), mode=mode) as client:
        pages = await walk_pages(client)
        assert pages == [["t0_0", "t0_1"], ["t1_0", "t1_1"], ["t2_0", "t2_1", "bare"]]
        assert pages == paged_tool_names()
        last = await client.list_tools(cursor="page-2")
        assert last.tools[-1].input_schema == {"type": "object"}
        assert text_of(await client.call_tool("t1_0", {"x": 1})) == "called t1_0"
        assert text_of(await client.call_tool("bare", {})) == "called bare"
        with pytest.raises(MCPError) as info:
            await client.list_tools(cursor="nonsense")
        assert info.value.error.code == INVALID_PARAMS
        assert info.value.error.message == "unknown cursor 'nonsense'"


async def test_paged_server_shape() -> None:
    async with Client(build_paged_server(pages=1, per_page=1)) as client:
        page = await client.list_tools()
    assert [tool.name for tool in page.tools] == ["t0_0", "bare"]
    assert page.next_cursor is None


# --------------------------------------------------------------------------- stdio


def test_stdio_command() -> None:
    command, args = stdio_command("stdio", "--paged")
    assert command == sys.executable
    assert Path(args[0]).is_absolute()
    assert args[0].endswith("/tests/mcp_servers.py")
    assert args[1:] == ["stdio", "--paged"]
    params = stdio_params("hang")
    assert (params.command, params.args) == (sys.executable, [args[0], "hang"])


@MODES
async def test_stdio_server_runs_in_its_own_process(mode: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with trio.fail_after(BOUND):
        async with Client(stdio_params("stdio", "--pidfile", str(pidfile)), mode=mode) as client:
            pid = int(text_of(await client.call_tool("pid", {})))
            assert pid == int(pidfile.read_text())
            assert pid != os.getpid()
            assert process_alive(pid)
            assert [t.name for t in (await client.list_tools()).tools] == list(SERVER_TOOL_NAMES)
            assert text_of(await client.call_tool("echo", {"text": "over stdio"})) == "over stdio"
            assert client.server_capabilities.tools is not None
            assert client.server_capabilities.tools.list_changed is True
        # The server exits on stdin EOF, within the SDK's close.
        assert await wait_until_dead(pid, BOUND)


async def test_stdio_paged_server() -> None:
    with trio.fail_after(BOUND):
        async with Client(stdio_params("stdio", "--paged")) as client:
            assert await walk_pages(client) == paged_tool_names()


@MODES
async def test_stdio_slow_sees_the_cancellation(mode: str, tmp_path: Path) -> None:
    """Over JSON-RPC the client sends notifications/cancelled; the server interrupts the handler."""
    marker = tmp_path / "marker"
    with trio.fail_after(BOUND):
        async with Client(stdio_params(), mode=mode) as client:
            await cancel_slow(client, marker)
            assert await wait_for_file(marker, BOUND) == "cancelled"
            assert text_of(await client.call_tool("echo", {"text": "after"})) == "after"


@MODES
async def test_stdio_server_dying_mid_call(mode: str) -> None:
    with trio.fail_after(BOUND):
        async with Client(stdio_params(), mode=mode) as client:
            pid = int(text_of(await client.call_tool("pid", {})))
            with pytest.raises(MCPError) as info:
                await client.call_tool("die", {})
            assert type(info.value) is MCPError
            assert info.value.error.code == CONNECTION_CLOSED == -32000
            assert info.value.error.message == "Connection closed"
            assert str(info.value) == "Connection closed"
            assert await wait_until_dead(pid, BOUND)
            # Every later request fails the same way, at once.
            for _ in range(2):
                with pytest.raises(MCPError) as later:
                    await client.call_tool("echo", {"text": "anyone?"})
                assert later.value.error.code == CONNECTION_CLOSED
                assert later.value.error.message == "Connection closed"
            with pytest.raises(MCPError) as listing:
                await client.list_tools()
            assert listing.value.error.code == CONNECTION_CLOSED


async def test_closing_stdio_client_leaves_the_spawned_child_alive() -> None:
    """The server exits by itself on stdin EOF, so the SDK never signals its process group."""
    child = 0
    try:
        with trio.fail_after(BOUND):
            async with Client(stdio_params()) as client:
                server_pid = int(text_of(await client.call_tool("pid", {})))
                child = int(text_of(await client.call_tool("spawn_child", {})))
                assert os.getpgid(child) == os.getpgid(server_pid) == server_pid
                assert process_alive(child)
            assert await wait_until_dead(server_pid, BOUND)
        assert process_alive(child)
        assert os.getpgid(child) == server_pid  # orphaned, still in the old group
    finally:
        if child:
            kill_quietly(child)
    assert await wait_until_dead(child, BOUND)


async def test_closing_stdio_client_kills_a_lingering_servers_group() -> None:
    """A server still alive 2 s after stdin EOF gets SIGTERM on its group: the child dies too."""
    child = 0
    try:
        with trio.fail_after(BOUND):
            async with Client(stdio_params("stdio", "--linger", "60")) as client:
                server_pid = int(text_of(await client.call_tool("pid", {})))
                child = int(text_of(await client.call_tool("spawn_child", {})))
            # The close waited out the grace period, then killed the group.
            assert not process_alive(server_pid)
            assert await wait_until_dead(child, BOUND)
    finally:
        if child:
            kill_quietly(child)


async def test_hang_never_completes_the_handshake(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with trio.fail_after(BOUND):
        with trio.move_on_after(1.0) as bound:
            async with Client(stdio_params("hang", "--pidfile", str(pidfile))):
                pytest.fail("the handshake completed")  # pragma: no cover
        assert bound.cancelled_caught
        # The SDK's close (shielded) ended the process.
        assert await wait_until_dead(int(pidfile.read_text()), BOUND)


async def test_process_alive_treats_zombies_as_dead() -> None:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", "pass"], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    with trio.fail_after(BOUND):
        while await process.stdout.receive_some():  # EOF: the child exited (not reaped yet)
            pass  # pragma: no cover
        assert await wait_until_dead(process.pid, BOUND)
    stat = await trio.Path(f"/proc/{process.pid}/stat").read_text()
    state = stat.rpartition(")")[2].split()[0]
    assert state == "Z"
    assert not process_alive(process.pid)
    await process.wait()
    await process.stdout.aclose()
    assert not process_alive(process.pid)
    assert not process_alive(2**22 + 1)  # above any pid_max: no such process


# --------------------------------------------------------------------------- HTTP


# Under trio the SDK's legacy streamable-HTTP client leaves httpx2/httpcore2 async
# generators (its standalone GET stream) unfinished at close; trio's finalizer warns.
HTTPX_ASYNCGEN_LEAK = pytest.mark.filterwarnings(
    "ignore:Async generator 'http(x|core)2[.]:ResourceWarning"
)


@pytest.mark.parametrize("mode", ["auto", pytest.param("legacy", marks=HTTPX_ASYNCGEN_LEAK)])
async def test_streamable_http(mode: str) -> None:
    with trio.fail_after(BOUND):
        async with serve_http("http") as (url, process):
            assert url.startswith("http://127.0.0.1:")
            assert url.endswith("/mcp")
            async with Client(url, mode=mode) as client:
                tools = (await client.list_tools()).tools
                assert [tool.name for tool in tools] == list(SERVER_TOOL_NAMES)
                assert text_of(await client.call_tool("echo", {"text": "over http"})) == "over http"
                assert int(text_of(await client.call_tool("pid", {}))) == process.pid
                result = await client.call_tool("structured", {"n": 3})
                assert result.structured_content == {"n": 3, "squared": 9}
        assert process.returncode is not None


async def test_streamable_http_paged() -> None:
    with trio.fail_after(BOUND):
        async with serve_http("http", paged=True) as (url, _process), Client(url) as client:
            assert await walk_pages(client) == paged_tool_names()


@MODES
async def test_sse(mode: str) -> None:
    with trio.fail_after(BOUND):
        async with serve_http("sse") as (url, process):
            assert url.startswith("http://127.0.0.1:")
            assert url.endswith("/sse")
            async with Client(sse_client(url), mode=mode) as client:
                assert text_of(await client.call_tool("echo", {"text": "over sse"})) == "over sse"
                assert int(text_of(await client.call_tool("pid", {}))) == process.pid
        assert process.returncode is not None


async def test_sse_paged() -> None:
    with trio.fail_after(BOUND):
        async with (
            serve_http("sse", paged=True) as (url, _process),
            Client(sse_client(url)) as client,
        ):
            assert await walk_pages(client) == paged_tool_names()
