"""EventReceiver: queued events without a scheduler pass each; the consumer is in step at hooks."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from helpers import Echo

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply


async def test_queued_events_are_taken_without_letting_other_tasks_run() -> None:
    send, inner = trio.open_memory_channel[int](8)
    receiver = al.EventReceiver(inner)
    ran: list[str] = []
    for value in (1, 2, 3):
        send.send_nowait(value)

    async def other() -> None:
        ran.append("other")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other)
        taken = [await receiver.receive() for _ in range(3)]
        assert (taken, ran) == ([1, 2, 3], [])  # no pass through the scheduler

        async def late() -> None:
            ran.append("late")
            await send.send(4)

        nursery.start_soon(late)
        assert await receiver.receive() == 4  # nothing queued: it waits, others run
        assert sorted(ran) == ["late", "other"]  # a batch runs in either order
        send.close()
        with pytest.raises(trio.EndOfChannel):
            await receiver.receive()


async def test_receive_is_still_a_cancel_point() -> None:
    send, inner = trio.open_memory_channel[int](8)
    send.send_nowait(1)
    receiver = al.EventReceiver(inner)
    with trio.CancelScope() as scope:
        scope.cancel()
        await receiver.receive()
    assert scope.cancelled_caught
    assert receiver.receive_nowait() == 1  # the event was not taken


async def test_clone_close_and_statistics_are_the_channels() -> None:
    send, inner = trio.open_memory_channel[int](8)
    receiver = al.EventReceiver(inner)
    clone = receiver.clone()
    send.send_nowait(7)
    assert receiver.statistics().current_buffer_used == 1
    assert await clone.receive() == 7
    with receiver:
        pass
    with pytest.raises(trio.ClosedResourceError):
        receiver.receive_nowait()
    await clone.aclose()
    with pytest.raises(trio.BrokenResourceError):
        send.send_nowait(8)


async def test_the_consumer_has_seen_every_event_before_a_hook_runs() -> None:
    """Events are queued without waiting, but a hook or a permission check runs only after
    the consumer has taken all that came before it."""
    seen: list[str] = []
    at_hooks: list[tuple[str, int]] = []

    def before_turn(messages: Any, index: int) -> bool:
        at_hooks.append((f"before_turn {index}", len(seen)))
        return True

    def after_tool(name: str, call_id: str, result: Any) -> None:
        at_hooks.append((f"after {call_id}", len(seen)))

    provider = ScriptedProvider(
        [reply("one two three", call("echo", {"text": "a"}, id="c1")), reply("done")]
    )
    agent = al.Agent(
        provider, tools=[Echo()], before_turn=before_turn, after_tool_execution=after_tool
    )
    async with agent.prompt("go") as events:
        async for event in events:
            seen.append(type(event).__name__)
    # Each hook ran with the consumer in step: it had taken every event sent before it.
    assert [name for name, _ in at_hooks] == ["before_turn 0", "after c1", "before_turn 1"]
    assert at_hooks[0][1] == seen.index("TurnStart")  # before_turn precedes its TurnStart
    assert at_hooks[1][1] == seen.index("ToolExecutionEnd") + 1
    assert at_hooks[2][1] == len(seen) - seen[::-1].index("TurnStart") - 1
