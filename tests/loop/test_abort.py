"""Abort, early exit and cancellation: AgentEnd still arrives and the history stays whole."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers import Echo, LoggingChannel, Sleeper, Steerer, run_recorded, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import EventRecorder, assert_well_formed


async def abort_when(agent: al.Agent, condition: Any, *prompts: str) -> EventRecorder:
    """Run, calling agent.abort() on the first event matching ``condition``."""
    recorder = EventRecorder()
    async with agent.prompt(*prompts) as events:
        async for event in events:
            recorder.events.append(event)
            if condition(event, recorder):
                agent.abort()
    return recorder


async def test_abort_while_streaming_keeps_partial_text_and_ends(autojump_clock: Any) -> None:
    """Abort mid-stream: the partial text is kept, marked ABORTED, and AgentEnd arrives."""
    provider = ScriptedProvider([reply("one two three four five")], delta_delay=1.0)
    agent = al.Agent(provider)
    recorder = await abort_when(agent, lambda e, r: len(r.of_type(al.MessageUpdate)) == 2, "go")
    assert recorder.names()[-6:] == [
        "MessageStart",
        "MessageUpdate",
        "MessageUpdate",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    last = agent.messages[-1]
    assert last == al.AssistantMessage(
        (al.TextContent("one two "),),
        al.StopReason.ABORTED,
        timestamp=last.timestamp,
        error_message="Aborted",
    )
    assert recorder.of_type(al.MessageEnd)[-1].message == last
    assert recorder.of_type(al.TurnEnd)[0].message == last
    assert recorder.of_type(al.AgentEnd)[0].messages == agent.messages
    assert not agent.is_running


async def test_abort_while_streaming_tool_calls_drops_unfinished_calls(autojump_clock: Any) -> None:
    """Tool calls still streaming when the abort lands are dropped, never run."""
    echo = Echo()
    provider = ScriptedProvider(
        [reply("Let me", call("echo", {"text": "a long argument"}))], delta_delay=1.0
    )
    agent = al.Agent(provider, tools=[echo])
    await abort_when(
        agent,
        lambda e, r: isinstance(e, al.MessageUpdate) and isinstance(e.delta, al.ToolCallDelta),
        "go",
    )
    assert texts(agent.messages) == [("user", "go"), ("assistant:aborted", "Let me")]
    assert echo.calls == []
    assert_well_formed(agent.messages)


async def test_abort_while_parallel_tools_run(autojump_clock: Any) -> None:
    """Abort mid-tools: every call is cancelled, gets a result and an end event."""
    sleeper = Sleeper()
    provider = ScriptedProvider(
        [reply("Working.", call("sleep", id="a"), call("sleep", id="b")), reply("next")]
    )
    agent = al.Agent(provider, tools=[sleeper])
    recorder = await abort_when(
        agent, lambda e, r: len(r.of_type(al.ToolExecutionStart)) == 2, "go"
    )
    assert sorted(sleeper.outcomes) == [("a", "cancelled"), ("b", "cancelled")]
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant:aborted", "Working.[sleep#a,sleep#b]"),
        ("result:error", "a=Cancelled: the run was aborted."),
        ("result:error", "b=Cancelled: the run was aborted."),
    ]
    ends = recorder.of_type(al.ToolExecutionEnd)
    assert [(e.tool_call_id, e.result.text_content, e.is_error) for e in ends] == [
        ("a", "Cancelled: the run was aborted.", True),
        ("b", "Cancelled: the run was aborted.", True),
    ]
    turn_end = recorder.of_type(al.TurnEnd)[0]
    assert turn_end.message == agent.messages[1]
    assert turn_end.tool_results == agent.messages[2:]
    assert recorder.names()[-1] == "AgentEnd"
    assert provider.remaining == 1  # the model was not called again


async def test_abort_in_sequential_closes_calls_not_yet_started(autojump_clock: Any) -> None:
    """Sequential abort: the running call is cancelled; later calls get start, end and a result."""
    sleeper = Sleeper()
    provider = ScriptedProvider(
        [reply(call("sleep", id="a"), call("sleep", id="b"), call("sleep", id="c"))]
    )
    agent = al.Agent(provider, tools=[sleeper], strategy=al.Sequential())
    recorder = await abort_when(agent, lambda e, r: isinstance(e, al.ToolExecutionStart), "go")
    assert sleeper.started == ["a"]
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionStart)] == ["a", "b", "c"]
    assert [e.tool_call_id for e in recorder.of_type(al.ToolExecutionEnd)] == ["a", "b", "c"]
    assert [kind for kind, _ in texts(agent.messages)] == [
        "user",
        "assistant:aborted",
        "result:error",
        "result:error",
        "result:error",
    ]


async def test_finished_results_survive_an_abort(autojump_clock: Any) -> None:
    """A call that finished before the abort keeps its real result."""
    sleeper = Sleeper()
    provider = ScriptedProvider(
        [
            reply(
                call("sleep", {"seconds": 1}, id="fast"), call("sleep", {"seconds": 100}, id="slow")
            )
        ]
    )
    agent = al.Agent(provider, tools=[sleeper])
    await abort_when(agent, lambda e, r: isinstance(e, al.ToolExecutionEnd), "go")
    assert texts(agent.messages)[2:] == [
        ("result:ok", "fast=slept 1"),
        ("result:error", "slow=Cancelled: the run was aborted."),
    ]


async def test_next_prompt_after_abort_sends_a_well_formed_request(autojump_clock: Any) -> None:
    """After an abort the agent runs again, and the model gets every call answered."""
    provider = ScriptedProvider(
        [reply(call("sleep", id="a"), call("sleep", id="b")), reply("fresh")]
    )
    agent = al.Agent(provider, tools=[Sleeper()])
    await abort_when(agent, lambda e, r: isinstance(e, al.ToolExecutionStart), "go")
    assert await agent.run("again") == agent.messages[-2:]
    request = provider.requests[-1]
    assert_well_formed(request.messages)
    assert texts(request.messages) == [
        ("user", "go"),
        ("assistant:aborted", "[sleep#a,sleep#b]"),
        ("result:error", "a=Cancelled: the run was aborted."),
        ("result:error", "b=Cancelled: the run was aborted."),
        ("user", "again"),
    ]


async def test_abort_keeps_steering_already_taken() -> None:
    """A steering message the loop took before the abort is not lost: it is in the history."""
    steerer, echo = Steerer(message="steer me"), Echo()
    provider = ScriptedProvider(
        [reply(call("steerer", id="a"), call("echo", {"text": "x"}, id="b"))]
    )
    agent = al.Agent(
        provider,
        tools=[steerer, echo],
        strategy=al.Sequential(),
        after_turn=lambda messages, usage: agent.abort(),  # after the poll took the message
    )
    steerer.agent = agent
    recorder = await run_recorded(agent, "go")
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant:tool_use", "[steerer#a,echo#b]"),
        ("result:ok", "a=steered"),
        ("result:error", "b=Skipped due to queued user message."),
        ("user", "steer me"),
    ]
    assert recorder.names()[-3:] == ["MessageStart", "MessageEnd", "AgentEnd"]
    assert agent.steering_queue == ()
    assert provider.remaining == 0


async def test_steering_not_yet_taken_stays_queued(autojump_clock: Any) -> None:
    """A steering message still queued when the run is aborted waits for the next run."""
    agent = al.Agent(ScriptedProvider([reply(call("sleep", id="a"))]), tools=[Sleeper()])
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionStart):
                agent.steer("later")
                agent.abort()
    assert [m.content for m in agent.steering_queue] == [(al.TextContent("later"),)]


async def test_abort_before_the_first_turn() -> None:
    """An abort right at the start still ends with AgentEnd, the prompt kept."""
    agent = al.Agent(ScriptedProvider([reply("never")]))
    async with agent.prompt("go") as events:
        agent.abort()
        recorder = EventRecorder()
        await recorder.consume(events)
    assert recorder.names() == ["AgentStart", "MessageStart", "MessageEnd", "AgentEnd"]
    assert texts(agent.messages) == [("user", "go")]


def test_abort_without_a_run_does_nothing() -> None:
    """abort() with no run going on is a no-op."""
    agent = al.Agent(ScriptedProvider())
    agent.abort()
    assert not agent.is_running


async def test_leaving_the_block_early_cancels_the_run(autojump_clock: Any) -> None:
    """Breaking out of the events cancels the run; its tasks are done when the block exits."""
    sleeper = Sleeper()
    agent = al.Agent(
        ScriptedProvider([reply(call("sleep", id="a")), reply("after")]), tools=[sleeper]
    )
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionStart):
                break
    assert sleeper.outcomes == [("a", "cancelled")]  # the tool task ended before we got here
    assert not agent.is_running
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant:aborted", "[sleep#a]"),
        ("result:error", "a=Cancelled: the run ended before this tool call finished."),
    ]
    assert texts(await agent.run("again"))[-1] == ("assistant:stop", "after")


async def test_leaving_after_agent_end_lets_after_loop_finish(autojump_clock: Any) -> None:
    """Breaking out on AgentEnd does not cancel the after_loop hook."""
    finished: list[bool] = []

    async def after_loop(messages: Any, usage: al.Usage) -> None:
        await trio.sleep(1)
        finished.append(True)

    agent = al.Agent(ScriptedProvider([reply("hi")]), after_loop=after_loop)
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.AgentEnd):
                break
    assert finished == [True]


async def test_exception_in_the_body_cancels_the_run_and_propagates(autojump_clock: Any) -> None:
    """An exception raised while consuming leaves as itself; the run is cancelled."""
    sleeper = Sleeper()
    agent = al.Agent(ScriptedProvider([reply(call("sleep", id="a"))]), tools=[sleeper])
    with pytest.raises(KeyError, match=r"consumer"):
        async with agent.prompt("go") as events:
            async for event in events:
                if isinstance(event, al.ToolExecutionStart):
                    raise KeyError("consumer")
    assert sleeper.outcomes == [("a", "cancelled")]
    assert_well_formed(agent.messages)


async def test_caller_cancelling_agent_loop_leaves_history_whole(autojump_clock: Any) -> None:
    """Cancelling the caller's scope stops agent_loop; the context is still well formed."""
    context = al.AgentContext(tools=[Sleeper()])
    config = al.AgentLoopConfig(provider=ScriptedProvider([reply(call("sleep", id="a"))]))
    send, receive = trio.open_memory_channel[al.AgentEvent](100)
    with trio.move_on_after(1):
        await al.agent_loop(["go"], context, config, send)
    assert texts(context.messages) == [
        ("user", "go"),
        ("assistant:aborted", "[sleep#a]"),
        ("result:error", "a=Cancelled: the run ended before this tool call finished."),
    ]
    names = [type(e).__name__ async for e in receive]  # the channel was closed
    assert names[-1] == "ToolExecutionStart"


async def test_soft_abort_scope_of_agent_loop(autojump_clock: Any) -> None:
    """Cancelling the abort_scope given to agent_loop ends the run softly with AgentEnd."""
    context = al.AgentContext(tools=[Sleeper()])
    config = al.AgentLoopConfig(provider=ScriptedProvider([reply(call("sleep", id="a"))]))
    send, receive = trio.open_memory_channel[al.AgentEvent](100)
    abort_scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: al.agent_loop(["go"], context, config, send, abort_scope=abort_scope)
        )
        await trio.sleep(5)
        abort_scope.cancel()
    names = [type(e).__name__ async for e in receive]
    assert names[-4:] == ["MessageStart", "MessageEnd", "TurnEnd", "AgentEnd"]
    assert texts(context.messages)[1:] == [
        ("assistant:aborted", "[sleep#a]"),
        ("result:error", "a=Cancelled: the run was aborted."),
    ]


async def test_error_while_tools_run_leaves_history_whole(autojump_clock: Any) -> None:
    """A hook failing while another call runs: the error propagates, every call has a result."""

    def after(name: str, call_id: str, is_error: bool) -> None:
        if call_id == "fast":
            raise RuntimeError("after hook broke")

    provider = ScriptedProvider(
        [
            reply(
                call("sleep", {"seconds": 1}, id="fast"), call("sleep", {"seconds": 100}, id="slow")
            )
        ]
    )
    sleeper = Sleeper()
    agent = al.Agent(provider, tools=[sleeper], after_tool_execution=after)
    with pytest.raises(RuntimeError, match=r"^after hook broke$"):
        await agent.run("go")
    assert ("slow", "cancelled") in sleeper.outcomes
    assert texts(agent.messages)[1:] == [
        ("assistant:tool_use", "[sleep#fast,sleep#slow]"),
        ("result:ok", "fast=slept 1"),
        ("result:error", "slow=Cancelled: the run ended before this tool call finished."),
    ]


async def test_after_hook_fires_for_calls_an_abort_ended(autojump_clock: Any) -> None:
    """Soft abort: each call the before hook allowed gets its after hook, after its end event."""
    log: list[str] = []

    def describe(event: al.AgentEvent) -> str | None:
        if isinstance(event, al.ToolExecutionStart | al.ToolExecutionEnd):
            return f"{type(event).__name__} {event.tool_call_id}"
        return None

    config = al.AgentLoopConfig(
        provider=ScriptedProvider([reply(call("sleep", id="a"), call("sleep", id="b"))]),
        before_tool_execution=lambda name, call_id, args: log.append(f"before {call_id}"),
        after_tool_execution=lambda name, call_id, is_error: log.append(
            f"after {call_id} error={is_error}"
        ),
    )
    send, receive = trio.open_memory_channel[al.AgentEvent](100)
    abort_scope = trio.CancelScope()
    context = al.AgentContext(tools=[Sleeper()])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(
            lambda: al.agent_loop(
                ["go"],
                context,
                config,
                LoggingChannel(send, log, describe),
                abort_scope=abort_scope,  # type: ignore[arg-type]
            )
        )
        await trio.sleep(5)
        abort_scope.cancel()
    receive.close()
    assert log == [
        "before a",
        "ToolExecutionStart a",
        "before b",
        "ToolExecutionStart b",
        "ToolExecutionEnd a",
        "after a error=True",
        "ToolExecutionEnd b",
        "after b error=True",
    ]


async def test_no_after_hook_when_the_run_is_cancelled(autojump_clock: Any) -> None:
    """Hard cancellation (leaving early) runs no more hooks."""
    log: list[str] = []
    agent = al.Agent(
        ScriptedProvider([reply(call("sleep", id="a"))]),
        tools=[Sleeper()],
        after_tool_execution=lambda *args: log.append("after"),
    )
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionStart):
                break
    assert log == []
    assert_well_formed(agent.messages)


async def test_an_abort_during_tools_still_counts_the_turns_model_usage(
    autojump_clock: Any,
) -> None:
    """The model call that asked for the tools was made: AgentEnd.usage includes it."""
    usage = al.Usage(input=120, output=30, total_tokens=150)
    model = ScriptedProvider([reply(call("sleep", {"seconds": 100}, id="c1"), usage=usage)])
    agent = al.Agent(model, tools=[Sleeper()])
    async with agent.prompt("nap") as events:
        async for event in events:
            if isinstance(event, al.ToolExecutionStart):
                agent.abort()
            if isinstance(event, al.AgentEnd):
                end = event
    assert end.usage == usage
