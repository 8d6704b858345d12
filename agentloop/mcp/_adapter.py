"""A server's tools as agentloop tools: a :class:`McpToolAdapter` each, in a :class:`ToolList`."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import mcp.types as mcp_types
import trio

from .._tool import (
    NO_CLAIM,
    Claim,
    ToolContext,
    ToolError,
    ToolResult,
    UniqueNames,
    model_tool_name,
)
from .._types import TextContent
from .._util import call_hook, raise_single
from ._base import all_pages, public
from ._config import ServerHost
from ._content import convert_result

if TYPE_CHECKING:
    from mcp import Client


__all__ = ["ADAPT_BATCH", "McpToolAdapter", "ToolList", "adapt_tools"]

log = logging.getLogger("agentloop.mcp")


class ToolHost(ServerHost, Protocol):
    """What an adapter and a :class:`ToolList` need of their connection (an ``McpConnection``)."""

    def offers(self, adapter: McpToolAdapter) -> bool: ...

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        progress: Any = None,
        context: ToolContext | None = None,
    ) -> mcp_types.CallToolResult: ...


def _schema(tool: mcp_types.Tool) -> dict[str, Any]:
    """The tool's input schema, an own copy; an empty object schema if it has none."""
    schema: object = tool.input_schema
    if not isinstance(schema, dict) or not schema:
        return {"type": "object", "properties": {}}
    copied = copy.deepcopy(schema)
    return copied if "type" in copied else {"type": "object", **copied}


def _progress_text(progress: float, total: float | None, message: str | None) -> str:
    if message:
        return message
    if total:
        return f"{progress:g}/{total:g}"
    return f"{progress:g}"


@public
@attrs.frozen(eq=False)
class McpToolAdapter:
    """One tool of an MCP server, callable by the model like any other tool.

    Made by the server's :class:`~agentloop.mcp.McpConnection` (see
    ``connection.tools``); all tools of a server share its connection.

    Attributes:
        name: The name the model sees: ``PREFIX__tool`` with a prefix, made
            valid for model APIs (``[a-zA-Z0-9_-]``, at most 64 characters).
        tool_name: The server's name for the tool, which the server is called with.
        label: The tool's title, else its annotations' title, else its name.
        description: The server's description.
        parameters_schema: The tool's ``inputSchema`` (an empty object schema
            if it has none).
        annotations: The server's hints as a dict (``readOnlyHint``,
            ``destructiveHint``, ``idempotentHint``, ``openWorldHint``,
            ``title``), empty if none.
        output_schema: The schema of its structured content, or None.
        timeout: Seconds a call may take (the connection's ``call_timeout``);
            the loop enforces it, and cancelling the call tells the server.
        replay_safe: Whether a call may run again after a crash (see
            :class:`~agentloop.AgentTool`): ``replay`` if set, else whether
            the server hints the tool is read-only or idempotent.

    What a call claims, for the scheduler (:meth:`resources`), follows the
    server's hints too, with the key ``"mcp:<server name>"``: a read-only tool
    reads it, a destructive one writes it (so it waits for, and holds off, the
    server's other read-only and destructive calls), unless the connection's
    ``destructive_exclusive`` is False; a tool with neither hint claims nothing.

    A call's result maps the server's content (see
    :func:`~agentloop.mcp.open_mcp`); ``details`` has ``structured`` (the
    structured content) and ``content`` (data of audio, links and non-image
    blobs) when there are any. A result the server marks ``isError`` is an
    error result with the server's text. Progress notifications become
    ``ProgressMessage`` events and ``ToolExecutionUpdate`` events whose
    details are ``{"progress", "total", "message"}``.
    """

    connection: ToolHost = attrs.field(repr=False)
    tool_name: str
    name: str
    label: str = attrs.field(repr=False)
    description: str = attrs.field(repr=False)
    parameters_schema: dict[str, Any] = attrs.field(repr=False)
    annotations: dict[str, Any] = attrs.field(factory=dict, repr=False)
    output_schema: dict[str, Any] | None = attrs.field(default=None, repr=False)
    #: Overrides the server's hints for ``replay_safe`` (``attrs.evolve(tool, replay=True)``).
    replay: bool | None = attrs.field(default=None, kw_only=True, repr=False)

    @classmethod
    def from_tool(cls, connection: ToolHost, tool: mcp_types.Tool, name: str) -> McpToolAdapter:
        """The adapter for ``tool`` as the server listed it, named ``name``."""
        annotations = (
            {}
            if tool.annotations is None
            else tool.annotations.model_dump(mode="json", by_alias=True, exclude_none=True)
        )
        label = tool.title or annotations.get("title") or tool.name
        return cls(
            connection,
            tool.name,
            name,
            label,
            tool.description or "",
            _schema(tool),
            annotations,
            tool.output_schema,
        )

    def same_definition(self, other: McpToolAdapter) -> bool:
        """Whether ``other`` is the same tool of the same server, defined the same way."""
        return self.connection is other.connection and _definition(self) == _definition(other)

    @property
    def timeout(self) -> float | None:
        """Seconds a call may take (the connection's ``call_timeout``); None for no limit."""
        return self.connection.config.call_timeout

    @property
    def replay_safe(self) -> bool:
        """Whether a call may run again after a crash: ``replay``, else the server's hints."""
        if self.replay is not None:
            return self.replay
        hints = self.annotations
        return hints.get("readOnlyHint") is True or hints.get("idempotentHint") is True

    @property
    def read_only(self) -> bool:
        """Whether the server says the tool does not change anything (``readOnlyHint``)."""
        return self.annotations.get("readOnlyHint") is True

    def resources(self, params: dict[str, Any]) -> Claim:
        """What a call claims, from the server's hints; the key is ``"mcp:<server name>"``.

        ``readOnlyHint``: ``Claim(reads={key})``. Else ``destructiveHint``:
        ``Claim(writes={key})``, or ``Claim()`` if the connection's
        ``destructive_exclusive`` is False. Neither hint: ``Claim()``.
        """
        if self.read_only:
            return Claim(reads={f"mcp:{self.connection.name}"})
        destructive = self.annotations.get("destructiveHint") is True
        if destructive and self.connection.config.destructive_exclusive:
            return Claim(writes={f"mcp:{self.connection.name}"})
        return NO_CLAIM

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call the tool on the server; see the class docstring.

        Raises:
            ToolError: the server is gone, refused the call, or marked the
                result as an error.

        Cancellation: the request is cancelled on the server too.
        """
        if not self.connection.offers(self):
            raise ToolError(
                f"MCP server '{self.connection.name}' no longer offers the tool '{self.tool_name}'"
            )
        send, receive = trio.open_memory_channel[tuple[float, float | None, str | None]](math.inf)
        reporting = False

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            # Runs in the SDK's task: hand over to a task of this call, which reports in
            # order; it starts at the first notification (most calls send none).
            nonlocal reporting
            try:
                send.send_nowait((progress, total, message))
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                pass  # the call is over
            else:
                if not reporting:
                    reporting = True
                    nursery.start_soon(report)
            await trio.lowlevel.checkpoint()

        async def report() -> None:
            last = -math.inf
            async for first in receive:
                batch = [first]
                while True:
                    try:
                        batch.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                for progress, total, message in sorted(batch, key=lambda item: item[0]):
                    if progress <= last:
                        continue  # the SDK may hand notifications over out of order
                    last = progress
                    if message:
                        message = self.connection.redactor.text(message)
                    text = _progress_text(progress, total, message)
                    await ctx.progress(text)
                    details = {"progress": progress, "total": total, "message": message}
                    await ctx.update(ToolResult.text(text, details=details))

        try:
            async with trio.open_nursery() as nursery:
                try:
                    result = await self.connection.call_tool(
                        self.tool_name, params, progress=on_progress, context=ctx
                    )
                finally:
                    send.close()
        except BaseExceptionGroup as group:
            # The reporter's nursery must not wrap the call's own error (a ToolError
            # naming the server, a Cancelled). A HookFailure from an update hook stays
            # wrapped: it must pass the loop's tool gate as itself.
            raise_single(group, unwrap_hooks=False)
        content, details = convert_result(result, max_bytes=self.connection.config.max_result_bytes)
        # What the server sends back must not carry the credentials sent to it.
        redact = self.connection.redactor
        if redact:
            content = tuple(
                TextContent(redact.text(b.text)) if isinstance(b, TextContent) else b
                for b in content
            )
            details = redact.json(details)
        if result.is_error:
            text = "\n".join(b.text for b in content if isinstance(b, TextContent)) or (
                f"The MCP tool '{self.tool_name}' failed without saying why"
            )
            raise ToolError(text, details=details or None)
        return ToolResult(content, details=details or None)


def _definition(adapter: McpToolAdapter) -> tuple[Any, ...]:
    return (
        adapter.tool_name,
        adapter.name,
        adapter.label,
        adapter.description,
        adapter.parameters_schema,
        adapter.annotations,
        adapter.output_schema,
    )


#: Tools adapted between two checkpoints while a server's listing is read.
ADAPT_BATCH = 100


async def adapt_tools(
    connection: ToolHost,
    listed: Sequence[mcp_types.Tool],
    prefix: str | None,
    previous: Mapping[str, McpToolAdapter],
) -> dict[str, McpToolAdapter]:
    """Adapters for the tools a server listed, by model name; unchanged ones kept as they were.

    Names are ``PREFIX__tool`` made valid for model APIs, made unique in order
    (in time linear in the number of tools, however many share a name). A long
    listing lets other tasks run every :data:`ADAPT_BATCH` tools.

    Cancellation: at those checkpoints; nothing has changed then.
    """
    old = {adapter.tool_name: adapter for adapter in previous.values()}
    tools: dict[str, McpToolAdapter] = {}
    names = UniqueNames()
    for position, tool in enumerate(listed):
        if position and position % ADAPT_BATCH == 0:
            await trio.lowlevel.checkpoint()
        name = names.add(model_tool_name(prefix, tool.name))
        adapter = McpToolAdapter.from_tool(connection, tool, name)
        kept = old.get(tool.name)
        tools[name] = kept if kept is not None and kept.same_definition(adapter) else adapter
    return tools


class ToolList:
    """A server's tools as adapters, kept up to date: the connection's ``tools``.

    Listed (every page) at each connection; listed again when the server says
    the list changed: ``notifications/tools/list_changed``, or on 2026-07-28
    connections an update of a ``subscriptions/listen`` stream. Each time the
    list changed, ``on_tools_changed`` of the connection's options is called.
    A tool that did not change keeps its adapter object.
    """

    def __init__(self, connection: ToolHost) -> None:
        self._connection = connection
        self._tools: dict[str, McpToolAdapter] = {}
        self._refresh = trio.Event()  # the server's tool list changed

    @property
    def tools(self) -> tuple[McpToolAdapter, ...]:
        """The tools in the server's order."""
        return tuple(self._tools.values())

    def offers(self, adapter: McpToolAdapter) -> bool:
        """Whether ``adapter`` is still one of the server's tools."""
        return self._tools.get(adapter.name) is adapter

    def refresh(self) -> None:
        """The server said its tool list changed: list it again (:meth:`watch` does)."""
        self._refresh.set()

    async def load(self, client: Client) -> bool:
        """List every page of the server's tools; whether ``tools`` changed."""
        listed = await all_pages(lambda cursor: client.list_tools(cursor=cursor), "tools")
        return await self.update(listed)

    async def update(self, listed: Sequence[mcp_types.Tool]) -> bool:
        """The tools are ``listed`` from now on; whether ``tools`` changed."""
        connection = self._connection
        tools = await adapt_tools(connection, listed, connection.prefix, self._tools)
        changed = list(tools.values()) != list(self._tools.values())  # by identity (eq=False)
        self._tools = tools
        return changed

    async def changed(self) -> None:
        """Call ``on_tools_changed``; its failure is logged, it does not end the connection."""
        connection = self._connection
        hook = connection.config.on_tools_changed
        if hook is None:
            return
        try:
            await call_hook(hook, connection)
        except Exception:
            log.exception("MCP server %r: on_tools_changed failed", connection.name)

    async def watch(self, client: Client) -> None:
        """For one connection: list the tools again each time the server says they changed."""
        while True:
            await self._refresh.wait()
            self._refresh = trio.Event()
            try:
                changed = await self.load(client)
            except Exception as error:
                log.warning(
                    "MCP server %r: cannot list its tools again: %s",
                    self._connection.name,
                    self._connection.redactor.text(str(error)),
                )
                continue
            if changed:
                await self.changed()

    async def listen(
        self, client: Client, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """On 2026-07-28 connections, list changes come through a subscription.

        Reports ``started`` once subscribed, or once it is clear that it cannot
        be. Older connections get ``notifications/tools/list_changed``, which
        the connection's message handler hands to :meth:`refresh`.
        """
        subscribed = False
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                subscribed = True
                task_status.started()
                async for _event in subscription:
                    self.refresh()
        except Exception as error:  # older protocol, the server declined, or the stream broke
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "MCP server %r: no list-changed subscription: %s",
                    self._connection.name,
                    self._connection.redactor.text(str(error)),
                )
        if not subscribed:
            task_status.started()
