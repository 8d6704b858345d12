"""An agent served as an MCP server: one tool, ``run_agent``, that runs it on a prompt.

:func:`serve_agent` serves a factory of :class:`~agentloop.Agent` over stdio
or streamable HTTP with the official MCP SDK's low-level ``Server``. The SDK
is written on anyio, so it runs under trio as it is: its task groups are trio
nurseries and its cancel scopes trio's, so the run of a tool call is a child of
the request that asked for it.

What a call does (:class:`_AgentService`):

- ``run_agent(prompt, conversation_id?)`` runs a new agent (the factory's)
  on the prompt, or, with the ``conversation_id`` an earlier call returned,
  the same agent again, so it sees that conversation's history. Conversations
  belong to the MCP session that started them (on HTTP, its
  ``Mcp-Session-Id``); the oldest idle one is forgotten past
  ``max_conversations``.
- With a progress token, the first ``notifications/progress`` names the
  conversation (``conversation: ID``, so a client that cancels the call can
  still continue it), and each assistant text and each tool start and end is
  one more, whose message says it (:func:`progress_text`).
- ``notifications/cancelled`` aborts the run (``Agent.abort``): every tool call
  still gets its one result (bash's process group is killed), so the
  conversation can go on; a run that does not end within
  :data:`ABORT_GRACE` seconds is cancelled outright.
- A permission ``ask`` is an ``elicitation/create`` request to the client
  (one boolean, ``approve``) when the client declared elicitation; otherwise
  the agent's own approver decides, and without one the call is refused.
- The result: the answer as text, and ``structuredContent`` (``answer``,
  ``stop_reason``, ``conversation_id``, ``usage``) under the tool's
  ``outputSchema``; ``isError`` when the run ended in an error.

The server speaks the handshake protocol revisions (``initialize``, 2024-11-05
to 2025-11-25): a run asks the client questions in the middle of a call, which
needs a connection the server can send requests on. It answers the 2026-07-28
``server/discover`` probe with "method not found", so clients that probe fall
back to the handshake (the SDKs do).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import attrs
import mcp_types as types
import trio
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from .. import _events as ev
from .._agent import Agent
from .._approval import Decision, Deferred
from .._tool import PermissionRequest
from .._types import AssistantMessage
from .._util import call_hook
from ._base import public

__all__ = [
    "ABORT_GRACE",
    "AgentFactory",
    "OUTPUT_SCHEMA",
    "ServeOptions",
    "build_server",
    "progress_text",
]

logger = logging.getLogger("agentloop.mcp.serve")

#: What :func:`serve_agent` serves: called for each new conversation, it returns
#: the agent (plain or async).
AgentFactory = Callable[[], "Agent | Awaitable[Agent]"]

#: Seconds a cancelled call's run has to end after ``Agent.abort()`` (its tools
#: get their results, bash's process group is killed) before it is cancelled outright.
ABORT_GRACE = 10.0

_USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        name: {"type": "integer"}
        for name in ("input", "output", "cache_read", "cache_write", "total_tokens")
    },
    "required": ["input", "output", "cache_read", "cache_write", "total_tokens"],
}

#: The ``outputSchema`` of the tool: what its ``structuredContent`` holds.
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "The agent's last text."},
        "stop_reason": {
            "type": "string",
            "enum": [kind.value for kind in ev.StopKind],
            "description": "Why the run ended (agentloop's StopKind).",
        },
        "stop_message": {"type": "string", "description": "The stop, in a sentence."},
        "conversation_id": {
            "type": "string",
            "description": "Pass it to run_agent again to continue this conversation.",
        },
        "usage": _USAGE_SCHEMA,
    },
    "required": ["answer", "stop_reason", "stop_message", "conversation_id", "usage"],
}

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": "What to ask the agent."},
        "conversation_id": {
            "type": "string",
            "description": "Continue the conversation an earlier call returned "
            "(its conversation_id); leave it out to start a new one.",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}

_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Let the agent make this tool call.",
        }
    },
    "required": ["approve"],
}


@public
@attrs.frozen(kw_only=True)
class ServeOptions:
    """How :func:`serve_agent` presents the agent.

    Attributes:
        name: The server's name (``serverInfo.name``).
        tool_name: The tool's name.
        description: The tool's description, for the client's model.
        max_conversations: How many conversations are kept; past it, the
            least recently used idle one is forgotten.
    """

    name: str = "agentloop"
    tool_name: str = "run_agent"
    description: str = (
        "Run an agent on a prompt: it may use its tools, and answers when it is done. "
        "Pass the conversation_id of an earlier answer to continue that conversation."
    )
    max_conversations: int = attrs.field(default=64)

    @max_conversations.validator
    def _check(self, attribute: attrs.Attribute[int], value: int) -> None:
        if value < 1:
            raise ValueError(f"max_conversations must be 1 or more, got {value!r}")


def progress_text(event: ev.AgentEvent) -> str | None:
    """The progress message that tells ``event``, or None for events not told.

    ``text: ...`` for an assistant message's text (once the message ends),
    ``tool start: NAME ARGS`` (the arguments as JSON, cut at 200 characters)
    and ``tool end: NAME OUTCOME`` (``ok``, ``error``, ``denied``,
    ``cancelled``...).

    >>> from agentloop import ToolExecutionEnd, ToolResult
    >>> progress_text(ToolExecutionEnd(loop_id="a.1", tool_call_id="c1", tool_name="bash",
    ...     result=ToolResult.text("hi"), is_error=False))
    'tool end: bash ok'
    """
    if isinstance(event, ev.MessageEnd) and isinstance(event.message, AssistantMessage):
        text = event.message.text
        return f"text: {text}" if text else None
    if isinstance(event, ev.ToolExecutionStart):
        args = json.dumps(event.args, ensure_ascii=False, default=str)
        if len(args) > 200:
            args = args[:199] + "\u2026"
        return f"tool start: {event.tool_name} {args}"
    if isinstance(event, ev.ToolExecutionEnd):
        return f"tool end: {event.tool_name} {event.outcome.value}"
    return None


@attrs.define(eq=False)
class _Conversation:
    id: str
    owner: str | None  # the MCP session it belongs to (None: stdio, one client)
    agent: Agent
    request: ServerRequestContext[Any, Any] | None = None  # the call running it
    aborting: bool = False  # that call was cancelled: its run is being aborted
    idle: trio.Event = attrs.field(factory=trio.Event)  # set when that run has ended


def _owner(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """The MCP session of a request: its ``Mcp-Session-Id`` on HTTP, None on stdio."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return None
    value = headers.get("mcp-session-id")
    return value if isinstance(value, str) else None


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _can_elicit(ctx: ServerRequestContext[Any, Any]) -> bool:
    capabilities = ctx.session.client_capabilities
    return (
        capabilities is not None
        and capabilities.elicitation is not None
        and ctx.session.can_send_request
    )


class _AgentService:
    """The tool's handlers, and the conversations they keep."""

    def __init__(self, factory: AgentFactory, options: ServeOptions) -> None:
        self.factory = factory
        self.options = options
        self.conversations: OrderedDict[str, _Conversation] = OrderedDict()

    def tool(self) -> types.Tool:
        return types.Tool(
            name=self.options.tool_name,
            description=self.options.description,
            input_schema=_INPUT_SCHEMA,
            output_schema=OUTPUT_SCHEMA,
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[self.tool()])

    async def refuse_discover(
        self, ctx: ServerRequestContext[Any, Any], params: types.RequestParams | None
    ) -> types.EmptyResult:
        raise MCPError(code=types.METHOD_NOT_FOUND, message="Method not found", data=ctx.method)

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        if params.name != self.options.tool_name:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        arguments = params.arguments or {}
        prompt = arguments.get("prompt")
        conversation_id = arguments.get("conversation_id")
        unknown = sorted(set(arguments) - {"prompt", "conversation_id"})
        if unknown:
            return _error(f"Invalid arguments: unknown argument {unknown[0]!r}")
        if not isinstance(prompt, str) or not prompt.strip():
            return _error("Invalid arguments: prompt must be a non-empty string")
        if conversation_id is not None and not isinstance(conversation_id, str):
            return _error("Invalid arguments: conversation_id must be a string")
        if conversation_id is None:
            conversation = await self._start(ctx)
        else:
            found = self.conversations.get(conversation_id)
            if found is None or found.owner != _owner(ctx):
                return _error(
                    f"Unknown conversation: {conversation_id} (leave conversation_id out "
                    "to start a new one)"
                )
            if found.request is not None and found.aborting:
                await found.idle.wait()  # a cancelled run: it ends within ABORT_GRACE
            if found.request is not None:
                return _error(f"The conversation {conversation_id} is running another prompt")
            conversation = found
            self.conversations.move_to_end(conversation.id)
        return await self._run(conversation, prompt, ctx)

    async def _start(self, ctx: ServerRequestContext[Any, Any]) -> _Conversation:
        agent = await call_hook(self.factory)
        if not isinstance(agent, Agent):
            raise TypeError(f"the agent factory returned {agent!r}, not an Agent")
        conversation = _Conversation(uuid.uuid4().hex, _owner(ctx), agent)
        permissions = agent.config.permissions
        if permissions is not None:
            fallback = permissions.approver
            approver = partial(
                self._approve, conversation, None if isinstance(fallback, Deferred) else fallback
            )
            agent.config = attrs.evolve(
                agent.config, permissions=attrs.evolve(permissions, approver=approver)
            )
        self.conversations[conversation.id] = conversation
        idle = [c.id for c in self.conversations.values() if c.request is None]
        while len(self.conversations) > self.options.max_conversations and idle:
            del self.conversations[idle.pop(0)]
        return conversation

    async def _approve(
        self,
        conversation: _Conversation,
        fallback: Callable[[PermissionRequest], Any] | None,
        request: PermissionRequest,
    ) -> bool | Decision | Deferred:
        """A permission ask: the client's user when it takes elicitation, else ``fallback``."""
        ctx = conversation.request
        if ctx is not None and _can_elicit(ctx):
            result = await ctx.session.elicit_form(
                f"The agent asks to run {request.reason.partition(' needs approval')[0]}. "
                "Approve this tool call?",
                _APPROVAL_SCHEMA,
                related_request_id=ctx.request_id,
            )
            if result.action == "accept":
                if (result.content or {}).get("approve") is True:
                    return True
                return request.deny(f"{request.reason}: the user did not approve it")
            return request.deny(f"{request.reason}: the user {result.action}ed the question")
        if fallback is not None:
            answer: bool | Decision | Deferred = await call_hook(fallback, request)
            return answer
        return request.deny(
            f"{request.reason}, and the MCP client cannot be asked (it takes no elicitation)"
        )

    async def _run(
        self, conversation: _Conversation, prompt: str, ctx: ServerRequestContext[Any, Any]
    ) -> types.CallToolResult:
        """Run the prompt; a cancelled request aborts the run softly (see the module)."""
        conversation.request = ctx
        conversation.idle = trio.Event()
        agent = conversation.agent
        end: ev.AgentEnd | None = None
        telling = True  # progress goes out until the request is cancelled or cannot be told
        step = 1
        done = trio.Event()
        try:
            await ctx.session.report_progress(step, None, f"conversation: {conversation.id}")
        except Exception as error:  # the client left
            logger.debug("progress cannot be sent: %r", error)
            telling = False

        async def drive() -> None:
            nonlocal end, telling, step
            top: str | None = None  # the run's loop (a sub-agent's events have their own)
            try:
                async with agent.prompt(prompt) as events:
                    async for event in events:
                        top = top or event.loop_id
                        if isinstance(event, ev.AgentEnd) and event.loop_id == top:
                            end = event
                        message = progress_text(event) if telling else None
                        if message is None:
                            continue
                        step += 1
                        try:
                            await ctx.session.report_progress(step, None, message)
                        except Exception as error:  # the client left: the run goes on
                            logger.debug("progress cannot be sent: %r", error)
                            telling = False
            finally:
                done.set()

        try:
            async with trio.open_nursery() as nursery:
                # The run is shielded from the request's cancellation: that aborts
                # it instead (below), so every call gets its result.
                run_scope = trio.CancelScope(shield=True)

                async def shielded() -> None:
                    with run_scope:
                        await drive()

                nursery.start_soon(shielded)
                try:
                    await done.wait()
                except trio.Cancelled:
                    telling = False
                    conversation.aborting = True
                    agent.abort()
                    with trio.move_on_after(ABORT_GRACE, shield=True):
                        await done.wait()
                    run_scope.cancel()
                    raise
        finally:
            conversation.request = None
            conversation.aborting = False
            conversation.idle.set()
        if end is None:  # pragma: no cover - a run always ends with AgentEnd
            return _error("The run ended without an end")
        return _result(conversation.id, end)


def _result(conversation_id: str, end: ev.AgentEnd) -> types.CallToolResult:
    answer = ""
    for message in reversed(end.messages):
        if isinstance(message, AssistantMessage) and message.text:
            answer = message.text
            break
    stop = end.stop_reason
    usage = end.usage
    structured = {
        "answer": answer,
        "stop_reason": stop.kind.value,
        "stop_message": stop.message,
        "conversation_id": conversation_id,
        "usage": {
            "input": usage.input,
            "output": usage.output,
            "cache_read": usage.cache_read,
            "cache_write": usage.cache_write,
            "total_tokens": usage.total_tokens,
        },
    }
    text = answer
    if not stop.completed:
        said = stop.message or stop.kind.value
        text = f"{answer}\n\n[the run stopped: {said}]" if answer else f"[the run stopped: {said}]"
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
        is_error=stop.kind is ev.StopKind.ERROR,
    )


def build_server(factory: AgentFactory, options: ServeOptions | None = None) -> Server[Any]:
    """The MCP SDK ``Server`` that serves agents of ``factory`` (see the module).

    Run it with :func:`serve_agent`, or yourself (``server.streamable_http_app()``
    in your own ASGI application, say).
    """
    service = _AgentService(factory, options or ServeOptions())
    server: Server[Any] = Server(
        service.options.name,
        version=_version(),
        on_list_tools=service.list_tools,
        on_call_tool=service.call_tool,
    )
    server.add_request_handler("server/discover", types.RequestParams, service.refuse_discover)
    return server


def _version() -> str:
    from .. import __version__

    return __version__
