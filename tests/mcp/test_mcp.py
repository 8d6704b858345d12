"""agentloop.mcp against real MCP servers: in-process, stdio subprocesses, HTTP on 127.0.0.1.

The servers are those of ``mcp_servers.py``. Only the model is scripted; every
tool call goes over a real connection to a real server. Waits on processes are
bounded with ``fail_after`` and poll /proc; none asserts on wall-clock time.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolRequestParams, CallToolResult, ListToolsResult, Tool
from mcp_fixtures import (
    kill_quietly,
    process_alive,
    serve_http,
    stdio_command,
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

import agentloop as al
from agentloop.mcp import (
    HttpServer,
    McpConfig,
    McpConnection,
    McpConnectionError,
    McpToolAdapter,
    SseServer,
    StdioServer,
    open_mcp,
    open_mcp_servers,
)
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import EventRecorder, assert_well_formed

# In-process, "auto" speaks the 2026-07-28 protocol through direct calls; "legacy" runs
# the initialize handshake and JSON-RPC over memory streams.
PROTOCOLS = pytest.mark.parametrize("protocol", ["auto", "legacy"])
BOUND = 30.0  # seconds: a ceiling on real-process waits, never the expected time
ABORTED = "Cancelled: the run was aborted."


def stdio_server(mode: str = "stdio", *extra: str) -> StdioServer:
    command, args = stdio_command(mode, *extra)
    return StdioServer(command, args)


async def run_calls(
    tools: Any, *calls: tuple[str, dict[str, Any]], **options: Any
) -> tuple[al.Agent, EventRecorder]:
    """Run an agent whose model makes ``calls`` (in one message), then says "done"."""
    script = [
        reply(*(call(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls))),
        reply("done"),
    ]
    agent = al.Agent(ScriptedProvider(script), tools=tools, **options)
    recorder = EventRecorder()
    async with agent.prompt("go") as events:
        await recorder.consume(events)
    assert_well_formed(agent.messages)
    return agent, recorder


def results(agent: al.Agent) -> dict[str, al.ToolResultMessage]:
    return {m.tool_call_id: m for m in agent.messages if isinstance(m, al.ToolResultMessage)}


def details(recorder: EventRecorder) -> dict[str, Any]:
    """Each call's result details (they go to the events, not to the model)."""
    return {e.tool_call_id: e.result.details for e in recorder.of_type(al.ToolExecutionEnd)}


async def call_text(connection: McpConnection, tool: str, args: dict[str, Any]) -> str:
    result = await connection.call_tool(tool, args)
    return "".join(getattr(block, "text", "") for block in result.content)


# --------------------------------------------------------------------------- tools


async def test_tools_are_listed_with_the_prefix_and_called_with_the_raw_name() -> None:
    async with open_mcp(build_server(), McpConfig(prefix="srv"), name="srv") as srv:
        assert [t.name for t in srv.tools] == [f"srv__{n}" for n in SERVER_TOOL_NAMES]
        assert [t.tool_name for t in srv.tools] == list(SERVER_TOOL_NAMES)
        echo = srv.tools[0]
        assert isinstance(echo, McpToolAdapter)
        assert echo.label == "echo"
        assert echo.description == "Return the text unchanged."
        assert echo.parameters_schema == {
            "type": "object",
            "properties": {"text": {"title": "Text", "type": "string"}},
            "required": ["text"],
            "title": "echoArguments",
        }
        assert echo.timeout == 300.0
        assert not echo.read_only
        lookup = srv.tools[SERVER_TOOL_NAMES.index("read_only_lookup")]
        assert lookup.label == "Read-only lookup"
        assert lookup.annotations == {"readOnlyHint": True, "openWorldHint": False}
        assert lookup.read_only
        assert repr(srv) == f"<McpConnection 'srv' connected tools={len(SERVER_TOOL_NAMES)}>"

        agent, _ = await run_calls(srv.tools, ("srv__echo", {"text": "hello"}))
    assert results(agent)["c0"].text == "hello"
    assert not results(agent)["c0"].is_error


async def test_without_a_prefix_the_names_are_the_servers() -> None:
    async with open_mcp(build_server()) as srv:
        assert srv.name == "agentloop-test"  # the server object's name
        assert [t.name for t in srv.tools] == list(SERVER_TOOL_NAMES)


async def test_every_page_of_the_tool_list_is_read() -> None:
    async with open_mcp(build_paged_server(pages=3, per_page=2), McpConfig(prefix="p")) as paged:
        expected = [name for page in paged_tool_names(3, 2) for name in page]
        assert [t.tool_name for t in paged.tools] == expected
        assert [t.name for t in paged.tools] == [f"p__{n}" for n in expected]
        bare = paged.tools[-1]
        assert bare.parameters_schema == {"type": "object"}
        agent, _ = await run_calls(paged.tools, ("p__t2_1", {"x": 1}), ("p__bare", {}))
    assert results(agent)["c0"].text == "called t2_1"
    assert results(agent)["c1"].text == "called bare"


@PROTOCOLS
async def test_every_content_type_is_mapped(protocol: str) -> None:
    async with open_mcp(build_server(), McpConfig(prefix="s", protocol=protocol)) as srv:
        agent, recorder = await run_calls(srv.tools, ("s__all_content", {}))
    result = results(agent)["c0"]
    assert not result.is_error
    kinds = [(type(block).__name__, getattr(block, "text", None)) for block in result.content]
    assert kinds == [
        ("TextContent", "plain text"),
        ("ImageContent", None),
        ("TextContent", "[audio: audio/wav, 60 bytes]"),
        (
            "TextContent",
            "[resource link: report.txt <file:///tmp/report.txt> (text/plain): "
            "A report the tool wrote.]",
        ),
        ("TextContent", "[resource mem://notes]\nembedded notes"),
        ("ImageContent", None),
    ]
    image, blob_image = result.content[1], result.content[5]
    assert isinstance(image, al.ImageContent)
    assert isinstance(blob_image, al.ImageContent)
    assert base64.b64decode(image.data) == PNG_BYTES
    assert image.mime_type == "image/png"
    assert base64.b64decode(blob_image.data) == PNG_BYTES
    extras = details(recorder)["c0"]["content"]
    assert [entry["type"] for entry in extras] == ["audio", "resource_link"]
    assert base64.b64decode(extras[0]["data"]) == WAV_BYTES
    assert extras[0]["mime_type"] == "audio/wav"
    assert extras[1]["uri"] == "file:///tmp/report.txt"


@PROTOCOLS
async def test_structured_content_goes_to_details(protocol: str) -> None:
    async with open_mcp(build_server(), McpConfig(prefix="s", protocol=protocol)) as srv:
        structured = srv.tools[SERVER_TOOL_NAMES.index("structured")]
        assert structured.output_schema is not None
        assert structured.output_schema["required"] == ["n", "squared"]
        agent, recorder = await run_calls(
            srv.tools, ("s__structured", {"n": 7}), ("s__echo", {"text": "x"})
        )
    assert results(agent)["c0"].text == structured_text(7)
    assert details(recorder) == {
        "c0": {"structured": {"n": 7, "squared": 49}},
        "c1": {"structured": {"result": "x"}},
    }


@PROTOCOLS
async def test_is_error_results_are_error_results(protocol: str) -> None:
    async with open_mcp(build_server(), McpConfig(prefix="s", protocol=protocol)) as srv:
        agent, _ = await run_calls(
            srv.tools, ("s__fail", {"message": "no such row"}), ("s__crash", {})
        )
    fail, crash = results(agent)["c0"], results(agent)["c1"]
    assert (fail.is_error, fail.text) == (True, "no such row")
    assert (crash.is_error, crash.text) == (True, "Error executing tool crash")


async def test_arguments_are_checked_before_the_server_is_called() -> None:
    async with open_mcp(build_server(), McpConfig(prefix="s")) as srv:
        agent, _ = await run_calls(srv.tools, ("s__echo", {"text": 5}))
    result = results(agent)["c0"]
    assert (result.is_error, result.text) == (
        True,
        "Invalid arguments: $.text: 5 is not of type 'string'",
    )


async def test_an_unknown_tool_is_an_error_result() -> None:
    async with open_mcp(build_server(), name="srv") as srv:
        result = await srv.call_tool("no_such_tool", {})
    assert result.is_error
    assert [getattr(b, "text", None) for b in result.content] == ["Unknown tool: no_such_tool"]


def refusing_server() -> Server[Any]:
    """A server that answers every call with a JSON-RPC error."""

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="picky", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        raise MCPError(code=INVALID_PARAMS, message=f"{params.name} wants a different day")

    return Server("refusing", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_refused_call_is_a_tool_error() -> None:
    async with open_mcp(refusing_server(), McpConfig(prefix="r")) as srv:
        assert srv.name == "refusing"
        agent, _ = await run_calls(srv.tools, ("r__picky", {}))
    result = results(agent)["c0"]
    assert (result.is_error, result.text) == (
        True,
        "MCP server 'refusing' refused the call to 'picky': picky wants a different day",
    )


@PROTOCOLS
async def test_progress_becomes_progress_and_update_events(protocol: str) -> None:
    async with open_mcp(build_server(), McpConfig(prefix="s", protocol=protocol)) as srv:
        agent, recorder = await run_calls(srv.tools, ("s__progress", {"steps": 3}))
    assert results(agent)["c0"].text == "done"
    progress = [e.text for e in recorder.of_type(al.ProgressMessage)]
    assert progress == ["step 1", "step 2", "step 3"]
    updates = recorder.of_type(al.ToolExecutionUpdate)
    assert [u.partial_result.details for u in updates] == [
        {"progress": float(i), "total": 3.0, "message": f"step {i}"} for i in (1, 2, 3)
    ]
    assert [u.partial_result.text_content for u in updates] == ["step 1", "step 2", "step 3"]


async def test_a_call_past_its_timeout_is_cancelled_on_the_server(
    autojump_clock: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    async with open_mcp(build_server(), McpConfig(prefix="s", call_timeout=5)) as srv:
        assert srv.tools[0].timeout == 5
        start = trio.current_time()
        agent, _ = await run_calls(srv.tools, ("s__slow", {"seconds": 1000, "marker": str(marker)}))
        assert trio.current_time() - start == pytest.approx(5)
    result = results(agent)["c0"]
    assert (result.is_error, result.text) == (True, "Tool exceeded timeout of 5s")
    assert marker.read_text() == "cancelled"


async def test_no_call_timeout(autojump_clock: Any, tmp_path: Path) -> None:
    async with open_mcp(build_server(), McpConfig(prefix="s", call_timeout=None)) as srv:
        assert srv.tools[0].timeout is None
        agent, _ = await run_calls(
            srv.tools, ("s__slow", {"seconds": 10_000, "marker": str(tmp_path / "m")})
        )
    assert results(agent)["c0"].text == "slept"


async def test_calls_run_concurrently_on_one_connection(
    autojump_clock: Any, tmp_path: Path
) -> None:
    calls = [("s__slow", {"seconds": 10, "marker": str(tmp_path / f"m{i}")}) for i in range(5)]
    async with open_mcp(build_server(), McpConfig(prefix="s")) as srv:
        start = trio.current_time()
        agent, _ = await run_calls(srv.tools, *calls)
        assert trio.current_time() - start == pytest.approx(10)  # not 50: they overlapped
    assert [results(agent)[f"c{i}"].text for i in range(5)] == ["slept"] * 5


async def test_abort_cancels_the_call_on_the_server(autojump_clock: Any, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    async with open_mcp(build_server(), McpConfig(prefix="s")) as srv:
        agent = al.Agent(
            ScriptedProvider(
                [reply(call("s__slow", {"seconds": 1000, "marker": str(marker)}, id="c0"))]
            ),
            tools=srv.tools,
        )
        async with agent.prompt("go") as events:
            async for event in events:
                if isinstance(event, al.ToolExecutionStart):
                    await trio.sleep(1)
                    agent.abort()
    assert (results(agent)["c0"].is_error, results(agent)["c0"].text) == (True, ABORTED)
    assert marker.read_text() == "cancelled"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_the_tool_list_is_refreshed_when_the_server_says_it_changed(protocol: str) -> None:
    changed = trio.Event()
    seen: list[list[str]] = []

    def on_changed(connection: McpConnection) -> None:
        seen.append([t.name for t in connection.tools])
        changed.set()

    async with open_mcp(
        build_server(), McpConfig(prefix="s", on_tools_changed=on_changed, protocol=protocol)
    ) as srv:
        before = srv.tools
        assert await call_text(srv, "add_tool", {"name": "late"}) == "added"
        with trio.fail_after(BOUND):
            await changed.wait()
        assert seen == [[f"s__{n}" for n in (*SERVER_TOOL_NAMES, "late")]]
        # Unchanged tools keep their adapter objects.
        assert srv.tools[: len(before)] == before
        agent, _ = await run_calls(srv.tools, ("s__late", {}))
    assert results(agent)["c0"].text == "I am late"


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match=r"^call_timeout must be > 0 or None, got 0$"):
        McpConfig(call_timeout=0)
    with pytest.raises(ValueError, match=r"^connect_timeout must be > 0, got -1$"):
        McpConfig(connect_timeout=-1)
    with pytest.raises(
        ValueError, match=r"^protocol must be 'auto', 'legacy' or one of '.*', got 'x'$"
    ):
        McpConfig(protocol="x")


async def test_a_closed_connection_refuses_calls() -> None:
    async with open_mcp(build_server(), McpConfig(prefix="s"), name="srv") as srv:
        echo = srv.tools[0]
    with pytest.raises(al.ToolError, match=r"^MCP server 'srv' is closed$"):
        await srv.call_tool("echo", {"text": "late"})
    agent, _ = await run_calls([echo], ("s__echo", {"text": "late"}))
    assert results(agent)["c0"].text == "MCP server 'srv' is closed"


async def test_errors_in_the_block_leave_as_themselves() -> None:
    with pytest.raises(KeyError):
        async with open_mcp(build_server()):
            raise KeyError("mine")


# --------------------------------------------------------------------------- stdio


async def test_stdio_server_end_to_end() -> None:
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), McpConfig(prefix="srv"), name="srv") as srv:
            assert srv.pid is not None
            assert process_alive(srv.pid)
            assert srv.server_info is not None
            assert srv.server_info.name == "agentloop-test"
            agent, recorder = await run_calls(
                srv.tools,
                ("srv__echo", {"text": "over stdio"}),
                ("srv__structured", {"n": 3}),
                ("srv__progress", {"steps": 2}),
                ("srv__fail", {"message": "nope"}),
            )
            pid = srv.pid
        assert not process_alive(pid)
    got = results(agent)
    assert got["c0"].text == "over stdio"
    assert details(recorder)["c1"] == {"structured": {"n": 3, "squared": 9}}
    assert got["c2"].text == "done"
    assert (got["c3"].is_error, got["c3"].text) == (True, "nope")
    assert [e.text for e in recorder.of_type(al.ProgressMessage)] == ["step 1", "step 2"]


async def test_five_concurrent_calls_get_their_own_answers() -> None:
    calls = [("s__echo", {"text": f"message {i}"}) for i in range(5)]
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), McpConfig(prefix="s")) as srv:
            agent, _ = await run_calls(srv.tools, *calls)
    assert [results(agent)[f"c{i}"].text for i in range(5)] == [f"message {i}" for i in range(5)]


async def test_a_server_that_dies_mid_call_fails_the_call_and_is_restarted() -> None:
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), McpConfig(prefix="s"), name="srv") as srv:
            first = int(await call_text(srv, "pid", {}))
            agent, _ = await run_calls(srv.tools, ("s__die", {}), ("s__echo", {"text": "x"}))
            died = results(agent)["c0"]
            assert (died.is_error, died.text) == (
                True,
                "MCP server 'srv' closed the connection during the call to 'die' "
                "(the server process exited with status 3)",
            )
            assert await wait_until_dead(first, BOUND)
            # The next call starts the server again.
            second = int(await call_text(srv, "pid", {}))
            assert second != first
            assert srv.pid == second
            assert srv.connections == 2
            assert await call_text(srv, "echo", {"text": "back"}) == "back"


async def test_a_server_killed_from_outside_mid_call(tmp_path: Path) -> None:
    marker = str(tmp_path / "marker")
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), name="srv") as srv:
            pid = srv.pid
            assert pid is not None
            errors: list[str] = []
            started = trio.Event()

            async def progress(value: float, total: float | None, message: str | None) -> None:
                started.set()

            async def slow_call() -> None:
                try:
                    args = {"seconds": 600, "marker": marker}
                    await srv.call_tool("slow", args, progress=progress)
                except al.ToolError as error:
                    errors.append(str(error))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_call)
                await started.wait()
                os.kill(pid, signal.SIGKILL)
            assert errors == [
                "MCP server 'srv' closed the connection during the call to 'slow' "
                "(the server process was killed by signal 9)"
            ]
            assert await call_text(srv, "echo", {"text": "again"}) == "again"


async def test_closing_ends_the_server_and_its_children() -> None:
    children: list[int] = []
    try:
        with trio.fail_after(BOUND):
            async with open_mcp(stdio_server(), name="srv") as srv:
                server = int(await call_text(srv, "pid", {}))
                children.append(int(await call_text(srv, "spawn_child", {})))
                children.append(int(await call_text(srv, "spawn_child", {})))
                assert all(process_alive(pid) for pid in (server, *children))
            # Dead as soon as the block is left: no orphans.
            assert [process_alive(pid) for pid in (server, *children)] == [False, False, False]
    finally:
        for child in children:
            kill_quietly(child)


async def test_the_children_of_a_dead_server_are_ended_too() -> None:
    child = 0
    try:
        with trio.fail_after(BOUND):
            async with open_mcp(stdio_server(), name="srv") as srv:
                child = int(await call_text(srv, "spawn_child", {}))
                with pytest.raises(al.ToolError):
                    await srv.call_tool("die", {})
                assert await wait_until_dead(child, BOUND)
    finally:
        kill_quietly(child)


async def test_a_server_that_lingers_after_eof_is_killed(tmp_path: Path) -> None:
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server("stdio", "--linger", "600"), name="srv") as srv:
            pid = int(await call_text(srv, "pid", {}))
        assert not process_alive(pid)


async def test_a_cancelled_block_still_ends_the_server() -> None:
    with trio.fail_after(BOUND):
        with trio.CancelScope() as scope:
            async with open_mcp(stdio_server(), name="srv") as srv:
                pid = srv.pid
                scope.cancel()
                await trio.sleep_forever()
        assert pid is not None
        assert not process_alive(pid)


async def test_abort_cancels_the_call_on_a_stdio_server(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), McpConfig(prefix="s")) as srv:
            agent = al.Agent(
                ScriptedProvider(
                    [reply(call("s__slow", {"seconds": 600, "marker": str(marker)}, id="c0"))]
                ),
                tools=srv.tools,
            )
            async with agent.prompt("go") as events:
                async for event in events:
                    if isinstance(event, al.ProgressMessage):  # the server runs the handler
                        agent.abort()
            assert results(agent)["c0"].text == ABORTED
            assert await wait_for_file(marker, BOUND) == "cancelled"
            assert await call_text(srv, "echo", {"text": "still here"}) == "still here"


async def test_the_handshake_is_bounded(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with trio.fail_after(BOUND):
        with pytest.raises(McpConnectionError) as info:
            async with open_mcp(
                stdio_server("hang", "--pidfile", str(pidfile)),
                McpConfig(connect_timeout=0.5),
                name="mute",
            ):
                pytest.fail("the handshake completed")  # pragma: no cover
        assert str(info.value) == "MCP server 'mute' did not complete the handshake within 500ms"
        assert not process_alive(int(pidfile.read_text()))


async def test_a_command_that_does_not_exist() -> None:
    with pytest.raises(McpConnectionError) as info:
        async with open_mcp(StdioServer("agentloop-no-such-command"), name="x"):
            pass  # pragma: no cover
    assert str(info.value) == (
        "cannot start MCP server 'x': [Errno 2] No such file or directory: "
        "'agentloop-no-such-command'"
    )


async def test_a_server_that_exits_at_start_says_why() -> None:
    script = "import sys; print('config.toml: no such file', file=sys.stderr); sys.exit(4)"
    with trio.fail_after(BOUND):
        with pytest.raises(McpConnectionError) as info:
            async with open_mcp(StdioServer(sys.executable, ["-c", script]), name="broken"):
                pass  # pragma: no cover
    assert str(info.value) == (
        "cannot connect to MCP server 'broken': Connection closed (the server process exited "
        "with status 4; the end of its stderr:\nconfig.toml: no such file)"
    )


async def test_the_server_gets_env_and_cwd(tmp_path: Path) -> None:
    command, args = stdio_command()
    server = StdioServer(command, args, env={"AGENTLOOP_MCP_TEST": "yes"}, cwd=tmp_path)
    with trio.fail_after(BOUND):
        async with open_mcp(server) as srv:
            pid = srv.pid
            assert pid is not None
            environ = (await trio.Path(f"/proc/{pid}/environ").read_bytes()).split(b"\0")
            assert b"AGENTLOOP_MCP_TEST=yes" in environ
            assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path)


# --------------------------------------------------------------------------- HTTP

# Under trio, the SDK's streamable-HTTP client leaves httpx2/httpcore2 async generators
# (its long-lived response streams) unfinished when it closes them; trio's finalizer
# warns about each. The leak is inside the SDK; these tests let that one warning pass.
HTTPX_ASYNCGEN_LEAK = pytest.mark.filterwarnings(
    "ignore:Async generator 'http(x|core)2[.]:ResourceWarning"
)


@HTTPX_ASYNCGEN_LEAK
async def test_streamable_http_end_to_end() -> None:
    with trio.fail_after(BOUND):
        async with (
            serve_http("http") as (url, _process),
            open_mcp(HttpServer(url), McpConfig(prefix="web")) as web,
        ):
            assert web.name == "127.0.0.1"
            assert web.pid is None
            agent, recorder = await run_calls(
                web.tools,
                ("web__echo", {"text": "over http"}),
                ("web__progress", {"steps": 2}),
                ("web__all_content", {}),
            )
    got = results(agent)
    assert got["c0"].text == "over http"
    assert got["c1"].text == "done"
    assert len(got["c2"].content) == 6
    assert [e.text for e in recorder.of_type(al.ProgressMessage)] == ["step 1", "step 2"]


@HTTPX_ASYNCGEN_LEAK
async def test_legacy_sse_end_to_end() -> None:
    with trio.fail_after(BOUND):
        async with (
            serve_http("sse") as (url, _process),
            open_mcp(SseServer(url), McpConfig(prefix="old")) as old,
        ):
            agent, recorder = await run_calls(
                old.tools, ("old__echo", {"text": "over sse"}), ("old__structured", {"n": 2})
            )
    assert results(agent)["c0"].text == "over sse"
    assert details(recorder)["c1"] == {"structured": {"n": 2, "squared": 4}}


@HTTPX_ASYNCGEN_LEAK
async def test_an_unreachable_http_server() -> None:
    with trio.socket.socket() as sock:  # a port nobody listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with trio.fail_after(BOUND):
        with pytest.raises(McpConnectionError) as info:
            async with open_mcp(HttpServer(f"http://127.0.0.1:{port}/mcp"), name="web"):
                pass  # pragma: no cover
    assert str(info.value) == (
        f"cannot connect to MCP server 'web': ConnectError: all attempts to connect to "
        f"127.0.0.1:{port} failed"
    )


@HTTPX_ASYNCGEN_LEAK
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_http_server_that_dies_mid_call_then_comes_back(
    protocol: str, tmp_path: Path
) -> None:
    with trio.fail_after(BOUND):
        async with serve_http("http") as (url, process):
            port = int(url.split(":")[2].split("/")[0])
            async with open_mcp(HttpServer(url), McpConfig(protocol=protocol), name="web") as web:
                started = trio.Event()
                errors: list[str] = []

                async def progress(value: float, total: float | None, message: str | None) -> None:
                    started.set()

                async def slow_call() -> None:
                    args = {"seconds": 600, "marker": str(tmp_path / "m")}
                    try:
                        await web.call_tool("slow", args, progress=progress)
                    except al.ToolError as error:
                        errors.append(str(error))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(slow_call)
                    await started.wait()
                    process.kill()
                assert errors == [
                    "MCP server 'web' closed the connection during the call to 'slow'"
                ]
                with pytest.raises(al.ToolError) as down:
                    await web.call_tool("echo", {"text": "anyone?"})
                assert str(down.value) == (
                    "MCP server 'web' is not available: cannot connect to MCP server 'web': "
                    f"ConnectError: all attempts to connect to 127.0.0.1:{port} failed"
                )
                async with serve_http("http", port=port):
                    assert await call_text(web, "echo", {"text": "back"}) == "back"


@HTTPX_ASYNCGEN_LEAK
async def test_an_expired_http_session_is_started_again() -> None:
    """A handshake-era session the server forgot (404): a new session, and the call goes through."""
    with trio.fail_after(BOUND):
        async with serve_http("http") as (url, process):
            port = int(url.split(":")[2].split("/")[0])
            async with open_mcp(HttpServer(url), McpConfig(protocol="legacy"), name="web") as web:
                assert await call_text(web, "echo", {"text": "one"}) == "one"
                assert web.connections == 1
                process.kill()  # while no call is in flight
                await process.wait()
                async with serve_http("http", port=port):  # a new server: it knows no sessions
                    assert await call_text(web, "echo", {"text": "two"}) == "two"
                    assert web.connections == 2
                    assert await call_text(web, "echo", {"text": "three"}) == "three"
                    assert web.connections == 2


@HTTPX_ASYNCGEN_LEAK
async def test_http_headers_are_sent(tmp_path: Path) -> None:
    """Headers reach the server: a wrong Host header is refused by its DNS-rebinding guard."""
    with trio.fail_after(BOUND):
        async with serve_http("http") as (url, _process):
            with pytest.raises(McpConnectionError) as info:
                async with open_mcp(HttpServer(url, headers={"Host": "evil.example"}), name="web"):
                    pass  # pragma: no cover
    assert str(info.value).startswith("cannot connect to MCP server 'web': ")


# --------------------------------------------------------------------------- configuration


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def stdio_entry(*extra: str) -> dict[str, Any]:
    command, args = stdio_command("stdio", *extra)
    return {"command": command, "args": args}


async def test_open_mcp_servers_connects_every_server(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "mcp.json",
        {
            "alpha": stdio_entry(),
            "beta": {**stdio_entry("--paged")},
            "gamma": {**stdio_entry(), "disabled": True},
        },
    )
    with trio.fail_after(BOUND):
        async with open_mcp_servers(config) as servers:
            assert list(servers) == ["alpha", "beta"]
            assert servers.errors == {}
            names = [t.name for t in servers.tools]
            assert names[: len(SERVER_TOOL_NAMES)] == [f"alpha__{n}" for n in SERVER_TOOL_NAMES]
            assert names[len(SERVER_TOOL_NAMES) :] == [
                f"beta__{n}" for page in paged_tool_names() for n in page
            ]
            pids = [servers["alpha"].pid, servers["beta"].pid]
            agent, _ = await run_calls(
                servers.tools, ("alpha__echo", {"text": "a"}), ("beta__t0_0", {})
            )
        assert [process_alive(pid) for pid in pids if pid] == [False, False]
    assert results(agent)["c0"].text == "a"
    assert results(agent)["c1"].text == "called t0_0"


async def test_open_mcp_servers_names_the_servers_that_failed(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "mcp.json",
        {"good": stdio_entry(), "bad": {"command": "agentloop-no-such-command"}},
    )
    with trio.fail_after(BOUND):
        with pytest.raises(McpConnectionError) as info:
            async with open_mcp_servers(config):
                pytest.fail("a required server failed")  # pragma: no cover
        assert str(info.value) == (
            "cannot start MCP server 'bad': [Errno 2] No such file or directory: "
            "'agentloop-no-such-command'"
        )
        async with open_mcp_servers(config, McpConfig(prefix=False), required=False) as servers:
            assert list(servers) == ["good"]
            assert servers.errors == {"bad": str(info.value)}
            assert [t.name for t in servers.tools] == list(SERVER_TOOL_NAMES)
            assert repr(servers) == "McpServers(['good'], errors=['bad'])"


async def test_a_failing_on_tools_changed_is_logged_and_the_connection_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    called = trio.Event()

    def on_changed(connection: McpConnection) -> None:
        called.set()
        raise RuntimeError("my callback broke")

    async with open_mcp(build_server(), McpConfig(on_tools_changed=on_changed), name="srv") as srv:
        assert await call_text(srv, "add_tool", {"name": "late"}) == "added"
        with trio.fail_after(BOUND):
            await called.wait()
        assert await call_text(srv, "late", {}) == "I am late"
        assert srv.connections == 1
    failures = [r for r in caplog.records if r.name == "agentloop.mcp" and r.exc_info]
    assert [r.getMessage() for r in failures] == ["MCP server 'srv': on_tools_changed failed"]


async def test_a_restarted_server_with_other_tools_is_reported(tmp_path: Path) -> None:
    """The server is restarted after a crash and comes back as another server (paged)."""
    flag = tmp_path / "paged"
    command, args = stdio_command()
    script = f'if [ -e "{flag}" ]; then exec "$0" "$@" --paged; else exec "$0" "$@"; fi'
    server = StdioServer("sh", ["-c", script, command, *args])
    seen: list[list[str]] = []
    reported = trio.Event()

    def on_changed(connection: McpConnection) -> None:
        seen.append([t.name for t in connection.tools])
        reported.set()

    with trio.fail_after(BOUND):
        async with open_mcp(server, McpConfig(on_tools_changed=on_changed), name="srv") as srv:
            assert [t.name for t in srv.tools] == list(SERVER_TOOL_NAMES)
            flag.touch()
            with pytest.raises(al.ToolError):
                await srv.call_tool("die", {})
            assert await call_text(srv, "t0_0", {}) == "called t0_0"
            await reported.wait()
            expected = [name for page in paged_tool_names() for name in page]
            assert [t.name for t in srv.tools] == expected
            assert seen == [expected]
            assert srv.connections == 2


async def test_a_server_killed_while_sending_progress_is_a_tool_error_not_a_group(
    tmp_path: Path,
) -> None:
    """Called directly (as a workflow activity would), the adapter raises the ToolError
    itself: the nursery of its progress reporter does not wrap it in an ExceptionGroup."""
    marker = str(tmp_path / "marker")
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), name="srv") as srv:
            (slow,) = [tool for tool in srv.tools if tool.tool_name == "slow"]
            (die,) = [tool for tool in srv.tools if tool.tool_name == "die"]
            pid = srv.pid
            assert pid is not None
            progress: list[str] = []

            async def on_progress(text: str) -> None:
                progress.append(text)
                os.kill(pid, signal.SIGKILL)  # the server dies while the reporter runs

            async def on_update(result: al.ToolResult) -> None:
                await trio.lowlevel.checkpoint()

            ctx = al.ToolContext("c1", slow.name, trio.CancelScope(), on_update, on_progress)
            with pytest.raises(al.ToolError) as caught:
                await slow.execute({"seconds": 600, "marker": marker}, ctx)
            assert type(caught.value) is al.ToolError
            assert str(caught.value) == (
                "MCP server 'srv' closed the connection during the call to 'slow' "
                "(the server process was killed by signal 9)"
            )
            assert progress == ["sleeping"]
            # Without progress, the same: a ToolError naming the server.
            plain = al.ToolContext("c2", die.name, trio.CancelScope())
            with pytest.raises(al.ToolError) as caught:
                await die.execute({}, plain)
            assert str(caught.value) == (
                "MCP server 'srv' closed the connection during the call to 'die' "
                "(the server process exited with status 3)"
            )
            # The next call starts the server again and succeeds.
            assert await call_text(srv, "echo", {"text": "back"}) == "back"
            assert srv.connections == 3


# --------------------------------------------------------------------------- hostile servers

TOKEN = "tok-9f8e7d6c5b4a"
API_KEY = "key-0123456789ab"


@HTTPX_ASYNCGEN_LEAK
@pytest.mark.parametrize("mode", ["http", "sse"])
async def test_credentials_a_server_echoes_are_redacted(mode: str) -> None:
    """Headers sent to the server come back as *** in results, progress, events and errors."""
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Api-Key": API_KEY}
    kind = HttpServer if mode == "http" else SseServer
    with trio.fail_after(BOUND):
        async with (
            serve_http(mode) as (url, _process),
            open_mcp(kind(url, headers=headers), name="echo") as srv,
        ):
            agent, recorder = await run_calls(
                srv.tools,
                ("echo_request", {}),
                ("fail", {"message": f"bad key {API_KEY} with {TOKEN}"}),
            )
    got = results(agent)
    echoed = json.loads(got["c0"].text)["headers"]
    assert (echoed["authorization"], echoed["x-api-key"]) == ("***", "***")
    assert got["c1"].text == "bad key *** with ***"
    assert [e.text for e in recorder.of_type(al.ProgressMessage)] == ["got ***"]
    # (The model's own arguments hold them; what the server sent back does not.)
    ends = recorder.of_type(al.ToolExecutionEnd) + recorder.of_type(al.ToolExecutionUpdate)
    everything = repr(ends) + repr(list(got.values()))
    assert TOKEN not in everything
    assert API_KEY not in everything


async def test_a_stdio_servers_secret_env_values_are_redacted() -> None:
    command, args = stdio_command()
    server = StdioServer(command, args, env={"SERVICE_TOKEN": TOKEN, "ECHO_ENV": TOKEN})
    with trio.fail_after(BOUND):
        async with open_mcp(server, name="srv") as srv:
            agent, _ = await run_calls(srv.tools, ("echo_request", {}))
    assert json.loads(results(agent)["c0"].text) == {"headers": {}, "env": "***"}


async def test_a_huge_result_is_capped_on_a_character_boundary() -> None:
    """10 MiB of text: the first 100,000 bytes reach the model, and a line says how much came."""
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), name="srv") as srv:
            agent, recorder = await run_calls(
                srv.tools, ("big", {"kib": 10240}), ("big", {"kib": 200, "structured": True})
            )
            small = await run_calls(srv.tools, ("big", {"kib": 2, "structured": True}))
    got = results(agent)
    first = got["c0"].content
    assert len(first) == 2
    assert isinstance(first[0], al.TextContent)
    assert first[0].text.encode("utf-8") == (("é" + "x" * 1022) * 98).encode("utf-8")[:100_000]
    assert first[1] == al.TextContent(
        "[Result truncated: the server sent 10.0 MiB of text; the first 97.7 KiB are shown.]"
    )
    assert details(recorder)["c0"] == {"omitted": {"text": 10 * 1024 * 1024}}
    # Structured content over the limit is left out whole, never cut into invalid JSON.
    assert details(recorder)["c1"] == {"omitted": {"structured": 204812, "text": 204800}}
    # Within the limit, nothing changes.
    assert details(small[1])["c0"] == {"structured": {"text": ("é" + "x" * 1022) * 2}}


async def test_max_result_bytes_is_configurable_and_checked() -> None:
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), McpConfig(max_result_bytes=10), name="srv") as srv:
            agent, _ = await run_calls(srv.tools, ("echo", {"text": "0123456789ééé"}))
    # Byte 10 is the first byte of an 'é': the cut keeps whole characters only.
    assert [b.text for b in results(agent)["c0"].content if isinstance(b, al.TextContent)] == [
        "0123456789",
        "[Result truncated: the server sent 16 bytes of text; the first 10 bytes are shown.]",
    ]
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), McpConfig(max_result_bytes=3), name="srv") as srv:
            agent, _ = await run_calls(srv.tools, ("echo", {"text": "ééé"}))
    assert results(agent)["c0"].content[0] == al.TextContent("é")
    for bad in (0, -5, True, 1.5):
        with pytest.raises(ValueError, match="max_result_bytes must be an integer >= 1"):
            McpConfig(max_result_bytes=bad)
