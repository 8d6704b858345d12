"""Scheduling: the tree-wide budget, exclusive tools, resource keys, deadlines, the events."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop._tool import tool_traits
from agentloop._tool._schedule import Claim, Scheduler, Ticket
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import EventRecorder, assert_well_formed
from agentloop.tools import SubAgentTool

# --------------------------------------------------------------------------- a probe tool


@attrs.define
class Watch:
    """What ran at once, checked at every start: the budget and the conflicts."""

    budget: float = float("inf")
    # A key per running call (call ids repeat across sub-agents) -> (call id, tool, claim).
    running: dict[object, tuple[str, str, Claim]] = attrs.field(factory=dict)
    peak: int = 0
    starts: list[tuple[float, str]] = attrs.field(factory=list)
    problems: list[str] = attrs.field(factory=list)

    def start(self, key: object, call_id: str, tool: str, claim: Claim) -> None:
        for other_id, other_tool, other in self.running.values():
            if claim.conflicts(other):
                self.problems.append(f"{call_id} ({tool}) ran beside {other_id} ({other_tool})")
        self.running[key] = (call_id, tool, claim)
        counted = sum(1 for _, _, c in self.running.values() if c.budget)
        self.peak = max(self.peak, counted)
        if counted > self.budget:
            self.problems.append(f"{counted} calls ran at once, over {self.budget}")
        self.starts.append((trio.current_time(), call_id))

    def end(self, key: object) -> None:
        del self.running[key]


@attrs.define(eq=False)
class Probe:
    """Sleeps ``seconds``; claims what its arguments say; reports to the watch."""

    name: str
    watch: Watch
    exclusive: bool = False
    label: str = "Probe"
    description: str = "Work a while."
    parameters_schema: dict[str, Any] = attrs.field(
        factory=lambda: {
            "type": "object",
            "properties": {
                "seconds": {"type": "number"},
                "reads": {"type": "array", "items": {"type": "string"}},
                "writes": {"type": "array", "items": {"type": "string"}},
            },
        }
    )

    def resources(self, params: dict[str, Any]) -> Claim:
        return Claim(
            exclusive=self.exclusive,
            reads=params.get("reads", ()),
            writes=params.get("writes", ()),
        )

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        key = object()
        self.watch.start(key, ctx.tool_call_id, self.name, self.resources(params))
        try:
            await trio.sleep(params.get("seconds", 1))
        finally:
            self.watch.end(key)
        return al.ToolResult.text("ok")


async def run(agent: al.Agent, *messages: str) -> EventRecorder:
    recorder = EventRecorder()
    async with agent.prompt(*messages) as events:
        await recorder.consume(events)
    return recorder


def calls(*arguments: dict[str, Any], tool: str = "work") -> Any:
    return reply(*[call(tool, args, id=f"c{i}") for i, args in enumerate(arguments, 1)])


def queue_events(recorder: EventRecorder) -> list[tuple[str, str, Any]]:
    """The queued events in order, then the dequeued ones by time waited and id (calls
    that start at one instant do so in whatever order trio runs their tasks)."""
    queued: list[tuple[str, str, Any]] = []
    dequeued: list[tuple[str, str, Any]] = []
    for event in recorder.events:
        match event:
            case al.ToolCallQueued(tool_call_id=call_id, reason=reason):
                queued.append(("queued", call_id, reason))
            case al.ToolCallDequeued(tool_call_id=call_id, waited=waited):
                dequeued.append(("dequeued", call_id, waited))
    return queued + sorted(dequeued, key=lambda item: (item[2], item[1]))


# --------------------------------------------------------------------------- Claim, Schedule


def test_conflicts() -> None:
    a = Claim(reads={"a"})
    assert not a.conflicts(Claim(reads={"a"}))
    assert a.conflicts(Claim(writes={"a"}))
    assert Claim(writes={"a"}).conflicts(a)
    assert Claim(writes={"a"}).conflicts(Claim(writes={"a", "b"}))
    assert not Claim(writes={"a"}).conflicts(Claim(writes={"b"}, reads={"c"}))
    assert Claim(exclusive=True).conflicts(Claim())
    assert not Claim().conflicts(Claim())
    assert Claim(reads="one key").reads == frozenset({"one key"})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_concurrent": 0}, "max_concurrent must be"),
        ({"per_tool": {"bash": 0}}, "Schedule per_tool['bash'] must be an integer >= 1, got 0"),
        ({"run_timeout": -1}, "run_timeout must be"),
        ({"turn_timeout": 0}, "turn_timeout must be"),
    ],
)
def test_bad_schedules_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match="must be") as caught:
        al.Schedule(**kwargs)
    assert message in str(caught.value)


def test_waiting_is_first_come_first_served_among_conflicts() -> None:
    """A writer queued behind readers is not overtaken by later readers; the budget is FIFO."""
    scheduler = Scheduler()

    def ticket(call_id: str, claim: Claim) -> Ticket:
        return Ticket("t", call_id, "loop", claim)

    r1, w, r2 = (
        ticket("r1", Claim(reads={"k"})),
        ticket("w", Claim(writes={"k"})),
        ticket("r2", Claim(reads={"k"})),
    )
    assert scheduler.try_start(r1) is None
    assert scheduler.try_start(w) == "waiting for t (r1): both use k"
    assert scheduler.try_start(r2) == "waiting for t (w): it came first"
    scheduler.release(r1)
    assert (w.running, r2.running) == (True, False)
    scheduler.release(w)
    assert r2.running

    budget = Scheduler(al.Schedule(max_concurrent=1))
    first, second, third = (ticket(name, Claim()) for name in ("1", "2", "3"))
    assert budget.try_start(first) is None
    assert budget.try_start(second) == "waiting for the budget (1 call running)"
    assert budget.try_start(third) == "waiting for the budget (1 call running)"
    budget.release(first)
    assert (second.running, third.running, budget.waiting) == (True, False, 1)


# --------------------------------------------------------------------------- through Agent


async def test_the_budget_queues_calls_and_says_so(autojump_clock: Any) -> None:
    watch = Watch(budget=2)
    provider = ScriptedProvider([calls(*[{"seconds": 1}] * 4), reply("done")])
    agent = al.Agent(provider, tools=[Probe("work", watch)], schedule=al.Schedule(max_concurrent=2))
    recorder = await run(agent, "go")
    assert watch.problems == []
    assert watch.peak == 2
    assert queue_events(recorder) == [
        ("queued", "c3", "waiting for the budget (2 calls running)"),
        ("queued", "c4", "waiting for the budget (2 calls running)"),
        ("dequeued", "c3", 1.0),
        ("dequeued", "c4", 1.0),
    ]
    names = [
        type(e).__name__
        for e in recorder.events
        if getattr(e, "tool_call_id", None) == "c3" and not isinstance(e, al.MessageUpdate)
    ]
    assert names == ["ToolExecutionStart", "ToolCallQueued", "ToolCallDequeued", "ToolExecutionEnd"]
    assert trio.current_time() == 2.0


async def test_a_per_tool_limit(autojump_clock: Any) -> None:
    watch = Watch()
    fetch, other = Probe("fetch", watch), Probe("other", watch)
    provider = ScriptedProvider(
        [
            reply(
                call("fetch", {}, id="f1"),
                call("fetch", {}, id="f2"),
                call("other", {}, id="o1"),
                call("fetch", {}, id="f3"),
            ),
            reply("done"),
        ]
    )
    agent = al.Agent(provider, tools=[fetch, other], schedule=al.Schedule(per_tool={"fetch": 2}))
    recorder = await run(agent, "go")
    assert queue_events(recorder) == [
        ("queued", "f3", "waiting for the limit of fetch (2 running)"),
        ("dequeued", "f3", 1.0),
    ]
    assert trio.current_time() == 2.0


async def test_an_exclusive_tool_runs_alone(autojump_clock: Any) -> None:
    watch = Watch()
    work, alone = Probe("work", watch), Probe("alone", watch, exclusive=True)
    provider = ScriptedProvider(
        [
            reply(
                call("work", {}, id="w1"),
                call("alone", {}, id="x1"),
                call("work", {}, id="w2"),
            ),
            reply("done"),
        ]
    )
    recorder = await run(al.Agent(provider, tools=[work, alone]), "go")
    assert watch.problems == []
    assert queue_events(recorder) == [
        ("queued", "x1", "waiting for work (w1): this call runs alone"),
        ("queued", "w2", "waiting for alone (x1): it runs alone"),
        ("dequeued", "x1", 1.0),
        ("dequeued", "w2", 2.0),
    ]
    assert trio.current_time() == 3.0


@attrs.define(eq=False)
class Reader:
    """``exclusive = True`` and a ``resources`` that claims only reads: both must hold."""

    log: list[tuple[float, str, str]]
    name: str = "alone"
    label: str = "Reader"
    description: str = "Read a while, alone."
    exclusive: bool = True
    parameters_schema: dict[str, Any] = attrs.field(factory=lambda: {"type": "object"})

    def resources(self, params: dict[str, Any]) -> Claim:
        return Claim(reads={"/data"})

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.log.append((trio.current_time(), "start", ctx.tool_call_id))
        await trio.sleep(1)
        self.log.append((trio.current_time(), "end", ctx.tool_call_id))
        return al.ToolResult.text("ok")


@pytest.mark.parametrize("schedule", [None, al.Schedule(max_concurrent=8)])
async def test_an_exclusive_tool_with_resources_still_runs_alone(
    autojump_clock: Any, schedule: al.Schedule | None
) -> None:
    """Two calls of a tool both ``exclusive`` and claiming shared reads run one after
    the other (its reads alone would let them overlap), with or without a Schedule."""
    log: list[tuple[float, str, str]] = []
    provider = ScriptedProvider(
        [reply(call("alone", {}, id="a1"), call("alone", {}, id="a2")), reply("done")]
    )
    agent = al.Agent(provider, tools=[Reader(log)], schedule=schedule)
    recorder = await run(agent, "go")
    assert log == [
        (0.0, "start", "a1"),
        (1.0, "end", "a1"),
        (1.0, "start", "a2"),
        (2.0, "end", "a2"),
    ]
    assert queue_events(recorder) == [
        ("queued", "a2", "waiting for alone (a1): it runs alone"),
        ("dequeued", "a2", 1.0),
    ]


def test_exclusive_makes_the_claims_of_resources_exclusive() -> None:
    """``exclusive = True`` adds ``exclusive`` to what ``resources`` claims, keeping the rest."""
    resources = tool_traits(Reader([])).resources
    assert resources is not None
    assert resources({}) == Claim(exclusive=True, reads={"/data"})

    class Free(Reader):
        def resources(self, params: dict[str, Any]) -> Claim:
            return Claim(writes={"/x"}, budget=False)

    free = tool_traits(Free([])).resources
    assert free is not None
    assert free({}) == Claim(exclusive=True, writes={"/x"}, budget=False)
    assert tool_traits(attrs.evolve(Reader([]), exclusive=False)).resources is not None
    plain = tool_traits(attrs.evolve(Reader([]), exclusive=False)).resources
    assert plain is not None
    assert plain({}) == Claim(reads={"/data"})


async def test_calls_on_one_key_take_turns_and_others_run_beside_them(autojump_clock: Any) -> None:
    watch = Watch()
    provider = ScriptedProvider(
        [
            calls(
                {"writes": ["/a"]},
                {"reads": ["/a"]},
                {"reads": ["/b"]},
                {"writes": ["/b", "/c"]},
                {"reads": ["/c"]},
            ),
            reply("done"),
        ]
    )
    recorder = await run(al.Agent(provider, tools=[Probe("work", watch)]), "go")
    assert watch.problems == []
    assert queue_events(recorder) == [
        ("queued", "c2", "waiting for work (c1): both use /a"),
        ("queued", "c4", "waiting for work (c3): both use /b"),
        ("queued", "c5", "waiting for work (c4): it came first"),
        ("dequeued", "c2", 1.0),
        ("dequeued", "c4", 1.0),
        ("dequeued", "c5", 2.0),
    ]


async def test_the_budget_spans_sub_agents_and_a_narrow_budget_cannot_deadlock(
    autojump_clock: Any,
) -> None:
    """Four sub-agents of five calls each, with a budget of one: one call at a time, all done."""
    watch = Watch(budget=1)

    def child() -> ScriptedProvider:
        return ScriptedProvider([calls(*[{"seconds": 1}] * 5), reply("child done")])

    kids = [SubAgentTool(f"kid{i}", child(), tools=[Probe("work", watch)]) for i in range(4)]
    provider = ScriptedProvider(
        [reply(*[call(f"kid{i}", {"task": "t"}) for i in range(4)]), reply("done")]
    )
    agent = al.Agent(provider, tools=kids, schedule=al.Schedule(max_concurrent=1))
    recorder = await run(agent, "go")
    end = recorder.events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)
    assert (watch.problems, watch.peak, len(watch.starts)) == ([], 1, 20)
    assert trio.current_time() == 20.0


async def test_the_run_deadline_cancels_calls_and_ends_the_run(autojump_clock: Any) -> None:
    watch = Watch()
    provider = ScriptedProvider([calls({"seconds": 1}, {"seconds": 5}), reply("never")])
    agent = al.Agent(provider, tools=[Probe("work", watch)], schedule=al.Schedule(run_timeout=2))
    recorder = await run(agent, "go")
    end = recorder.events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.DEADLINE, "Deadline reached (2s)")
    results = [
        (e.tool_call_id, e.result.text_content) for e in recorder.of_type(al.ToolExecutionEnd)
    ]
    assert results == [("c1", "ok"), ("c2", "Cancelled: the run's deadline passed.")]
    assert_well_formed(agent.messages)
    assert trio.current_time() == 2.0


async def test_a_turn_deadline_applies_to_each_turn(autojump_clock: Any) -> None:
    watch = Watch()
    provider = ScriptedProvider([calls({"seconds": 2}), calls({"seconds": 4}), reply("never")])
    agent = al.Agent(provider, tools=[Probe("work", watch)], schedule=al.Schedule(turn_timeout=3))
    recorder = await run(agent, "go")
    end = recorder.events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.DEADLINE, "Turn deadline reached (3s)")
    assert [e.result.text_content for e in recorder.of_type(al.ToolExecutionEnd)] == [
        "ok",
        "Cancelled: the turn's deadline passed.",
    ]
    assert trio.current_time() == 5.0  # 2s for the first turn, 3s for the second
    assert_well_formed(agent.messages)


async def test_a_sub_agent_never_outlives_its_parents_deadline(autojump_clock: Any) -> None:
    watch = Watch()
    child = ScriptedProvider([calls({"seconds": 100}), reply("child done")])
    kid = SubAgentTool(
        "kid", child, tools=[Probe("work", watch)], schedule=al.Schedule(run_timeout=1000)
    )
    provider = ScriptedProvider([reply(call("kid", {"task": "t"}, id="k1")), reply("never")])
    agent = al.Agent(provider, tools=[kid], schedule=al.Schedule(run_timeout=3))
    recorder = await run(agent, "go")
    end = recorder.events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason.kind is al.StopKind.DEADLINE
    (kid_end,) = [e for e in recorder.of_type(al.ToolExecutionEnd) if e.tool_call_id == "k1"]
    assert kid_end.is_error
    assert watch.running == {}
    assert trio.current_time() == 3.0
    assert_well_formed(agent.messages)


async def test_a_call_waiting_in_the_queue_gets_its_result_on_abort(autojump_clock: Any) -> None:
    watch = Watch()
    provider = ScriptedProvider([calls({"seconds": 5}, {"seconds": 5}), reply("never")])
    agent = al.Agent(provider, tools=[Probe("work", watch)], schedule=al.Schedule(max_concurrent=1))
    recorder = EventRecorder()
    async with agent.prompt("go") as events:
        async for event in events:
            recorder.events.append(event)
            if isinstance(event, al.ToolCallQueued):
                agent.abort()
    assert queue_events(recorder) == [("queued", "c2", "waiting for the budget (1 call running)")]
    assert [
        (e.tool_call_id, e.result.text_content) for e in recorder.of_type(al.ToolExecutionEnd)
    ] == [
        ("c1", "Cancelled: the run was aborted."),
        ("c2", "Cancelled: the run was aborted."),
    ]
    assert_well_formed(agent.messages)


async def test_a_resources_method_that_raises_fails_only_its_call(autojump_clock: Any) -> None:
    watch = Watch()

    class Broken(Probe):
        def resources(self, params: dict[str, Any]) -> Claim:
            raise KeyError("path")

    provider = ScriptedProvider(
        [reply(call("broken", {}, id="b1"), call("work", {}, id="w1")), reply("done")]
    )
    recorder = await run(
        al.Agent(provider, tools=[Broken("broken", watch), Probe("work", watch)]), "go"
    )
    assert [
        (e.tool_call_id, e.result.text_content) for e in recorder.of_type(al.ToolExecutionEnd)
    ] == [
        ("b1", "Cannot schedule the call: KeyError: 'path'"),
        ("w1", "ok"),
    ]


# --------------------------------------------------------------------------- any tree


KEYS = st.sampled_from(["a", "b", "c"])
ARGS = st.fixed_dictionaries(
    {"seconds": st.sampled_from([0.5, 1, 2])},
    optional={"reads": st.lists(KEYS, max_size=2), "writes": st.lists(KEYS, max_size=2)},
)
TURN = st.lists(st.tuples(st.sampled_from(["work", "alone"]), ARGS), min_size=1, max_size=5)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parent_turns=st.lists(TURN, max_size=2),
    children=st.lists(st.lists(TURN, min_size=1, max_size=2), max_size=3),
    budget=st.none() | st.integers(min_value=1, max_value=4),
    per_tool=st.none() | st.integers(min_value=1, max_value=2),
    stop=st.none()
    | st.tuples(st.sampled_from(["abort", "deadline"]), st.sampled_from([0.5, 1.5, 3])),
)
def test_any_tree_keeps_the_budget_the_claims_and_one_result_per_call(
    parent_turns: list[list[tuple[str, dict[str, Any]]]],
    children: list[list[list[tuple[str, dict[str, Any]]]]],
    budget: int | None,
    per_tool: int | None,
    stop: tuple[str, float] | None,
) -> None:
    watch = Watch(budget=float("inf") if budget is None else budget)
    tools: list[Any] = [Probe("work", watch), Probe("alone", watch, exclusive=True)]

    def script(turns: list[list[tuple[str, dict[str, Any]]]], last: str) -> ScriptedProvider:
        return ScriptedProvider(
            [reply(*[call(name, args) for name, args in turn]) for turn in turns] + [reply(last)]
        )

    kids = [
        SubAgentTool(f"kid{i}", script(turns, "kid done"), tools=tools)
        for i, turns in enumerate(children)
    ]
    first = [call(kid.name, {"task": "t"}) for kid in kids]
    turns = [[*[(c.name, c.arguments) for c in first]], *parent_turns] if first else parent_turns
    provider = script(turns or [[("work", {"seconds": 1})]], "done")
    schedule = al.Schedule(
        max_concurrent=budget,
        per_tool={} if per_tool is None else {"work": per_tool},
        run_timeout=stop[1] if stop and stop[0] == "deadline" else None,
    )
    agent = al.Agent(provider, tools=[*tools, *kids], schedule=schedule)
    recorder = EventRecorder()

    async def main() -> None:
        with trio.fail_after(10_000):  # a deadlock fails here instead of hanging
            async with trio.open_nursery() as nursery:
                if stop and stop[0] == "abort":

                    async def abort_later() -> None:
                        await trio.sleep(stop[1])
                        agent.abort()

                    nursery.start_soon(abort_later)
                async with agent.prompt("go") as events:
                    await recorder.consume(events)
                nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert watch.problems == []
    assert watch.running == {}
    assert_well_formed(agent.messages)
    starts = [e.tool_call_id for e in recorder.events if isinstance(e, al.ToolExecutionStart)]
    ends = [e.tool_call_id for e in recorder.events if isinstance(e, al.ToolExecutionEnd)]
    assert sorted(starts) == sorted(ends)
    assert len(set(starts)) == len(starts)
    assert isinstance(recorder.events[-1], al.AgentEnd)


async def test_a_passed_deadline_cancels_an_mcp_call_on_the_server(
    autojump_clock: Any, tmp_path: Any
) -> None:
    """The server's tool sees the cancellation (notifications/cancelled), not just the client."""
    pytest.importorskip("mcp")
    from mcp_servers import build_server

    from agentloop.mcp import McpConfig, open_mcp

    marker = tmp_path / "marker"
    async with open_mcp(build_server(), McpConfig(prefix="s")) as server:
        provider = ScriptedProvider(
            [reply(call("s__slow", {"seconds": 1000, "marker": str(marker)}, id="c0"))]
        )
        agent = al.Agent(provider, tools=server.tools, schedule=al.Schedule(run_timeout=7))
        recorder = await run(agent, "go")
    end = recorder.events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.DEADLINE, "Deadline reached (7s)")
    assert [e.result.text_content for e in recorder.of_type(al.ToolExecutionEnd)] == [
        "Cancelled: the run's deadline passed."
    ]
    assert marker.read_text() == "cancelled"


CLAIMS = st.builds(
    Claim,
    exclusive=st.sampled_from([False, False, False, True]),
    reads=st.frozensets(KEYS, max_size=2),
    writes=st.frozensets(KEYS, max_size=2),
    budget=st.booleans(),
).filter(lambda claim: claim.budget or not claim.trivial)


@settings(max_examples=400, deadline=None)
@given(
    claims=st.lists(st.tuples(st.sampled_from(["t1", "t2"]), CLAIMS), min_size=1, max_size=25),
    steps=st.lists(st.sampled_from(["arrive", "finish", "cancel"]), max_size=80),
    budget=st.none() | st.integers(min_value=1, max_value=3),
    per_tool=st.none() | st.integers(min_value=1, max_value=2),
)
def test_the_scheduler_alone_keeps_every_rule_and_never_sticks(
    claims: list[tuple[str, Claim]],
    steps: list[str],
    budget: int | None,
    per_tool: int | None,
) -> None:
    """Random arrivals, ends and cancellations: the rules hold after every step, nothing
    waits while nothing runs, and every call not cancelled runs exactly once."""
    scheduler = Scheduler(
        al.Schedule(max_concurrent=budget, per_tool={} if per_tool is None else {"t1": per_tool})
    )
    tickets = [Ticket(name, f"c{i}", "loop", claim) for i, (name, claim) in enumerate(claims)]
    arrived: list[Ticket] = []
    ran: list[Ticket] = []
    cancelled: list[Ticket] = []

    def check() -> None:
        running = [t for t in arrived if t.running]
        for ticket in running:
            if ticket not in ran:
                ran.append(ticket)
        for i, a in enumerate(running):
            for b in running[i + 1 :]:
                assert not a.claim.conflicts(b.claim), (a.call_id, b.call_id)
        counted = [t for t in running if t.claim.budget]
        assert len(counted) <= (budget or len(counted))
        assert len([t for t in counted if t.name == "t1"]) <= (per_tool or len(counted))
        queued = [t for t in arrived if not t.running and t.state != "done"]
        assert scheduler.waiting == len(queued)
        assert running or not queued, "calls wait while nothing runs"

    pending = list(tickets)
    for step in [*steps, *["arrive"] * len(tickets)]:
        if step == "arrive" and pending:
            ticket = pending.pop(0)
            scheduler.try_start(ticket)
            arrived.append(ticket)
        elif step == "finish":
            running = [t for t in arrived if t.running]
            if running:
                scheduler.release(running[0])
        elif step == "cancel":
            queued = [t for t in arrived if not t.running and t.state != "done"]
            if queued:
                scheduler.release(queued[-1])
                cancelled.append(queued[-1])
        check()
    while any(t.running for t in arrived):
        scheduler.release(next(t for t in arrived if t.running))
        check()
    assert sorted(t.call_id for t in ran) == sorted(
        t.call_id for t in tickets if t not in cancelled
    )
