"""The agent side of ACP: sessions, prompts, permissions, cancellation, modes.

:func:`serve_acp` answers a client (an editor) on a pair of trio streams. A
:class:`AcpAgentSetup` makes each session's :class:`~agentloop.Agent`; the
server turns the agent's events into ``session/update`` notifications, its
permission questions into ``session/request_permission`` requests, and
``session/cancel`` into :meth:`Agent.abort() <agentloop.Agent.abort>`. Every
session lives in a task of its own (so what it opens, MCP servers for one,
closes in the task that opened it) until the connection ends.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from .. import __version__
from .. import _events as ev
from .._agent import Agent
from .._tool import Answer, PermissionRequest
from .._types import (
    AssistantMessage,
    StopReason,
    ToolCall,
    UserMessage,
)
from ._rpc import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    RESOURCE_NOT_FOUND,
    Connection,
    PeerGone,
    RpcError,
)
from ._updates import STOP_REASONS, tool_call_start, tool_call_title, tool_content, tool_kind

__all__ = ["PROTOCOL_VERSION", "AcpAgentSetup", "AcpMode", "AcpSession", "serve_acp"]

#: The ACP protocol version spoken (the official schema's ``PROTOCOL_VERSION``).
PROTOCOL_VERSION = 1


@attrs.frozen
class AcpMode:
    """A session mode the client may switch to (``session/set_mode``)."""

    id: str
    name: str
    description: str = ""


@attrs.define(eq=False, kw_only=True)
class AcpSession:
    """One ACP session, as the setup sees it when it makes or changes the agent.

    Attributes:
        session_id: The id the client knows the session by.
        cwd: The session's working directory (absolute; the client's).
        mode: The current mode's id.
        mcp_servers: The MCP servers the client passed, as an ``mcpServers``
            configuration (``{"mcpServers": {name: {...}}}``), or None.
        client_capabilities: What the client said it offers (``fs``, ``terminal``).
        stack: Closed when the session ends, in the session's own task: enter
            what the session keeps open (MCP servers) here.
        approver: The permission approver that asks the client
            (``session/request_permission``); give it to the agent's
            :class:`~agentloop.Permissions`.
        state: Free for the setup's own use.
    """

    session_id: str
    cwd: Path
    mode: str
    mcp_servers: dict[str, Any] | None
    client_capabilities: dict[str, Any]
    stack: contextlib.AsyncExitStack
    approver: Callable[[PermissionRequest], Any]
    #: Send a request to the client and wait for its result (raises ``RpcError``).
    request: Callable[[str, Any], Awaitable[Any]]
    state: dict[str, Any] = attrs.field(factory=dict)
    #: The old and new text of files the calls changed, by call id (see ``Diffing``).
    diffs: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    agent: Agent | None = None
    allowed: set[tuple[str, str | None]] = attrs.field(factory=set)
    running: bool = False
    closed: trio.Event = attrs.field(factory=trio.Event)


class AcpAgentSetup(Protocol):
    """What :func:`serve_acp` needs to make the agents of its sessions."""

    #: The modes a session may be in. Empty: no modes.
    modes: Sequence[AcpMode]
    #: The mode a session starts in.
    default_mode: str

    def new_session_id(self) -> str:
        """A fresh session id."""
        ...

    async def new_session(self, session: AcpSession) -> Agent:
        """The agent of a new session (called in the session's task).

        Raises:
            AgentloopError: the session cannot be set up (the client is told why).
        """
        ...

    async def set_mode(self, session: AcpSession, agent: Agent) -> None:
        """Apply ``session.mode`` (just changed) to the idle ``agent``."""
        ...

    async def load_session(self, session: AcpSession, agent: Agent, session_id: str) -> None:
        """Load the saved session ``session_id`` into the new session's idle ``agent``.

        Raises:
            LookupError: there is no such session.
        """
        ...

    def journal(self, session: AcpSession) -> None:
        """Called before each prompt runs (the setup may start recording)."""
        ...


def _log(text: str) -> None:
    print(f"agentloop acp: {text}", file=sys.stderr, flush=True)


def _param(params: Any, name: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: expected an object")
    value = params.get(name)
    if not isinstance(value, kind):
        raise RpcError(INVALID_PARAMS, f"Invalid params: {name!r} is missing or of the wrong type")
    return value


def _mcp_config(servers: list[Any]) -> dict[str, Any] | None:
    """The client's MCP servers (ACP's list) as an ``mcpServers`` configuration."""
    config: dict[str, Any] = {}
    for server in servers:
        if not isinstance(server, dict) or not isinstance(server.get("name"), str):
            raise RpcError(INVALID_PARAMS, "Invalid params: an MCP server without a name")
        name = server["name"]
        pairs = server.get("env") if "command" in server else server.get("headers")
        values = {
            str(pair.get("name")): str(pair.get("value"))
            for pair in pairs or ()
            if isinstance(pair, dict)
        }
        if "command" in server:
            config[name] = {
                "command": server["command"],
                "args": list(server.get("args") or ()),
                "env": values,
            }
        elif server.get("type") == "http":
            config[name] = {"url": server.get("url"), "headers": values}
        else:
            raise RpcError(
                INVALID_PARAMS, f"Invalid params: MCP server {name!r}: only stdio and http"
            )
    return {"mcpServers": config} if config else None


def prompt_text(blocks: Any) -> str:
    """A prompt's content blocks as the text the model reads.

    Text is taken as it is; a resource link as its name and URI; an embedded
    text resource as its text, marked with its URI.

    Raises:
        RpcError: a block of a type not handled (images, audio, binary resources).
    """
    if not isinstance(blocks, list) or not blocks:
        raise RpcError(INVALID_PARAMS, "Invalid params: 'prompt' is a list of content blocks")
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "resource_link":
            parts.append(f"[{block.get('name', '')}]({block.get('uri', '')})")
        elif kind == "resource":
            resource = block.get("resource") or {}
            if "text" not in resource:
                raise RpcError(INVALID_PARAMS, "Invalid params: binary resources are not handled")
            uri = resource.get("uri", "")
            parts.append(f'<resource uri="{uri}">\n{resource["text"]}\n</resource>')
        else:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {kind!r} content is not handled")
    return "\n\n".join(parts)


class _Server:
    def __init__(self, setup: AcpAgentSetup, nursery: trio.Nursery) -> None:
        self.setup = setup
        self.nursery = nursery
        self.sessions: dict[str, AcpSession] = {}
        self.client_capabilities: dict[str, Any] = {}
        self.connection: Connection | None = None

    @property
    def conn(self) -> Connection:
        assert self.connection is not None
        return self.connection

    # ----------------------------------------------------------------- dispatch

    async def on_request(self, method: str, params: Any) -> Any:
        if method == "initialize":
            return self.initialize(params)
        if method == "session/new":
            return await self.new_session(params)
        if method == "session/load":
            return await self.load_session(params)
        if method == "session/prompt":
            return await self.prompt(params)
        if method == "session/set_mode":
            return await self.set_mode(params)
        if method == "authenticate":
            return {}
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    async def on_notification(self, method: str, params: Any) -> None:
        if method == "session/cancel":
            session = self.session(params)
            if session.agent is not None and session.running:
                session.agent.abort()
        elif not method.startswith("$/"):
            _log(f"an unknown notification: {method}")

    def session(self, params: Any) -> AcpSession:
        session_id = _param(params, "sessionId", str)
        session = self.sessions.get(session_id)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: no session {session_id!r}")
        return session

    # ----------------------------------------------------------------- methods

    def initialize(self, params: Any) -> dict[str, Any]:
        _param(params, "protocolVersion", int)
        capabilities = params.get("clientCapabilities")
        self.client_capabilities = capabilities if isinstance(capabilities, dict) else {}
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                "mcpCapabilities": {"http": True, "sse": False},
            },
            "authMethods": [],
            "agentInfo": {"name": "agentloop", "title": "agentloop", "version": __version__},
        }

    def _modes(self, session: AcpSession) -> dict[str, Any] | None:
        if not self.setup.modes:
            return None
        return {
            "currentModeId": session.mode,
            "availableModes": [
                {"id": mode.id, "name": mode.name, "description": mode.description}
                for mode in self.setup.modes
            ],
        }

    async def _open(self, params: Any, session_id: str) -> AcpSession:
        cwd = Path(_param(params, "cwd", str))
        if not cwd.is_absolute():
            raise RpcError(INVALID_PARAMS, f"Invalid params: cwd must be absolute: {cwd}")
        if not await trio.Path(cwd).is_dir():
            raise RpcError(INVALID_PARAMS, f"Invalid params: not a directory: {cwd}")
        servers = _mcp_config(_param(params, "mcpServers", list))
        session = AcpSession(
            session_id=session_id,
            cwd=Path(await trio.Path(cwd).resolve()),
            mode=self.setup.default_mode,
            mcp_servers=servers,
            client_capabilities=self.client_capabilities,
            stack=contextlib.AsyncExitStack(),
            approver=lambda request: self._approve(session, request),
            request=self.conn.request,
        )
        try:
            await self.nursery.start(self._live, session)
        except RpcError:
            raise
        except Exception as error:
            raise RpcError(-32603, f"the session cannot be set up: {error}") from error
        return session

    async def _live(self, session: AcpSession, *, task_status: trio.TaskStatus[None]) -> None:
        """The session's task: what it opened stays open until the connection ends."""
        async with session.stack:
            session.agent = await self.setup.new_session(session)
            self.sessions[session.session_id] = session
            task_status.started()
            await session.closed.wait()

    async def new_session(self, params: Any) -> dict[str, Any]:
        session = await self._open(params, self.setup.new_session_id())
        response: dict[str, Any] = {"sessionId": session.session_id}
        modes = self._modes(session)
        if modes is not None:
            response["modes"] = modes
        return response

    async def load_session(self, params: Any) -> dict[str, Any]:
        wanted = _param(params, "sessionId", str)
        if wanted in self.sessions:
            raise RpcError(INVALID_PARAMS, f"Invalid params: session {wanted!r} is open already")
        session = await self._open(params, wanted)
        assert session.agent is not None
        try:
            await self.setup.load_session(session, session.agent, wanted)
        except LookupError as error:
            self.sessions.pop(session.session_id, None)
            session.closed.set()
            raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: {error}") from None
        from ._updates import replay

        for update in replay(session.cwd, session.agent.messages):
            await self._update(session, update)
        modes = self._modes(session)
        return {} if modes is None else {"modes": modes}

    async def set_mode(self, params: Any) -> dict[str, Any]:
        session = self.session(params)
        mode = _param(params, "modeId", str)
        if mode not in {m.id for m in self.setup.modes}:
            raise RpcError(INVALID_PARAMS, f"Invalid params: no mode {mode!r}")
        if session.running:
            raise RpcError(INVALID_PARAMS, "the mode changes between prompts, not during one")
        session.mode = mode
        assert session.agent is not None
        await self.setup.set_mode(session, session.agent)
        await self._update(session, {"sessionUpdate": "current_mode_update", "currentModeId": mode})
        return {}

    # ----------------------------------------------------------------- prompts

    async def _update(self, session: AcpSession, update: dict[str, Any]) -> None:
        await self.conn.notify(
            "session/update", {"sessionId": session.session_id, "update": update}
        )

    async def _approve(self, session: AcpSession, request: PermissionRequest) -> Answer:
        """Ask the client about a call (allow once / allow always / reject)."""
        key = (request.tool_name, request.subject[1] if request.subject else None)
        if key in session.allowed or (request.tool_name, None) in session.allowed:
            return True
        always = (
            f"Always allow {request.tool_name} {key[1]!r} in this session"
            if request.subject is not None and request.subject[0] == "command"
            else f"Always allow {request.tool_name} in this session"
        )
        tool_call = {
            "toolCallId": request.tool_call_id,
            "title": tool_call_title(request.tool_name, request.arguments),
            "kind": tool_kind(request.tool_name),
            "status": "pending",
            "rawInput": request.arguments,
        }
        try:
            result = await self.conn.request(
                "session/request_permission",
                {
                    "sessionId": session.session_id,
                    "toolCall": tool_call,
                    "options": [
                        {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "allow_always", "name": always, "kind": "allow_always"},
                        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
                    ],
                },
            )
        except (RpcError, PeerGone) as error:
            return request.deny(f"the editor did not answer: {error}")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        chosen = outcome.get("optionId") if isinstance(outcome, dict) else None
        if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
            if chosen == "allow_once":
                return True
            if chosen == "allow_always":
                if request.subject is not None and request.subject[0] == "command":
                    session.allowed.add(key)
                else:
                    session.allowed.add((request.tool_name, None))
                return True
            if chosen == "reject_once":
                return request.deny("the user refused")
        return request.deny("the request was cancelled")

    async def prompt(self, params: Any) -> dict[str, Any]:
        session = self.session(params)
        text = prompt_text(params.get("prompt"))
        agent = session.agent
        assert agent is not None
        if session.running:
            raise RpcError(INVALID_PARAMS, "a prompt is already running in this session")
        session.running = True
        self.setup.journal(session)
        root: str | None = None
        end: ev.AgentEnd | None = None
        last: AssistantMessage | None = None
        refused: set[str] = set()  # calls refused before they started: never in progress
        try:
            async with agent.prompt(UserMessage.text(text)) as events:
                async for event in events:
                    if isinstance(event, ev.AgentStart) and root is None:
                        root = event.loop_id
                    if event.loop_id != root:
                        continue  # a sub-agent's events: its tool call stands for it
                    await self._show(session, event, refused)
                    if isinstance(event, ev.AgentEnd):
                        end = event
                    elif isinstance(event, ev.MessageEnd) and isinstance(
                        event.message, AssistantMessage
                    ):
                        last = event.message
        finally:
            session.running = False
        if (
            last is not None
            and last.stop_reason is StopReason.ERROR
            and (end is None or end.stop_reason.kind is ev.StopKind.ERROR)
        ):
            raise RpcError(-32603, f"the model failed: {last.error_message or 'an error'}")
        if end is None:
            return {"stopReason": "cancelled"}
        kind = end.stop_reason.kind
        if kind is ev.StopKind.ERROR:
            raise RpcError(-32603, f"the run failed: {end.stop_reason.message}")
        if last is not None and last.stop_reason is StopReason.LENGTH:
            return {"stopReason": "max_tokens"}
        if last is not None and last.stop_reason is StopReason.REFUSAL:
            return {"stopReason": "refusal"}
        return {"stopReason": STOP_REASONS.get(kind, "end_turn")}

    async def _show(self, session: AcpSession, event: ev.AgentEvent, refused: set[str]) -> None:
        match event:
            case ev.ToolApprovalDecided(tool_call_id=call_id, approved=False):
                refused.add(call_id)
            case ev.MessageUpdate(delta=ev.TextDelta(delta=text)) if text:
                await self._update(
                    session,
                    {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {"type": "text", "text": text},
                    },
                )
            case ev.MessageUpdate(delta=ev.ThinkingDelta(delta=text)) if text:
                await self._update(
                    session,
                    {
                        "sessionUpdate": "agent_thought_chunk",
                        "content": {"type": "text", "text": text},
                    },
                )
            case ev.MessageEnd(message=AssistantMessage(content=content)):
                for block in content:
                    if isinstance(block, ToolCall):
                        await self._update(
                            session,
                            tool_call_start(session.cwd, block.id, block.name, block.arguments),
                        )
            case ev.ToolExecutionStart(tool_call_id=call_id) if call_id not in refused:
                await self._update(
                    session,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "in_progress",
                    },
                )
            case ev.ToolExecutionUpdate(tool_call_id=call_id, partial_result=partial):
                await self._update(
                    session,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "content": tool_content(partial),
                    },
                )
            case ev.ToolExecutionEnd(tool_call_id=call_id, result=result, is_error=failed):
                await self._update(
                    session,
                    {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": call_id,
                        "status": "failed" if failed else "completed",
                        "content": tool_content(result, session.diffs.pop(call_id, None)),
                    },
                )
            case _:
                pass


async def serve_acp(
    setup: AcpAgentSetup,
    receive: trio.abc.ReceiveStream,
    send: trio.abc.SendStream,
) -> None:
    """Serve ACP on ``receive`` / ``send`` until the client closes its end.

    Then every prompt still running is cancelled (its tools' processes are
    killed), every session's resources (MCP servers) are closed, and this
    returns. Cancelling it does the same.
    """
    async with trio.open_nursery() as nursery:
        server = _Server(setup, nursery)
        server.connection = Connection(
            receive, send, on_request=server.on_request, on_notification=server.on_notification
        )
        await server.conn.serve()
        for session in server.sessions.values():
            session.closed.set()
        nursery.cancel_scope.cancel()
