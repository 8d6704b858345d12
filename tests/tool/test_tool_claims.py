"""What the built-in tools, MCP tools and OpenAPI tools claim for the scheduler.

Each tool's ``resources(params)`` is checked for exact :class:`~agentloop.Claim`
values, hostile arguments included (they must never raise: a raising
``resources`` fails the call), and end to end through an ``Agent``: conflicting
calls of one batch are queued (``ToolCallQueued`` with its reason, then
``ToolCallDequeued``), others are not.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import hypothesis
import hypothesis.strategies as st
import mcp.types as mcp_types
import pytest
import trio
from mcp.server.mcpserver import MCPServer
from mcp_fixtures import stdio_command

import agentloop as al
from agentloop._tool import tool_traits
from agentloop.mcp import (
    McpConfig,
    McpConnection,
    McpToolAdapter,
    StdioServer,
    open_mcp,
    open_mcp_servers,
)
from agentloop.openapi import OpenApiConfig, OpenApiToolAdapter
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import EventRecorder
from agentloop.tools import (
    BashTool,
    EditFileTool,
    ListFilesTool,
    ReadFileTool,
    SearchTool,
    Workspace,
    WriteFileTool,
    default_tools,
)

NOTHING = al.Claim()
BOUND = 30.0  # seconds: a ceiling on real-process waits, never the expected time


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A workspace root, resolved (the keys are resolved paths), with a few files."""
    top = tmp_path.resolve() / "root"
    (top / "src").mkdir(parents=True)
    (top / "a.txt").write_text("a\n")
    (top / "b.txt").write_text("b\n")
    (top / "src" / "app.py").write_text("print('hi')\n")
    (tmp_path / "outside.txt").write_text("secret\n")
    return top


def key(root: Path, *parts: str) -> str:
    return str(root.joinpath(*parts))


# =========================================================================== file tools


class TestFileToolClaims:
    def test_read_file_reads_the_resolved_path(self, root: Path) -> None:
        read = ReadFileTool(root)
        a = key(root, "a.txt")
        assert read.resources({"path": "a.txt"}) == al.Claim(reads={a})
        assert read.resources({"path": "./src/../a.txt", "offset": 2}) == al.Claim(reads={a})
        assert read.resources({"path": a}) == al.Claim(reads={a})  # absolute, inside the root
        assert read.resources({"path": "src/app.py"}) == al.Claim(
            reads={key(root, "src", "app.py")}
        )
        # A file that does not exist yet is still the path it would be.
        assert read.resources({"path": "new/c.txt"}) == al.Claim(reads={key(root, "new", "c.txt")})

    def test_write_and_edit_write_the_resolved_path(self, root: Path) -> None:
        a = key(root, "a.txt")
        write, edit = WriteFileTool(root), EditFileTool(root)
        assert write.resources({"path": "a.txt", "content": "x"}) == al.Claim(writes={a})
        assert write.resources({"path": "src/../a.txt", "content": "x"}) == al.Claim(writes={a})
        assert write.resources({"path": "new.txt", "content": ""}) == al.Claim(
            writes={key(root, "new.txt")}
        )
        assert edit.resources({"path": "a.txt", "old_text": "a", "new_text": "b"}) == al.Claim(
            writes={a}
        )
        assert edit.resources({"path": a, "edits": []}) == al.Claim(writes={a})

    def test_a_symlink_is_the_file_it_points_to(self, root: Path) -> None:
        os.symlink("a.txt", root / "link.txt")
        a = key(root, "a.txt")
        assert ReadFileTool(root).resources({"path": "link.txt"}) == al.Claim(reads={a})
        assert WriteFileTool(root).resources({"path": "link.txt", "content": ""}) == al.Claim(
            writes={a}
        )

    def test_list_and_search_read_the_directory(self, root: Path) -> None:
        listing, search = ListFilesTool(root), SearchTool(root)
        top, src = str(root), key(root, "src")
        assert listing.resources({}) == al.Claim(reads={top})
        assert listing.resources({"path": ""}) == al.Claim(reads={top})  # as the tool reads it
        assert listing.resources({"path": "."}) == al.Claim(reads={top})
        assert listing.resources({"path": "src", "pattern": "*.py"}) == al.Claim(reads={src})
        assert listing.resources({"path": "src/app.py"}) == al.Claim(
            reads={key(root, "src", "app.py")}
        )
        assert search.resources({"pattern": "x"}) == al.Claim(reads={top})
        assert search.resources({"pattern": "x", "path": "src/"}) == al.Claim(reads={src})
        assert search.resources({"pattern": "x", "path": ""}) == al.Claim(reads={top})

    def test_the_tools_of_a_shared_workspace_agree_on_keys(self, root: Path) -> None:
        tools = {tool.name: tool for tool in default_tools(Workspace(root))}
        a = key(root, "a.txt")
        write = tool_traits(tools["write_file"]).resources
        read = tool_traits(tools["read_file"]).resources
        assert write is not None
        assert read is not None
        assert write({"path": "a.txt", "content": ""}).conflicts(read({"path": a}))
        assert not read({"path": "a.txt"}).conflicts(read({"path": "a.txt"}))
        # Keys are compared by equality: a directory is not a prefix of its files.
        listing = tool_traits(tools["list_files"]).resources
        assert listing is not None
        assert not write({"path": "src/app.py", "content": ""}).conflicts(listing({"path": "src"}))

    @pytest.mark.parametrize(
        "path",
        [
            "../outside.txt",  # leaves the root
            "src/../../outside.txt",
            "/etc/passwd",  # absolute, outside the root
            "~/x",  # the home directory is outside the root
            "~agentloop_no_such_user/x",  # expanduser raises RuntimeError
            "",  # an invalid path for the file tools
            "a\x00b",  # a NUL
            "\ud800",  # a lone surrogate: the OS cannot encode it
            "x" * 300,  # a name too long to resolve
        ],
    )
    def test_a_path_the_tool_refuses_claims_nothing(self, root: Path, path: str) -> None:
        for tool in (ReadFileTool(root), WriteFileTool(root), EditFileTool(root)):
            assert tool.resources({"path": path, "content": ""}) == NOTHING
        expected = al.Claim(reads={str(root)}) if path == "" else NOTHING  # "" is "."
        assert ListFilesTool(root).resources({"path": path}) == expected
        assert SearchTool(root).resources({"pattern": "x", "path": path}) == expected

    def test_a_symlink_out_of_the_root_or_a_loop_claims_nothing(self, root: Path) -> None:
        os.symlink(root.parent / "outside.txt", root / "out.txt")
        os.symlink("loop", root / "loop")
        for path in ("out.txt", "loop", "loop/x"):
            assert ReadFileTool(root).resources({"path": path}) == NOTHING
            assert WriteFileTool(root).resources({"path": path, "content": ""}) == NOTHING
            assert ListFilesTool(root).resources({"path": path}) == NOTHING

    @pytest.mark.parametrize("value", [None, 5, 1.5, True, ["a.txt"], {"p": "a.txt"}, b"a.txt"])
    def test_a_path_that_is_not_a_string_claims_nothing(self, root: Path, value: Any) -> None:
        for tool in (ReadFileTool(root), WriteFileTool(root), EditFileTool(root)):
            assert tool.resources({"path": value}) == NOTHING
        # None is a missing path: the directory tools list the root.
        expected = al.Claim(reads={str(root)}) if value is None else NOTHING
        assert ListFilesTool(root).resources({"path": value}) == expected
        assert SearchTool(root).resources({"pattern": 1, "path": value}) == expected

    def test_a_missing_path(self, root: Path) -> None:
        assert ReadFileTool(root).resources({}) == NOTHING
        assert WriteFileTool(root).resources({"content": "x"}) == NOTHING
        assert EditFileTool(root).resources({"old_text": "a", "new_text": "b"}) == NOTHING
        assert ListFilesTool(root).resources({}) == al.Claim(reads={str(root)})
        assert SearchTool(root).resources({}) == al.Claim(reads={str(root)})


@pytest.fixture(scope="module")
def shared_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    top = tmp_path_factory.mktemp("claims").resolve()
    (top / "a.txt").write_text("a\n")
    return top


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=5,
)
PATHS = st.one_of(
    JSON,
    st.lists(st.sampled_from(["..", ".", "a.txt", "src", "/", "~", "\x00", "\ud800", "/etc"])).map(
        "/".join
    ),
)


@hypothesis.given(path=PATHS, extra=st.dictionaries(st.text(), JSON, max_size=3))
def test_file_tool_claims_never_raise_and_stay_in_the_root(
    shared_root: Path, path: Any, extra: dict[str, Any]
) -> None:
    """Whatever the arguments, a claim names at most one path, inside the root."""
    params = {**extra, "path": path}
    for tool, writes in [
        (ReadFileTool(shared_root), False),
        (WriteFileTool(shared_root), True),
        (EditFileTool(shared_root), True),
        (ListFilesTool(shared_root), False),
        (SearchTool(shared_root), False),
    ]:
        claim = tool.resources(params)
        assert isinstance(claim, al.Claim)
        assert not claim.exclusive
        assert claim.budget
        keys = claim.writes if writes else claim.reads
        assert not (claim.reads if writes else claim.writes)
        assert len(keys) <= 1
        for name in keys:
            path_of = Path(name)
            assert path_of == shared_root or shared_root in path_of.parents


# =========================================================================== bash


class TestBashClaims:
    def test_exclusive_by_default(self, root: Path) -> None:
        bash = BashTool(root)
        assert bash.exclusive is True
        assert bash.resources({"command": "ls"}) == al.Claim(exclusive=True)
        assert bash.resources({}) == al.Claim(exclusive=True)
        assert bash.resources({"command": 5, "timeout": "x"}) == al.Claim(exclusive=True)

    def test_exclusive_false_claims_nothing(self, root: Path) -> None:
        bash = BashTool(root, exclusive=False)
        assert bash.resources({"command": "ls"}) == NOTHING
        resources = tool_traits(bash).resources
        assert resources is not None
        assert resources({"command": "ls"}) == NOTHING
        assert "exclusive=False" in repr(bash)


# =========================================================================== MCP


def mcp_connection(name: str = "files", **options: Any) -> McpConnection:
    config = McpConfig(call_timeout=30.0, connect_timeout=1, **options)
    return McpConnection(StdioServer("true"), config, name=name)


def mcp_tool(connection: McpConnection, **hints: Any) -> McpToolAdapter:
    annotations = mcp_types.ToolAnnotations(**hints) if hints else None
    raw = mcp_types.Tool(name="t", input_schema={"type": "object"}, annotations=annotations)
    return McpToolAdapter.from_tool(connection, raw, "t")


class TestMcpClaims:
    @pytest.mark.parametrize(
        ("hints", "claim"),
        [
            ({"read_only_hint": True}, al.Claim(reads={"mcp:files"})),
            ({"read_only_hint": True, "destructive_hint": True}, al.Claim(reads={"mcp:files"})),
            ({"read_only_hint": True, "idempotent_hint": True}, al.Claim(reads={"mcp:files"})),
            ({"destructive_hint": True}, al.Claim(writes={"mcp:files"})),
            ({"read_only_hint": False, "destructive_hint": True}, al.Claim(writes={"mcp:files"})),
            ({"destructive_hint": False}, NOTHING),
            ({"read_only_hint": False}, NOTHING),
            ({"idempotent_hint": True}, NOTHING),
            ({"open_world_hint": True, "title": "T"}, NOTHING),
            ({}, NOTHING),
        ],
    )
    def test_the_hints_decide(self, hints: dict[str, Any], claim: al.Claim) -> None:
        tool = mcp_tool(mcp_connection(), **hints)
        assert tool.resources({}) == claim
        assert tool.resources({"anything": [1, None], "path": "../x"}) == claim
        resources = tool_traits(tool).resources
        assert resources is not None
        assert resources({}) == claim

    def test_destructive_exclusive_false(self) -> None:
        connection = mcp_connection(destructive_exclusive=False)
        assert connection.destructive_exclusive is False
        assert mcp_tool(connection, destructive_hint=True).resources({}) == NOTHING
        assert mcp_tool(connection, read_only_hint=True).resources({}) == al.Claim(
            reads={"mcp:files"}
        )

    def test_the_key_is_the_servers_name(self) -> None:
        assert mcp_connection().destructive_exclusive is True
        tool = mcp_tool(mcp_connection("db.prod"), destructive_hint=True)
        assert tool.resources({}) == al.Claim(writes={"mcp:db.prod"})


def build_annotated_server() -> MCPServer:
    server: MCPServer = MCPServer("claims")

    @server.tool(annotations=mcp_types.ToolAnnotations(destructive_hint=True))
    async def delete(item: str) -> str:
        """Delete an item."""
        return f"deleted {item}"

    @server.tool(annotations=mcp_types.ToolAnnotations(read_only_hint=True))
    async def lookup(item: str) -> str:
        """Look an item up."""
        return f"found {item}"

    return server


async def run_batch(tools: Any, *calls: tuple[str, dict[str, Any]]) -> EventRecorder:
    """Run an agent whose model makes ``calls`` (ids c1, c2...) in one message."""
    script = [
        reply(*(call(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls, 1))),
        reply("done"),
    ]
    agent = al.Agent(ScriptedProvider(script), tools=tools)
    recorder = EventRecorder()
    async with agent.prompt("go") as events:
        await recorder.consume(events)
    return recorder


def queue_events(recorder: EventRecorder) -> list[tuple[str, str, str, str]]:
    """The queue events: (kind, call id, tool name, reason), in order."""
    found: list[tuple[str, str, str, str]] = []
    for event in recorder.events:
        if isinstance(event, al.ToolCallQueued):
            found.append(("queued", event.tool_call_id, event.tool_name, event.reason))
        elif isinstance(event, al.ToolCallDequeued):
            found.append(("dequeued", event.tool_call_id, event.tool_name, ""))
    return found


def ends(recorder: EventRecorder) -> dict[str, tuple[bool, str]]:
    return {
        e.tool_call_id: (e.is_error, e.result.text_content)
        for e in recorder.of_type(al.ToolExecutionEnd)
    }


async def test_destructive_mcp_calls_queue_on_their_server() -> None:
    async with open_mcp(build_annotated_server(), name="db") as server:
        recorder = await run_batch(
            server.tools,
            ("delete", {"item": "a"}),
            ("delete", {"item": "b"}),
        )
        assert queue_events(recorder) == [
            ("queued", "c2", "delete", "waiting for delete (c1): both use mcp:db"),
            ("dequeued", "c2", "delete", ""),
        ]
        assert ends(recorder) == {"c1": (False, "deleted a"), "c2": (False, "deleted b")}

        recorder = await run_batch(
            server.tools, ("lookup", {"item": "a"}), ("lookup", {"item": "b"})
        )
        assert queue_events(recorder) == []

    async with open_mcp(
        build_annotated_server(), McpConfig(destructive_exclusive=False), name="db"
    ) as server:
        recorder = await run_batch(
            server.tools, ("delete", {"item": "a"}), ("delete", {"item": "b"})
        )
        assert queue_events(recorder) == []
        assert ends(recorder) == {"c1": (False, "deleted a"), "c2": (False, "deleted b")}


async def test_open_mcp_servers_keys_are_the_configured_names() -> None:
    command, args = stdio_command("stdio")
    config = {"mcpServers": {"alpha": {"command": command, "args": args}}}
    with trio.fail_after(BOUND):
        async with open_mcp_servers(config, McpConfig(destructive_exclusive=False)) as servers:
            assert servers["alpha"].destructive_exclusive is False
            lookup = next(t for t in servers.tools if t.tool_name == "read_only_lookup")
            assert lookup.resources({"key": "k"}) == al.Claim(reads={"mcp:alpha"})
            echo = next(t for t in servers.tools if t.tool_name == "echo")
            assert echo.resources({"text": "x"}) == NOTHING


# =========================================================================== OpenAPI


def openapi_tools(base_url: str = "https://api.example/v1") -> dict[str, OpenApiToolAdapter]:
    item = {"parameters": [{"name": "id", "in": "path", "required": True}]}
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/items": {
                method: {"operationId": f"{method}_items", "responses": {"200": {}}}
                for method in ("get", "head", "post", "put", "patch", "delete", "options")
            },
            "/items/{id}": {
                "get": {"operationId": "get_item", "responses": {"200": {}}, **item},
                "delete": {"operationId": "delete_item", "responses": {"200": {}}, **item},
            },
        },
    }
    tools = OpenApiToolAdapter.from_spec(document, OpenApiConfig(base_url=base_url))
    return {tool.name: tool for tool in tools}


class TestOpenApiClaims:
    def test_get_and_head_read_the_api(self) -> None:
        tools = openapi_tools()
        reads = al.Claim(reads={"openapi:https://api.example/v1"})
        assert tools["get_items"].resources({}) == reads
        assert tools["head_items"].resources({}) == reads
        assert tools["get_item"].resources({"id": "7"}) == reads
        for name in ("post_items", "put_items", "patch_items", "delete_items", "options_items"):
            assert tools[name].resources({}) == NOTHING, name
        assert tools["delete_item"].resources({"id": "7"}) == NOTHING

    def test_the_key_is_the_base_url(self) -> None:
        tool = openapi_tools("http://127.0.0.1:9")["get_items"]
        assert tool.base_url == "http://127.0.0.1:9"
        resources = tool_traits(tool).resources
        assert resources is not None
        assert resources({}) == al.Claim(reads={"openapi:http://127.0.0.1:9"})

    @pytest.mark.parametrize(
        "params", [{}, {"id": None}, {"id": ["a", {"b": 1}]}, {"body": 1.5, "x": "../.."}]
    )
    def test_hostile_arguments_do_not_matter(self, params: dict[str, Any]) -> None:
        tools = openapi_tools()
        assert tools["get_item"].resources(params) == al.Claim(
            reads={"openapi:https://api.example/v1"}
        )
        assert tools["delete_item"].resources(params) == NOTHING


# =========================================================================== end to end


async def test_two_writes_of_one_file_queue_and_reads_do_not(
    root: Path, autojump_clock: trio.testing.MockClock
) -> None:
    tools = default_tools(root)
    a = key(root, "a.txt")
    recorder = await run_batch(
        tools,
        ("write_file", {"path": "a.txt", "content": "one"}),
        ("write_file", {"path": "./src/../a.txt", "content": "two"}),
        ("read_file", {"path": "b.txt"}),
        ("read_file", {"path": "src/app.py"}),
    )
    assert queue_events(recorder) == [
        ("queued", "c2", "write_file", f"waiting for write_file (c1): both use {a}"),
        ("dequeued", "c2", "write_file", ""),
    ]
    dequeued = recorder.of_type(al.ToolCallDequeued)
    assert [(e.tool_call_id, e.tool_name, e.waited) for e in dequeued] == [
        ("c2", "write_file", 0.0)  # the mock clock: nothing here sleeps
    ]
    # The second write starts after the first ended, so it replaces it.
    order = [
        (kind, call_id) for kind, call_id in ends_and_starts(recorder) if call_id in ("c1", "c2")
    ]
    assert order == [
        ("ToolExecutionEnd", "c1"),
        ("ToolCallDequeued", "c2"),
        ("ToolExecutionEnd", "c2"),
    ]
    assert ends(recorder) == {
        "c1": (False, "Wrote 3 bytes to a.txt (replaced)"),
        "c2": (False, "Wrote 3 bytes to a.txt (replaced)"),
        "c3": (False, "[b.txt: 1 line]\n     1\tb"),
        "c4": (False, "[src/app.py: 1 line]\n     1\tprint('hi')"),
    }
    assert (root / "a.txt").read_text() == "two"


async def test_a_read_waits_for_a_write_of_the_same_file(
    root: Path, autojump_clock: trio.testing.MockClock
) -> None:
    a = key(root, "a.txt")
    recorder = await run_batch(
        default_tools(root),
        ("edit_file", {"path": "a.txt", "old_text": "a", "new_text": "z"}),
        ("read_file", {"path": a}),
        ("read_file", {"path": "b.txt"}),
        ("list_files", {}),  # the root's key is not a.txt's: not queued
    )
    assert queue_events(recorder) == [
        ("queued", "c2", "read_file", f"waiting for edit_file (c1): both use {a}"),
        ("dequeued", "c2", "read_file", ""),
    ]
    assert ends(recorder)["c2"] == (False, "[a.txt: 1 line]\n     1\tz")


async def test_bash_calls_run_one_at_a_time(root: Path) -> None:
    """Real processes, so trio's own clock (a waiting subprocess looks idle to a mock one)."""
    step = "echo start{n} >> log; sleep 0.05; echo end{n} >> log"
    with trio.fail_after(BOUND):
        recorder = await run_batch(
            [BashTool(root)],
            ("bash", {"command": step.format(n=1)}),
            ("bash", {"command": step.format(n=2)}),
        )
    assert queue_events(recorder) == [
        ("queued", "c2", "bash", "waiting for bash (c1): it runs alone"),
        ("dequeued", "c2", "bash", ""),
    ]
    assert ends_and_starts(recorder) == [
        ("ToolExecutionEnd", "c1"),
        ("ToolCallDequeued", "c2"),
        ("ToolExecutionEnd", "c2"),
    ]
    assert (root / "log").read_text() == "start1\nend1\nstart2\nend2\n"


async def test_other_tools_wait_for_bash(root: Path) -> None:
    with trio.fail_after(BOUND):
        recorder = await run_batch(
            default_tools(root),
            ("bash", {"command": "echo hi > c.txt"}),
            ("read_file", {"path": "c.txt"}),
        )
    assert queue_events(recorder) == [
        ("queued", "c2", "read_file", "waiting for bash (c1): it runs alone"),
        ("dequeued", "c2", "read_file", ""),
    ]
    assert ends(recorder) == {
        "c1": (False, "Exit code: 0\n"),
        "c2": (False, "[c.txt: 1 line]\n     1\thi"),
    }


def ends_and_starts(recorder: EventRecorder) -> list[tuple[str, str]]:
    """The ``ToolExecutionEnd`` and ``ToolCallDequeued`` events: (kind, call id), in order."""
    return [
        (type(e).__name__, e.tool_call_id)
        for e in recorder.events
        if isinstance(e, al.ToolExecutionEnd | al.ToolCallDequeued)
    ]


async def test_bash_exclusive_false_runs_commands_side_by_side(root: Path) -> None:
    """The first command waits for a file only the second makes: they must overlap."""
    wait = "for i in $(seq 1000); do [ -e flag ] && exit 0; sleep 0.01; done; exit 1"
    with trio.fail_after(BOUND):
        recorder = await run_batch(
            [BashTool(root, exclusive=False)],
            ("bash", {"command": wait}),
            ("bash", {"command": "touch flag"}),
        )
    assert queue_events(recorder) == []
    assert ends(recorder) == {"c1": (False, "Exit code: 0\n"), "c2": (False, "Exit code: 0\n")}
