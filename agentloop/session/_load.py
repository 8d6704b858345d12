"""Loading a session: its history, what awaits approval, what a stopped process left
open; and recovering it."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .. import _events as ev
from .._approval import Approve, Decision, Deny, PendingCall, Suspended, not_approved
from .._text import checked_text
from .._tool import ToolNotFound, ToolResult, tool_traits
from .._types import (
    AssistantMessage,
    Message,
    StopReason,
    TextContent,
    ToolCall,
    ToolOutcome,
    ToolResultMessage,
    Usage,
)
from ..serialization import DeserializationError, from_dict
from ._record import INTERRUPTED, NOT_RUN_AGAIN, log


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
                                subject=pending.subject,
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
        from .._loop import run_tool_call
        from .._tool import ToolRegistry, check_arguments

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
        subject=asked.subject,
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
