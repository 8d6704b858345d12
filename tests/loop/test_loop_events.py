"""The loop's event stream: exact order and content for text and tool runs."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import trio
from helpers import Echo, run_recorded, texts

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import assert_well_formed


async def test_text_only_run_event_order() -> None:
    """A text reply gives start, prompt, streamed assistant message, turn end, agent end."""
    agent = al.Agent(ScriptedProvider([reply("Hello there")]))
    recorder = await run_recorded(agent, "hi")
    assert recorder.names() == [
        "AgentStart",
        "TurnStart",
        "MessageStart",
        "MessageEnd",
        "MessageStart",
        "MessageUpdate",
        "MessageUpdate",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert [e.delta for e in recorder.of_type(al.MessageUpdate)] == [
        al.TextDelta(delta="Hello ", index=0),
        al.TextDelta(delta="there", index=0),
    ]


async def test_text_only_run_event_payloads() -> None:
    """Each event of a text run carries the loop id and the right message."""
    agent = al.Agent(ScriptedProvider([reply("Hello there")]), agent_id="a1")
    recorder = await run_recorded(agent, "hi")
    events = recorder.events
    assert {e.loop_id for e in events} == {"a1.1"}
    prompt, answer = agent.messages
    assert events[2] == al.MessageStart(loop_id="a1.1", message=prompt)
    assert events[3] == al.MessageEnd(loop_id="a1.1", message=prompt)
    start = events[4]
    assert isinstance(start, al.MessageStart)
    assert start.message == al.AssistantMessage(
        (), al.StopReason.STOP, timestamp=start.message.timestamp
    )
    updates = recorder.of_type(al.MessageUpdate)
    assert [u.message.content for u in updates] == [
        (al.TextContent("Hello "),),
        (al.TextContent("Hello there"),),
    ]
    assert events[7] == al.MessageEnd(loop_id="a1.1", message=answer)
    assert answer.content == (al.TextContent("Hello there"),)
    assert answer.stop_reason is al.StopReason.STOP
    turn_end = events[8]
    assert isinstance(turn_end, al.TurnEnd)
    assert (turn_end.turn_index, turn_end.message, turn_end.tool_results) == (0, answer, ())
    assert turn_end.usage == answer.usage
    end = events[9]
    assert isinstance(end, al.AgentEnd)
    assert end.messages == (prompt, answer)
    assert end.usage == answer.usage


async def test_tool_run_event_order() -> None:
    """A tool call adds start, end and the result message, then a second turn."""
    echo = Echo()
    provider = ScriptedProvider([reply("Reading.", call("echo", {"text": "a"})), reply("Done.")])
    agent = al.Agent(provider, tools=[echo])
    recorder = await run_recorded(agent, "go")
    assert recorder.names() == [
        "AgentStart",
        "TurnStart",
        "MessageStart",
        "MessageEnd",
        "MessageStart",
        "MessageUpdate",  # "Reading."
        "MessageUpdate",  # '{"text"'
        "MessageUpdate",  # ': "a"}'
        "MessageEnd",
        "ToolExecutionStart",
        "ToolExecutionEnd",
        "MessageStart",
        "MessageEnd",
        "TurnEnd",
        "TurnStart",
        "MessageStart",
        "MessageUpdate",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert [u.delta for u in recorder.of_type(al.MessageUpdate)][:3] == [
        al.TextDelta(delta="Reading.", index=0),
        al.ToolCallDelta(delta='{"text":', index=1, tool_call_id="call_1", name="echo"),
        al.ToolCallDelta(delta=' "a"}', index=1, tool_call_id="call_1", name="echo"),
    ]
    assert texts(agent.messages) == [
        ("user", "go"),
        ("assistant:tool_use", "Reading.[echo#call_1]"),
        ("result:ok", "call_1=A"),
        ("assistant:stop", "Done."),
    ]
    assert echo.calls == [{"text": "a"}]


async def test_tool_events_carry_call_details() -> None:
    """Start carries the arguments; End carries the result; TurnEnd lists the results."""
    agent = al.Agent(
        ScriptedProvider([reply(call("echo", {"text": "a"}, id="c9")), reply("ok")]),
        tools=[Echo()],
        agent_id="x",
    )
    recorder = await run_recorded(agent, "go")
    assert recorder.of_type(al.ToolExecutionStart) == [
        al.ToolExecutionStart(
            loop_id="x.1", tool_call_id="c9", tool_name="echo", args={"text": "a"}
        )
    ]
    assert recorder.of_type(al.ToolExecutionEnd) == [
        al.ToolExecutionEnd(
            loop_id="x.1",
            tool_call_id="c9",
            tool_name="echo",
            result=al.ToolResult.text("A"),
            is_error=False,
            child_loop_id=None,
        )
    ]
    result_message = agent.messages[2]
    assert result_message == al.ToolResultMessage(
        "c9", "echo", (al.TextContent("A"),), is_error=False, timestamp=result_message.timestamp
    )
    first_turn_end = recorder.of_type(al.TurnEnd)[0]
    assert first_turn_end.tool_results == (result_message,)


async def test_streaming_partial_message_holds_tool_call_without_arguments() -> None:
    """While streaming, a tool call appears with its id and name and {} as arguments."""
    agent = al.Agent(
        ScriptedProvider([reply("x", call("echo", {"text": "abc"})), reply("y")]), tools=[Echo()]
    )
    recorder = await run_recorded(agent, "go")
    last_update = recorder.of_type(al.MessageUpdate)[2]
    assert last_update.message.content == (
        al.TextContent("x"),
        al.ToolCall("call_1", "echo", {}),
    )
    assert agent.messages[1].content[1] == al.ToolCall("call_1", "echo", {"text": "abc"})


async def test_second_prompt_request_contains_first_exchange() -> None:
    """History is sent: the second request holds the first prompt and answer."""
    provider = ScriptedProvider([reply("First answer."), reply("Second answer.")])
    agent = al.Agent(provider, system_prompt="Be brief.")
    await agent.run("first")
    await agent.run("second")
    first_request, second_request = provider.requests
    assert first_request.system_prompt == "Be brief."
    assert texts(first_request.messages) == [("user", "first")]
    assert texts(second_request.messages) == [
        ("user", "first"),
        ("assistant:stop", "First answer."),
        ("user", "second"),
    ]


async def test_requests_offer_the_tools() -> None:
    """Each request lists the tools' names, descriptions and schemas."""
    provider = ScriptedProvider([reply("ok")])
    echo = Echo()
    await al.Agent(provider, tools=[echo]).run("hi")
    assert provider.requests[0].tools == (
        al.providers.ToolDefinition("echo", echo.description, echo.parameters_schema),
    )


async def test_timestamps_strictly_increase() -> None:
    """Every message of the history is stamped later than the one before it."""
    agent = al.Agent(
        ScriptedProvider(
            [reply(call("echo", {"text": "a"}), call("echo", {"text": "b"})), reply("done")]
        ),
        tools=[Echo()],
    )
    await agent.run("go")
    stamps = [m.timestamp for m in agent.messages]
    assert len(stamps) == 5
    assert all(a < b for a, b in itertools.pairwise(stamps))


async def test_run_returns_new_messages_only() -> None:
    """run() returns the messages this run added, not the earlier history."""
    agent = al.Agent(ScriptedProvider([reply("one"), reply("two")]))
    await agent.run("a")
    new = await agent.run("b")
    assert texts(new) == [("user", "b"), ("assistant:stop", "two")]
    assert len(agent.messages) == 4


async def test_thinking_streams_as_thinking_deltas() -> None:
    """Thinking blocks stream as ThinkingDelta and end up as ThinkingContent."""
    agent = al.Agent(
        ScriptedProvider([reply(al.ThinkingContent("hmm ok", signature="sig"), "Answer.")])
    )
    recorder = await run_recorded(agent, "q")
    assert [u.delta for u in recorder.of_type(al.MessageUpdate)] == [
        al.ThinkingDelta(delta="hmm ", index=0),
        al.ThinkingDelta(delta="ok", index=0),
        al.TextDelta(delta="Answer.", index=1),
    ]
    assert agent.messages[1].content == (
        al.ThinkingContent("hmm ok", signature="sig"),
        al.TextContent("Answer."),
    )


async def test_low_level_agent_loop_closes_channel_and_returns_messages() -> None:
    """agent_loop sends every event, closes the channel and returns the new messages."""
    context = al.AgentContext(system_prompt="s", tools=[Echo()])
    config = al.AgentLoopConfig(
        provider=ScriptedProvider([reply(call("echo", {"text": "q"})), reply("fin")])
    )
    send, receive = trio.open_memory_channel[al.AgentEvent](100)
    new = await al.agent_loop(["go"], context, config, send, loop_id="L")
    events = [event async for event in receive]
    assert isinstance(events[0], al.AgentStart)
    assert isinstance(events[-1], al.AgentEnd)
    assert events[-1].messages == new
    assert list(context.messages) == list(new)
    assert texts(new)[-1] == ("assistant:stop", "fin")


async def test_agent_loop_continue_answers_existing_history() -> None:
    """agent_loop_continue asks the model to go on from the history as it is."""
    prompt = al.UserMessage.text("earlier")
    context = al.AgentContext(messages=[prompt])
    provider = ScriptedProvider([reply("continued")])
    send, receive = trio.open_memory_channel[al.AgentEvent](100)
    new = await al.agent_loop_continue(context, al.AgentLoopConfig(provider=provider), send)
    names = [type(e).__name__ async for e in receive]
    assert names == [
        "AgentStart",
        "TurnStart",
        "MessageStart",
        "MessageUpdate",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]
    assert texts(new) == [("assistant:stop", "continued")]
    assert list(provider.requests[0].messages) == [prompt]


async def test_agent_loop_continue_refuses_history_ending_with_assistant() -> None:
    """Continuing after an assistant message is refused: nothing to answer."""
    context = al.AgentContext(
        messages=[
            al.UserMessage.text("q"),
            al.AssistantMessage((al.TextContent("a"),), al.StopReason.STOP),
        ]
    )
    send, _receive = trio.open_memory_channel[al.AgentEvent](10)
    with pytest.raises(ValueError, match=r"ends with an assistant message"):
        await al.agent_loop_continue(context, al.AgentLoopConfig(provider=ScriptedProvider()), send)


async def test_agent_loop_continue_refuses_empty_history() -> None:
    """Continuing an empty history is refused."""
    send, _receive = trio.open_memory_channel[al.AgentEvent](10)
    with pytest.raises(ValueError, match=r"it is empty"):
        await al.agent_loop_continue(
            al.AgentContext(), al.AgentLoopConfig(provider=ScriptedProvider()), send
        )


async def test_closed_receiver_does_not_stop_the_run() -> None:
    """If the consumer closes its end, the loop finishes the run without sending."""
    context = al.AgentContext(tools=[Echo()])
    config = al.AgentLoopConfig(
        provider=ScriptedProvider([reply(call("echo", {"text": "q"})), reply("fin")])
    )
    send, receive = trio.open_memory_channel[al.AgentEvent](0)
    receive.close()
    new = await al.agent_loop(["go"], context, config, send)
    assert texts(new) == [
        ("user", "go"),
        ("assistant:tool_use", "[echo#call_1]"),
        ("result:ok", "call_1=Q"),
        ("assistant:stop", "fin"),
    ]
    assert_well_formed(new)


async def test_missing_or_repeated_call_ids_are_replaced() -> None:
    """Tool calls with an empty or repeated id get unique ids before entering the history."""

    class SloppyServer:
        async def stream(self, request: Any, emit: Any) -> al.AssistantMessage:
            if len(request.messages) > 1:
                return al.AssistantMessage((al.TextContent("done"),), al.StopReason.STOP)
            calls = (
                al.ToolCall("", "echo", {"text": "a"}),
                al.ToolCall("x", "echo", {"text": "b"}),
                al.ToolCall("x", "echo", {"text": "c"}),
            )
            return al.AssistantMessage(calls, al.StopReason.TOOL_USE)

    agent = al.Agent(SloppyServer(), tools=[Echo()], agent_id="s")
    await agent.run("go")
    assert texts(agent.messages)[1:5] == [
        ("assistant:tool_use", "[echo#s.1-0-0,echo#x,echo#s.1-0-2]"),
        ("result:ok", "s.1-0-0=A"),
        ("result:ok", "x=B"),
        ("result:ok", "s.1-0-2=C"),
    ]
    assert_well_formed(agent.messages)


async def test_tool_calls_in_a_failed_reply_are_answered_not_run() -> None:
    """A reply that ends with ERROR but holds tool calls: each gets a result; none runs."""
    echo = Echo()
    provider = ScriptedProvider(
        [reply("Partly", call("echo", {"text": "a"}, id="e1"), stop_reason=al.StopReason.ERROR)]
    )
    agent = al.Agent(provider, tools=[echo])
    recorder = await run_recorded(agent, "go")
    assert echo.calls == []
    assert texts(agent.messages)[1:] == [
        ("assistant:error", "Partly[echo#e1]"),
        ("result:error", "e1=Not executed: the model's reply ended with an error."),
    ]
    assert recorder.names()[-7:] == [
        "MessageEnd",
        "ToolExecutionStart",
        "ToolExecutionEnd",
        "MessageStart",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]


async def test_a_restart_voids_the_partial_message_and_only_the_retry_counts() -> None:
    """Deltas, a StreamRestart, new deltas: the partial starts over; history has the retry."""

    class FlakyOnce:
        async def stream(self, request: Any, emit: Any) -> al.AssistantMessage:
            await emit(al.TextDelta(delta="Half an ans"))
            await emit(al.StreamRestart(attempt=2, delay=0.0, error="stream cut off"))
            await emit(al.TextDelta(delta="Whole answer."))
            return al.AssistantMessage((al.TextContent("Whole answer."),), al.StopReason.STOP)

    agent = al.Agent(FlakyOnce())
    recorder = await run_recorded(agent, "go")
    updates = recorder.of_type(al.MessageUpdate)
    assert [(type(u.delta).__name__, u.message.text) for u in updates] == [
        ("TextDelta", "Half an ans"),
        ("StreamRestart", ""),
        ("TextDelta", "Whole answer."),
    ]
    assert texts(agent.messages) == [("user", "go"), ("assistant:stop", "Whole answer.")]


async def test_a_paused_turn_is_continued() -> None:
    """A reply that stops PAUSED (no tool calls) gets another turn to go on."""
    provider = ScriptedProvider(
        [reply("Working on it", stop_reason=al.StopReason.PAUSED), reply(" and done.")]
    )
    agent = al.Agent(provider)
    recorder = await run_recorded(agent, "go")
    assert [e.turn_index for e in recorder.of_type(al.TurnStart)] == [0, 1]
    assert texts(provider.requests[1].messages) == [
        ("user", "go"),
        ("assistant:paused", "Working on it"),
    ]


async def test_thinking_level_reaches_the_request() -> None:
    """The agent's thinking level is part of every request."""
    provider = ScriptedProvider([reply("ok")])
    await al.Agent(provider, thinking_level=al.ThinkingLevel.HIGH).run("go")
    assert provider.requests[0].thinking is al.ThinkingLevel.HIGH


async def test_update_messages_are_built_only_when_read() -> None:
    """A consumer that reads only deltas never pays for building the partial messages."""
    agent = al.Agent(ScriptedProvider([reply("one two three four")]))
    recorder = await run_recorded(agent, "go")
    updates = recorder.of_type(al.MessageUpdate)
    assert [callable(u._message) for u in updates] == [True] * 4
    assert updates[1].message.text == "one two "
    assert [callable(u._message) for u in updates] == [True, False, True, True]
