"""An agent behind the AG-UI protocol: an ASGI app that streams a run's events over SSE.

:func:`agui_app` returns the app; :func:`serve_agui` serves it with
Hypercorn's trio worker (no asyncio loop in the process). What a request does:

- A POST of an AG-UI ``RunAgentInput`` (JSON) runs the thread's agent and
  answers with ``text/event-stream``: ``RUN_STARTED``, the run's events
  (:class:`~agentloop.web._agui_events.AguiTranslator`), then
  ``RUN_FINISHED`` or ``RUN_ERROR``.
- Threads: the first request of a ``threadId`` makes its agent with the
  factory; later ones run the same agent, which keeps the history. Only the
  input's last message is read (a user message: the prompt; tool messages:
  frontend tools' results). Past ``max_threads``, the idle thread used
  longest ago is forgotten. A thread runs one request at a time: a second
  one meanwhile gets 409.
- Frontend tools (``RunAgentInput.tools``) are offered to the model beside
  the agent's own. A call of one is deferred like an approval
  (``Permissions(approver=DEFER)``): the run ends with ``RUN_FINISHED``
  (outcome ``success``, ``pendingToolCallIds``) and the call open; the next
  request's tool message with that ``toolCallId`` is its result, and the run
  goes on (``Agent.resume``).
- Approvals: a permission ``ask`` that the agent's own approver does not
  decide (no approver, or one that answers ``DEFER``) ends the run with
  ``RUN_FINISHED`` whose outcome is ``interrupt``, one ``Interrupt`` per call
  (``id`` = ``toolCallId``, ``reason`` ``"tool_approval"``). The next
  request's ``resume`` entries answer them: ``status: "resolved"`` with
  payload ``{"approved": true}`` (optionally ``"arguments"``, to run it with
  edited arguments) or ``{"approved": false, "reason": "..."}``;
  ``"cancelled"`` refuses the call. A waiting call the next request does not
  answer is refused (``"No answer from the client."``).
- A client that goes away (the connection closes) aborts its run: every tool
  call gets its result, bash's process group is killed, the history stays
  whole; a run that does not end within ``abort_grace`` seconds is cancelled.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import attrs
import trio

from .. import _events as ev
from .._agent import Agent
from .._approval import DEFER, Decision, Deferred, PendingCall
from .._errors import AgentloopError
from .._tool import AgentTool, PermissionRequest, Permissions, ToolContext
from .._types import ToolResult
from ._agui_events import AguiTranslator, usage_entries

__all__ = ["ABORT_GRACE", "AguiApp", "AgentFactory", "agui_app", "serve_agui"]

logger = logging.getLogger("agentloop.web.agui")

#: Called for each new thread, it returns the thread's agent (plain or async).
AgentFactory = Callable[[], "Agent | Awaitable[Agent]"]

#: Seconds a run whose client went away has to end after ``Agent.abort()``
#: before it is cancelled outright.
ABORT_GRACE = 10.0

#: What an approval interrupt's answer (``ResumeEntry.payload``) holds.
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "reason": {"type": "string", "description": "Why not (the model reads it)."},
        "arguments": {"type": "object", "description": "Run it with these arguments."},
    },
    "required": ["approved"],
}

NO_ANSWER = "No answer from the client."

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class _BadInput(AgentloopError):
    """The request is no RunAgentInput this app can run (answered with 400 or RUN_ERROR)."""


@attrs.define
class _FrontendTool:
    """A tool the client runs: its result is the client's answer, kept in ``answers``."""

    name: str
    description: str
    parameters_schema: dict[str, Any]
    answers: dict[str, str]

    @property
    def label(self) -> str:
        return self.name

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        await trio.lowlevel.checkpoint()
        return ToolResult.text(self.answers.pop(ctx.tool_call_id, NO_ANSWER))


@attrs.define
class _Thread:
    agent: Agent
    tools: tuple[AgentTool, ...]
    permissions: Permissions | None
    frontend: frozenset[str] = frozenset()
    answers: dict[str, str] = attrs.Factory(dict)
    busy: bool = False


class AguiApp:
    """The ASGI app of :func:`agui_app` (see the module for what a request does)."""

    def __init__(
        self,
        factory: AgentFactory,
        *,
        path: str = "/",
        max_threads: int = 1000,
        abort_grace: float = ABORT_GRACE,
    ) -> None:
        self.factory = factory
        self.path = path
        self.max_threads = max_threads
        self.abort_grace = abort_grace
        self._threads: OrderedDict[str, _Thread] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":  # pragma: no cover - websockets are refused by the server
            return
        if scope["path"] != self.path:
            await _plain(send, 404, "Not found")
            return
        if scope["method"] != "POST":
            await _plain(send, 405, "POST a RunAgentInput")
            return
        body = await _read_body(receive)
        if body is None:
            return
        try:
            request = _parse_input(body)
        except _BadInput as error:
            await _plain(send, 400, f"Invalid RunAgentInput: {error}")
            return
        thread_id = request["threadId"]
        thread = self._threads.get(thread_id)
        if thread is not None and thread.busy:
            await _plain(send, 409, f"Thread {thread_id} is running")
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-type", b"text/event-stream"),
                    (b"cache-control", b"no-cache"),
                ],
            }
        )
        stream = _Stream(send)
        await stream.write(
            [{"type": "RUN_STARTED", "threadId": thread_id, "runId": request["runId"]}]
        )
        try:
            if thread is None:
                thread = await self._new_thread(thread_id)
            thread.busy = True
            try:
                await self._run(thread, request, stream, receive)
            finally:
                thread.busy = False
        except _BadInput as error:
            await stream.write([{"type": "RUN_ERROR", "message": str(error), "code": "input"}])
        except Exception as error:
            logger.exception("the AG-UI run failed")
            await stream.write(
                [{"type": "RUN_ERROR", "message": f"{type(error).__name__}: {error}"}]
            )
        await stream.close()

    async def _new_thread(self, thread_id: str) -> _Thread:
        made = self.factory()
        agent = await made if inspect.isawaitable(made) else made
        if not isinstance(agent, Agent):
            raise TypeError(f"the factory returned {type(agent).__name__}, not an Agent")
        thread = _Thread(agent, agent.tools, agent.config.permissions)
        if thread_id in self._threads:  # another request made it meanwhile
            return self._threads[thread_id]
        self._threads[thread_id] = thread
        while len(self._threads) > self.max_threads:
            idle = next((key for key, value in self._threads.items() if not value.busy), None)
            if idle is None:
                break
            del self._threads[idle]
        return thread

    async def _run(
        self, thread: _Thread, request: dict[str, Any], stream: _Stream, receive: Receive
    ) -> None:
        self._threads.move_to_end(request["threadId"])
        agent = thread.agent
        self._offer_tools(thread, request.get("tools") or [])
        last = request["messages"][-1] if request["messages"] else None
        prompt = _user_text(last) if last is not None and last.get("role") == "user" else None
        if agent.pending:
            decisions = self._decisions(thread, agent.pending, request)
            if prompt is not None:
                agent.follow_up(prompt)
            run = agent.resume(decisions)
        elif prompt is not None:
            run = agent.prompt(prompt)
        else:
            raise _BadInput("the last message is not a user message and no tool call waits")
        translator = AguiTranslator(frontend=thread.frontend)
        done = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._watch_client, receive, stream, agent, done, nursery)
            async with run as events:
                end = await _pump(events, translator, stream)
            done.set()
            nursery.cancel_scope.cancel()
        if end is not None:
            await stream.write([_final(end, request, thread.frontend)])

    async def _watch_client(
        self,
        receive: Receive,
        stream: _Stream,
        agent: Agent,
        done: trio.Event,
        nursery: trio.Nursery,
    ) -> None:
        """Abort the run when the client goes away; cancel it if it does not end in time."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
        stream.gone = True
        logger.info("the AG-UI client went away: aborting its run")
        agent.abort()
        with trio.move_on_after(self.abort_grace):
            await done.wait()
        nursery.cancel_scope.cancel()

    def _offer_tools(self, thread: _Thread, declared: list[Any]) -> None:
        own = {tool.name for tool in thread.tools}
        frontend = [
            _FrontendTool(
                name=str(tool["name"]),
                description=str(tool.get("description", "")),
                parameters_schema=tool.get("parameters") or {"type": "object", "properties": {}},
                answers=thread.answers,
            )
            for tool in declared
            if isinstance(tool, dict) and tool.get("name") and tool["name"] not in own
        ]
        names = frozenset(tool.name for tool in frontend)
        thread.frontend = names
        agent = thread.agent
        agent.tools = (*thread.tools, *frontend)
        agent.config = attrs.evolve(agent.config, permissions=_permissions(thread, names))

    def _decisions(
        self, thread: _Thread, pending: tuple[PendingCall, ...], request: dict[str, Any]
    ) -> list[Decision]:
        results = {
            message.get("toolCallId"): _content_text(message.get("content"))
            for message in request["messages"]
            if message.get("role") == "tool"
        }
        answers = {
            entry.get("interruptId"): entry
            for entry in request.get("resume") or []
            if isinstance(entry, dict)
        }
        decisions: list[Decision] = []
        for call in pending:
            if call.tool_call_id in results:
                thread.answers[call.tool_call_id] = results[call.tool_call_id]
                decisions.append(call.approve())
            elif call.tool_call_id in answers:
                decisions.append(_answer(call, answers[call.tool_call_id]))
            else:
                decisions.append(call.deny(NO_ANSWER))
        return decisions


def agui_app(
    factory: AgentFactory,
    *,
    path: str = "/",
    max_threads: int = 1000,
    abort_grace: float = ABORT_GRACE,
) -> AguiApp:
    """An ASGI app that runs ``factory``'s agents for AG-UI clients (see the module).

    ``path`` is where it takes POSTs (others get 404); ``max_threads`` how
    many threads (each one agent and its history) it keeps; ``abort_grace``
    the seconds a run whose client went away has to end once aborted.

    The app runs under trio (Hypercorn's trio worker: :func:`serve_agui`).
    Cancellation: the runs going on are cancelled (the history is left whole).
    """
    return AguiApp(factory, path=path, max_threads=max_threads, abort_grace=abort_grace)


async def serve_agui(
    factory: AgentFactory,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    path: str = "/",
    max_threads: int = 1000,
    abort_grace: float = ABORT_GRACE,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve :func:`agui_app` on ``http://host:port/path`` with Hypercorn's trio worker.

    Port 0 takes a free one; ``task_status.started`` gets the URL once it
    serves. Runs until cancelled.

    Raises:
        OSError: the address cannot be listened on.
        ImportError: Hypercorn is not installed (``pip install 'agentloop[web]'``).

    Cancellation: the runs going on are cancelled, then the server stops.
    """
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve
    except ImportError as error:  # pragma: no cover - hypercorn comes with agentloop[web]
        raise ImportError("serving AG-UI needs Hypercorn: pip install 'agentloop[web]'") from error
    app = agui_app(factory, path=path, max_threads=max_threads, abort_grace=abort_grace)
    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logger  # Hypercorn's messages go to logging, not to stderr
    config.graceful_timeout = 1.0
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(_hypercorn, serve, app, config)
        task_status.started(binds[0].rstrip("/") + path)


async def _hypercorn(
    serve: Any, app: Any, config: Any, *, task_status: trio.TaskStatus[list[str]]
) -> None:
    await serve(app, config, task_status=task_status)


# --------------------------------------------------------------------------- pieces


class _Stream:
    """The SSE body: events written as ``data:`` lines; nothing once the client is gone."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.gone = False

    async def write(self, events: list[dict[str, Any]]) -> None:
        if events:
            await self.write_bytes(_encode(events))

    async def write_bytes(self, data: bytes) -> None:
        if self.gone or not data:
            return
        try:
            await self.send({"type": "http.response.body", "body": data, "more_body": True})
        except OSError:  # pragma: no cover - Hypercorn reports a gone client on receive
            self.gone = True

    async def close(self) -> None:
        if not self.gone:
            try:
                await self.send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:  # pragma: no cover
                self.gone = True


#: One encoder for every event (``json.dumps`` with options makes one per call).
_to_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _encode(events: list[dict[str, Any]]) -> bytes:
    return "".join([f"data: {_to_json(event)}\n\n" for event in events]).encode("utf-8")


async def _pump(
    events: trio.abc.ReceiveChannel[ev.AgentEvent], translator: AguiTranslator, stream: _Stream
) -> ev.AgentEnd | None:
    """Translate and write the run's events, as many per write as are queued."""
    end: ev.AgentEnd | None = None
    receive_nowait = getattr(events, "receive_nowait", None)
    while True:
        try:
            event = await events.receive()
        except trio.EndOfChannel:
            return end
        batch = translator.translate(event)
        if isinstance(event, ev.AgentEnd) and event.loop_id == translator.loop_id:
            end = event
        while receive_nowait is not None:
            try:
                event = receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            batch += translator.translate(event)
            if isinstance(event, ev.AgentEnd) and event.loop_id == translator.loop_id:
                end = event
        await stream.write(batch)


def _final(end: ev.AgentEnd, request: dict[str, Any], frontend: frozenset[str]) -> dict[str, Any]:
    stop = end.stop_reason
    if stop.kind is ev.StopKind.ERROR:
        return {"type": "RUN_ERROR", "message": stop.message, "code": stop.kind.value}
    final: dict[str, Any] = {
        "type": "RUN_FINISHED",
        "threadId": request["threadId"],
        "runId": request["runId"],
        "result": {"stopReason": stop.kind.value, "message": stop.message},
    }
    approvals = [call for call in end.pending if call.tool_name not in frontend]
    waiting = [call.tool_call_id for call in end.pending if call.tool_name in frontend]
    if approvals:
        final["outcome"] = {
            "type": "interrupt",
            "interrupts": [
                {
                    "id": call.tool_call_id,
                    "reason": "tool_approval",
                    "message": f"Approve {call.tool_name} {json.dumps(call.arguments)}?",
                    "toolCallId": call.tool_call_id,
                    "responseSchema": APPROVAL_SCHEMA,
                    "metadata": {"toolName": call.tool_name, "arguments": call.arguments},
                }
                for call in approvals
            ],
        }
    elif stop.kind is ev.StopKind.ABORTED:
        final["outcome"] = {"type": "cancelled"}
    elif waiting:
        final["outcome"] = {"type": "success", "pendingToolCallIds": waiting}
    usage = usage_entries(end.usage_by_model)
    if usage:
        final["usage"] = usage
    return final


def _permissions(thread: _Thread, frontend: frozenset[str]) -> Permissions:
    """The thread's permissions, with frontend tools asked and undecided asks deferred."""
    base = thread.permissions
    own = None if base is None else base.approver

    async def approver(request: PermissionRequest) -> Any:
        if request.tool_name in frontend or own is None or isinstance(own, Deferred):
            return DEFER
        answer = own(request)
        return await answer if inspect.isawaitable(answer) else answer

    if base is None:
        return Permissions(ask=sorted(frontend), approver=approver)
    return attrs.evolve(base, ask=(*base.ask, *sorted(frontend)), approver=approver)


def _answer(call: PendingCall, entry: dict[str, Any]) -> Decision:
    if entry.get("status") != "resolved":
        return call.deny("The client cancelled the approval.")
    payload = entry.get("payload")
    if payload is True or (isinstance(payload, dict) and payload.get("approved") is True):
        arguments = payload.get("arguments") if isinstance(payload, dict) else None
        return call.approve(arguments if isinstance(arguments, dict) else None)
    reason = payload.get("reason") if isinstance(payload, dict) else None
    return call.deny(reason if isinstance(reason, str) and reason else "Denied by the user.")


def _parse_input(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as error:
        raise _BadInput(f"not JSON ({error})") from None
    if not isinstance(data, dict):
        raise _BadInput("not a JSON object")
    for key in ("threadId", "runId"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise _BadInput(f"{key} must be a non-empty string")
    messages = data.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _BadInput("messages must be a list of objects")
    if not isinstance(data.get("tools") or [], list):
        raise _BadInput("tools must be a list")
    return data


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return json.dumps(content)


def _user_text(message: dict[str, Any]) -> str | None:
    text = _content_text(message.get("content"))
    return text or None


async def _read_body(receive: Receive) -> bytes | None:
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body)


async def _plain(send: Send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": text.encode("utf-8")})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
