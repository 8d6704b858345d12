"""An MCP server's resources and prompts: listed, read, rendered, subscribed to.

:class:`ResourcesMixin` is a part of :class:`~agentloop.mcp.McpConnection`:
its methods ask the server through the connection's live client. What comes
back becomes agentloop values (:class:`McpResource`, :class:`McpPrompt`),
content blocks and messages, capped and with the credentials sent to the
server redacted, as tool results are.

Subscriptions follow the protocol the connection speaks: a 2025-era
connection sends ``resources/subscribe``; a 2026-07-28 one holds a
``subscriptions/listen`` stream naming the subscribed URIs, opened again
whenever the set changes. Both deliver ``notifications/resources/updated``,
which a task of the connection hands to ``on_resource_updated`` in order.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import httpx2
import mcp.types as mcp_types
import pydantic
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._tool import ToolError, format_duration
from .._types import (
    AssistantMessage,
    Message,
    StopReason,
    ToolResultContent,
    UserMessage,
)
from .._util import call_hook
from ._base import McpRequestError
from ._resource_tools import McpResourceTool, resource_tools_of
from ._resource_values import (
    McpPrompt,
    McpPromptArgument,
    McpResource,
    McpResourceContents,
    McpResourceTemplate,
    as_content,
    assistant_block,
    capped,
    contents,
    prompt_block,
    redacted,
)

if TYPE_CHECKING:
    from .._secrets import Redactor

__all__ = ["ResourceUpdatedHook", "ResourcesMixin"]

log = logging.getLogger("agentloop.mcp")

_T = TypeVar("_T")

#: Called (plain or async) with the URI of a subscribed resource that changed.
ResourceUpdatedHook = Callable[[str], Any]

_MAX_PAGES = 1000
# What a transport raises when the connection breaks under a request (besides MCPError).
_TRANSPORT_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, httpx2.TransportError)


# --------------------------------------------------------------------------- the mixin


@attrs.define(eq=False)
class _Listening:
    """The listen stream for the subscriptions as they are now: ``done`` once it is open."""

    done: trio.Event = attrs.field(factory=trio.Event)
    error: str | None = None


@attrs.define(eq=False)
class _ResourceState:
    """A connection's subscriptions and the updates not yet handed on."""

    subscribed: dict[str, None] = attrs.field(factory=dict)  # an ordered set
    changed: trio.Event = attrs.field(factory=trio.Event)
    pending: _Listening = attrs.field(factory=_Listening)
    updates: tuple[trio.MemorySendChannel[str], trio.MemoryReceiveChannel[str]] = attrs.field(
        factory=lambda: trio.open_memory_channel[str](math.inf)
    )


class ResourcesMixin:
    """Resources and prompts of an MCP server, for :class:`~agentloop.mcp.McpConnection`.

    Every method connects again first if the connection was lost, waits at
    most the connection's ``call_timeout`` for each request, and raises
    :class:`~agentloop.mcp.McpRequestError` when the server refuses it, does
    not answer in time, is unreachable, or closes the connection meanwhile.
    """

    # What the mixin uses of the connection.
    name: str
    prefix: str | None
    call_timeout: float | None
    max_result_bytes: int
    #: Called (plain or async) with the URI of a subscribed resource the server
    #: says changed; its exceptions are logged (``agentloop.mcp``), not raised.
    on_resource_updated: ResourceUpdatedHook | None = None

    if TYPE_CHECKING:
        redactor: Redactor
        _client: Client | None
        _expired: bool

        async def _connected(self) -> Client: ...

        def _lose(self, client: Client) -> None: ...

    # ----------------------------------------------------------------- requests

    @property
    def _resource_state(self) -> _ResourceState:
        state: _ResourceState | None = self.__dict__.get("_resource_state_")
        if state is None:
            state = self.__dict__["_resource_state_"] = _ResourceState()
        return state

    async def _request(
        self, method: str, target: str | None, send: Callable[[Client], Awaitable[_T]]
    ) -> _T:
        """``send(client)``, failures as :class:`McpRequestError`; again if the session expired."""
        what = method if target is None else f"{method} {target!r}"
        redact = self.redactor.text
        for attempt in range(2):
            try:
                client = await self._connected()
            except ToolError as error:
                raise McpRequestError(str(error), server=self.name, method=method) from error
            timeout = self.call_timeout
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

    async def _pages(
        self, method: str, fetch: Callable[[Client, str | None], Awaitable[Any]], field: str
    ) -> list[Any]:
        listed: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(_MAX_PAGES):

            async def send(client: Client, at: str | None = cursor) -> Any:
                return await fetch(client, at)

            page = await self._request(method, None, send)
            listed.extend(getattr(page, field))
            cursor = page.next_cursor
            if not cursor or cursor in seen:
                break
            seen.add(cursor)
        return listed

    # ----------------------------------------------------------------- resources

    async def list_resources(self) -> list[McpResource]:
        """The server's resources, every page, in the server's order.

        Raises:
            McpRequestError: the server refused, is unreachable, or timed out.
        """
        listed = await self._pages(
            "resources/list",
            lambda c, cursor: c.list_resources(cursor=cursor, cache_mode="bypass"),
            "resources",
        )
        redact = self.redactor.text
        return [
            McpResource(
                uri=str(r.uri),
                name=r.name,
                title=r.title,
                description=None if r.description is None else redact(r.description),
                mime_type=r.mime_type,
                size=r.size,
            )
            for r in listed
        ]

    async def list_resource_templates(self) -> list[McpResourceTemplate]:
        """The server's resource templates, every page, in the server's order.

        Raises:
            McpRequestError: as for :meth:`list_resources`.
        """
        listed = await self._pages(
            "resources/templates/list",
            lambda c, cursor: c.list_resource_templates(cursor=cursor, cache_mode="bypass"),
            "resource_templates",
        )
        redact = self.redactor.text
        return [
            McpResourceTemplate(
                uri_template=t.uri_template,
                name=t.name,
                title=t.title,
                description=None if t.description is None else redact(t.description),
                mime_type=t.mime_type,
            )
            for t in listed
        ]

    async def read_resource_contents(self, uri: str) -> list[McpResourceContents]:
        """The resource at ``uri`` as the server sent it: text, or bytes, per part.

        Nothing is capped; text is redacted. Use :meth:`read_resource` for
        content blocks to give a model.

        Raises:
            McpRequestError: the server refused (an unknown URI), is
                unreachable, or timed out.
        """
        result: mcp_types.ReadResourceResult = await self._request(
            "resources/read", uri, lambda c: c.read_resource(uri, cache_mode="bypass")
        )
        return [contents(item, self.redactor) for item in result.contents]

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
        parts = await self.read_resource_contents(uri)
        content = [redacted(as_content(part, header=False), self.redactor) for part in parts]
        return capped(content, self.max_result_bytes)

    async def subscribe(self, uri: str) -> None:
        """Ask the server to say when the resource at ``uri`` changes.

        Each ``notifications/resources/updated`` then calls
        ``on_resource_updated(uri)``. The subscription is renewed when the
        connection is (after a lost connection or a restarted server).

        Raises:
            McpRequestError: the server does not support subscriptions, or
                refused, is unreachable, or timed out.
        """
        await self._change_subscription(uri, subscribe=True)

    async def unsubscribe(self, uri: str) -> None:
        """Stop the updates of :meth:`subscribe` for ``uri``.

        Raises:
            McpRequestError: as for :meth:`subscribe`.
        """
        await self._change_subscription(uri, subscribe=False)

    @property
    def subscriptions(self) -> tuple[str, ...]:
        """The URIs subscribed to, in order."""
        return tuple(self._resource_state.subscribed)

    async def _change_subscription(self, uri: str, *, subscribe: bool) -> None:
        method = "resources/subscribe" if subscribe else "resources/unsubscribe"
        client = await self._request(method, uri, _itself)
        capability = client.server_capabilities.resources
        if capability is None or not capability.subscribe:
            raise McpRequestError(
                f"MCP server '{self.name}' does not support resource subscriptions",
                server=self.name,
                method=method,
            )
        state = self._resource_state
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            request: Any
            if subscribe:
                request = mcp_types.SubscribeRequest(
                    params=mcp_types.SubscribeRequestParams(uri=uri)
                )
            else:
                request = mcp_types.UnsubscribeRequest(
                    params=mcp_types.UnsubscribeRequestParams(uri=uri)
                )

            async def send(c: Client) -> Any:
                return await c.session.send_request(request, mcp_types.EmptyResult)

            await self._request(method, uri, send)
            if subscribe:
                state.subscribed[uri] = None
            else:
                state.subscribed.pop(uri, None)
            return
        # 2026-07-28: the connection's watcher listens again with the new set.
        before = dict(state.subscribed)
        if subscribe:
            state.subscribed[uri] = None
        else:
            state.subscribed.pop(uri, None)
        if state.subscribed == before:
            return
        listening = state.pending
        state.changed.set()

        async def confirmed(_client: Client) -> None:
            await listening.done.wait()

        await self._request(method, uri, confirmed)
        if listening.error is not None:
            if subscribe:  # nothing is subscribed on the server: keep the set as it was
                state.subscribed.pop(uri, None)
            else:
                state.subscribed[uri] = None
            raise McpRequestError(
                self.redactor.text(f"MCP server '{self.name}' refused {method} {uri!r}: ")
                + listening.error,
                server=self.name,
                method=method,
            )

    def _resource_updated(self, uri: str) -> None:
        """The server said the resource at ``uri`` changed (from the message handler)."""
        if self.on_resource_updated is None:
            return
        send, _ = self._resource_state.updates
        send.send_nowait(uri)

    async def _watch_resources(
        self, client: Client, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """For one connection: renew the subscriptions, then hand on updates in order.

        Started by the connection's owner with ``nursery.start`` before it
        counts as connected (so no update is missed after a reconnection), and
        cancelled when the connection ends. Reports ``started`` once the
        subscriptions are renewed; on 2026-07-28 connections it goes on
        holding the listen stream.
        """
        async with trio.open_nursery() as nursery:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await nursery.start(self._hold_listen, client)
            else:
                await self._renew_subscriptions(client)
            nursery.start_soon(self._hand_on_updates)
            task_status.started()

    async def _hand_on_updates(self) -> None:
        _, receive = self._resource_state.updates
        while True:
            uri = await receive.receive()
            hook = self.on_resource_updated
            if hook is None:
                continue
            try:
                await call_hook(hook, uri)
            except Exception:
                log.exception("MCP server %r: on_resource_updated failed", self.name)

    async def _renew_subscriptions(self, client: Client) -> None:
        for uri in list(self._resource_state.subscribed):
            request = mcp_types.SubscribeRequest(params=mcp_types.SubscribeRequestParams(uri=uri))
            try:
                await client.session.send_request(request, mcp_types.EmptyResult)
            except Exception as error:
                log.warning(
                    "MCP server %r: cannot subscribe to %r again: %s",
                    self.name,
                    uri,
                    self.redactor.text(str(error)),
                )

    async def _hold_listen(
        self, client: Client, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen for updates of the subscribed URIs; listen again whenever they change.

        Reports ``started`` once the first stream is open (or failed to open).
        """
        state = self._resource_state
        listening = state.pending
        started = False

        def opened() -> None:
            nonlocal started
            listening.done.set()
            if not started:
                started = True
                task_status.started()

        try:
            while True:
                listening = state.pending
                state.pending = _Listening()
                changed = state.changed = trio.Event()
                uris = tuple(state.subscribed)
                if not uris:
                    opened()
                    await changed.wait()
                    continue
                try:
                    async with client.listen(resource_subscriptions=uris) as subscription:
                        opened()
                        await self._drain_until(subscription, changed)
                except Exception as error:
                    text = error.message if isinstance(error, MCPError) else str(error)
                    listening.error = self.redactor.text(text or type(error).__name__)
                    opened()
                    log.warning(
                        "MCP server %r: cannot listen for resource updates: %s",
                        self.name,
                        listening.error,
                    )
                await changed.wait()
        finally:
            for waiting in (listening, state.pending):
                if not waiting.done.is_set():
                    waiting.error = "the connection ended before the server confirmed it"
                    waiting.done.set()
            state.pending = _Listening()  # for the next connection's watcher

    async def _drain_until(self, subscription: Any, changed: trio.Event) -> None:
        """Read the listen stream (its updates reach the message handler too) until ``changed``."""
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                try:
                    async for _event in subscription:
                        pass
                    why = "the server closed it"
                except Exception as error:
                    why = self.redactor.text(str(error))
                log.warning(
                    "MCP server %r: the resource update stream ended (%s); "
                    "it is opened again at the next subscribe() or unsubscribe()",
                    self.name,
                    why,
                )
                nursery.cancel_scope.cancel()

            nursery.start_soon(drain)
            await changed.wait()
            nursery.cancel_scope.cancel()

    # ----------------------------------------------------------------- prompts

    async def list_prompts(self) -> list[McpPrompt]:
        """The server's prompts, every page, in the server's order.

        Raises:
            McpRequestError: as for :meth:`list_resources`.
        """
        listed = await self._pages(
            "prompts/list",
            lambda c, cursor: c.list_prompts(cursor=cursor, cache_mode="bypass"),
            "prompts",
        )
        redact = self.redactor.text
        return [
            McpPrompt(
                name=p.name,
                title=p.title,
                description=None if p.description is None else redact(p.description),
                arguments=tuple(
                    McpPromptArgument(a.name, a.description, bool(a.required))
                    for a in p.arguments or ()
                ),
            )
            for p in listed
        ]

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
        args = None if arguments is None else {str(k): str(v) for k, v in arguments.items()}
        result: mcp_types.GetPromptResult = await self._request(
            "prompts/get", name, lambda c: c.get_prompt(name, args)
        )
        messages: list[Message] = []
        for message in result.messages:
            content = capped([prompt_block(message.content, self.redactor)], self.max_result_bytes)
            if message.role == "assistant":
                blocks = [assistant_block(block) for block in content]
                messages.append(AssistantMessage(blocks, stop_reason=StopReason.STOP))
            else:
                messages.append(UserMessage(content))
        return messages

    # ----------------------------------------------------------------- tools

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
        client = await self._request("resources/list", None, _itself)
        if client.server_capabilities.resources is None:
            return []
        return resource_tools_of(self)


async def _itself(client: Client) -> Client:
    await trio.lowlevel.checkpoint()
    return client
