"""The live connection to one MCP server: a task of its own keeps it, exchanges go through it.

The SDK client is entered and left by one task, the *owner* (:meth:`Link.run`),
started with ``nursery.start`` by :func:`~agentloop.mcp.open_mcp`; tool calls
and requests from any task use it (an exchange only sends a message and waits
for the answer). When the connection is lost (the server died, an HTTP session
expired), the owner closes what is left of it and, at the next exchange,
connects again: a stdio server is started anew. Closing the link stops the
owner, which closes the SDK client: a stdio server's whole process group is
ended, bounded and shielded.

At each connection the owner starts what follows the server's lists (the
connection's :class:`~._adapter.ToolList` and :class:`~._resources.Resources`)
before it counts as connected, so no change is missed after a reconnection.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import httpx2
import mcp.types as mcp_types
import pydantic
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError

from .._secrets import Redactor
from .._tool import ToolError, format_duration
from .._util import leaves
from ._base import McpAuthError, McpConnectionError, McpRequestError
from ._http import http_transport
from ._oauth import pausable_deadline
from ._servers import HttpServer, SseServer, StdioServer
from ._stdio import StdioProcess, stdio_transport

if TYPE_CHECKING:
    from ._adapter import ToolList
    from ._config import McpConfig
    from ._requests import ServerRequests
    from ._resources import Resources

__all__ = ["Link", "ProgressSink"]

log = logging.getLogger("agentloop.mcp")

#: Receives a call's progress: (progress, total or None, message or None).
ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]

_T = TypeVar("_T")
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


class Link:
    """The live connection of an ``McpConnection``: its owner task and its exchanges.

    ``server_info``, ``instructions`` and ``protocol_version`` are what the
    server said at the last connection; ``connections`` how many times it
    connected (reconnects are > 1).
    """

    def __init__(
        self,
        server: Any,
        name: str,
        redactor: Redactor,
        options: Callable[[], McpConfig],
        requests: ServerRequests,
        tools: ToolList,
        resources: Resources,
    ) -> None:
        self.server = server
        self.name = name
        self.redactor = redactor
        self._options = options
        self._requests = requests
        self._tools = tools
        self._resources = resources
        self._client: Client | None = None
        self._process: StdioProcess | None = None  # the stdio server's process, if any
        self._expired = False  # the HTTP server forgot the session
        self._attempt = _Attempt()
        self._lost = trio.Event()  # the current connection is lost
        self._wanted = trio.Event()  # a call wants a connection
        self._closing = trio.Event()
        self.server_info: mcp_types.Implementation | None = None
        self.instructions: str | None = None
        self.protocol_version: str | None = None
        self.connections = 0

    @property
    def connected(self) -> bool:
        """Whether a client is connected now."""
        return self._client is not None

    @property
    def pid(self) -> int | None:
        """The pid of the stdio server process last started, or None."""
        return None if self._process is None else self._process.pid

    # ----------------------------------------------------------------- the owner task

    def _new_client(self) -> Client:
        server, config = self.server, self._options()
        if isinstance(server, StdioServer):
            self._process = StdioProcess(self.name, self.redactor)
            target: Any = stdio_transport(server, self._process)
        elif isinstance(server, HttpServer | SseServer):
            target = http_transport(
                server, config.call_timeout, self._session_expired, self.redactor
            )
        else:
            target = server  # an SDK server object, served in-process
        return Client(
            target,
            message_handler=self._on_message,
            client_info=mcp_types.Implementation(name="agentloop", version=_version()),
            cache=None,
            mode=config.protocol,
            log_level=config.log_level,  # type: ignore[arg-type]  # checked by McpConfig
            **self._requests.client_options(),
        )

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._tools.refresh()
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            self._resources.updated(str(message.params.uri))
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
            connect_timeout = self._options().connect_timeout
            # The handshake's deadline lives on a scope around the whole connection
            # (the client's own scopes nest inside it); it is lifted once connected.
            # While a person authorizes in a browser (OAuth), the deadline is paused.
            with (
                trio.CancelScope(deadline=trio.current_time() + connect_timeout) as handshake,
                pausable_deadline(handshake),
            ):
                try:
                    async with self._new_client() as client, trio.open_nursery() as watchers:
                        # Subscribe to list changes first, so that none is missed.
                        await watchers.start(self._tools.listen, client)
                        await watchers.start(self._resources.watch, client)
                        changed = await self._tools.load(client)
                        await self._set_log_level(client)
                        handshake.deadline = math.inf
                        self._connected_to(client)
                        self._log_connected()
                        attempt.done.set()
                        if not started:
                            started = True
                            task_status.started()
                        elif changed:  # the server came back with other tools
                            watchers.start_soon(self._tools.changed)
                        watchers.start_soon(self._tools.watch, client)
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
                    f"{format_duration(connect_timeout)}"
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
                    len(self._tools.tools),
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

    async def _set_log_level(self, client: Client) -> None:
        """On handshake-era connections, ask for ``log_level`` (``logging/setLevel``).

        Newer connections carry the level on every request instead (the SDK's
        ``log_level``). A server without the logging capability is not asked.
        """
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        level = self._options().log_level
        if level is None or client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        if client.server_capabilities.logging is None:
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in 2026-07-28, current before it
            await client.session.set_logging_level(level)  # type: ignore[arg-type]

    # ----------------------------------------------------------------- exchanges

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
        self, tool: str, arguments: Mapping[str, Any], progress: ProgressSink | None
    ) -> mcp_types.CallToolResult:
        """Call the server's tool ``tool``, failures as :class:`~agentloop.ToolError`.

        Sent again once if the HTTP session had expired (the call never ran),
        and once after the user went through the pages of a URL elicitation.
        """
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

    async def request(
        self, method: str, target: str | None, send: Callable[[Client], Awaitable[_T]]
    ) -> _T:
        """``send(client)``, failures as :class:`McpRequestError`; again if the session expired.

        The :class:`~._resources.Requester` of the connection's resources.
        """
        what = method if target is None else f"{method} {target!r}"
        redact = self.redactor.text
        for attempt in range(2):
            try:
                client = await self._connected()
            except ToolError as error:
                raise McpRequestError(str(error), server=self.name, method=method) from error
            timeout = self._options().call_timeout
            try:
                with trio.fail_after(math.inf if timeout is None else timeout):
                    return await send(client)
            except trio.TooSlowError:
                assert timeout is not None
                message = (
                    f"MCP server '{self.name}' did not answer {what} "
                    f"within {format_duration(timeout)}"
                )
                raise McpRequestError(message, server=self.name, method=method) from None
            except MCPError as error:
                if error.code == mcp_types.CONNECTION_CLOSED:
                    self._lose(client)
                    message = f"MCP server '{self.name}' closed the connection during {what}"
                    raise McpRequestError(message, server=self.name, method=method) from error
                if self._expired and client is self._client:
                    self._lose(client)  # the HTTP session expired: the request never ran
                    if attempt == 0:
                        continue
                message = redact(f"MCP server '{self.name}' refused {what}: {error.message}")
                raise McpRequestError(
                    message, server=self.name, method=method, code=error.code
                ) from error
            except _TRANSPORT_ERRORS as error:
                self._lose(client)
                message = f"MCP server '{self.name}' closed the connection during {what}"
                raise McpRequestError(message, server=self.name, method=method) from error
            except pydantic.ValidationError as error:
                message = redact(
                    f"MCP server '{self.name}' sent an invalid answer to {what}: "
                    f"{error.error_count()} validation error(s)"
                )
                raise McpRequestError(message, server=self.name, method=method) from error
        raise AssertionError("unreachable")  # pragma: no cover

    async def _closed_during(self, tool: str, cause: str = "") -> str:
        message = f"MCP server '{self.name}' closed the connection during the call to '{tool}'"
        if cause:
            message += f": {cause}"
        if self._process is not None:
            note = await self._process.wait_exit(_EXIT_NOTE_WAIT)
            if note:
                message += f" ({note})"
        return message

    async def roots_changed(self) -> None:
        """Tell the server its roots changed (``notifications/roots/list_changed``), if connected.

        A failure is logged: the server gets the new list when it next asks.
        """
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
