"""Approvals as data: the decisions a run waits for, and where a run stopped to wait.

A permission ``ask`` (see :class:`~agentloop.Permissions`) is answered by the
approver now (``True``, ``False``, an :class:`Approve` or a :class:`Deny`), or
later: an approver that returns :data:`DEFER` (or ``Permissions(approver=DEFER)``)
leaves the call pending. The other calls of the same reply still run; the run
then ends with ``StopKind.AWAITING_APPROVAL``, and its ``AgentEnd.suspended``
(a :class:`Suspended`) holds what the run needs to go on: the
:class:`PendingCall` values and the results already made, held back so that the
history's order is the one an uninterrupted run gives. ``Agent.resume(decisions)``
goes on once every pending call is decided::

    end = ...                                   # the AgentEnd of the run
    for call in end.pending:
        print(call.tool_name, call.arguments, call.reason)
    async with agent.resume([end.pending[0].approve(), end.pending[1].deny("Not today")]):
        ...

Every value here is plain data: :mod:`agentloop.serialization` writes and reads
it, so a session file, a database row or a Temporal history can keep it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any, Final, Protocol, TypeAlias

import attrs

from ._errors import AgentloopError
from ._types import ToolResultMessage, UserMessage


class Asked(Protocol):
    """What :func:`answer_of` reads of a question (a ``PermissionRequest``)."""

    @property
    def tool_call_id(self) -> str: ...
    @property
    def tool_name(self) -> str: ...
    @property
    def subject(self) -> tuple[str, str] | None: ...


__all__ = [
    "DEFER",
    "Approve",
    "Asked",
    "ApprovalError",
    "Decision",
    "Deferred",
    "Deny",
    "PendingCall",
    "Suspended",
    "answer_of",
    "check_decisions",
    "describe_call",
    "not_approved",
    "subject_pair",
]


class Deferred(enum.Enum):
    """The type of :data:`DEFER`."""

    DEFER = "defer"

    def __repr__(self) -> str:
        return "DEFER"


DEFER: Final = Deferred.DEFER
"""What an approver returns to decide later; as ``Permissions(approver=DEFER)``,
every call that needs approval waits for a decision."""


def _pending(value: Iterable[PendingCall]) -> tuple[PendingCall, ...]:
    return tuple(value)


def _results(value: Iterable[ToolResultMessage]) -> tuple[ToolResultMessage, ...]:
    return tuple(value)


def _queued(value: Iterable[UserMessage]) -> tuple[UserMessage, ...]:
    return tuple(value)


def subject_pair(value: Iterable[str] | None) -> tuple[str, str] | None:
    """A call's subject as a ``(kind, value)`` pair (JSON gives a list), or None."""
    if value is None:
        return None
    kind, text = value
    return (kind, text)


def _arguments(value: Any) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise TypeError(f"arguments must be a dict or None, got {type(value).__name__}")
    return value


@attrs.frozen
class Approve:
    """Let the pending call ``tool_call_id`` run; with ``arguments``, run it with those.

    Edited arguments are checked against the tool's schema like any call's: an
    invalid edit reaches the model as the usual ``Invalid arguments`` result
    naming each failing ``$.path``. The history keeps the call as the model made
    it; ``ToolExecutionStart.args`` and ``ToolApprovalDecided.arguments`` show
    what ran.

    >>> Approve("call_1", {"path": "notes.md"})
    Approve(tool_call_id='call_1', arguments={'path': 'notes.md'})
    """

    tool_call_id: str
    arguments: dict[str, Any] | None = attrs.field(default=None, converter=_arguments)


@attrs.frozen
class Deny:
    """Refuse the pending call ``tool_call_id``; the model reads
    ``"Permission denied: <reason>"`` (a default reason when it is None)."""

    tool_call_id: str
    reason: str | None = None


Decision: TypeAlias = Approve | Deny
"""A decision on one pending call."""


@attrs.frozen(kw_only=True)
class PendingCall:
    """A tool call that waits for a decision.

    ``reason`` is the sentence that asked (``"bash 'rm -rf build' needs approval
    (the rule ask(bash(rm *)))"``), ``rule`` the ask rule's text, if a rule asked
    (None: the ``default`` or ``sandboxed`` setting did), ``subject`` what the
    call touches, as the tool declares it (``("command", "make test")``), if it does.
    """

    tool_call_id: str
    tool_name: str
    arguments: dict[str, Any]
    reason: str
    rule: str | None = None
    subject: tuple[str, str] | None = attrs.field(default=None, converter=subject_pair)

    def approve(self, arguments: dict[str, Any] | None = None) -> Approve:
        """The decision to let this call run (with ``arguments``, if given)."""
        return Approve(self.tool_call_id, arguments)

    def deny(self, reason: str | None = None) -> Deny:
        """The decision to refuse this call, telling the model ``reason``."""
        return Deny(self.tool_call_id, reason)


@attrs.frozen(kw_only=True)
class Suspended:
    """Where a run stopped to wait for decisions (``AgentEnd.suspended``).

    Attributes:
        pending: The calls that wait, in the reply's order.
        results: The results of the same reply's other calls, in its order,
            held back until the pending calls are decided.
        turn_index: The turn the calls belong to.
        turns_done, requests, tokens_used, cost: What the run's limits had
            counted; the run goes on counting from there.
        elapsed: Seconds the run had run (``max_duration``,
            ``Schedule.run_timeout``); the wait is not counted.
        turn_elapsed: Seconds that turn had run (``Schedule.turn_timeout``).
        queued: Steering messages the run took from its queue during that
            turn, not yet in the history: they join it after the turn's
            results, when the run goes on.
    """

    pending: tuple[PendingCall, ...] = attrs.field(converter=_pending)
    results: tuple[ToolResultMessage, ...] = attrs.field(default=(), converter=_results)
    turn_index: int = 0
    turns_done: int = 0
    requests: int = 0
    tokens_used: int = 0
    cost: float = 0.0
    elapsed: float = 0.0
    turn_elapsed: float = 0.0
    queued: tuple[UserMessage, ...] = attrs.field(default=(), converter=_queued)

    @property
    def call_ids(self) -> tuple[str, ...]:
        """The pending calls' ids, in order."""
        return tuple(call.tool_call_id for call in self.pending)


def describe_call(tool_name: str, subject: tuple[str, str] | None) -> str:
    """A call as a question or a refusal names it: ``bash 'make test'``."""
    if subject is None:
        return f"calling {tool_name}"
    kind, value = subject
    shown = value if len(value) <= 200 else value[:200] + "…"
    return f"{tool_name} on {shown!r}" if kind == "path" else f"{tool_name} {shown!r}"


def not_approved(tool_name: str, subject: tuple[str, str] | None) -> str:
    """``"bash 'make' was not approved"``: a refusal that gives no reason."""
    return f"{describe_call(tool_name, subject)} was not approved"


def answer_of(request: Asked, answer: object) -> Approve | Deny | Deferred:
    """What an approver's return value decides for ``request``: True and False as an
    ``Approve`` and a ``Deny``; a decision for another call, or anything else, refuses it
    (a refusal without a reason gets :func:`not_approved`'s)."""
    if answer is True:
        return Approve(request.tool_call_id)
    if answer is False:
        return Deny(request.tool_call_id, not_approved(request.tool_name, request.subject))
    if answer is DEFER:
        return DEFER
    if isinstance(answer, Approve | Deny):
        if answer.tool_call_id != request.tool_call_id:
            return Deny(
                request.tool_call_id,
                f"the approver answered for another call ({answer.tool_call_id!r})",
            )
        if isinstance(answer, Deny) and not answer.reason:
            return Deny(request.tool_call_id, not_approved(request.tool_name, request.subject))
        return answer
    return Deny(
        request.tool_call_id,
        f"the approver returned {type(answer).__name__}, not True, False, a decision or DEFER",
    )


class ApprovalError(AgentloopError, ValueError):
    """Decisions that cannot be applied: an unknown call id, a call decided twice,
    a pending call left undecided, or decisions where no call waits. Nothing ran."""


def _ids(ids: Iterable[str]) -> str:
    return ", ".join(repr(i) for i in ids)


def check_decisions(
    pending: Sequence[PendingCall], decisions: Iterable[Decision]
) -> dict[str, Decision]:
    """The decisions by call id, once each is checked against ``pending``.

    Raises:
        ApprovalError: a decision names a call that is not pending, two decide
            one call, or a pending call has none (each names the ids).
        TypeError: a decision is not an :class:`Approve` or a :class:`Deny`.
    """
    waiting = [call.tool_call_id for call in pending]
    known = set(waiting)
    by_id: dict[str, Decision] = {}
    unknown: list[str] = []
    twice: list[str] = []
    for decision in decisions:
        if not isinstance(decision, Approve | Deny):
            raise TypeError(f"a decision is an Approve or a Deny, got {type(decision).__name__}")
        call_id = decision.tool_call_id
        if call_id not in known:
            unknown.append(call_id)
        elif call_id in by_id:
            twice.append(call_id)
        else:
            by_id[call_id] = decision
    problems: list[str] = []
    if unknown:
        problems.append(
            f"no pending call has the id {_ids(unknown)}"
            + (f" (pending: {_ids(waiting)})" if waiting else " (no call is pending)")
        )
    if twice:
        problems.append(f"{_ids(dict.fromkeys(twice))} decided more than once")
    missing = [call_id for call_id in waiting if call_id not in by_id]
    if missing:
        problems.append(f"no decision for {_ids(missing)}")
    if problems:
        raise ApprovalError("; ".join(problems) + "; nothing ran")
    return by_id
