"""open_mcp and open_mcp_servers: connections as async context managers."""

from __future__ import annotations

import os
import warnings
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._util import raise_single, require_trio
from ._base import McpConnectionError, public
from ._config import McpConfig, config_with
from ._servers import load_mcp_config

if TYPE_CHECKING:  # the MCP SDK loads with the first connection
    from ._adapter import McpToolAdapter
    from ._connection import McpConnection

__all__ = ["McpServers", "open_mcp", "open_mcp_servers"]


@public
def open_mcp(
    server: Any, config: McpConfig | None = None, *, name: str | None = None, **options: Any
) -> AbstractAsyncContextManager[McpConnection]:
    """Connect to an MCP server for the duration of the block; yield the connection.

    ``server`` is a :class:`StdioServer`, :class:`HttpServer` or
    :class:`SseServer`, or an ``mcp`` SDK server object (served in-process,
    as tests do). ``config`` holds the options (timeouts, prefix, limits,
    what the client offers the server...; see :class:`McpConfig`). The
    connection lists the server's tools (every page) before the block starts:
    ``connection.tools``. A task of the block's nursery owns the connection;
    leaving the block closes it (a stdio server's process group is ended,
    bounded)::

        async with open_mcp(StdioServer("uvx", ["mcp-server-time"]),
                            McpConfig(prefix="time")) as time:
            agent = Agent(provider, tools=time.tools)

    ``name`` is the server's name in messages and in its tools' scheduling key
    ``"mcp:<name>"`` (default: the command's or the URL host's name). The
    options of before :class:`McpConfig` (``open_mcp(server, prefix="time")``)
    still work, with a :class:`DeprecationWarning`.

    What a server sends back (results, errors, progress) never holds the
    credentials sent to it: header values, a basic ``auth``, the URL's
    password and secret query values, secret ``env`` values of a stdio server,
    and their encodings, are replaced by ``***``.

    Raises:
        McpConnectionError: the server could not be started or reached, or
            did not complete the handshake within ``connect_timeout``.
        TypeError: ``config`` is not an :class:`McpConfig`.
        ValueError: an option of before :class:`McpConfig` is out of range.

    Cancellation: cancelling the block closes the connection, as leaving it does.
    """
    return _open_mcp(server, config_with(config, options, "open_mcp"), name)


@asynccontextmanager
async def _open_mcp(
    server: Any, config: McpConfig, name: str | None
) -> AsyncIterator[McpConnection]:
    require_trio("open_mcp()")
    from ._connection import McpConnection

    connection = McpConnection(server, config, name=name)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(connection.run)
            try:
                yield connection
            finally:
                connection.close()
    except BaseExceptionGroup as group:
        raise_single(group)


@public
class McpServers(Mapping[str, "McpConnection"]):
    """The connections of :func:`open_mcp_servers`, by server name.

    ``tools`` is every connected server's tools, in the configuration's order;
    ``errors`` says, by name, why a server could not be connected (only with
    ``required=False``).
    """

    def __init__(self, connections: dict[str, McpConnection], errors: dict[str, str]) -> None:
        self._connections = connections
        self.errors = errors

    def __getitem__(self, name: str) -> McpConnection:
        return self._connections[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._connections)

    def __len__(self) -> int:
        return len(self._connections)

    def __repr__(self) -> str:
        return f"McpServers({list(self._connections)!r}, errors={list(self.errors)!r})"

    @property
    def tools(self) -> list[McpToolAdapter]:
        """Every connected server's tools."""
        return [tool for connection in self._connections.values() for tool in connection.tools]


@public
def open_mcp_servers(
    servers: Mapping[str, Any] | str | os.PathLike[str] | None = None,
    config: McpConfig | None = None,
    *,
    required: bool = True,
    **options: Any,
) -> AbstractAsyncContextManager[McpServers]:
    """Connect to every server of an ``mcpServers`` configuration, all at once.

    ``servers`` is as for :func:`load_mcp_config` (a path or the parsed JSON).
    ``config`` holds the options of every connection, as for :func:`open_mcp`
    (an :class:`Elicitation` and a :class:`McpLogMessage` name their server);
    its ``prefix`` is each server's name by default, so the servers' tools are
    named ``<server name>__<tool>`` (``False``: no prefix). A server's name is
    its name in the configuration, and its scheduling key ``"mcp:<name>"``.
    The options of before :class:`McpConfig` (``prefix=True``...) still work,
    with a :class:`DeprecationWarning`, as does the configuration given as
    ``config=`` (now ``servers``).

    Raises:
        McpConnectionError: a server could not be connected and ``required``
            is true (the others are closed first); the message names each
            server that failed and why.
        TypeError: ``config`` is not an :class:`McpConfig`.
        ValueError: ``config.prefix`` is a string (the servers' tools would
            clash), an option of before :class:`McpConfig` is out of range,
            or as for :func:`load_mcp_config`.
        OSError: the configuration file cannot be read.
    """
    given: Any = config
    if servers is None and given is not None and not isinstance(given, McpConfig):
        warnings.warn(  # the configuration, as config= before McpConfig
            "open_mcp_servers(config=...) is deprecated: the configuration is the first "
            "argument, open_mcp_servers(servers, McpConfig(...))",
            DeprecationWarning,
            stacklevel=2,
        )
        servers, config = given, None
    if servers is None:
        raise TypeError("open_mcp_servers() needs the servers: a path or an mcpServers mapping")
    config = config_with(config, options, "open_mcp_servers")
    if isinstance(config.prefix, str):
        raise ValueError(
            "open_mcp_servers() prefixes each server's tools with its name: prefix must be "
            f"True, False or None, got {config.prefix!r}"
        )
    if config.prefix is None:
        config = attrs.evolve(config, prefix=True)
    return _open_mcp_servers(servers, config, required)


@asynccontextmanager
async def _open_mcp_servers(
    servers: Mapping[str, Any] | str | os.PathLike[str], config: McpConfig, required: bool
) -> AsyncIterator[McpServers]:
    require_trio("open_mcp_servers()")
    specs = load_mcp_config(servers)
    from ._connection import McpConnection

    connections = {name: McpConnection(spec, config, name=name) for name, spec in specs.items()}
    errors: dict[str, str] = {}
    try:
        async with _servers_nursery(connections, errors, required) as opened:
            yield opened
    except BaseExceptionGroup as group:
        raise_single(group)


@asynccontextmanager
async def _servers_nursery(
    connections: dict[str, McpConnection], errors: dict[str, str], required: bool
) -> AsyncIterator[McpServers]:
    async with trio.open_nursery() as nursery:

        async def start(name: str, connection: McpConnection) -> None:
            try:
                await nursery.start(connection.run)
            except McpConnectionError as error:
                errors[name] = str(error)

        try:
            async with trio.open_nursery() as starting:
                for name, connection in connections.items():
                    starting.start_soon(start, name, connection)
            if errors and required:
                raise McpConnectionError(
                    "; ".join(errors[name] for name in connections if name in errors)
                )
            live = {name: c for name, c in connections.items() if name not in errors}
            yield McpServers(live, errors)
        finally:
            for connection in connections.values():
                connection.close()
