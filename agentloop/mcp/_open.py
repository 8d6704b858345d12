"""open_mcp and open_mcp_servers: connections as async context managers."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import trio

from .._check import check_number
from .._secrets import redact_url
from .._util import raise_single, require_trio
from ._base import DEFAULT_MAX_RESULT_BYTES, McpConnectionError
from ._requests import LOG_LEVELS, ElicitationHandler, LogHandler, McpRoot, McpSampling
from ._servers import HttpServer, SseServer, StdioServer, load_mcp_config

if TYPE_CHECKING:  # the MCP SDK loads with the first connection
    from ._adapter import McpToolAdapter
    from ._connection import McpConnection

__all__ = ["McpServers", "open_mcp", "open_mcp_servers"]

DEFAULT_CALL_TIMEOUT = 300.0
DEFAULT_CONNECT_TIMEOUT = 30.0


def _default_name(server: Any) -> str:
    if isinstance(server, StdioServer):
        return Path(server.command).name
    if isinstance(server, HttpServer | SseServer):
        return urlsplit(server.url).hostname or redact_url(server.url)
    return str(getattr(server, "name", None) or type(server).__name__)


def _check_options(
    call_timeout: float | None,
    connect_timeout: float,
    protocol: str,
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    log_level: str | None = None,
) -> None:
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    if log_level is not None and log_level not in LOG_LEVELS:
        levels = ", ".join(repr(level) for level in LOG_LEVELS)
        raise ValueError(f"log_level must be None or one of {levels}, got {log_level!r}")

    check_number(max_result_bytes, "max_result_bytes", at_least=1, integer=True)
    if protocol not in ("auto", "legacy") and protocol not in MODERN_PROTOCOL_VERSIONS:
        versions = ", ".join(repr(v) for v in MODERN_PROTOCOL_VERSIONS)
        raise ValueError(
            f"protocol must be 'auto', 'legacy' or one of {versions}, got {protocol!r}"
        )
    check_number(call_timeout, "call_timeout", above=0, optional=True)
    check_number(connect_timeout, "connect_timeout", above=0)


@asynccontextmanager
async def open_mcp(
    server: Any,
    *,
    name: str | None = None,
    prefix: str | None = None,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    on_tools_changed: Callable[[McpConnection], Any] | None = None,
    protocol: str = "auto",
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    destructive_exclusive: bool = True,
    elicitation: ElicitationHandler | None = None,
    sampling: McpSampling | None = None,
    roots: Sequence[McpRoot | str | os.PathLike[str]] | None = None,
    on_log: LogHandler | None = None,
    log_level: str | None = None,
    on_resource_updated: Callable[[str], Any] | None = None,
) -> AsyncIterator[McpConnection]:
    """Connect to an MCP server for the duration of the block; yield the connection.

    ``server`` is a :class:`StdioServer`, :class:`HttpServer` or
    :class:`SseServer`, or an ``mcp`` SDK server object (served in-process,
    as tests do). The connection lists the server's tools (every page) before
    the block starts: ``connection.tools``. A task of the block's nursery owns
    the connection; leaving the block closes it (a stdio server's process
    group is ended, bounded).

    Args:
        name: The server's name in messages and in its tools' scheduling key
            ``"mcp:<name>"`` (default: the command's or the URL host's name).
        prefix: Tool names become ``PREFIX__tool``; the server is still called
            with the tool's own name.
        call_timeout: Seconds a tool call may take (the tools' ``timeout``);
            past it the call is cancelled on the server. None: no limit.
        connect_timeout: Seconds to connect and complete the handshake, for
            the first connection and any reconnection.
        on_tools_changed: Called (plain or async) with the connection when its
            tools changed: the server said so and was listed again, or it came
            back from a reconnection with other tools. Its exceptions are logged
            (``agentloop.mcp``), not raised.
        protocol: ``"auto"`` (ask the server which protocol it speaks, and
            fall back to the ``initialize`` handshake of older servers),
            ``"legacy"`` (the handshake only), or a protocol version to speak.
        max_result_bytes: Bytes of text (UTF-8) one tool result may put into
            the context; more is cut on a character boundary, with a last line
            giving the full size. Images over 5 MiB are described instead;
            structured content or binary data in ``details`` over the limit
            is left out, its size in ``details["omitted"]``.
        destructive_exclusive: A call of a tool the server hints is destructive
            (``destructiveHint``, and not ``readOnlyHint``) claims the key
            ``"mcp:<name>"`` as written, so it runs apart from the server's
            other read-only and destructive calls, anywhere in the agent tree.
            False: such a call claims nothing. A read-only tool's calls always
            claim the key as read (they run together); see
            :meth:`~agentloop.mcp.McpToolAdapter.resources`.
        elicitation: Answers the server's questions to the user
            (``elicitation/create``): a plain or async function of an
            :class:`Elicitation` returning an :class:`ElicitationAnswer`. An
            accepted form gets the schema's defaults for fields it leaves out
            and is checked against the schema; content that does not fit is
            handed back with ``problems`` (three tries, then ``cancel``). None:
            the client does not declare elicitation, and a server that asks gets
            the error "Elicitation not supported".
        sampling: Lets the server ask a model for replies
            (``sampling/createMessage``); see :class:`McpSampling`. None: not
            declared.
        roots: The directories the server may work in (paths or ``file://``
            URIs), answered to ``roots/list``; change them with
            :meth:`McpConnection.set_roots`. None: not declared.
        on_log: Called (plain or async) with each :class:`McpLogMessage` the
            server sends; its exceptions are logged. Every message is also a
            record of the ``agentloop.mcp.server`` logger at the matching level,
            and, while one of the server's tools runs, a progress line of that
            call (``[level] text``).
        log_level: The least severe level the server should send
            (``"debug"`` … ``"emergency"``): ``logging/setLevel`` on older
            connections, a per-request opt-in on 2026-07-28 ones. None: the
            server's default (2026-07-28 servers then send none).
        on_resource_updated: Called (plain or async) with the URI of a
            resource subscribed to with :meth:`McpConnection.subscribe` when
            the server says it changed, in order; its exceptions are logged.

    What a server sends back (results, errors, progress) never holds the
    credentials sent to it: header values, a basic ``auth``, the URL's
    password and secret query values, secret ``env`` values of a stdio server,
    and their encodings, are replaced by ``***``.

    Raises:
        McpConnectionError: the server could not be started or reached, or
            did not complete the handshake within ``connect_timeout``.
        ValueError: a timeout is not positive, or ``protocol`` is not one of those.

    Cancellation: cancelling the block closes the connection, as leaving it does.
    """
    require_trio("open_mcp()")
    _check_options(call_timeout, connect_timeout, protocol, max_result_bytes, log_level)
    from ._connection import McpConnection

    connection = McpConnection(
        server,
        name=name or _default_name(server),
        prefix=prefix,
        call_timeout=call_timeout,
        connect_timeout=connect_timeout,
        on_tools_changed=on_tools_changed,
        protocol=protocol,
        max_result_bytes=max_result_bytes,
        destructive_exclusive=destructive_exclusive,
        elicitation=elicitation,
        sampling=sampling,
        roots=roots,
        on_log=on_log,
        log_level=log_level,
    )
    connection.on_resource_updated = on_resource_updated
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(connection.run)
            try:
                yield connection
            finally:
                connection.close()
    except BaseExceptionGroup as group:
        raise_single(group)


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


@asynccontextmanager
async def open_mcp_servers(
    config: Mapping[str, Any] | str | os.PathLike[str],
    *,
    prefix: bool = True,
    required: bool = True,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    protocol: str = "auto",
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    destructive_exclusive: bool = True,
    elicitation: ElicitationHandler | None = None,
    sampling: McpSampling | None = None,
    roots: Sequence[McpRoot | str | os.PathLike[str]] | None = None,
    on_log: LogHandler | None = None,
    log_level: str | None = None,
) -> AsyncIterator[McpServers]:
    """Connect to every server of an ``mcpServers`` configuration, all at once.

    ``config`` is as for :func:`load_mcp_config` (a path or the parsed JSON).
    With ``prefix``, each server's tools are named ``<server name>__<tool>``.
    Each connection is as :func:`open_mcp` makes it (``elicitation``,
    ``sampling``, ``roots``, ``on_log`` and ``log_level`` apply to every server;
    an :class:`Elicitation` and a :class:`McpLogMessage` name their server); a
    server's scheduling key is ``"mcp:<server name>"`` (its name in the
    configuration).

    Raises:
        McpConnectionError: a server could not be connected and ``required``
            is true (the others are closed first); the message names each
            server that failed and why.
        ValueError: as for :func:`open_mcp`, or from :func:`load_mcp_config`.
        OSError: the configuration file cannot be read.
    """
    require_trio("open_mcp_servers()")
    _check_options(call_timeout, connect_timeout, protocol, max_result_bytes, log_level)
    specs = load_mcp_config(config)
    from ._connection import McpConnection

    connections = {
        name: McpConnection(
            spec,
            name=name,
            prefix=name if prefix else None,
            call_timeout=call_timeout,
            connect_timeout=connect_timeout,
            protocol=protocol,
            max_result_bytes=max_result_bytes,
            destructive_exclusive=destructive_exclusive,
            elicitation=elicitation,
            sampling=sampling,
            roots=roots,
            on_log=on_log,
            log_level=log_level,
        )
        for name, spec in specs.items()
    }
    errors: dict[str, str] = {}
    try:
        async with _servers_nursery(connections, errors, required) as servers:
            yield servers
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
