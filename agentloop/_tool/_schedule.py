"""Scheduling tool calls across an agent tree: a shared budget, exclusive tools, resource keys.

:class:`Claim` is what one call needs: to run alone (``exclusive``), or keys it
reads (shared with other readers) and keys it writes (excluding everyone else
on those keys). :class:`Schedule` is the policy a run sets: how many calls may
run at once in the whole tree (and per tool), and its deadlines.
:class:`Scheduler` carries it out: one per tree, found by sub-agents through a
context variable (trio copies the context of the task that starts a task, so a
sub-agent's loop, which runs inside its parent's tool call, sees its parent's).

Waiting is first come, first served among calls that conflict: a call never
starts ahead of an earlier waiting call it conflicts with, or ahead of an
earlier call waiting for the same budget, so an exclusive call or a writer is
not starved by a stream of readers.
"""

from __future__ import annotations

import collections
import contextlib
import heapq
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

import attrs

from .._check import number_field
from .._words import plural

if TYPE_CHECKING:  # trio loads with the driver: the loop core imports the values here
    import trio

__all__ = [
    "NO_CLAIM",
    "Claim",
    "Schedule",
    "Scheduler",
    "Ticket",
    "claim_of",
    "current_scheduler",
    "use_scheduler",
]


def _keys(value: Collection[str]) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset((value,))
    return frozenset(value)


@attrs.frozen
class Claim:
    """What a tool call needs while it runs, for the scheduler.

    ``exclusive``: nothing else in the agent tree runs while it does. ``reads``:
    keys it only reads, shared with other readers. ``writes``: keys it changes;
    no other call using one of them (reading or writing) runs meanwhile. Keys
    are plain strings; the file tools use resolved paths, MCP tools
    ``"mcp:<server>"``. ``budget``: whether the call counts against
    :attr:`Schedule.max_concurrent` (a sub-agent's call does not: its children
    do).

    >>> Claim(writes={"/tmp/a.txt"}).conflicts(Claim(reads={"/tmp/a.txt"}))
    True
    >>> Claim(reads={"/tmp/a.txt"}).conflicts(Claim(reads={"/tmp/a.txt"}))
    False
    """

    exclusive: bool = attrs.field(default=False, kw_only=True)
    reads: frozenset[str] = attrs.field(default=frozenset(), converter=_keys, kw_only=True)
    writes: frozenset[str] = attrs.field(default=frozenset(), converter=_keys, kw_only=True)
    budget: bool = attrs.field(default=True, kw_only=True)

    def conflicts(self, other: Claim) -> bool:
        """Whether the two calls may not run at the same time."""
        if self.exclusive or other.exclusive:
            return True
        if self.writes and (self.writes & other.writes or self.writes & other.reads):
            return True
        return bool(other.writes and other.writes & self.reads)

    @property
    def trivial(self) -> bool:
        """Whether the claim conflicts with nothing (budget aside)."""
        return not (self.exclusive or self.reads or self.writes)


NO_CLAIM = Claim()
_NO_BUDGET = Claim(budget=False)

_optional_positive = number_field(above=0, optional=True)


def _per_tool(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    for name, limit in value.items():
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ValueError(f"Schedule per_tool[{name!r}] must be an integer >= 1, got {limit!r}")


@attrs.frozen(kw_only=True)
class Schedule:
    """How a run and its sub-agents share time: limits on calls at once, and deadlines.

    ``max_concurrent``: tool calls running at once in the whole agent tree (a
    sub-agent's own call does not count, its calls do), ``None`` for no limit.
    ``per_tool``: the same, per tool name. ``run_timeout``: seconds the run may
    take, sub-agents included; ``turn_timeout``: seconds each turn (its model
    request and its tool calls) may take. When a deadline passes, running calls
    are cancelled (each gets a result), and the run ends with
    ``StopKind.DEADLINE``. A sub-agent runs inside its parent's deadlines,
    whatever its own say.

    >>> Schedule(max_concurrent=50, run_timeout=600).max_concurrent
    50
    """

    max_concurrent: int | None = attrs.field(default=None, validator=_optional_positive)
    per_tool: Mapping[str, int] = attrs.field(factory=dict, validator=_per_tool)
    run_timeout: float | None = attrs.field(default=None, validator=_optional_positive)
    turn_timeout: float | None = attrs.field(default=None, validator=_optional_positive)


class Ticket:
    """A call's place: held behind an exclusive call, waiting for its keys, ready
    (waiting for the budget), running, then done."""

    __slots__ = (
        "call_id",
        "claim",
        "cleared",
        "event",
        "loop_id",
        "name",
        "running",
        "seq",
        "state",
    )

    def __init__(self, name: str, call_id: str, loop_id: str, claim: Claim) -> None:
        self.name = name
        self.call_id = call_id
        self.loop_id = loop_id
        self.claim = claim
        self.running = False
        self.event: trio.Event | None = None
        self.seq = 0
        self.state = "new"  # new, held, keys, ready, running, done
        self.cleared: set[str] = set()  # keys on which nothing ahead conflicts

    def __lt__(self, other: Ticket) -> bool:
        return self.seq < other.seq


class Scheduler:
    """The budget and the claims of one agent tree; see the module docstring.

    Each key has a queue of the calls that use it, in the order they came: a
    reader is clear on a key when no writer is ahead of it, a writer when it
    is first. A call clear on all its keys is ready, and runs when the budget
    has room; ready calls take freed places in the order they came. An
    exclusive call closes a gate: later calls are held until it is done, and
    it starts when every earlier call is done. Each step costs the number of
    keys of the calls involved, not the number of waiting calls.

    Synchronous bookkeeping, with a trio.Event per waiting call. Not thread-safe
    (one trio run).
    """

    __slots__ = (
        "_active",
        "_gate",
        "_held",
        "_queues",
        "_ready",
        "_seq",
        "_tool_running",
        "_writers_queued",
        "max_concurrent",
        "per_tool",
        "running",
        "running_tickets",
        "schedule",
        "waiting",
    )

    def __init__(self, schedule: Schedule | None = None) -> None:
        self.schedule = schedule or Schedule()
        self.max_concurrent = self.schedule.max_concurrent or math.inf
        self.per_tool = dict(self.schedule.per_tool)
        self.running = 0  # running calls that count against the budget
        self.running_tickets: set[Ticket] = set()
        self.waiting = 0  # calls queued (held, waiting for keys, or ready)
        self._seq = 0
        self._tool_running: dict[str, int] = {}
        self._queues: dict[str, dict[Ticket, None]] = {}  # key -> its calls, in order
        self._writers_queued: dict[str, int] = {}  # key -> writers in its queue
        self._ready: list[Ticket] = []  # a heap, by arrival
        self._gate: Ticket | None = None  # the exclusive call in charge
        self._held: collections.deque[Ticket] = collections.deque()
        self._active = 0  # admitted calls not done (the gate aside)

    # ----------------------------------------------------------------- the API

    def try_start(self, ticket: Ticket) -> str | None:
        """Start ``ticket`` now if it may (returns None), else queue it and say why.

        A claim that is trivial and skips the budget needs no ticket: callers
        run such calls without one.
        """
        assert ticket.claim.budget or not ticket.claim.trivial
        self._seq += 1
        ticket.seq = self._seq
        import trio

        ticket.event = trio.Event()
        if self._gate is not None:
            ticket.state = "held"
            self._held.append(ticket)
            self.waiting += 1
            return _waiting_for(self._gate, "it runs alone")
        self._admit(ticket)
        return None if ticket.running else self._reason(ticket)

    async def wait(self, ticket: Ticket) -> None:
        """Wait until a queued ticket runs. On cancellation it leaves the queue."""
        assert ticket.event is not None
        try:
            await ticket.event.wait()
        except BaseException:
            self.release(ticket)
            raise

    def release(self, ticket: Ticket) -> None:
        """A call ended, or will not run: free its place (or leave the queue) and start
        whoever may start now. Idempotent."""
        state = ticket.state
        if state in ("done", "new"):
            return
        ticket.state = "done"
        if state == "held":
            self._held.remove(ticket)
            self.waiting -= 1
            return
        if state in ("keys", "ready"):
            self.waiting -= 1  # (a ready ticket stays in the heap; it is skipped there)
        if state == "running":
            ticket.running = False
            self.running_tickets.discard(ticket)
            if ticket.claim.budget:
                self.running -= 1
                if ticket.name in self.per_tool:
                    self._tool_running[ticket.name] -= 1
        if ticket is self._gate:
            self._gate = None
            self._open_gate()
            return
        self._active -= 1
        self._leave_keys(ticket)
        self._fill()
        self._try_gate()

    # ----------------------------------------------------------------- admission

    def _admit(self, ticket: Ticket) -> None:
        claim = ticket.claim
        if claim.exclusive:
            self._gate = ticket
            ticket.state = "keys"
            self.waiting += 1
            self._try_gate()
            return
        self._active += 1
        ticket.state = "keys"
        self.waiting += 1
        queues, writers = self._queues, self._writers_queued
        for key in claim.writes:
            queue = queues.setdefault(key, {})
            queue[ticket] = None
            writers[key] = writers.get(key, 0) + 1
            if len(queue) == 1:
                ticket.cleared.add(key)
        for key in claim.reads - claim.writes:
            queue = queues.setdefault(key, {})
            queue[ticket] = None
            if not writers.get(key):
                ticket.cleared.add(key)
        if len(ticket.cleared) == len(claim.writes | claim.reads):
            self._make_ready(ticket)

    def _make_ready(self, ticket: Ticket) -> None:
        # Calls that came earlier and wait for the budget wait only while it is full,
        # when this one cannot run either: a freed place goes to the earliest.
        ticket.state = "ready"
        if self._may_run(ticket):
            self._start(ticket)
        else:
            heapq.heappush(self._ready, ticket)

    def _may_run(self, ticket: Ticket) -> bool:
        if not ticket.claim.budget:
            return True
        if self.running >= self.max_concurrent:
            return False
        limit = self.per_tool.get(ticket.name)
        return limit is None or self._tool_running.get(ticket.name, 0) < limit

    def _start(self, ticket: Ticket) -> None:
        if ticket.state != "new":
            self.waiting -= 1
        ticket.state = "running"
        ticket.running = True
        self.running_tickets.add(ticket)
        if ticket.claim.budget:
            self.running += 1
            if ticket.name in self.per_tool:
                self._tool_running[ticket.name] = self._tool_running.get(ticket.name, 0) + 1
        if ticket.event is not None:
            ticket.event.set()

    def _fill(self) -> None:
        """Give free places to the ready calls, in the order they came."""
        ready = self._ready
        skipped: list[Ticket] = []
        while ready and self.running < self.max_concurrent:
            ticket = heapq.heappop(ready)
            if ticket.state != "ready":
                continue
            if self._may_run(ticket):
                self._start(ticket)
            else:
                skipped.append(ticket)  # its tool's limit: later calls of other tools go on
        for ticket in skipped:
            heapq.heappush(ready, ticket)

    # ----------------------------------------------------------------- keys

    def _leave_keys(self, ticket: Ticket) -> None:
        claim = ticket.claim
        queues, writers = self._queues, self._writers_queued
        for key in claim.writes | claim.reads:
            queue = queues[key]
            del queue[ticket]
            wrote = key in claim.writes
            if wrote:
                writers[key] -= 1
                if not writers[key]:
                    del writers[key]
            if not queue:
                del queues[key]
                continue
            if wrote:
                self._clear_from_head(key, queue)
            else:
                head = next(iter(queue))
                if key in head.claim.writes:
                    self._clear(head, key)  # a reader ahead of it left

    def _clear_from_head(self, key: str, queue: dict[Ticket, None]) -> None:
        """A writer left ``key``: clear the readers now first, or the writer now first."""
        for position, ticket in enumerate(queue):
            if key in ticket.claim.writes:
                if position == 0:
                    self._clear(ticket, key)
                return
            self._clear(ticket, key)

    def _clear(self, ticket: Ticket, key: str) -> None:
        cleared = ticket.cleared
        if key in cleared or ticket.state != "keys":
            return
        cleared.add(key)
        if len(cleared) == len(ticket.claim.writes | ticket.claim.reads):
            self._make_ready(ticket)

    # ----------------------------------------------------------------- the gate

    def _try_gate(self) -> None:
        gate = self._gate
        if gate is not None and gate.state == "keys" and self._active == 0:
            self._start(gate)

    def _open_gate(self) -> None:
        """The exclusive call is done: let the held calls in, in order, up to the next one."""
        held = self._held
        while held and self._gate is None:
            ticket = held.popleft()
            self.waiting -= 1
            ticket.state = "new"
            self._admit(ticket)
        self._fill()

    # ----------------------------------------------------------------- reasons

    def _reason(self, ticket: Ticket) -> str:
        """Why a queued call waits (for its ToolCallQueued event)."""
        claim = ticket.claim
        if claim.exclusive:
            other = next(iter(self.running_tickets), None)
            if other is not None:
                return _waiting_for(other, "this call runs alone")
            return "waiting: this call runs alone"
        if ticket.state == "keys":
            for key in sorted(claim.writes | claim.reads):
                for other in self._queues[key]:
                    if other is ticket:
                        break
                    if key in claim.writes or key in other.claim.writes:
                        why = f"both use {key}" if other.running else "it came first"
                        return _waiting_for(other, why)
        limit = self.per_tool.get(ticket.name)
        if self.running < self.max_concurrent and limit is not None:
            return f"waiting for the limit of {ticket.name} ({limit} running)"
        return f"waiting for the budget ({plural(self.running, 'call')} running)"


def _waiting_for(ticket: Ticket, why: str) -> str:
    return f"waiting for {ticket.name} ({ticket.call_id}): {why}"


#: The scheduler of the agent tree the current task runs in.
_current: ContextVar[Scheduler | None] = ContextVar("agentloop_scheduler", default=None)


def current_scheduler() -> Scheduler | None:
    """The scheduler of the tree the current task belongs to, if any."""
    return _current.get()


@contextlib.contextmanager
def use_scheduler(scheduler: Scheduler) -> Iterator[Scheduler]:
    """Make ``scheduler`` the current task's (and the tasks it starts) for the block."""
    token = _current.set(scheduler)
    try:
        yield scheduler
    finally:
        _current.reset(token)


def claim_of(
    resources: Callable[[dict[str, Any]], Claim] | None, arguments: dict[str, Any]
) -> Claim:
    """A call's claim from its tool's ``resources`` (a tool without one claims nothing)."""
    if resources is None:
        return NO_CLAIM
    claim = resources(arguments)
    if not isinstance(claim, Claim):
        raise TypeError(f"resources() must return a Claim, got {type(claim).__name__}")
    return claim
