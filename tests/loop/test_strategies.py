"""Execution strategies, steering, follow-ups, queue modes and execution limits."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers import Echo, Sleeper, Steerer, run_recorded, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply


def sleeps(*seconds: float) -> list[Any]:
    return [call("sleep", {"seconds": s}, id=f"s{i}") for i, s in enumerate(seconds, 1)]


@pytest.mark.parametrize(
    ("strategy", "elapsed"),
    [(al.Parallel(), 0.05), (al.Sequential(), 0.15), (al.Batched(2), 0.10), (al.Batched(3), 0.05)],
)
async def test_strategy_timing(autojump_clock: Any, strategy: Any, elapsed: float) -> None:
    """Three 50 ms tools take 50 ms in parallel, 150 ms in sequence, 100 ms in batches of 2."""
    agent = al.Agent(
        ScriptedProvider([reply(*sleeps(0.05, 0.05, 0.05)), reply("done")]),
        tools=[Sleeper()],
        strategy=strategy,
    )
    start = trio.current_time()
    await agent.run("go")
    assert trio.current_time() - start == pytest.approx(elapsed, abs=1e-9)


async def test_parallel_results_keep_call_order(autojump_clock: Any) -> None:
    """Ends arrive as tools finish; the result messages keep the order of the calls."""
    agent = al.Agent(
        ScriptedProvider([reply(*sleeps(0.3, 0.2, 0.1)), reply("done")]), tools=[Sleeper()]
    )
    recorder = await run_recorded(agent, "go")
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionStart)] == ["s1", "s2", "s3"]
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionEnd)] == ["s3", "s2", "s1"]
    assert texts(agent.messages)[2:5] == [
        ("result:ok", "s1=slept 0.3"),
        ("result:ok", "s2=slept 0.2"),
        ("result:ok", "s3=slept 0.1"),
    ]
    # Result messages are announced in history order, after all ends.
    names = recorder.names()
    first_result = names.index("ToolExecutionEnd") + 3
    assert (
        names[first_result - 3 : first_result + 6]
        == ["ToolExecutionEnd"] * 3
        + [
            "MessageStart",
            "MessageEnd",
        ]
        * 3
    )


def test_batched_zero_is_refused() -> None:
    """Batched(0) is refused when built."""
    with pytest.raises(ValueError, match=r"^Batched size must be an integer >= 1, got 0$"):
        al.Batched(0)


def test_strategy_must_be_a_strategy() -> None:
    """A config with something else as its strategy is refused."""
    with pytest.raises(TypeError, match=r"^strategy must be Sequential"):
        al.AgentLoopConfig(provider=ScriptedProvider(), strategy="parallel")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- steering


def steering_agent(strategy: Any, n_calls: int) -> tuple[al.Agent, ScriptedProvider, Echo]:
    echo = Echo()
    steerer = Steerer()
    calls = [call("steerer", id="c1")] + [
        call("echo", {"text": f"t{i}"}, id=f"c{i}") for i in range(2, n_calls + 1)
    ]
    provider = ScriptedProvider([reply(*calls), reply("adjusted")])
    agent = al.Agent(provider, tools=[steerer, echo], strategy=strategy)
    steerer.agent = agent
    return agent, provider, echo


async def test_sequential_checks_steering_after_each_call() -> None:
    """Sequential: a steer during the first call skips the calls after it."""
    agent, provider, echo = steering_agent(al.Sequential(), 3)
    recorder = await run_recorded(agent, "go")
    assert echo.calls == []
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant:tool_use", "[steerer#c1,echo#c2,echo#c3]"),
        ("result:ok", "c1=steered"),
        ("result:error", "c2=Skipped due to queued user message."),
        ("result:error", "c3=Skipped due to queued user message."),
        ("user", "change of plan"),
        ("assistant:stop", "adjusted"),
    ]
    skipped_end = recorder.of_type(al.ToolExecutionEnd)[1]
    assert (skipped_end.tool_call_id, skipped_end.is_error) == ("c2", True)
    assert texts(provider.requests[1].messages)[-1] == ("user", "change of plan")


async def test_parallel_checks_steering_once_after_all_calls() -> None:
    """Parallel: every call runs; the steering message goes with the next request."""
    agent, _provider, echo = steering_agent(al.Parallel(), 3)
    await run_recorded(agent, "go")
    assert sorted(c["text"] for c in echo.calls) == ["t2", "t3"]  # both ran, in any order
    assert texts(agent.messages)[2:6] == [
        ("result:ok", "c1=steered"),
        ("result:ok", "c2=T2"),
        ("result:ok", "c3=T3"),
        ("user", "change of plan"),
    ]


async def test_batched_checks_steering_after_each_batch() -> None:
    """Batched(2): a steer in the first batch skips the later batches only."""
    agent, _provider, echo = steering_agent(al.Batched(2), 4)
    await run_recorded(agent, "go")
    assert echo.calls == [{"text": "t2"}]
    assert texts(agent.messages)[2:7] == [
        ("result:ok", "c1=steered"),
        ("result:ok", "c2=T2"),
        ("result:error", "c3=Skipped due to queued user message."),
        ("result:error", "c4=Skipped due to queued user message."),
        ("user", "change of plan"),
    ]


async def test_skipped_calls_get_start_and_end_but_no_hooks() -> None:
    """A skipped call has start and end events; tool hooks do not fire for it."""
    hooked: list[str] = []
    echo, steerer = Echo(), Steerer()
    agent = al.Agent(
        ScriptedProvider(
            [reply(call("steerer", id="c1"), call("echo", {"text": "x"}, id="c2")), reply("ok")]
        ),
        tools=[steerer, echo],
        strategy=al.Sequential(),
        before_tool_execution=lambda name, call_id, args: hooked.append(call_id),
    )
    steerer.agent = agent
    recorder = await run_recorded(agent, "go")
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionStart)] == ["c1", "c2"]
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionEnd)] == ["c1", "c2"]
    assert hooked == ["c1"]


async def test_steering_queued_before_the_run_joins_the_first_request() -> None:
    """A message steered before the run is polled first and sent with the prompt."""
    provider = ScriptedProvider([reply("ok")])
    agent = al.Agent(provider)
    agent.steer("also this")
    await agent.run("main prompt")
    assert texts(provider.requests[0].messages) == [("user", "main prompt"), ("user", "also this")]
    assert agent.steering_queue == ()


async def test_steering_after_a_text_reply_starts_another_turn() -> None:
    """A steer that arrives while the model answers in text starts one more turn."""
    provider = ScriptedProvider([reply("first"), reply("second")])
    agent = al.Agent(provider, after_turn=lambda messages, usage: None)
    steered = False

    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.MessageUpdate) and not steered:
                agent.steer("wait, one more thing")
                steered = True
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant:stop", "first"),
        ("user", "wait, one more thing"),
        ("assistant:stop", "second"),
    ]


# --------------------------------------------------------------------------- follow-ups


@pytest.mark.parametrize(
    ("mode", "expected_turns"),
    [(al.QueueMode.ONE_AT_A_TIME, 3), (al.QueueMode.ALL, 2)],
)
async def test_follow_ups_by_queue_mode(mode: al.QueueMode, expected_turns: int) -> None:
    """Follow-ups start new turns when the model is done: one per poll, or all at once."""
    provider = ScriptedProvider([reply("a"), reply("b"), reply("c")])
    agent = al.Agent(provider, follow_up_mode=mode)
    agent.follow_up("then this")
    agent.follow_up("and this")
    recorder = await run_recorded(agent, "start")
    assert [e.turn_index for e in recorder.of_type(al.TurnStart)] == list(range(expected_turns))
    assert provider.remaining == 3 - expected_turns
    user_texts = [t for kind, t in texts(agent.messages) if kind == "user"]
    assert user_texts == ["start", "then this", "and this"]


async def test_steering_mode_all_takes_every_queued_message() -> None:
    """With QueueMode.ALL a poll takes the whole steering queue."""
    provider = ScriptedProvider([reply("ok")])
    agent = al.Agent(provider, steering_mode=al.QueueMode.ALL)
    agent.steer("one")
    agent.steer("two")
    await agent.run("go")
    assert texts(provider.requests[0].messages) == [
        ("user", "go"),
        ("user", "one"),
        ("user", "two"),
    ]


async def test_clearing_queues() -> None:
    """Queued messages can be inspected and dropped before they are taken."""
    agent = al.Agent(ScriptedProvider())
    agent.steer("s")
    agent.follow_up("f")
    assert [m.content for m in agent.steering_queue] == [(al.TextContent("s"),)]
    assert [m.content for m in agent.follow_up_queue] == [(al.TextContent("f"),)]
    agent.clear_steering_queue()
    assert (agent.steering_queue, len(agent.follow_up_queue)) == ((), 1)
    agent.clear_follow_up_queue()
    agent.steer("s2")
    agent.follow_up("f2")
    agent.clear_queues()
    assert (agent.steering_queue, agent.follow_up_queue) == ((), ())


# --------------------------------------------------------------------------- limits


def endless_tool_calls(
    usage: al.Usage | None = None, delay: float | None = None
) -> ScriptedProvider:
    return ScriptedProvider(
        [
            al.providers.ScriptedTurn(
                content=(call("echo", {"text": str(i)}),), usage=usage, delay=delay
            )
            for i in range(10)
        ]
    )


async def test_max_turns_gives_exactly_that_many_model_calls() -> None:
    """max_turns=2 makes two model calls, then a stop message ends the run."""
    provider = endless_tool_calls()
    agent = al.Agent(provider, tools=[Echo()], limits=al.ExecutionLimits(max_turns=2))
    recorder = await run_recorded(agent, "go")
    assert len(provider.requests) == 2
    assert texts(agent.messages)[-1] == ("user", "[Agent stopped: Max turns reached (2/2)]")
    assert recorder.names()[-3:] == ["MessageStart", "MessageEnd", "AgentEnd"]


async def test_max_total_tokens_stops_the_run() -> None:
    """Tokens (input plus output) past the limit stop the run before the next turn."""
    provider = endless_tool_calls(usage=al.Usage(input=60, output=50, total_tokens=110))
    agent = al.Agent(provider, tools=[Echo()], limits=al.ExecutionLimits(max_total_tokens=200))
    await agent.run("go")
    assert len(provider.requests) == 2
    assert texts(agent.messages)[-1] == ("user", "[Agent stopped: Max tokens reached (220/200)]")


async def test_max_duration_stops_the_run(autojump_clock: Any) -> None:
    """The run stops at the first turn boundary after max_duration seconds."""
    provider = endless_tool_calls(delay=5.0)
    agent = al.Agent(provider, tools=[Echo()], limits=al.ExecutionLimits(max_duration=12))
    await agent.run("go")
    assert len(provider.requests) == 3
    assert texts(agent.messages)[-1] == ("user", "[Agent stopped: Max duration reached (15s/12s)]")


async def test_max_cost_stops_the_run() -> None:
    """The run stops once the summed cost reaches max_cost."""
    provider = endless_tool_calls(usage=al.Usage(input=1, output=1, total_tokens=2, cost=0.5))
    agent = al.Agent(provider, tools=[Echo()], limits=al.ExecutionLimits(max_cost=1.0))
    new = await agent.run("go")
    assert len(provider.requests) == 2
    assert texts(new)[-1] == ("user", "[Agent stopped: Max cost reached ($1.0000/$1.0000)]")


def test_default_limits_are_the_originals() -> None:
    """Defaults: 50 turns, a million tokens, 600 seconds, no cost limit."""
    assert al.ExecutionLimits() == al.ExecutionLimits(
        max_turns=50, max_total_tokens=1_000_000, max_duration=600.0, max_cost=None
    )


@pytest.mark.parametrize("field", ["max_turns", "max_total_tokens", "max_duration", "max_cost"])
def test_limits_must_be_positive(field: str) -> None:
    """A limit of zero or less is refused."""
    with pytest.raises(ValueError, match=f"^{field} must be > 0 or None, got 0$"):
        al.ExecutionLimits(**{field: 0})


# --------------------------------------------------------------------------- loop hooks


async def test_before_loop_veto_sends_only_agent_end() -> None:
    """before_loop returning False: no AgentStart, no turn, just AgentEnd; history untouched."""
    provider = ScriptedProvider([reply("never")])
    agent = al.Agent(provider, before_loop=lambda messages: False)
    recorder = await run_recorded(agent, "go")
    assert recorder.names() == ["AgentEnd"]
    assert recorder.events[0] == al.AgentEnd(
        loop_id=recorder.events[0].loop_id,
        messages=(),
        usage=al.Usage(),
        timestamp=recorder.events[0].timestamp,
        stop_reason=al.AgentStop(al.StopKind.VETOED, "before_loop returned False"),
    )
    assert agent.messages == ()
    assert provider.requests == []


async def test_before_turn_veto_ends_the_run() -> None:
    """before_turn returning False ends the run before that turn starts."""
    seen: list[int] = []

    def before_turn(messages: Any, turn_index: int) -> bool:
        seen.append(turn_index)
        return turn_index < 1

    provider = ScriptedProvider([reply(call("echo", {"text": "a"})), reply("never")])
    agent = al.Agent(provider, tools=[Echo()], before_turn=before_turn)
    recorder = await run_recorded(agent, "go")
    assert seen == [0, 1]
    assert [e.turn_index for e in recorder.of_type(al.TurnStart)] == [0]
    assert recorder.names()[-2:] == ["TurnEnd", "AgentEnd"]
    assert len(provider.requests) == 1


async def test_loop_and_turn_hooks_receive_history_and_usage() -> None:
    """after_turn gets the history and the turn's usage; after_loop the new messages and total."""
    calls: list[Any] = []
    usage = al.Usage(input=3, output=4, total_tokens=7)
    provider = ScriptedProvider(
        [
            al.providers.ScriptedTurn(content=(call("echo", {"text": "a"}),), usage=usage),
            al.providers.ScriptedTurn(content=("done",), usage=usage),
        ]
    )

    async def after_loop(new_messages: Any, total: al.Usage) -> None:
        calls.append(("after_loop", len(new_messages), total))

    agent = al.Agent(
        provider,
        tools=[Echo()],
        before_loop=lambda messages: calls.append(("before_loop", len(messages))),
        before_turn=lambda messages, i: calls.append(("before_turn", len(messages), i)),
        after_turn=lambda messages, u: calls.append(("after_turn", len(messages), u)),
        after_loop=after_loop,
    )
    await agent.run("go")
    assert calls == [
        ("before_loop", 0),
        ("before_turn", 1, 0),
        ("after_turn", 3, usage),
        ("before_turn", 3, 1),
        ("after_turn", 4, usage),
        ("after_loop", 4, usage + usage),
    ]


async def test_provider_error_ends_the_turn_as_an_error_message() -> None:
    """A ProviderError becomes an ERROR assistant message; on_error hears it; no exception."""
    errors: list[str] = []
    provider = ScriptedProvider(
        [al.providers.fail(al.providers.ProviderError("overloaded"), "partial ")]
    )
    agent = al.Agent(provider, on_error=errors.append)
    recorder = await run_recorded(agent, "go")
    last = agent.messages[-1]
    assert isinstance(last, al.AssistantMessage)
    assert (last.stop_reason, last.error_message, last.content) == (
        al.StopReason.ERROR,
        "overloaded",
        (al.TextContent("partial "),),
    )
    assert errors == ["overloaded"]
    assert recorder.names()[-4:] == ["MessageUpdate", "MessageEnd", "TurnEnd", "AgentEnd"]


async def test_provider_exception_leaves_the_run_as_itself() -> None:
    """Any other provider exception comes out of the run as itself."""
    agent = al.Agent(ScriptedProvider([al.providers.fail(ZeroDivisionError("bug"))]))
    with pytest.raises(ZeroDivisionError, match=r"^bug$"):
        await agent.run("go")
    assert texts(agent.messages) == [("user", "go"), ("assistant:error", "")]
    assert agent.messages[-1].error_message == "ZeroDivisionError: bug"  # type: ignore[union-attr]


async def test_running_twice_at_once_is_refused() -> None:
    """prompt() while a run is going on raises RuntimeError."""
    agent = al.Agent(ScriptedProvider([reply("a")]))
    async with agent.prompt("one") as events:
        with pytest.raises(RuntimeError, match=r"already running; use steer"):
            async with agent.prompt("two"):
                pass
        async for _ in events:
            pass
    assert not agent.is_running
