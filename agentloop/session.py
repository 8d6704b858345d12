"""Sessions: a run recorded as JSON Lines, loaded again, and resumed.

Record every event of a run; the recorder keeps what rebuilds the conversation::

    with SessionRecorder(new_session_path(), meta={"model": "claude-sonnet-5"}) as recorder:
        async with agent.prompt("Fix the failing test") as events:
            async for event in events:
                recorder.record(event)
                ...

Later, in another process::

    session = load_session(path)
    agent = Agent(provider, tools=tools)
    session.restore(agent)          # history, pruned and compacted context
    await agent.run("Go on")

The file holds one JSON object per line: a ``session`` header, then events as
:mod:`agentloop.serialization` writes them (``MessageEnd``, ``TurnEnd``, tool
starts and ends, ``PrunApplied``, ``CompactionEnded``, ``AgentStart`` and
``AgentEnd``; deltas and updates are left out). Each line reaches the operating
system as it is written (a killed process loses nothing written); ``fsync``
says when it is forced to the disk too.

Give the recorder to the loop as its ``journal`` and the session survives a
crash of the process: each tool call's intent is written before the tool
starts and its result as soon as it ends, and :meth:`Session.recover` answers
the calls a dead process left open (running again only what is safe to)::

    recorder = SessionRecorder(path)
    agent = Agent(provider, tools=tools, journal=recorder.record)
    ...                                        # the process is killed
    session = load_session(path)
    await session.recover(agent)               # after a new SessionRecorder(path)
    async with agent.resume() as events:       # the model goes on from there
        async for event in events:
            ...

A run that stopped to await approval (``StopKind.AWAITING_APPROVAL``: see
``Permissions(approver=DEFER)``) is on file too, and another process decides::

    session = load_session(path)
    recorder = SessionRecorder(path)
    agent = Agent(provider, tools=tools, permissions=permissions, journal=recorder.record)
    session.restore(agent)                     # or recover(), after a crash
    async with agent.resume([call.approve() for call in agent.pending]) as events:
        ...

The rules that keep approval safe across processes (the recorder keeps
``ToolApprovalRequested`` and ``ToolApprovalDecided``):

- A call of the last reply that was asked for (its ``ToolApprovalRequested`` is
  on file, or it was pending at the last stop) and has neither a recorded
  decision nor a recorded result is *pending* (``Session.pending``): it gets no
  result and no placeholder, and :meth:`Session.recover` never runs it; only a
  decision given to ``agent.resume(decisions)`` does.
- While calls are pending, the history ends with the results that had joined
  it (those of the calls before the first pending one); the results of the
  reply's other calls that ended (their ``ToolExecutionEnd`` is on file) are
  held back in ``Session.suspended.results``, never lost, and join the history
  in the reply's order once every pending call is decided.
- A call with a recorded decision and no result is one :meth:`Session.recover`
  answers: a denial gives its ``"Permission denied: <reason>"`` result and the
  call never runs; an approved call that had not started runs with the
  arguments it was approved with; one that had started runs again only if it is
  safe to (else ``NOT_RUN_AGAIN``), as any interrupted call.
- A call that had not started and was never asked for is checked against the
  recovering agent's permissions first: denied, it gets the denial; asked, it
  becomes pending (its request is journaled).
"""

from __future__ import annotations

import datetime
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

import attrs

from . import _events as ev
from ._approval import Approve, Decision, Deny, PendingCall, Suspended, not_approved
from ._errors import AgentloopError
from ._secrets import redact_urls
from ._text import checked_text
from ._tool import ToolNotFound, ToolResult, tool_traits
from ._types import (
    AssistantMessage,
    Message,
    StopReason,
    TextContent,
    ToolCall,
    ToolOutcome,
    ToolResultMessage,
    Usage,
)
from ._types import UserMessage as _UserMessage
from .serialization import DeserializationError, from_dict, to_dict

__all__ = [
    "INTERRUPTED",
    "NOT_RUN_AGAIN",
    "SESSION_FORMAT",
    "InterruptedCall",
    "Session",
    "SessionInfo",
    "SessionLockedError",
    "SessionRecorder",
    "find_session",
    "list_sessions",
    "load_session",
    "new_session_path",
    "session_directory",
]

log = logging.getLogger("agentloop.session")

SESSION_FORMAT = 1
"""The version of the file format, in each file's header."""

INTERRUPTED = "The session ended before this tool call finished; it has no result."
"""The result given, on loading, to a tool call the recording has no result for."""

NOT_RUN_AGAIN = (
    "The process stopped while this tool call ran, so its result is unknown; it was not "
    "run again because it may not be safe to repeat. Check its effects before retrying."
)
"""The result :meth:`Session.recover` gives a call that had started and is not safe to repeat."""

Fsync = Literal["call", "turn", "never"]


class SessionLockedError(AgentloopError):
    """Another process has the session open (its recorder holds the session's lock)."""


_KEPT = (
    ev.AgentStart,
    ev.AgentEnd,
    ev.TurnEnd,
    ev.MessageEnd,
    ev.ToolExecutionStart,
    ev.ToolExecutionEnd,
    ev.ToolApprovalRequested,
    ev.ToolApprovalDecided,
    ev.PrunApplied,
    ev.CompactionEnded,
)


# --------------------------------------------------------------------------- where


def session_directory() -> Path:
    """Where sessions are kept: ``$AGENTLOOP_HOME/sessions``, else under the user's data directory.

    The data directory is ``$XDG_DATA_HOME/agentloop``, else
    ``~/.local/share/agentloop``. The directory is not created here.
    """
    home = os.environ.get("AGENTLOOP_HOME")
    if home:
        return Path(home) / "sessions"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "agentloop" / "sessions"


def new_session_path(directory: str | os.PathLike[str] | None = None) -> Path:
    """A path for a new session file: ``<UTC time>-<random>.jsonl``, in ``directory``.

    The directory (default: :func:`session_directory`) is created if needed.
    """
    folder = Path(directory) if directory is not None else session_directory()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    return folder / f"{stamp}-{secrets.token_hex(3)}.jsonl"


# --------------------------------------------------------------------------- recording


def _redact_meta(value: Any) -> Any:
    """A header's ``meta`` with the credentials of the URLs in its strings redacted."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, Mapping):
        return {key: _redact_meta(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_meta(item) for item in value]
    return value


class SessionRecorder:
    """Writes the events of runs to a session file, one JSON object per line.

    Give it every event (:meth:`record` keeps those that matter), or give
    ``recorder.record`` to the loop as its ``journal`` (``Agent(...,
    journal=recorder.record)``): the loop then hands it each event as it
    happens, before the consumer sees it, so a tool call's intent is on file
    before the tool starts and its result as soon as it ends. It writes the
    header first, with ``meta`` (its strings' URLs without their credentials:
    a password, ``?key=``..., see :func:`agentloop._secrets.redact_url`). An
    existing file is appended to (a resumed session goes on
    in the same file; a line torn by a crash is ended first). A sub-agent's
    events can be recorded too (its own ``journal``, or ``on_event``): they
    carry their own ``loop_id`` and are linked by the parent's
    ``ToolExecutionEnd.child_loop_id``.

    Every line is handed to the operating system as it is written, so a killed
    process loses nothing written. ``fsync`` says when the file is also forced
    to the disk (against a power cut): ``"turn"`` (default) at each ``TurnEnd``
    and ``AgentEnd``, ``"call"`` also at each tool call's start and end and
    each message, ``"never"``.

    One process at a time: the recorder holds a lock on the session (an
    ``flock`` on the file, released by the system when the process dies, so a
    dead owner's lock is taken over at once) until :meth:`close`.

    Use it as a context manager, or call :meth:`close`.

    Raises:
        SessionLockedError: another process has the session open.
        OSError: the file cannot be opened or written.
        ValueError: ``fsync`` is not one of the three.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        meta: Mapping[str, Any] | None = None,
        fsync: Fsync = "turn",
    ) -> None:
        if fsync not in ("call", "turn", "never"):
            raise ValueError(f"fsync must be 'call', 'turn' or 'never', got {fsync!r}")
        self.path = Path(path)
        self.fsync: Fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        try:
            _lock(self._file.fileno(), self.path)
            exists = os.fstat(self._file.fileno()).st_size > 0
            torn = exists and not _ends_with_newline(self.path)
        except BaseException:
            self._file.close()
            raise
        if torn:  # the last run died mid-line: start on a line of our own
            self._file.write("\n")
        if exists:
            self.session_id = _read_header(self.path).get("id") or self.path.stem
        else:
            self.session_id = self.path.stem
            self._write(
                {
                    "type": "session",
                    "format": SESSION_FORMAT,
                    "id": self.session_id,
                    "created": datetime.datetime.now(datetime.UTC).isoformat(),
                    "meta": _redact_meta(dict(meta or {})),
                }
            )
            self.flush()

    def __repr__(self) -> str:
        return f"<SessionRecorder {str(self.path)!r}>"

    def record(self, event: ev.AgentEvent) -> None:
        """Write ``event`` if it is one a session keeps.

        Raises:
            ValueError: the recorder is closed.
            OSError: the file cannot be written.
        """
        if not isinstance(event, _KEPT):
            return
        self._write(to_dict(event))
        if self.fsync == "never":
            return
        if self.fsync == "call" or isinstance(event, ev.TurnEnd | ev.AgentEnd):
            self.flush()

    def flush(self) -> None:
        """Force what was written to the disk (``fsync``)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Flush and close the file and release the session; later events are not recorded."""
        if self._file is not None:
            try:
                self.flush()
            finally:
                self._file.close()  # releases the flock
                self._file = None

    def __enter__(self) -> SessionRecorder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _write(self, data: Mapping[str, Any]) -> None:
        if self._file is None:
            raise ValueError(f"the session recorder for {self.path} is closed")
        self._file.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()  # to the operating system: a killed process loses nothing


def _lock(fd: int, path: Path) -> None:
    """Take the session's lock (an ``flock`` on its file), or raise SessionLockedError."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLockedError(
            f"session {path} is open in another process; close it there first, or wait "
            "for that process to end"
        ) from None


# --------------------------------------------------------------------------- loading


@attrs.frozen
class Session:
    """A recorded session, loaded.

    Attributes:
        session_id: The session's id (its file name without ``.jsonl``).
        path: The file.
        meta: What the recorder was given (the model, the directory...).
        messages: The conversation of the top-level runs, in order and in
            each message's final form; a tool call the recording has no result
            for is given an error result (``INTERRUPTED``), so the history is
            one a model accepts.
        records: The prun and compaction records, in order.
        children: Each sub-agent run's messages, by its loop id (the parent's
            ``ToolExecutionEnd.child_loop_id``).
        usage: The model usage of the recorded runs, summed.
        warnings: What was skipped while reading (a torn last line, say).
        stops: Why each top-level run that finished ended, in order (its
            ``AgentEnd.stop_reason``).
        finished: Whether the last top-level run reached its ``AgentEnd``
            (False: the process stopped while it ran).
        interrupted: The tool calls of the last reply that have no recorded
            result and do not wait for a decision, with whether each had
            started and the decision recorded on it, if any: what
            :meth:`recover` answers. Each holds an ``INTERRUPTED`` placeholder
            in ``messages``, unless calls are pending.
        suspended: Where the session waits for decisions on tool calls, or
            None: the last stop's ``AgentEnd.suspended`` when that run was the
            last and finished, less the calls decided since (a resumed run cut
            off by a crash), with the results recorded since held back; for a
            run cut off while calls were asked for (it never stopped), the
            asked calls, with the counts of its limits at zero. ``messages``
            then ends with the results that had joined the history, with no
            placeholder for a pending or held call, and :meth:`restore` sets
            it as ``agent.context.suspended`` (``agent.pending``), so
            ``agent.resume(decisions)`` goes on. See the module's rules.
    """

    session_id: str
    path: Path
    meta: dict[str, Any]
    messages: tuple[Message, ...]
    records: tuple[ev.PrunRecord | ev.CompactionRecord, ...]
    children: dict[str, tuple[Message, ...]]
    usage: Usage
    warnings: tuple[str, ...]
    stops: tuple[ev.AgentStop, ...] = ()
    finished: bool = True
    interrupted: tuple[InterruptedCall, ...] = ()
    suspended: Suspended | None = None

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """The tool calls that wait for a decision (see :attr:`suspended`)."""
        return () if self.suspended is None else self.suspended.pending

    def restore(self, agent: Any) -> None:
        """Put this session's history and context into ``agent`` (which must be idle).

        The agent's previous history and queues are dropped. Prun and
        compaction records are applied again, so the agent's working context
        is the one the recorded run had. Calls that wait for a decision
        (:attr:`suspended`) wait in the agent too (``agent.pending``).

        Raises:
            RuntimeError: the agent is running.
        """
        agent.reset()
        agent.context.messages = list(self.messages)
        for record in self.records:
            agent.context.apply_record(record)
        agent.context.suspended = self.suspended

    async def recover(self, agent: Any) -> tuple[ToolResultMessage, ...]:
        """Restore into ``agent`` and answer the calls the stopped process left open.

        For each call of :attr:`interrupted`, in order: one denied by a
        recorded decision gets its ``"Permission denied: <reason>"`` result and
        never runs; one that had not started runs now (approved by a recorded
        decision: with the arguments it decided, checked against the tool's
        schema), unless the agent's permissions refuse it (the denial) or ask
        for it (it joins :attr:`agent.pending <agentloop.Agent.pending>`: it
        runs only once approved); one that had started runs again if its tool
        is safe to (its ``replay_safe`` trait: read-only or idempotent), else it
        gets the error result :data:`NOT_RUN_AGAIN`, so the model can decide.
        Each call then has exactly one result, or waits for a decision. With
        the agent's ``journal`` set (a new recorder on the same file), the
        intent and the result of each are recorded as in a run, so a crash
        during the recovery is recovered the same way. Afterwards,
        ``agent.resume()`` lets the model go on, or ``agent.resume(decisions)``
        when calls are pending: the results of the reply's calls join the
        history in its order once every pending call is decided.

        Returns the results, in order.

        Raises:
            RuntimeError: the agent is running.
            Exception: what the journal raised.

        Cancellation: a call being run is cancelled and keeps its
        ``INTERRUPTED`` placeholder; the calls after it are left as they are.
        """
        self.restore(agent)
        journal = agent.config.journal
        permissions = agent.config.permissions
        tools = {tool.name: tool for tool in agent.tools}
        answered: list[ToolResultMessage] = []
        asked: list[PendingCall] = []
        waits = self.suspended is not None
        for entry in self.interrupted:
            call = entry.call
            tool = tools.get(call.name)
            if (
                tool is not None
                and permissions is not None
                and entry.decision is None
                and not entry.started
            ):
                found = permissions.assess(tool, call.name, call.id, dict(call.arguments))
                if found is not None and not isinstance(found, str):
                    _log_recovery(self.session_id, call, "it needs approval; it waits")
                    pending = PendingCall(
                        tool_call_id=call.id,
                        tool_name=call.name,
                        arguments=call.arguments,
                        reason=found.reason,
                        rule=None if found.rule is None else str(found.rule),
                        subject=found.subject,
                    )
                    asked.append(pending)
                    if journal is not None:
                        journal(
                            ev.ToolApprovalRequested(
                                loop_id=entry.loop_id,
                                tool_call_id=call.id,
                                tool_name=call.name,
                                args=call.arguments,
                                reason=pending.reason,
                                rule=pending.rule,
                            )
                        )
                    continue
                denial = found
            else:
                denial = None
            message = await self._answer(agent, entry, tool, denial, stamp=not waits)
            if not waits and not asked:
                placeholder = next(
                    message
                    for message in reversed(agent.context.messages)
                    if isinstance(message, ToolResultMessage) and message.tool_call_id == call.id
                )
                agent.context.replace(placeholder, message)
                if journal is not None:
                    journal(ev.MessageEnd(loop_id=entry.loop_id, message=message))
            answered.append(message)
        if waits or asked:
            self._hold(agent, answered, asked)
        return tuple(answered)

    async def _answer(
        self, agent: Any, entry: InterruptedCall, tool: Any, denial: str | None, *, stamp: bool
    ) -> ToolResultMessage:
        """Give ``entry`` its result (running it if it may), its intent and result journaled."""
        from ._loop import run_tool_call
        from ._tool._registry import ToolRegistry, check_arguments

        journal = agent.config.journal
        call = entry.call
        decision = entry.decision
        if isinstance(decision, Approve) and decision.arguments is not None:
            call = attrs.evolve(call, arguments=decision.arguments)
        loop_id = entry.loop_id
        traits = tool_traits(tool) if tool is not None else None
        if journal is not None:
            journal(
                ev.ToolExecutionStart(
                    loop_id=loop_id, tool_call_id=call.id, tool_name=call.name, args=call.arguments
                )
            )
        if isinstance(decision, Deny):  # a denied call never runs
            denial = decision.reason or not_approved(call.name, None)
        if denial is not None:
            reason = denial
            _log_recovery(self.session_id, call, "denied; not running it")
            result = ToolResult.text(f"Permission denied: {reason}")
            outcome = ToolOutcome.DENIED
        elif tool is None or traits is None:
            _log_recovery(self.session_id, call, "no such tool")
            result = ToolResult.text(str(ToolNotFound(call.name)))
            outcome = ToolOutcome.NOT_FOUND
        elif entry.started and not traits.replay_safe:
            _log_recovery(self.session_id, call, "it had started; not running it again")
            result, outcome = ToolResult.text(NOT_RUN_AGAIN), ToolOutcome.NOT_RUN_AGAIN
        else:
            problem = None
            if isinstance(decision, Approve) and decision.arguments is not None:
                checker = ToolRegistry([tool]).get(tool.name)
                assert checker is not None
                problem = check_arguments(call, checker.validator)
            if problem is not None:
                _log_recovery(self.session_id, call, "its approved arguments are invalid")
                result, outcome = ToolResult.text(str(problem)), problem.outcome
            else:
                how = (
                    "replay-safe; running it again" if entry.started else "not started; running it"
                )
                _log_recovery(self.session_id, call, how)
                timeout = (
                    traits.timeout if traits.timeout is not None else agent.config.tool_timeout
                )
                result, outcome = await run_tool_call(tool, call, timeout, loop_id=loop_id)
        message = ToolResultMessage(
            call.id,
            call.name,
            result.content,
            is_error=outcome.is_error,
            timestamp=agent.context.next_timestamp() if stamp else 0,
            child_loop_id=result.child_loop_id,
            outcome=outcome,
        )
        if journal is not None:
            journal(
                ev.ToolExecutionEnd(
                    loop_id=loop_id,
                    tool_call_id=call.id,
                    tool_name=call.name,
                    result=result,
                    is_error=outcome.is_error,
                    outcome=outcome,
                )
            )
        return message

    def _hold(
        self, agent: Any, answered: list[ToolResultMessage], asked: list[PendingCall]
    ) -> None:
        """Calls of the last reply wait for decisions: the results of the calls before the
        first of them stay in (or join) the history, the others are held back with them
        in ``agent.context.suspended``, as a run that stops to wait holds them."""
        context = agent.context
        messages = list(context.messages)
        position = len(messages) - 1
        while position >= 0 and isinstance(messages[position], ToolResultMessage):
            position -= 1
        reply = messages[position]
        assert isinstance(reply, AssistantMessage)
        suspended = self.suspended or Suspended(pending=())
        pending = {call.tool_call_id: call for call in (*suspended.pending, *asked)}
        results: dict[str, ToolResultMessage] = {m.tool_call_id: m for m in suspended.results}
        for message in messages[position + 1 :]:
            assert isinstance(message, ToolResultMessage)
            if message.outcome is not ToolOutcome.INTERRUPTED:
                results[message.tool_call_id] = message
        new = {message.tool_call_id for message in answered}
        results.update({message.tool_call_id: message for message in answered})
        journal = agent.config.journal
        history = messages[: position + 1]
        held: list[ToolResultMessage] = []
        waiting: list[PendingCall] = []
        for call in reply.tool_calls:
            if call.id in pending:
                waiting.append(pending[call.id])
            elif call.id in results:
                result = results[call.id]
                if waiting:
                    held.append(attrs.evolve(result, timestamp=0))
                    continue
                if result.timestamp <= history[-1].timestamp:
                    result = attrs.evolve(result, timestamp=context.next_timestamp())
                history.append(result)
                if journal is not None and call.id in new:
                    journal(ev.MessageEnd(loop_id=self.interrupted[0].loop_id, message=result))
        context.messages = history
        context.suspended = attrs.evolve(suspended, pending=waiting, results=held)


def _log_recovery(session_id: str, call: ToolCall, outcome: str) -> None:
    log.info("session %s: interrupted call %s of %r: %s", session_id, call.id, call.name, outcome)


@attrs.frozen
class InterruptedCall:
    """A tool call of a session's last reply that has no recorded result (and waits for
    no decision).

    Attributes:
        call: The call, as the model made it.
        started: Whether its ``ToolExecutionStart`` was recorded: it may have
            run, in part or whole (with a journal, the intent is recorded
            before the tool starts).
        loop_id: The loop of the run it belongs to.
        decision: The decision recorded on it (``ToolApprovalDecided``), if it
            needed approval and was decided: :meth:`Session.recover` denies a
            denied call and runs an approved one with its arguments.
    """

    call: ToolCall
    started: bool
    loop_id: str
    decision: Decision | None = None


def load_session(path: str | os.PathLike[str]) -> Session:
    """Read a session file.

    A line that cannot be read (the last one, torn by a crash mid-write, or
    any other) is skipped with a warning (logged on ``agentloop.session`` and
    kept in ``Session.warnings``); it never stops the loading.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not a session file (no ``session`` header line).
    """
    path = Path(path)
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    warnings: list[str] = []
    header: dict[str, Any] | None = None
    events: list[ev.AgentEvent] = []
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(checked_text(line))
            if not isinstance(data, dict):
                raise ValueError("not an object")
            if data.get("type") == "session":
                header = header or data
                continue
            events.append(from_dict(data, ev.AgentEvent))
        except (ValueError, DeserializationError) as error:
            torn = number - 1 == last and not line.endswith("}")
            what = "a torn last line" if torn else f"line {number}"
            warning = f"{path}: skipped {what}: {_short(error)}"
            log.warning("%s", warning)
            warnings.append(warning)
    if header is None:
        raise ValueError(f"{path} is not an agentloop session (no session header)")
    return _assemble(path, header, events, warnings)


def _short(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else type(error).__name__
    return text if len(text) <= 120 else text[:119] + "…"


def _assemble(
    path: Path, header: dict[str, Any], events: list[ev.AgentEvent], warnings: list[str]
) -> Session:
    children_of: dict[str, str] = {}  # child loop id -> parent loop id
    for event in events:
        if isinstance(event, ev.AgentStart) and event.parent_loop_id is not None:
            children_of[event.loop_id] = event.parent_loop_id
    by_loop: dict[str, dict[int, Message]] = {}
    records: list[ev.PrunRecord | ev.CompactionRecord] = []
    usage = Usage()
    stops: list[ev.AgentStop] = []
    finished = True
    started: set[str] = set()  # top-level call ids with a ToolExecutionStart
    ended: dict[str, ev.ToolExecutionEnd] = {}  # ... and with a ToolExecutionEnd
    asked: dict[str, ev.ToolApprovalRequested] = {}  # ... that needed approval
    decided: dict[str, ev.ToolApprovalDecided] = {}  # ... and were decided
    suspended: Suspended | None = None  # where the last finished top-level run stopped
    turns = 0  # the TurnEnds of the last top-level run
    last_loop = ""
    for event in events:
        top = event.loop_id not in children_of
        messages = by_loop.setdefault("" if top else event.loop_id, {})
        if top:
            last_loop = event.loop_id
        match event:
            case ev.ToolExecutionStart(tool_call_id=call_id) if top:
                started.add(call_id)
            case ev.ToolExecutionEnd(tool_call_id=call_id) if top:
                ended[call_id] = event
            case ev.ToolApprovalRequested(tool_call_id=call_id) if top:
                asked[call_id] = event
            case ev.ToolApprovalDecided(tool_call_id=call_id) if top:
                decided[call_id] = event
            case ev.MessageEnd(message=message):
                messages[message.timestamp] = message
            case ev.TurnEnd(message=message, tool_results=results):
                # The final form: an aborted turn's assistant message is marked after its end.
                messages[message.timestamp] = message
                for result in results:
                    messages[result.timestamp] = result
                turns += top
            case ev.AgentStart() if top:
                finished = False
                turns = 0
            case ev.AgentEnd(messages=final, usage=run_usage, stop_reason=stop):
                for message in final:
                    messages[message.timestamp] = message
                if top:
                    usage = usage + run_usage
                    stops.append(stop)
                    finished = True
                    suspended = event.suspended
            case ev.PrunApplied(record=record) if top:
                records.append(record)
            case ev.CompactionEnded(record=record) if top:
                records.append(record)
            case _:
                pass
    conversation, last_open = _answered(sorted(by_loop.pop("", {}).items()), ended)
    children = {}
    for loop, found in by_loop.items():
        child, child_open = _answered(sorted(found.items()), {})
        _close(child, child_open, {})
        children[loop] = tuple(child)
    # The calls of the last reply that wait for a decision: asked (or pending at the last
    # stop) and neither decided nor ended. They get no result, and neither do the calls
    # after them: the ones that have a result hold it back (as the run did).
    waiting = {} if suspended is None else {c.tool_call_id: c for c in suspended.pending}
    pending = [
        waiting.get(call.id) or _pending_of(asked[call.id])
        for call in last_open
        if (call.id in asked or call.id in waiting)
        and call.id not in decided
        and call.id not in ended
    ]
    if pending:
        pending_ids = {call.tool_call_id for call in pending}
        held = {} if suspended is None else {m.tool_call_id: m for m in suspended.results}
        for call in last_open:
            if call.id in ended:
                held[call.id] = _result_of(call, ended[call.id], 0)
        open_calls = [call for call in last_open if call.id not in held.keys() | pending_ids]
        if suspended is None or not pending_ids <= set(waiting):
            # Cut off before it stopped: what its limits counted is not on file.
            suspended = Suspended(pending=(), turn_index=turns)
        suspended = attrs.evolve(
            suspended,
            pending=pending,
            results=[held[call.id] for call in last_open if call.id in held],
        )
    else:
        suspended = None
        open_calls = _close(conversation, last_open, ended)
    interrupted = tuple(
        InterruptedCall(call, call.id in started, last_loop, _decision_of(decided.get(call.id)))
        for call in open_calls
    )
    return Session(
        session_id=str(header.get("id") or path.stem),
        path=path,
        meta=dict(header.get("meta") or {}),
        messages=tuple(conversation),
        records=tuple(records),
        children=children,
        usage=usage,
        warnings=tuple(warnings),
        stops=tuple(stops),
        finished=finished,
        interrupted=interrupted,
        suspended=suspended,
    )


def _pending_of(asked: ev.ToolApprovalRequested) -> PendingCall:
    return PendingCall(
        tool_call_id=asked.tool_call_id,
        tool_name=asked.tool_name,
        arguments=asked.args,
        reason=asked.reason,
        rule=asked.rule,
    )


def _decision_of(decided: ev.ToolApprovalDecided | None) -> Decision | None:
    if decided is None:
        return None
    if not decided.approved:
        return Deny(decided.tool_call_id, decided.reason)
    return Approve(decided.tool_call_id, decided.arguments)


def _result_of(call: ToolCall, end: ev.ToolExecutionEnd, stamp: int) -> ToolResultMessage:
    return ToolResultMessage(
        call.id,
        call.name,
        end.result.content,
        is_error=end.is_error,
        timestamp=stamp,
        child_loop_id=end.result.child_loop_id,
        outcome=end.outcome,
    )


def _answered(
    ordered: list[tuple[int, Message]], ended: Mapping[str, ev.ToolExecutionEnd]
) -> tuple[list[Message], list[ToolCall]]:
    """The messages, each tool call answered but the last reply's, and the calls of the
    last reply that have no result message, in its order (see :func:`_close`)."""
    out: list[Message] = []
    open_calls: dict[str, ToolCall] = {}
    for _, message in ordered:
        if isinstance(message, ToolResultMessage):
            if open_calls.pop(message.tool_call_id, None) is not None:
                out.append(message)
            continue  # a result with no call before it cannot be sent
        if open_calls:  # a user or assistant message: the calls before it got no result
            _close(out, list(open_calls.values()), ended)
            open_calls.clear()
        out.append(message)
        if isinstance(message, AssistantMessage) and message.stop_reason != StopReason.ERROR:
            open_calls.update({call.id: call for call in message.tool_calls})
    return out, list(open_calls.values())


def _close(
    out: list[Message], calls: list[ToolCall], ended: Mapping[str, ev.ToolExecutionEnd]
) -> list[ToolCall]:
    """Answer ``calls`` at the end of ``out``: each with the result of its recorded
    ``ToolExecutionEnd`` (the process stopped before the result was added), or else an
    ``INTERRUPTED`` placeholder. Returns the calls given a placeholder."""
    placeheld: list[ToolCall] = []
    for call in calls:
        stamp = out[-1].timestamp + 1 if out else 0
        end = ended.get(call.id)
        if end is not None:
            out.append(_result_of(call, end, stamp))
            continue
        placeheld.append(call)
        out.append(
            ToolResultMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=(TextContent(INTERRUPTED),),
                is_error=True,
                timestamp=stamp,
                outcome=ToolOutcome.INTERRUPTED,
            )
        )
    return placeheld


# --------------------------------------------------------------------------- listing


@attrs.frozen
class SessionInfo:
    """A saved session, as :func:`list_sessions` describes it.

    Attributes:
        session_id: The session's id.
        path: Its file.
        modified: When the file was last written.
        title: The first user prompt, on one line, cut at 60 characters.
        messages: How many messages the conversation has.
        cwd: The directory the session was started in (the ``cwd`` of its
            header's ``meta``), or None when the file does not say (a file
            written by an older version, or by a recorder given no ``cwd``).
    """

    session_id: str
    path: Path
    modified: datetime.datetime
    title: str
    messages: int
    cwd: Path | None = None


def list_sessions(directory: str | os.PathLike[str] | None = None) -> list[SessionInfo]:
    """The sessions in ``directory`` (default: :func:`session_directory`), newest first.

    ``title`` is the first user prompt (cut at 60 characters); ``cwd`` the
    directory the session was started in, when its header says. Files that
    are not sessions are left out.
    """
    folder = Path(directory) if directory is not None else session_directory()
    if not folder.is_dir():
        return []
    found: list[SessionInfo] = []
    for path in folder.glob("*.jsonl"):
        try:
            session = load_session(path)
        except (OSError, ValueError):
            continue
        title = next(
            (m.text for m in session.messages if isinstance(m, _UserMessage) and m.text), ""
        )
        title = " ".join(title.split())
        if len(title) > 60:
            title = title[:59] + "…"
        modified = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
        cwd = session.meta.get("cwd")
        found.append(
            SessionInfo(
                session.session_id,
                path,
                modified,
                title,
                len(session.messages),
                Path(cwd) if isinstance(cwd, str) and cwd else None,
            )
        )
    found.sort(key=lambda info: (info.modified, info.session_id), reverse=True)
    return found


def find_session(session_id: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """The file of the session ``session_id`` (or the only one whose id starts with it).

    Raises:
        LookupError: no session has that id, or several start with it.
    """
    folder = Path(directory) if directory is not None else session_directory()
    exact = folder / f"{session_id}.jsonl"
    if exact.is_file():
        return exact
    matches = sorted(folder.glob(f"{session_id}*.jsonl")) if folder.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LookupError(f"no session {session_id!r} in {folder}")
    names = ", ".join(p.stem for p in matches)
    raise LookupError(f"several sessions start with {session_id!r}: {names}")


def _read_header(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8", errors="replace") as file:
        first = file.readline()
    try:
        data = json.loads(checked_text(first))
    except ValueError:
        return {}
    return data if isinstance(data, dict) and data.get("type") == "session" else {}


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"
