"""McpConfig: one value for open_mcp, open_mcp_servers and McpConnection alike.

Also: the keyword arguments of before it (accepted, with a DeprecationWarning at the
caller's line), the connection's parts (its resources reach the server only through
the ``request`` they are given), and the public home of the package's names.
"""

from __future__ import annotations

import json
import math
import pickle
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp_fixtures import stdio_command
from mcp_servers import SERVER_TOOL_NAMES, build_server

import agentloop.mcp
from agentloop._secrets import Redactor
from agentloop.mcp import (
    Elicitation,
    HttpServer,
    McpConfig,
    McpConnection,
    McpConnectionError,
    McpResource,
    McpRoot,
    StdioServer,
    open_mcp,
    open_mcp_servers,
)
from agentloop.mcp._resources import Resources

BOUND = 30.0  # seconds: a ceiling on real-process waits, never the expected time


def write_config(path: Path, *names: str) -> Path:
    """An ``mcpServers`` file with a stdio test server under each name."""
    command, args = stdio_command()
    servers = {name: {"command": command, "args": args} for name in names}
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


@contextmanager
def deprecated(message: str) -> Iterator[None]:
    """Exactly one DeprecationWarning, ``message``, pointing at this file (the caller)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    assert [(w.category, str(w.message)) for w in caught] == [(DeprecationWarning, message)]
    assert caught[0].filename == __file__


# --------------------------------------------------------------------------- one value


def test_the_defaults() -> None:
    config = McpConfig()
    assert (config.prefix, config.call_timeout, config.connect_timeout) == (None, 300.0, 30.0)
    assert (config.protocol, config.max_result_bytes, config.destructive_exclusive) == (
        "auto",
        100_000,
        True,
    )
    assert (config.elicitation, config.sampling, config.roots, config.on_log) == (
        None,
        None,
        None,
        None,
    )
    assert (config.log_level, config.on_tools_changed, config.on_resource_updated) == (
        None,
        None,
        None,
    )


def test_roots_become_mcp_roots() -> None:
    config = McpConfig(roots=["/srv/data", "file:///home/ada", McpRoot("file:///x", "x")])
    assert config.roots == (
        McpRoot("file:///srv/data", "data"),
        McpRoot("file:///home/ada", "ada"),
        McpRoot("file:///x", "x"),
    )


def test_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        McpConfig("time")  # type: ignore[call-arg]


async def test_open_mcp_and_the_connection_take_the_same_value() -> None:
    config = McpConfig(prefix="s", call_timeout=12.5, max_result_bytes=4096)
    async with open_mcp(build_server(), config, name="srv") as srv:
        assert srv.config is config
        assert (srv.name, srv.prefix, srv.call_timeout, srv.max_result_bytes) == (
            "srv",
            "s",
            12.5,
            4096,
        )
        assert [tool.name for tool in srv.tools] == [f"s__{n}" for n in SERVER_TOOL_NAMES]
        assert srv.tools[0].timeout == 12.5
    direct = McpConnection(StdioServer("/usr/bin/some-server"), config)
    assert (direct.config, direct.name, direct.prefix) == (config, "some-server", "s")


async def test_without_a_config_every_entry_point_has_the_same_defaults(tmp_path: Path) -> None:
    async with open_mcp(build_server()) as single:
        assert single.config == McpConfig()
        assert single.name == "agentloop-test"  # the SDK server's name, as McpConnection's
        assert single.prefix is None
    assert McpConnection(build_server()).config == McpConfig()
    assert McpConnection(build_server()).name == "agentloop-test"
    with trio.fail_after(BOUND):
        async with open_mcp_servers(write_config(tmp_path / "mcp.json", "one")) as servers:
            # The servers of a configuration are prefixed with their names by default.
            assert servers["one"].config == McpConfig(prefix=True)
            assert servers["one"].prefix == "one"
            assert servers.tools[0].name == f"one__{SERVER_TOOL_NAMES[0]}"


@pytest.mark.parametrize(
    ("prefix", "expected"), [(None, None), (False, None), (True, "srv"), ("p", "p"), ("", "")]
)
def test_the_prefix(prefix: str | bool | None, expected: str | None) -> None:
    connection = McpConnection(StdioServer("true"), McpConfig(prefix=prefix), name="srv")
    assert connection.prefix == expected


async def test_open_mcp_servers_without_prefixes(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", "one")
    with trio.fail_after(BOUND):
        async with open_mcp_servers(config, McpConfig(prefix=False)) as servers:
            assert servers["one"].prefix is None
            assert [t.name for t in servers.tools] == list(SERVER_TOOL_NAMES)


def test_open_mcp_servers_refuses_one_prefix_for_every_server(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as raised:  # noqa: PT011 - the text is checked below
        open_mcp_servers(tmp_path / "mcp.json", McpConfig(prefix="all"))
    assert str(raised.value) == (
        "open_mcp_servers() prefixes each server's tools with its name: "
        "prefix must be True, False or None, got 'all'"
    )


async def test_open_mcp_servers_takes_on_tools_changed(tmp_path: Path) -> None:
    """Missing from open_mcp_servers before McpConfig: each server reports its change."""
    changed: list[tuple[str, list[str]]] = []
    reported = trio.Event()

    def on_changed(connection: McpConnection) -> None:
        changed.append((connection.name, [t.name for t in connection.tools][-1:]))
        reported.set()

    config = write_config(tmp_path / "mcp.json", "one", "two")
    with trio.fail_after(BOUND):
        async with open_mcp_servers(config, McpConfig(on_tools_changed=on_changed)) as servers:
            await servers["two"].call_tool("add_tool", {"name": "late"})
            await reported.wait()
    assert changed == [("two", ["two__late"])]


def test_a_config_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError) as raised:
        open_mcp(build_server(), {"prefix": "s"})  # type: ignore[arg-type]
    assert str(raised.value) == "open_mcp() takes an McpConfig as its options, got {'prefix': 's'}"


# --------------------------------------------------------------------------- its options


def test_an_option_set_on_the_connection_changes_its_config() -> None:
    connection = McpConnection(StdioServer("true"), McpConfig(call_timeout=10.0))
    connection.call_timeout = 2.5
    assert connection.config == McpConfig(call_timeout=2.5)


def test_an_option_set_on_the_connection_is_checked() -> None:
    connection = McpConnection(StdioServer("true"), McpConfig(call_timeout=10.0))
    with pytest.raises(ValueError, match=r"^call_timeout must be > 0 or None, got 0$"):
        connection.call_timeout = 0
    assert connection.call_timeout == 10.0


def test_the_connection_checks_its_options_as_open_mcp_does() -> None:
    """Before McpConfig, McpConnection took any timeout (an infinite one meant none)."""
    with pytest.raises(ValueError, match=r"^call_timeout must be > 0 or None, got inf$"):
        McpConnection(StdioServer("true"), McpConfig(call_timeout=math.inf))


async def test_set_roots_changes_the_config() -> None:
    connection = McpConnection(StdioServer("true"), McpConfig(roots=["/a"]))
    await connection.set_roots(["/b", "file:///c"])
    assert connection.roots == (McpRoot("file:///b", "b"), McpRoot("file:///c", "c"))
    assert connection.config.roots == connection.roots


# --------------------------------------------------------------------------- the old keywords


async def test_open_mcp_takes_its_old_keywords_with_a_warning() -> None:
    with deprecated(
        "open_mcp(..., prefix=..., call_timeout=...) is deprecated: give the options as "
        "one value, open_mcp(..., McpConfig(prefix=..., call_timeout=...))"
    ):
        opened = open_mcp(build_server(), prefix="s", call_timeout=5, name="srv")
    async with opened as srv:
        assert srv.config == McpConfig(prefix="s", call_timeout=5)
        assert srv.tools[0].name == f"s__{SERVER_TOOL_NAMES[0]}"


async def test_the_old_keywords_apply_over_a_config() -> None:
    with deprecated(
        "open_mcp(..., log_level=...) is deprecated: give the options as one value, "
        "open_mcp(..., McpConfig(log_level=...))"
    ):
        opened = open_mcp(build_server(), McpConfig(prefix="s"), log_level="error")
    async with opened as srv:
        assert srv.config == McpConfig(prefix="s", log_level="error")


async def test_open_mcp_servers_takes_its_old_keywords_with_a_warning(tmp_path: Path) -> None:
    config = write_config(tmp_path / "mcp.json", "one")
    with deprecated(
        "open_mcp_servers(..., prefix=..., destructive_exclusive=...) is deprecated: give "
        "the options as one value, "
        "open_mcp_servers(..., McpConfig(prefix=..., destructive_exclusive=...))"
    ):
        opened = open_mcp_servers(config, prefix=False, destructive_exclusive=False)
    with trio.fail_after(BOUND):
        async with opened as servers:
            assert servers["one"].config == McpConfig(prefix=False, destructive_exclusive=False)
            assert [t.name for t in servers.tools] == list(SERVER_TOOL_NAMES)


async def test_open_mcp_servers_takes_its_old_config_keyword_with_a_warning(
    tmp_path: Path,
) -> None:
    config = write_config(tmp_path / "mcp.json", "one")
    with deprecated(
        "open_mcp_servers(config=...) is deprecated: the configuration is the first "
        "argument, open_mcp_servers(servers, McpConfig(...))"
    ):
        opened = open_mcp_servers(config=config)  # type: ignore[arg-type]
    with trio.fail_after(BOUND):
        async with opened as servers:
            assert list(servers) == ["one"]
            assert servers["one"].prefix == "one"


def test_open_mcp_servers_needs_its_servers() -> None:
    with pytest.raises(TypeError) as raised:
        open_mcp_servers()
    assert str(raised.value) == (
        "open_mcp_servers() needs the servers: a path or an mcpServers mapping"
    )


def test_the_connection_takes_its_old_keywords_with_a_warning() -> None:
    with deprecated(
        "McpConnection(..., prefix=..., call_timeout=..., connect_timeout=...) is "
        "deprecated: give the options as one value, "
        "McpConnection(..., McpConfig(prefix=..., call_timeout=..., connect_timeout=...))"
    ):
        connection = McpConnection(
            StdioServer("true"), name="x", prefix=None, call_timeout=30.0, connect_timeout=1
        )
    assert connection.config == McpConfig(call_timeout=30.0, connect_timeout=1)


def test_an_old_keyword_out_of_range_is_refused_after_the_warning() -> None:
    with (
        pytest.raises(ValueError, match=r"^connect_timeout must be > 0, got -1$"),
        pytest.warns(DeprecationWarning, match=r"^open_mcp\(\.\.\., connect_timeout=\.\.\.\)"),
    ):
        open_mcp(build_server(), connect_timeout=-1)


def test_an_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError) as raised:
        open_mcp(build_server(), timeout=5)
    assert str(raised.value) == "open_mcp() got an unexpected keyword argument 'timeout'"


# --------------------------------------------------------------------------- resources, composed


def notes_server() -> MCPServer:
    server = MCPServer("notes")

    @server.resource("note://todo", mime_type="text/plain", description="What to do")
    async def todo() -> str:
        return "Buy milk"

    @server.prompt()
    async def summarize(uri: str) -> str:
        """Summarize a note."""
        return f"Summarize {uri}."

    return server


async def test_resources_reach_the_server_only_through_the_request_they_are_given() -> None:
    """Resources is given a name, a redactor, a request function and the options: no
    connection. Here the request is a real SDK client of its own, and it sees each
    request the resources make, by method and target."""
    asked: list[tuple[str, str | None]] = []
    async with Client(notes_server()) as client:

        async def request(
            method: str, target: str | None, send: Callable[[Client], Awaitable[Any]]
        ) -> Any:
            asked.append((method, target))
            return await send(client)

        config = McpConfig(max_result_bytes=6)
        resources = Resources("notes", Redactor(["milk"]), request, lambda: config)
        assert await resources.list_resources() == [
            McpResource("note://todo", "todo", description="What to do", mime_type="text/plain")
        ]
        assert [block.text for block in await resources.read_resource("note://todo")] == [  # type: ignore[union-attr]
            "Buy **",  # redacted ("milk"), then capped
            "[Result truncated: the server sent 7 bytes of text; the first 6 bytes are shown.]",
        ]
        assert [prompt.name for prompt in await resources.list_prompts()] == ["summarize"]
        assert await resources.offered()
    assert asked == [
        ("resources/list", None),
        ("resources/read", "note://todo"),
        ("prompts/list", None),
        ("resources/list", None),
    ]


def test_the_connection_is_no_mixin() -> None:
    assert McpConnection.__mro__ == (McpConnection, object)


# --------------------------------------------------------------------------- the public home


def test_the_public_names_live_in_agentloop_mcp() -> None:
    homes = {
        name: getattr(agentloop.mcp, name).__module__
        for name in agentloop.mcp.__all__
        if name != "McpServerSpec"  # a type alias: a union has no module of its own
    }
    assert homes == dict.fromkeys(homes, "agentloop.mcp")
    assert repr(McpConfig) == "<class 'agentloop.mcp.McpConfig'>"
    error = McpConnectionError("cannot connect")
    assert f"{type(error).__module__}.{type(error).__qualname__}" == (
        "agentloop.mcp.McpConnectionError"
    )


@pytest.mark.parametrize(
    "value",
    [
        StdioServer("uvx", ["mcp-server-time"], env={"TZ": "UTC"}),
        HttpServer("https://example.com/mcp", {"X-Key": "k"}),
        McpRoot("file:///srv", "srv"),
        McpConfig(prefix="time", call_timeout=60, roots=["/srv"]),
        McpResource("note://todo", "todo", size=8),
        Elicitation(server="shop", message="Where?", schema={"type": "object"}),
        McpConnectionError("cannot connect"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_values_pickle_under_their_public_home(value: Any) -> None:
    data = pickle.dumps(value)
    assert b"agentloop.mcp._" not in data
    assert b"agentloop.mcp" in data
    again = pickle.loads(data)
    assert type(again) is type(value)
    if isinstance(value, Exception):
        assert again.args == value.args
    else:
        assert again == value
