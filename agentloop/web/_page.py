"""The local page of ``agentloop web``: a chat, its tool calls and a timeline, in a browser.

:func:`page_app` is the ASGI app (Starlette) and :func:`serve_page` serves it
with Hypercorn's trio worker on 127.0.0.1. The page (``static/``: plain HTML,
CSS and JavaScript, no build step, nothing from elsewhere) talks to the server
with a few JSON endpoints and one Server-Sent Events stream that carries the
run's events as :mod:`agentloop.serialization` writes them. The server adds no
rule of its own: it runs the agent, relays its events, and hands the page's
decisions (approve, deny, steer, abort) to the agent.

Every request must carry the secret token (``?token=`` or the
``X-Agentloop-Token`` header), and a request whose ``Origin`` or ``Host`` is not
the server's own gets 403: another site open in the same browser can neither
read the stream nor drive the agent.
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import attrs
import trio

from .._agent import Agent
from .._approval import Approve, Decision, Deny
from .._events import AgentEvent
from .._tool import Approver, PermissionRequest
from ..serialization import to_dict

__all__ = ["PageConversation", "PageHost", "PageSession", "page_app", "serve_page"]

logger = logging.getLogger("agentloop.web")

#: Static files the page loads, with their media types.
_ASSETS = {
    "page.css": "text/css; charset=utf-8",
    "page.js": "text/javascript; charset=utf-8",
}
#: How many frames a slow page may fall behind before its stream is closed (it reconnects).
_BACKLOG = 10_000


@attrs.define
class PageSession:
    """One conversation the page shows: its agent, and the session it is saved as.

    Args:
        agent: The agent; its approver must be the one :meth:`PageHost.new_session` was given.
        session_id: The id of the saved session (None: not saved yet, or not saved).
        start: Called before each run (start recording it, say).
        close: Called when the page leaves this conversation (stop recording it).
    """

    agent: Agent
    session_id: Callable[[], str | None] = lambda: None
    start: Callable[[], None] = lambda: None
    close: Callable[[], None] = lambda: None


class PageHost(Protocol):
    """What :func:`page_app` runs: how to make an agent, and the directory's sessions."""

    #: The model's label, shown on the page (never a key or a credential).
    label: str
    #: The directory the agent works in.
    directory: Path

    def new_session(self, approver: Approver) -> PageSession:
        """A new conversation whose agent asks ``approver`` about the calls that need approval."""
        ...

    async def sessions(self) -> list[dict[str, Any]]:
        """The directory's saved sessions, newest first: ``id``, ``title``,
        ``messages``, ``modified`` (ISO 8601)."""
        ...

    async def resume(self, session_id: str, approver: Approver) -> PageSession:
        """The saved session ``session_id`` of the directory, loaded into a new agent.

        Raises:
            LookupError: there is no such session, or it cannot be read.
        """
        ...


class PageConversation:
    """The state behind the page: the current conversation, its run, and the pages watching.

    Each event is published as a frame ``{"at": ms, "event": <to_dict(event)>}``,
    ``at`` being the milliseconds since the server started (when the server got
    it: tool events carry no time of their own). A frame ``{"at": ms, "reset":
    state}`` starts a conversation (a new one, or a resumed one with its
    messages). A page that connects gets every frame since the last reset, then
    the new ones, so a reloaded page shows the same thing.

    Calls that need approval wait (the agent's approver is :meth:`approver`)
    until a page answers, for as long as it takes: a page that goes away leaves
    them waiting for the next one; :meth:`abort` ends the wait with the run.
    """

    def __init__(self, host: PageHost) -> None:
        self.host = host
        self._t0 = time.perf_counter()
        self._frames: list[str] = []
        self._watchers: set[trio.MemorySendChannel[str]] = set()
        self._waiting: dict[str, tuple[trio.Event, list[Decision]]] = {}
        self._running = False
        self._nursery: trio.Nursery | None = None
        self._decided: dict[str, Decision] = {}
        self.session = host.new_session(self.approver)
        self._reset()

    # ------------------------------------------------------------------ frames

    def _at(self) -> float:
        return round((time.perf_counter() - self._t0) * 1000, 3)

    def _publish(self, frame: dict[str, Any]) -> None:
        text = json.dumps(frame, separators=(",", ":"))
        self._frames.append(text)
        for watcher in list(self._watchers):
            try:
                watcher.send_nowait(text)
            except trio.WouldBlock:  # too far behind: it reconnects and starts over
                self._watchers.discard(watcher)
                watcher.close()
            except trio.BrokenResourceError:
                self._watchers.discard(watcher)

    def publish(self, event: AgentEvent) -> None:
        """Send ``event`` to every page (and to the pages that connect later)."""
        self._publish({"at": self._at(), "event": to_dict(event)})

    def state(self) -> dict[str, Any]:
        """What the page shows besides the events: the model, the directory, the session."""
        agent = self.session.agent
        return {
            "model": self.host.label,
            "directory": str(self.host.directory),
            "session_id": self.session.session_id(),
            "running": self._running,
            "messages": [to_dict(message) for message in agent.messages],
            "pending": [
                {
                    "tool_call_id": call.tool_call_id,
                    "tool_name": call.tool_name,
                    "args": to_dict(call.arguments),
                    "reason": call.reason,
                }
                for call in agent.pending
            ],
        }

    def _reset(self) -> None:
        self._frames.clear()
        self._publish({"at": self._at(), "reset": self.state()})

    async def watch(self) -> AsyncIterator[str]:
        """The frames since the last reset, then each new one as it comes (JSON text)."""
        send, receive = trio.open_memory_channel[str](_BACKLOG)
        for frame in self._frames:
            send.send_nowait(frame)
        self._watchers.add(send)
        try:
            async with receive:
                async for frame in receive:
                    yield frame
        finally:
            self._watchers.discard(send)
            send.close()

    # ------------------------------------------------------------------ the run

    @property
    def running(self) -> bool:
        """Whether a run is going on."""
        return self._running

    async def approver(self, request: PermissionRequest) -> Approve | Deny:
        """The agent's approver: wait until a page answers (see :meth:`decide`)."""
        done = trio.Event()
        answer: list[Decision] = []
        self._waiting[request.tool_call_id] = (done, answer)
        try:
            await done.wait()
        finally:
            del self._waiting[request.tool_call_id]
        return answer[0]

    def decide(self, tool_call_id: str, approved: bool) -> bool:
        """A page's answer about the call ``tool_call_id``; False: no such call waits.

        A call of a resumed session that stopped to await approval (``agent.pending``)
        is decided too; when every pending call is, the run goes on with the decisions.
        """
        decision: Decision = (
            Approve(tool_call_id) if approved else Deny(tool_call_id, "Denied on the page.")
        )
        waiting = self._waiting.get(tool_call_id)
        if waiting is not None:
            done, answer = waiting
            if not done.is_set():
                answer.append(decision)
                done.set()
            return True
        agent = self.session.agent
        pending = {call.tool_call_id for call in agent.pending}
        if self._running or tool_call_id not in pending:
            return False
        self._decided[tool_call_id] = decision
        if pending <= set(self._decided):
            decisions = [self._decided.pop(call_id) for call_id in pending]
            self._start(lambda: agent.resume(decisions))
        return True

    def bind(self, nursery: trio.Nursery) -> None:
        """Run the agent's runs in ``nursery`` (the server's)."""
        self._nursery = nursery

    def prompt(self, text: str) -> bool:
        """Start a run on ``text``; False: a run is going on (steer it instead)."""
        if self._running or self.session.agent.pending:
            return False
        agent = self.session.agent
        self._start(lambda: agent.prompt(text))
        return True

    def _start(self, open_run: Callable[[], Any]) -> None:
        assert self._nursery is not None, "bind() first"
        self.session.start()
        self._running = True
        self._nursery.start_soon(self._run, open_run)

    async def _run(self, open_run: Callable[[], Any]) -> None:
        try:
            async with open_run() as events:
                async for event in events:
                    self.publish(event)
        except Exception as error:  # a hook's or the provider's: said on the page
            logger.exception("the run failed")
            self._publish({"at": self._at(), "error": f"{type(error).__name__}: {error}"})
        finally:
            self._running = False
            self._publish({"at": self._at(), "idle": self.state()})

    def steer(self, text: str) -> bool:
        """Add ``text`` to the running run (``agent.steer``); False: no run is going on."""
        if not self._running:
            return False
        self.session.agent.steer(text)
        return True

    def abort(self) -> bool:
        """Stop the run (``agent.abort``); False: no run is going on."""
        if not self._running:
            return False
        self.session.agent.abort()
        return True

    def new(self) -> bool:
        """Start a new conversation; False: a run is going on."""
        if self._running:
            return False
        self.session.close()
        self.session = self.host.new_session(self.approver)
        self._reset()
        return True

    async def resume(self, session_id: str) -> str | None:
        """Continue the saved session ``session_id``; the reason when it cannot be."""
        if self._running:
            return "a run is going on"
        try:
            session = await self.host.resume(session_id, self.approver)
        except LookupError as error:
            return str(error)
        self.session.close()
        self.session = session
        self._decided = {}
        self._reset()
        return None


# --------------------------------------------------------------------------- the app


def _allowed_origins(port: int) -> frozenset[str]:
    return frozenset(f"http://{host}:{port}" for host in ("127.0.0.1", "localhost"))


def page_app(conversation: PageConversation, token: str, port: Callable[[], int]) -> Any:
    """The page's ASGI app (Starlette): the page, its assets, its JSON endpoints, the stream.

    ``token`` is the secret every request must carry; ``port()`` the port served
    on (the ``Origin`` and ``Host`` a request may name). A refused request gets
    403 and ``forbidden`` as its body. The POST endpoints answer ``{"ok": true}``,
    or ``{"ok": false, "error": why}`` when they cannot do it now. Endpoints
    (JSON bodies)::

        GET  /                 the page          GET  /static/page.js, page.css
        GET  /api/events       the SSE stream    GET  /api/state, /api/sessions
        POST /api/prompt {text}   /api/steer {text}   /api/abort   /api/new
        POST /api/decide {tool_call_id, approved}     /api/resume {session_id}

    Raises:
        ImportError: Starlette is not installed (``pip install 'agentloop[web]'``).
    """
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
    from starlette.routing import Route

    static = resources.files("agentloop.web") / "static"
    expected = token.encode()

    def refused(request: Request) -> bool:
        given = request.query_params.get("token") or request.headers.get("x-agentloop-token", "")
        if not hmac.compare_digest(given.encode(), expected):
            return True
        allowed = _allowed_origins(port())
        origin = request.headers.get("origin")
        if origin is not None and origin not in allowed:
            return True
        host = request.headers.get("host", "")
        return f"http://{host}" not in allowed

    Handler = Callable[[Request], Awaitable[Response]]

    def guarded(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            if refused(request):
                return PlainTextResponse("forbidden", status_code=403)
            return await handler(request)

        return endpoint

    async def body(request: Request) -> dict[str, Any]:
        try:
            data = await request.json()
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}

    def answer(ok: bool, problem: str) -> Response:
        if ok:
            return JSONResponse({"ok": True})
        # 200 all the same: the page says why; a browser logs other statuses as errors.
        return JSONResponse({"ok": False, "error": problem})

    async def index(request: Request) -> Response:
        html = (static / "index.html").read_text(encoding="utf-8")
        return Response(
            html.replace("__TOKEN__", token),
            media_type="text/html; charset=utf-8",
            headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
        )

    async def asset(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in _ASSETS:
            return PlainTextResponse("not found", status_code=404)
        text = (static / name).read_text(encoding="utf-8")
        return Response(text, media_type=_ASSETS[name], headers={"Cache-Control": "no-store"})

    async def events(request: Request) -> Response:
        async def frames() -> AsyncIterator[bytes]:
            yield b": agentloop\n\n"
            async for frame in conversation.watch():
                yield f"data: {frame}\n\n".encode()

        return StreamingResponse(
            frames(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def state(request: Request) -> Response:
        return JSONResponse(conversation.state())

    async def sessions(request: Request) -> Response:
        return JSONResponse({"sessions": await conversation.host.sessions()})

    async def prompt(request: Request) -> Response:
        text = str((await body(request)).get("text") or "").strip()
        if not text:
            return answer(False, "an empty prompt")
        return answer(conversation.prompt(text), "a run is going on, or calls await approval")

    async def steer(request: Request) -> Response:
        text = str((await body(request)).get("text") or "").strip()
        if not text:
            return answer(False, "an empty message")
        return answer(conversation.steer(text), "no run is going on")

    async def abort(request: Request) -> Response:
        return answer(conversation.abort(), "no run is going on")

    async def new(request: Request) -> Response:
        return answer(conversation.new(), "a run is going on")

    async def decide(request: Request) -> Response:
        data = await body(request)
        call_id = str(data.get("tool_call_id") or "")
        ok = conversation.decide(call_id, data.get("approved") is True)
        return answer(ok, f"no call {call_id!r} awaits approval")

    async def resume(request: Request) -> Response:
        problem = await conversation.resume(str((await body(request)).get("session_id") or ""))
        return answer(problem is None, problem or "")

    routes = [
        Route("/", guarded(index)),
        Route("/static/{name}", guarded(asset)),
        Route("/api/events", guarded(events)),
        Route("/api/state", guarded(state)),
        Route("/api/sessions", guarded(sessions)),
        Route("/api/prompt", guarded(prompt), methods=["POST"]),
        Route("/api/steer", guarded(steer), methods=["POST"]),
        Route("/api/abort", guarded(abort), methods=["POST"]),
        Route("/api/new", guarded(new), methods=["POST"]),
        Route("/api/decide", guarded(decide), methods=["POST"]),
        Route("/api/resume", guarded(resume), methods=["POST"]),
    ]
    return Starlette(routes=routes)


async def serve_page(
    host: PageHost,
    *,
    port: int = 0,
    token: str | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the page of ``host`` on 127.0.0.1 (``port`` 0: a free one), until cancelled.

    ``task_status.started`` gets the page's URL, with its secret token (a new
    random one unless ``token`` is given). On cancellation the run going on is
    cancelled (its calls get their results) and the server stops.

    Raises:
        ImportError: Hypercorn or Starlette is missing (``pip install 'agentloop[web]'``).
        OSError: the port cannot be bound.
    """
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve
    except ImportError as error:  # pragma: no cover - hypercorn comes with agentloop[web]
        raise ImportError("the page needs Hypercorn: pip install 'agentloop[web]'") from error
    token = token or secrets.token_urlsafe(24)
    bound: list[int] = [port]
    conversation = PageConversation(host)
    app = page_app(conversation, token, lambda: bound[0])
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.graceful_timeout = 0.5
    try:
        async with trio.open_nursery() as nursery:
            conversation.bind(nursery)
            binds: Sequence[str] = await nursery.start(_hypercorn, serve, app, config)
            bound[0] = int(binds[0].rstrip("/").rpartition(":")[2])
            task_status.started(f"http://127.0.0.1:{bound[0]}/?token={token}")
    finally:
        conversation.session.close()


async def _hypercorn(
    serve: Any, app: Any, config: Any, *, task_status: trio.TaskStatus[list[str]]
) -> None:
    await serve(app, config, task_status=task_status)
