"""McpConnection: one MCP server, connected by a task of its own, and its tools.

The connection's SDK client is entered and left by one task, the *owner*,
started with ``nursery.start`` by :func:`open_mcp`; tool calls from any task
use it (a call only sends a message and waits for the answer). When the
connection is lost (the server died, an HTTP session expired), the owner
closes what is left of it and, at the next call, connects again: a stdio
server is started anew. Closing the connection stops the owner, which
closes the SDK client: a stdio server's whole process group is ended,
bounded and shielded, by the SDK.
"""

from __future__ import annotations

import logging
import math
import os
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs
import httpx2
import mcp.types as mcp_types
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from .._secrets import Redactor
from .._tool import ToolContext, ToolError, format_duration
from .._types import Usage
from .._util import call_hook, leaves
from ._adapter import McpToolAdapter, adapt_tools
from ._base import McpAuthError, McpConnectionError
from ._content import DEFAULT_MAX_RESULT_BYTES
from ._http import http_transport, server_secrets
from ._oauth import pausable_deadline
from ._requests import ElicitationHandler, LogHandler, McpRoot, McpSampling, ServerRequests
from ._resources import ResourcesMixin
from ._sampling import CallInFlight
from ._servers import HttpServer, SseServer, StdioServer
from ._stdio import StdioProcess, stdio_transport

__all__ = ["McpConnection", "McpConnectionError", "ProgressSink", "server_secrets"]

log = logging.getLogger("agentloop.mcp")

#: Receives a call's progress: (progress, total or None, message or None).
ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]

_MAX_PAGES = 1000
_EXIT_NOTE_WAIT = 1.0  # seconds a failed call waits to learn how the server process ended
# What a transport raises when the connection breaks under a call (besides MCPError).
_TRANSPORT_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, httpx2.TransportError)


@attrs.define(eq=False)
class _Attempt:
    """One connection attempt: callers wait on ``done``; ``error`` says why it failed."""

    done: trio.Event = attrs.field(factory=trio.Event)
    error: str | None = None


def _describe(error: BaseException) -> str:
    if isinstance(error, MCPError):
        return error.message
    if isinstance(error, BaseExceptionGroup):
        found = list(leaves(error))
        if len(found) == 1:
            return _describe(found[0])
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class McpConnection(ResourcesMixin):
    """A connection to one MCP server and the tools it offers.

    Made by :func:`~agentloop.mcp.open_mcp`, which owns it; use it while that
    ``async with`` block lasts. ``tools`` are :class:`McpToolAdapter` objects,
    kept up to date when the server says its list changed.

    Attributes:
        name: The server's name (for messages and the default prefix).
        prefix: Put before each tool name as ``PREFIX__tool``, or None.
        call_timeout: Seconds a tool call may take (each adapter's ``timeout``).
        connect_timeout: Seconds the connection and handshake may take.
        protocol: ``"auto"`` (discover the server's protocol, else fall back
            to the ``initialize`` handshake), ``"legacy"`` (the handshake
            only), or a protocol version to speak.
        max_result_bytes: Bytes of text one tool result may put into the
            context (see :func:`~agentloop.mcp.open_mcp`).
        redactor: Keeps the credentials sent to the server (headers, URL
            password, secret ``env`` values) out of results and errors.
        destructive_exclusive: Whether a call of a tool the server hints is
            destructive claims the server (see
            :meth:`~agentloop.mcp.McpToolAdapter.resources`).
    """

    def __init__(
        self,
        server: Any,
        *,
        name: str,
        prefix: str | None,
        call_timeout: float | None,
        connect_timeout: float,
        on_tools_changed: Callable[[McpConnection], Any] | None = None,
        protocol: str = "auto",
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        destructive_exclusive: bool = True,
        elicitation: ElicitationHandler | None = None,
        sampling: McpSampling | None = None,
        roots: Sequence[McpRoot | str | os.PathLike[str]] | None = None,
        on_log: LogHandler | None = None,
        log_level: str | None = None,
    ) -> None:
        self.max_result_bytes = max_result_bytes
        self.destructive_exclusive = destructive_exclusive
        self.server = server
        #: Keeps the credentials this connection sends out of what it reports.
        self.redactor = Redactor(server_secrets(server))
        self._requests = ServerRequests(
            name,
            self.redactor,
            elicitation=elicitation,
            sampling=sampling,
            roots=roots,
            on_log=on_log,
            log_level=log_level,
        )
        self.log_level = log_level
        self.protocol = protocol
        self.name = name
        self.prefix = prefix
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.on_tools_changed = on_tools_changed
        self._tools: dict[str, McpToolAdapter] = {}
        self._client: Client | None = None
        self._process: StdioProcess | None = None  # the stdio server's process, if any
        self._expired = False  # the HTTP server forgot the session
        self._attempt = _Attempt()
        self._lost = trio.Event()  # the current connection is lost
        self._wanted = trio.Event()  # a call wants a connection
        self._closing = trio.Event()
        self._refresh = trio.Event()  # the server's tool list changed
        self.server_info: mcp_types.Implementation | None = None
        self.instructions: str | None = None
        self.protocol_version: str | None = None
        self.connections = 0  # how many times it connected (reconnects are > 1)

    def __repr__(self) -> str:
        state = "connected" if self._client is not None else "disconnected"
        return f"<McpConnection {self.name!r} {state} tools={len(self._tools)}>"

    @property
    def pid(self) -> int | None:
        """The pid of the stdio server process last started, or None."""
        return None if self._process is None else self._process.pid

    @property
    def tools(self) -> tuple[McpToolAdapter, ...]:
        """The server's tools as agentloop tools, in the server's order."""
        return tuple(self._tools.values())

    @property
    def roots(self) -> tuple[McpRoot, ...] | None:
        """The roots the server is given, or None if the client offers none."""
        return self._requests.roots

    @property
    def sampling_usage(self) -> Usage:
        """The tokens the server's sampling requests have cost, over the connection's life."""
        return self._requests.sampling_usage

    async def set_roots(self, roots: Sequence[McpRoot | str | os.PathLike[str]]) -> None:
        """Give the server these roots from now on, and tell it they changed.

        Only for a connection opened with ``roots=`` (the capability is declared
        in the handshake). The server is sent ``notifications/roots/list_changed``
        if connected (it asks for the list again); else it gets the new list when
        it next asks.

        Raises:
            RuntimeError: the connection was opened without ``roots``.
        """
        if self._requests.roots is None:
            raise RuntimeError(
                f"MCP server '{self.name}' was connected without roots; "
                "pass roots=[...] to open_mcp to offer them"
            )
        self._requests.roots = tuple(McpRoot.of(root) for root in roots)
        client = self._client
        if client is None or self._lost.is_set():
            await trio.lowlevel.checkpoint()
            return
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated in 2026-07-28, current before it
                await client.send_roots_list_changed()
        except (MCPError, *_TRANSPORT_ERRORS) as error:
            log.warning(
                "MCP server %r: cannot tell it the roots changed: %s",
                self.name,
                self.redactor.text(_describe(error)),
            )

    # ----------------------------------------------------------------- the owner task

    def _new_client(self) -> Client:
        server = self.server
        if isinstance(server, StdioServer):
            self._process = StdioProcess(self.name, self.redactor)
            target: Any = stdio_transport(server, self._process)
        elif isinstance(server, HttpServer | SseServer):
            target = http_transport(server, self.call_timeout, self._session_expired, self.redactor)
        else:
            target = server  # an SDK server object, served in-process
        return Client(
            target,
            message_handler=self._on_message,
            client_info=mcp_types.Implementation(name="agentloop", version=_version()),
            cache=None,
            mode=self.protocol,
            log_level=self.log_level,  # type: ignore[arg-type]  # checked by open_mcp
            **self._requests.client_options(),
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._refresh.set()
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            self._resource_updated(str(message.params.uri))
        elif isinstance(message, Exception) and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "MCP server %r: transport error: %s", self.name, self.redactor.text(str(message))
            )
        await trio.lowlevel.checkpoint()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, stay connected, reconnect on demand; return once closed.

        Reports ``started`` after the first connection; if that fails, raises
        :class:`McpConnectionError` instead.
        """
        started = False
        while True:
            attempt = self._attempt
            error: Exception | None = None
            # The handshake's deadline lives on a scope around the whole connection
            # (the client's own scopes nest inside it); it is lifted once connected.
            # While a person authorizes in a browser (OAuth), the deadline is paused.
            with (
                trio.CancelScope(deadline=trio.current_time() + self.connect_timeout) as handshake,
                pausable_deadline(handshake),
            ):
                try:
                    async with self._new_client() as client, trio.open_nursery() as watchers:
                        # Subscribe to list changes first, so that none is missed.
                        await watchers.start(self._listen, client)
                        await watchers.start(self._watch_resources, client)
                        changed = await self._load_tools(client)
                        await self._set_log_level(client)
                        handshake.deadline = math.inf
                        self._connected_to(client)
                        self._log_connected()
                        attempt.done.set()
                        if not started:
                            started = True
                            task_status.started()
                        elif changed:  # the server came back with other tools
                            watchers.start_soon(self._tools_changed)
                        watchers.start_soon(self._watch_list, client)
                        await _first(self._closing.wait, self._lost.wait)
                        self._client = None
                        watchers.cancel_scope.cancel()
                except Exception as raised:  # Cancelled and KeyboardInterrupt go on
                    error = raised
                finally:
                    self._client = None
            if handshake.cancelled_caught:
                error = McpConnectionError(
                    f"MCP server '{self.name}' did not complete the handshake within "
                    f"{format_duration(self.connect_timeout)}"
                )
            if error is not None and not attempt.done.is_set():
                message = self.redactor.text(self._connect_failure(error))
                if not started:
                    found = list(leaves(error))
                    if len(found) == 1 and isinstance(found[0], McpAuthError):
                        auth = found[0]
                        raise McpAuthError(message, server=auth.server, step=auth.step) from auth
                    raise McpConnectionError(message) from error
                log.warning("%s", message)
                attempt.error = message
                attempt.done.set()
            elif error is not None:
                log.warning(
                    "MCP server %r: the connection ended: %s",
                    self.name,
                    self.redactor.text(_describe(error)),
                )
            if self._closing.is_set():
                return
            if error is None:
                self._log_lost()
            self._attempt = _Attempt()
            self._wanted = trio.Event()
            await _first(self._closing.wait, self._wanted.wait)
            if self._closing.is_set():
                self._attempt.error = f"MCP server '{self.name}' is closed"
                self._attempt.done.set()
                return

    def _connect_failure(self, error: Exception) -> str:
        found = list(leaves(error))
        if len(found) == 1 and isinstance(found[0], McpConnectionError):
            return str(found[0])
        spawned = self._process is None or self._process.pid is not None
        if len(found) == 1 and isinstance(found[0], OSError) and not spawned:
            return f"cannot start MCP server '{self.name}': {found[0]}"
        message = f"cannot connect to MCP server '{self.name}': {_describe(error)}"
        note = self._process.exit_note() if self._process is not None else ""
        return f"{message} ({note})" if note else message

    def _log_connected(self) -> None:
        if self.connections == 1:
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "MCP server %r: connected (protocol %s, %d tools)",
                    self.name,
                    self.protocol_version,
                    len(self._tools),
                )
        elif self._process is not None:
            log.info("MCP server %r: restarted (pid %s)", self.name, self._process.pid)
        else:
            log.info("MCP server %r: reconnected", self.name)

    def _log_lost(self) -> None:
        """The connection was lost without an error of its own (a call saw it break)."""
        if self._expired:
            log.info("MCP server %r: the HTTP session expired; starting a new one", self.name)
        elif self._process is None:
            log.warning(
                "MCP server %r: the connection was lost; reconnecting at the next call", self.name
            )
        else:
            status = self._process.status()
            log.warning(
                "MCP server %r: the connection was lost%s; restarting it at the next call",
                self.name,
                f" (the server process {status})" if status else "",
            )

    def _session_expired(self) -> None:
        self._expired = True

    def _connected_to(self, client: Client) -> None:
        self._client = client
        self._expired = False
        self._lost = trio.Event()
        self.server_info = client.server_info
        self.instructions = client.instructions
        self.protocol_version = client.protocol_version
        self.connections += 1

    def close(self) -> None:
        """Ask the owner task to close the connection (it does, shielded and bounded)."""
        self._closing.set()
        self._attempt.error = self._attempt.error or f"MCP server '{self.name}' is closed"

    async def _watch_list(self, client: Client) -> None:
        while True:
            await self._refresh.wait()
            self._refresh = trio.Event()
            try:
                changed = await self._load_tools(client)
            except Exception as error:
                log.warning(
                    "MCP server %r: cannot list its tools again: %s",
                    self.name,
                    self.redactor.text(str(error)),
                )
                continue
            if changed:
                await self._tools_changed()

    async def _tools_changed(self) -> None:
        """Call ``on_tools_changed``; its failure is logged, it does not end the connection."""
        if self.on_tools_changed is None:
            return
        try:
            await call_hook(self.on_tools_changed, self)
        except Exception:
            log.exception("MCP server %r: on_tools_changed failed", self.name)

    async def _listen(
        self, client: Client, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """On 2026-07-28 connections, list changes come through a subscription.

        Reports ``started`` once subscribed, or once it is clear that it cannot be.
        Older connections get ``notifications/tools/list_changed`` (``_on_message``).
        """
        subscribed = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                subscribed = True
                task_status.started()
                async for _event in subscription:
                    self._refresh.set()
        except Exception as error:  # older protocol, the server declined, or the stream broke
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "MCP server %r: no list-changed subscription: %s",
                    self.name,
                    self.redactor.text(str(error)),
                )
        if not subscribed:
            task_status.started()

    async def _set_log_level(self, client: Client) -> None:
        """On handshake-era connections, ask for ``log_level`` (``logging/setLevel``).

        Newer connections carry the level on every request instead (the SDK's
        ``log_level``). A server without the logging capability is not asked.
        """
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        level = self.log_level
        if level is None or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        if client.server_capabilities.logging is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in 2026-07-28, current before it
            await client.session.set_logging_level(level)  # type: ignore[arg-type]

    async def _load_tools(self, client: Client) -> bool:
        """List every page of the server's tools; whether ``tools`` changed."""
        listed: list[mcp_types.Tool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        return await self._set_tools(listed)

    async def _set_tools(self, listed: Sequence[mcp_types.Tool]) -> bool:
        tools = await adapt_tools(self, listed, self.prefix, self._tools)
        changed = list(tools.values()) != list(self._tools.values())  # by identity (eq=False)
        self._tools = tools
        return changed

    def offers(self, adapter: McpToolAdapter) -> bool:
        """Whether ``adapter`` is still one of this server's tools."""
        return self._tools.get(adapter.name) is adapter

    # ----------------------------------------------------------------- calls

    async def _connected(self) -> Client:
        """The live client, connecting again first if the connection was lost."""
        while True:
            if self._closing.is_set():
                raise ToolError(f"MCP server '{self.name}' is closed")
            client = self._client
            if client is not None and not self._lost.is_set():
                return client
            attempt = self._attempt
            self._wanted.set()
            await attempt.done.wait()
            if attempt.error is not None and self._client is None:
                raise ToolError(f"MCP server '{self.name}' is not available: {attempt.error}")

    def _lose(self, client: Client) -> None:
        if self._client is client:
            self._lost.set()

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        progress: ProgressSink | None = None,
        context: ToolContext | None = None,
    ) -> mcp_types.CallToolResult:
        """Call the server's tool ``tool``; connect again first if the connection was lost.

        ``context`` is the agent's call: while it runs, the tokens of the server's
        sampling requests count in its run's usage, and the server's log messages
        are its progress (the call started first, if several are in flight).

        Raises:
            ToolError: the server is unreachable, closed the connection during
                the call, or refused it (an unknown tool, bad arguments); or it
                asked for a model reply once the run had reached a limit (the
                call is then ended: see :class:`McpSampling`).

        Cancellation: the SDK tells the server (``notifications/cancelled``).
        """
        self._requests.limit_reached = None  # a new call: what ended the last one is past
        if context is None:
            return await self._call_tool(tool, arguments, progress)
        call = CallInFlight(context)
        calls = self._requests.calls
        calls.append(call)
        try:
            with call.scope:
                return await self._call_tool(tool, arguments, progress)
        finally:
            calls.remove(call)
        assert call.ended is not None  # only CallInFlight.end cancels its scope
        raise ToolError(self.redactor.text(call.ended))

    async def _call_tool(
        self, tool: str, arguments: Mapping[str, Any], progress: ProgressSink | None
    ) -> mcp_types.CallToolResult:
        renewed = elicited = False
        while True:
            client = await self._connected()
            try:
                return await client.call_tool(
                    tool,
                    dict(arguments),
                    progress_callback=progress,  # type: ignore[arg-type]  # same signature
                )
            except MCPError as error:
                if error.code == mcp_types.CONNECTION_CLOSED:
                    self._lose(client)
                    raise ToolError(self.redactor.text(await self._closed_during(tool))) from error
                if self._expired and client is self._client:
                    self._lose(client)  # the HTTP session expired: the call never ran
                    if not renewed:
                        renewed = True
                        continue
                if (
                    error.code == mcp_types.URL_ELICITATION_REQUIRED
                    and not elicited
                    and await self._requests.complete_url_elicitations(error.data)
                ):
                    elicited = True  # the user went through the server's pages: once more
                    continue
                raise ToolError(
                    self.redactor.text(
                        f"MCP server '{self.name}' refused the call to '{tool}': {error.message}"
                    )
                ) from error
            except _TRANSPORT_ERRORS as error:
                self._lose(client)
                message = await self._closed_during(tool, _describe(error))
                raise ToolError(self.redactor.text(message)) from error

    async def _closed_during(self, tool: str, cause: str = "") -> str:
        message = f"MCP server '{self.name}' closed the connection during the call to '{tool}'"
        if cause:
            message += f": {cause}"
        if self._process is not None:
            note = await self._process.wait_exit(_EXIT_NOTE_WAIT)
            if note:
                message += f" ({note})"
        return message


async def _first(*waits: Callable[[], Awaitable[object]]) -> None:
    """Return when the first of ``waits`` returns."""
    async with trio.open_nursery() as nursery:

        async def run(wait: Callable[[], Awaitable[object]]) -> None:
            await wait()
            nursery.cancel_scope.cancel()

        for wait in waits:
            nursery.start_soon(run, wait)


def _version() -> str:
    from .. import __version__

    return __version__
