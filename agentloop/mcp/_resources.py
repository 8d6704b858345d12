"""An MCP server's resources and prompts: listed, read, rendered, subscribed to.

:class:`Resources` is a part of :class:`~agentloop.mcp.McpConnection`: the
connection holds one and hands its public methods on to it. It reaches the
server only through what the connection gives it: ``request``, which runs one
exchange on the live client under the connection's rules (connect again first
if the connection was lost, wait at most ``call_timeout``, failures as
:class:`~agentloop.mcp.McpRequestError`), and ``options``, the connection's
:class:`~agentloop.mcp.McpConfig` as it is now. What comes back becomes
agentloop values (:class:`McpResource`, :class:`McpPrompt`), content blocks
and messages, capped and with the credentials sent to the server redacted, as
tool results are.

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
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
import mcp.types as mcp_types
import trio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .._types import AssistantMessage, Message, StopReason, ToolResultContent, UserMessage
from .._util import call_hook
from ._base import McpRequestError, all_pages
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
    from ._config import McpConfig

__all__ = ["Resources"]

log = logging.getLogger("agentloop.mcp")

_T = TypeVar("_T")


class Requester(Protocol):
    """Runs ``send(client)`` on the connection's live client, under the connection's rules.

    ``method`` and ``target`` (a URI, a prompt's name, or None) name the
    request in errors. Raises :class:`~agentloop.mcp.McpRequestError` when
    the server refuses, does not answer in time, is unreachable, or closes
    the connection meanwhile.
    """

    async def __call__(
        self, method: str, target: str | None, send: Callable[[Client], Awaitable[_T]]
    ) -> _T: ...


@attrs.define(eq=False)
class _Listening:
    """The listen stream for the subscriptions as they are now: ``done`` once it is open."""

    done: trio.Event = attrs.field(factory=trio.Event)
    error: str | None = None


class Resources:
    """The resources, subscriptions and prompts of one connection's server.

    Made by the connection with its name, its redactor, a :class:`Requester`
    and a way to read its options now; see the module docstring. The methods
    are those of :class:`~agentloop.mcp.McpConnection` of the same names.
    """

    def __init__(
        self,
        name: str,
        redactor: Redactor,
        request: Requester,
        options: Callable[[], McpConfig],
    ) -> None:
        self._name = name
        self._redactor = redactor
        self._request = request
        self._options = options
        self._subscribed: dict[str, None] = {}  # an ordered set
        self._changed = trio.Event()  # the set changed: listen again (2026-07-28)
        self._pending = _Listening()
        self._updates = trio.open_memory_channel[str](math.inf)

    # ----------------------------------------------------------------- requests

    async def _pages(
        self, method: str, fetch: Callable[[Client, str | None], Awaitable[Any]], field: str
    ) -> list[Any]:
        async def page(cursor: str | None) -> Any:
            return await self._request(method, None, lambda client: fetch(client, cursor))

        return await all_pages(page, field)

    def _redact(self, text: str | None) -> str | None:
        return None if text is None else self._redactor.text(text)

    async def offered(self) -> bool:
        """Whether the server declares the resources capability (connecting first if need be)."""
        client = await self._request("resources/list", None, _itself)
        return client.server_capabilities.resources is not None

    # ----------------------------------------------------------------- resources

    async def list_resources(self) -> list[McpResource]:
        """See :meth:`McpConnection.list_resources`."""
        listed = await self._pages(
            "resources/list",
            lambda c, cursor: c.list_resources(cursor=cursor, cache_mode="bypass"),
            "resources",
        )
        return [
            McpResource(
                uri=str(r.uri),
                name=r.name,
                title=r.title,
                description=self._redact(r.description),
                mime_type=r.mime_type,
                size=r.size,
            )
            for r in listed
        ]

    async def list_resource_templates(self) -> list[McpResourceTemplate]:
        """See :meth:`McpConnection.list_resource_templates`."""
        listed = await self._pages(
            "resources/templates/list",
            lambda c, cursor: c.list_resource_templates(cursor=cursor, cache_mode="bypass"),
            "resource_templates",
        )
        return [
            McpResourceTemplate(
                uri_template=t.uri_template,
                name=t.name,
                title=t.title,
                description=self._redact(t.description),
                mime_type=t.mime_type,
            )
            for t in listed
        ]

    async def read_resource_contents(self, uri: str) -> list[McpResourceContents]:
        """See :meth:`McpConnection.read_resource_contents`."""
        result: mcp_types.ReadResourceResult = await self._request(
            "resources/read", uri, lambda c: c.read_resource(uri, cache_mode="bypass")
        )
        return [contents(item, self._redactor) for item in result.contents]

    async def read_resource(self, uri: str) -> list[ToolResultContent]:
        """See :meth:`McpConnection.read_resource`."""
        parts = await self.read_resource_contents(uri)
        content = [redacted(as_content(part, header=False), self._redactor) for part in parts]
        return capped(content, self._options().max_result_bytes)

    # ----------------------------------------------------------------- subscriptions

    @property
    def subscriptions(self) -> tuple[str, ...]:
        """The URIs subscribed to, in order."""
        return tuple(self._subscribed)

    async def change_subscription(self, uri: str, *, subscribe: bool) -> None:
        """See :meth:`McpConnection.subscribe` and :meth:`McpConnection.unsubscribe`."""
        method = "resources/subscribe" if subscribe else "resources/unsubscribe"
        client = await self._request(method, uri, _itself)
        capability = client.server_capabilities.resources
        if capability is None or not capability.subscribe:
            raise McpRequestError(
                f"MCP server '{self._name}' does not support resource subscriptions",
                server=self._name,
                method=method,
            )
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
            await self._request(method, uri, lambda c: _send(c, request))
            if subscribe:
                self._subscribed[uri] = None
            else:
                self._subscribed.pop(uri, None)
            return
        # 2026-07-28: the connection's watcher listens again with the new set.
        before = dict(self._subscribed)
        if subscribe:
            self._subscribed[uri] = None
        else:
            self._subscribed.pop(uri, None)
        if self._subscribed == before:
            return
        listening = self._pending
        self._changed.set()

        async def confirmed(_client: Client) -> None:
            await listening.done.wait()

        await self._request(method, uri, confirmed)
        if listening.error is not None:
            if subscribe:  # nothing is subscribed on the server: keep the set as it was
                self._subscribed.pop(uri, None)
            else:
                self._subscribed[uri] = None
            raise McpRequestError(
                self._redactor.text(f"MCP server '{self._name}' refused {method} {uri!r}: ")
                + listening.error,
                server=self._name,
                method=method,
            )

    def updated(self, uri: str) -> None:
        """The server said the resource at ``uri`` changed (from the message handler)."""
        if self._options().on_resource_updated is None:
            return
        send, _ = self._updates
        send.send_nowait(uri)

    async def watch(
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
        _, receive = self._updates
        while True:
            uri = await receive.receive()
            hook = self._options().on_resource_updated
            if hook is None:
                continue
            try:
                await call_hook(hook, uri)
            except Exception:
                log.exception("MCP server %r: on_resource_updated failed", self._name)

    async def _renew_subscriptions(self, client: Client) -> None:
        for uri in list(self._subscribed):
            request = mcp_types.SubscribeRequest(params=mcp_types.SubscribeRequestParams(uri=uri))
            try:
                await _send(client, request)
            except Exception as error:
                log.warning(
                    "MCP server %r: cannot subscribe to %r again: %s",
                    self._name,
                    uri,
                    self._redactor.text(str(error)),
                )

    async def _hold_listen(
        self, client: Client, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen for updates of the subscribed URIs; listen again whenever they change.

        Reports ``started`` once the first stream is open (or failed to open).
        """
        listening = self._pending
        started = False

        def opened() -> None:
            nonlocal started
            listening.done.set()
            if not started:
                started = True
                task_status.started()

        try:
            while True:
                listening = self._pending
                self._pending = _Listening()
                changed = self._changed = trio.Event()
                uris = tuple(self._subscribed)
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
                    listening.error = self._redactor.text(text or type(error).__name__)
                    opened()
                    log.warning(
                        "MCP server %r: cannot listen for resource updates: %s",
                        self._name,
                        listening.error,
                    )
                await changed.wait()
        finally:
            for waiting in (listening, self._pending):
                if not waiting.done.is_set():
                    waiting.error = "the connection ended before the server confirmed it"
                    waiting.done.set()
            self._pending = _Listening()  # for the next connection's watcher

    async def _drain_until(self, subscription: Any, changed: trio.Event) -> None:
        """Read the listen stream (its updates reach the message handler too) until ``changed``."""
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                try:
                    async for _event in subscription:
                        pass
                    why = "the server closed it"
                except Exception as error:
                    why = self._redactor.text(str(error))
                log.warning(
                    "MCP server %r: the resource update stream ended (%s); "
                    "it is opened again at the next subscribe() or unsubscribe()",
                    self._name,
                    why,
                )
                nursery.cancel_scope.cancel()

            nursery.start_soon(drain)
            await changed.wait()
            nursery.cancel_scope.cancel()

    # ----------------------------------------------------------------- prompts

    async def list_prompts(self) -> list[McpPrompt]:
        """See :meth:`McpConnection.list_prompts`."""
        listed = await self._pages(
            "prompts/list",
            lambda c, cursor: c.list_prompts(cursor=cursor, cache_mode="bypass"),
            "prompts",
        )
        return [
            McpPrompt(
                name=p.name,
                title=p.title,
                description=self._redact(p.description),
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
        """See :meth:`McpConnection.get_prompt`."""
        args = None if arguments is None else {str(k): str(v) for k, v in arguments.items()}
        result: mcp_types.GetPromptResult = await self._request(
            "prompts/get", name, lambda c: c.get_prompt(name, args)
        )
        limit = self._options().max_result_bytes
        messages: list[Message] = []
        for message in result.messages:
            content = capped([prompt_block(message.content, self._redactor)], limit)
            if message.role == "assistant":
                blocks = [assistant_block(block) for block in content]
                messages.append(AssistantMessage(blocks, stop_reason=StopReason.STOP))
            else:
                messages.append(UserMessage(content))
        return messages


async def _itself(client: Client) -> Client:
    await trio.lowlevel.checkpoint()
    return client


async def _send(client: Client, request: Any) -> mcp_types.EmptyResult:
    """Send a request the client has no method for; its answer is empty."""
    return await client.session.send_request(request, mcp_types.EmptyResult)
