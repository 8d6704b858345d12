"""McpConnection: one MCP server, its tools, resources and prompts, and what it may ask.

The connection is a face over parts of its own, each given only what it needs:
the :class:`~._link.Link` (the task that keeps the live connection, and the
exchanges over it), the :class:`~._adapter.ToolList` (the server's tools, kept up
to date), :class:`~._resources.Resources` (resources, subscriptions and prompts,
sent through the link's ``request``) and :class:`~._requests.ServerRequests`
(what the server asks of the client). All of them read the connection's options,
one :class:`~agentloop.mcp.McpConfig`, as they are at the time.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar, overload

import attrs
import mcp.types as mcp_types
import trio
from mcp import Client

from .._secrets import Redactor
from .._tool import ToolContext, ToolError
from .._types import Message, ToolResultContent, Usage
from ._adapter import McpToolAdapter, ToolList
from ._base import public
from ._config import McpConfig, config_with
from ._http import server_secrets
from ._link import Link, ProgressSink
from ._request_values import McpRoot
from ._requests import ServerRequests
from ._resource_tools import McpResourceTool, resource_tools_of
from ._resource_values import McpPrompt, McpResource, McpResourceContents, McpResourceTemplate
from ._resources import Resources
from ._sampling import CallInFlight
from ._servers import default_name

__all__ = ["McpConnection"]

_T = TypeVar("_T")


class _Option(Generic[_T]):
    """An attribute of the connection that is a field of its ``config``.

    Reading it reads the field; setting it gives the connection a config with
    the field changed (checked as :class:`McpConfig` checks it).
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._field = name

    @overload
    def __get__(self, connection: None, owner: type) -> _Option[_T]: ...

    @overload
    def __get__(self, connection: McpConnection, owner: type) -> _T: ...

    def __get__(self, connection: McpConnection | None, owner: type) -> _Option[_T] | _T:
        if connection is None:
            return self
        value: _T = getattr(connection.config, self._field)
        return value

    def __set__(self, connection: McpConnection, value: _T) -> None:
        changed: dict[str, Any] = {self._field: value}
        connection._config = attrs.evolve(connection.config, **changed)


@public
class McpConnection:
    """A connection to one MCP server and the tools it offers.

    Made by :func:`~agentloop.mcp.open_mcp`, which owns it; use it while that
    ``async with`` block lasts. ``tools`` are :class:`McpToolAdapter` objects,
    kept up to date when the server says its list changed.

    ``McpConnection(server, config, name=...)`` takes what ``open_mcp`` takes
    (``name`` defaults alike); the keyword arguments of before
    :class:`McpConfig` still work, with a :class:`DeprecationWarning`.

    Attributes:
        server: Where the server is, as given.
        name: The server's name (for messages and the default prefix).
        config: The options (:class:`McpConfig`). Its fields
            ``call_timeout``, ``connect_timeout``, ``protocol``,
            ``max_result_bytes``, ``destructive_exclusive``, ``log_level``,
            ``on_tools_changed`` and ``on_resource_updated`` are attributes
            of the connection too; setting one gives the connection a config
            with it changed (checked as :class:`McpConfig` checks it).
        prefix: Put before each tool name as ``PREFIX__tool``, or None: the
            config's ``prefix``, with ``True`` made the server's name.
        redactor: Keeps the credentials sent to the server (headers, URL
            password, secret ``env`` values) out of results and errors.

    Raises:
        TypeError: ``config`` is not an :class:`McpConfig`.
        ValueError: an option is out of range (see :class:`McpConfig`).
    """

    # The fields of ``config`` that were the connection's attributes before McpConfig.
    call_timeout = _Option[float | None]()
    """``config.call_timeout``: seconds a tool call or a request may take."""
    connect_timeout = _Option[float]()
    """``config.connect_timeout``: seconds connecting and the handshake may take."""
    protocol = _Option[str]()
    """``config.protocol``: ``"auto"``, ``"legacy"`` or a protocol version."""
    max_result_bytes = _Option[int]()
    """``config.max_result_bytes``: bytes of text one result may put into the context."""
    destructive_exclusive = _Option[bool]()
    """``config.destructive_exclusive``: whether destructive calls claim the server."""
    log_level = _Option[str | None]()
    """``config.log_level``: the least severe level the server should send."""
    on_tools_changed = _Option[Callable[["McpConnection"], Any] | None]()
    """``config.on_tools_changed``: called with the connection when its tools changed."""
    on_resource_updated = _Option[Callable[[str], Any] | None]()
    """``config.on_resource_updated``: called with the URI of a subscribed resource
    that changed."""

    def __init__(
        self,
        server: Any,
        config: McpConfig | None = None,
        *,
        name: str | None = None,
        **options: Any,
    ) -> None:
        self._config = config_with(config, options, "McpConnection")
        self.server = server
        self.name = name or default_name(server)
        prefix = self._config.prefix
        self.prefix: str | None = (
            self.name if prefix is True else prefix if isinstance(prefix, str) else None
        )
        #: Keeps the credentials this connection sends out of what it reports.
        self.redactor = Redactor(server_secrets(server))
        self._requests = ServerRequests(self.name, self.redactor, self._options)
        self._resources = Resources(self.name, self.redactor, self._request, self._options)
        self._tool_list = ToolList(self)
        self._link = Link(
            server,
            self.name,
            self.redactor,
            self._options,
            self._requests,
            self._tool_list,
            self._resources,
        )

    @property
    def config(self) -> McpConfig:
        """The connection's options (see :class:`McpConfig`)."""
        return self._config

    def _options(self) -> McpConfig:
        return self._config

    async def _request(
        self, method: str, target: str | None, send: Callable[[Client], Awaitable[_T]]
    ) -> _T:
        # The resources' Requester: the link's request (the link is made after them).
        return await self._link.request(method, target, send)

    def __repr__(self) -> str:
        state = "connected" if self._link.connected else "disconnected"
        return f"<McpConnection {self.name!r} {state} tools={len(self.tools)}>"

    @property
    def pid(self) -> int | None:
        """The pid of the stdio server process last started, or None."""
        return self._link.pid

    @property
    def server_info(self) -> mcp_types.Implementation | None:
        """The server's name and version, as it said at the last connection."""
        return self._link.server_info

    @property
    def instructions(self) -> str | None:
        """The server's instructions, as it said at the last connection."""
        return self._link.instructions

    @property
    def protocol_version(self) -> str | None:
        """The protocol version spoken at the last connection."""
        return self._link.protocol_version

    @property
    def connections(self) -> int:
        """How many times it connected (more than 1 after a reconnection)."""
        return self._link.connections

    @property
    def tools(self) -> tuple[McpToolAdapter, ...]:
        """The server's tools as agentloop tools, in the server's order."""
        return self._tool_list.tools

    def offers(self, adapter: McpToolAdapter) -> bool:
        """Whether ``adapter`` is still one of this server's tools."""
        return self._tool_list.offers(adapter)

    @property
    def roots(self) -> tuple[McpRoot, ...] | None:
        """The roots the server is given, or None if the client offers none."""
        return self._config.roots

    @property
    def sampling_usage(self) -> Usage:
        """The tokens the server's sampling requests have cost, over the connection's life."""
        return self._requests.sampling_usage

    async def set_roots(self, roots: Sequence[McpRoot | str | os.PathLike[str]]) -> None:
        """Give the server these roots from now on, and tell it they changed.

        Only for a connection opened with ``McpConfig(roots=...)`` (the capability
        is declared in the handshake). The server is sent ``notifications/roots/list_changed``
        if connected (it asks for the list again); else it gets the new list when
        it next asks.

        Raises:
            RuntimeError: the connection was opened without ``roots``.
        """
        if self._config.roots is None:
            raise RuntimeError(
                f"MCP server '{self.name}' was connected without roots; "
                "pass McpConfig(roots=[...]) to open_mcp to offer them"
            )
        self._config = attrs.evolve(self._config, roots=roots)
        await self._link.roots_changed()

    # ----------------------------------------------------------------- resources and prompts
    # Each connects again first if the connection was lost, waits at most
    # ``call_timeout`` for each request, and raises McpRequestError when the server
    # refuses it, does not answer in time, is unreachable, or closes the connection.

    async def list_resources(self) -> list[McpResource]:
        """The server's resources, every page, in the server's order.

        Raises:
            McpRequestError: the server refused, is unreachable, or timed out.
        """
        return await self._resources.list_resources()

    async def list_resource_templates(self) -> list[McpResourceTemplate]:
        """The server's resource templates, every page, in the server's order.

        Raises:
            McpRequestError: as for :meth:`list_resources`.
        """
        return await self._resources.list_resource_templates()

    async def read_resource_contents(self, uri: str) -> list[McpResourceContents]:
        """The resource at ``uri`` as the server sent it: text, or bytes, per part.

        Nothing is capped; text is redacted. Use :meth:`read_resource` for
        content blocks to give a model.

        Raises:
            McpRequestError: the server refused (an unknown URI), is
                unreachable, or timed out.
        """
        return await self._resources.read_resource_contents(uri)

    async def read_resource(self, uri: str) -> list[ToolResultContent]:
        """The resource at ``uri`` as content blocks, for a model.

        Text is a :class:`~agentloop.TextContent`; a PNG, JPEG, GIF or WebP
        image an :class:`~agentloop.ImageContent`; other binary data a line
        ``[resource URI: MIME, SIZE]`` (binary data of a text type, valid
        UTF-8, is its text). Capped like a tool result (``max_result_bytes``
        of text; images up to 5 MiB) and redacted. The blocks can go into a
        prompt: ``agent.prompt(UserMessage([TextContent("..."), *blocks]))``.

        Raises:
            McpRequestError: as for :meth:`read_resource_contents`.
        """
        return await self._resources.read_resource(uri)

    async def subscribe(self, uri: str) -> None:
        """Ask the server to say when the resource at ``uri`` changes.

        Each ``notifications/resources/updated`` then calls
        ``on_resource_updated(uri)``. The subscription is renewed when the
        connection is (after a lost connection or a restarted server).

        Raises:
            McpRequestError: the server does not support subscriptions, or
                refused, is unreachable, or timed out.
        """
        await self._resources.change_subscription(uri, subscribe=True)

    async def unsubscribe(self, uri: str) -> None:
        """Stop the updates of :meth:`subscribe` for ``uri``.

        Raises:
            McpRequestError: as for :meth:`subscribe`.
        """
        await self._resources.change_subscription(uri, subscribe=False)

    @property
    def subscriptions(self) -> tuple[str, ...]:
        """The URIs subscribed to, in order."""
        return self._resources.subscriptions

    async def list_prompts(self) -> list[McpPrompt]:
        """The server's prompts, every page, in the server's order.

        Raises:
            McpRequestError: as for :meth:`list_resources`.
        """
        return await self._resources.list_prompts()

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[Message]:
        """The prompt ``name`` rendered with ``arguments``, as messages.

        Each of the server's messages becomes a :class:`~agentloop.UserMessage`
        or :class:`~agentloop.AssistantMessage` (``StopReason.STOP``). Content
        maps as in tool results; an embedded resource becomes
        ``[resource URI]`` and its text (or a line describing binary data); an
        image in an assistant message becomes a line describing it. Each
        message is capped and redacted like a tool result.

        Raises:
            McpRequestError: the server refused (an unknown prompt, a missing
                argument), is unreachable, or timed out.
        """
        return await self._resources.get_prompt(name, arguments)

    async def resource_tools(self) -> list[McpResourceTool]:
        """Two tools that let the model browse the server's resources, if it has any.

        ``PREFIX__list_resources`` (no arguments) lists the resources and
        templates: URI, MIME type, name, description.
        ``PREFIX__read_resource`` (``uri``) reads one (see
        :meth:`read_resource`). ``PREFIX`` is the connection's prefix, else
        its name. Empty if the server does not declare the resources
        capability.

        Raises:
            McpRequestError: the server is unreachable.
        """
        return resource_tools_of(self) if await self._resources.offered() else []

    # ----------------------------------------------------------------- the owner task

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Connect, stay connected, reconnect on demand; return once closed.

        Reports ``started`` after the first connection; if that fails, raises
        :class:`McpConnectionError` instead.
        """
        await self._link.run(task_status=task_status)

    def close(self) -> None:
        """Ask the owner task to close the connection (it does, shielded and bounded)."""
        self._link.close()

    # ----------------------------------------------------------------- calls

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
            return await self._link.call_tool(tool, arguments, progress)
        call = CallInFlight(context)
        calls = self._requests.calls
        calls.append(call)
        try:
            with call.scope:
                return await self._link.call_tool(tool, arguments, progress)
        finally:
            calls.remove(call)
        assert call.ended is not None  # only CallInFlight.end cancels its scope
        raise ToolError(self.redactor.text(call.ended))
