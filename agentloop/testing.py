"""Helpers for testing code built on agentloop: record events, check histories.

Example::

    from agentloop.testing import ScriptedProvider, call, collect_events, reply

    async def test_my_tool():
        agent = Agent(ScriptedProvider([reply(call("my_tool", {"x": 1})), reply("ok")]),
                      tools=[my_tool])
        events = await collect_events(agent, "go")
        assert event_names(events)[:2] == ["AgentStart", "TurnStart"]
        assert_well_formed(agent.messages)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

import trio

from ._agent import Agent
from ._approval import Suspended
from ._events import AgentEvent, MessageUpdate, TextDelta
from ._types import AssistantMessage, Message, ToolResultMessage, UserMessage
from .providers import ScriptedProvider, ScriptExhausted, call, fail, reply

__all__ = [
    "EventRecorder",
    "ScriptExhausted",
    "ScriptedProvider",
    "assert_well_formed",
    "call",
    "collect_events",
    "event_names",
    "fail",
    "reply",
    "streamed_text",
]

E = TypeVar("E", bound=AgentEvent)


def event_names(events: Iterable[AgentEvent]) -> list[str]:
    """The class names of ``events``, in order: ``["AgentStart", "TurnStart", ...]``."""
    return [type(event).__name__ for event in events]


def streamed_text(events: Iterable[AgentEvent]) -> str:
    """The text deltas of ``events``, concatenated."""
    return "".join(
        event.delta.delta
        for event in events
        if isinstance(event, MessageUpdate) and isinstance(event.delta, TextDelta)
    )


class EventRecorder:
    """Collects the events of a channel; query them afterwards.

    Example::

        recorder = EventRecorder()
        async with agent.prompt("hi") as events:
            await recorder.consume(events)
        assert recorder.names()[-1] == "AgentEnd"
    """

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    async def consume(self, channel: trio.abc.ReceiveChannel[AgentEvent]) -> None:
        """Receive until the channel closes, keeping every event."""
        async for event in channel:
            self.events.append(event)

    def names(self) -> list[str]:
        """The class names of the events, in order."""
        return event_names(self.events)

    def of_type(self, cls: type[E]) -> list[E]:
        """The events that are instances of ``cls``, in order."""
        return [event for event in self.events if isinstance(event, cls)]

    def text(self) -> str:
        """All streamed text, concatenated."""
        return streamed_text(self.events)


async def collect_events(agent: Agent, *messages: str | UserMessage) -> list[AgentEvent]:
    """Run ``agent`` with ``messages`` and return every event it sent, in order."""
    recorder = EventRecorder()
    async with agent.prompt(*messages) as events:
        await recorder.consume(events)
    return recorder.events


def assert_well_formed(messages: Sequence[Message], *, suspended: Suspended | None = None) -> None:
    """Assert that ``messages`` is a history a model API would accept.

    Every tool call of an assistant message is answered by exactly one tool
    result before the next assistant or user message, results answer calls of
    the assistant message right before them, and no id is answered twice.

    With ``suspended`` (``AgentEnd.suspended`` of a run that stopped awaiting
    approval), the history is the one at that stop: the last reply's calls left
    unanswered must be exactly its pending calls and the calls whose results it
    holds back.

    Raises:
        AssertionError: describing the first problem found.
    """
    open_calls: dict[str, str] = {}
    for position, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            if open_calls:
                raise AssertionError(
                    f"message {position}: assistant message while tool calls "
                    f"{sorted(open_calls)} have no result"
                )
            for tool_call in message.tool_calls:
                if tool_call.id in open_calls:
                    raise AssertionError(
                        f"message {position}: tool call id {tool_call.id!r} used twice"
                    )
                open_calls[tool_call.id] = tool_call.name
        elif isinstance(message, ToolResultMessage):
            name = open_calls.pop(message.tool_call_id, None)
            if name is None:
                raise AssertionError(
                    f"message {position}: result for {message.tool_call_id!r}, "
                    "which is not an open tool call"
                )
            if name != message.tool_name:
                raise AssertionError(
                    f"message {position}: result for {message.tool_call_id!r} names tool "
                    f"{message.tool_name!r}, but the call was to {name!r}"
                )
        elif open_calls:
            raise AssertionError(
                f"message {position}: user message while tool calls "
                f"{sorted(open_calls)} have no result"
            )
    if suspended is not None:
        waiting = {*suspended.call_ids, *(r.tool_call_id for r in suspended.results)}
        if set(open_calls) != waiting:
            raise AssertionError(
                f"tool calls {sorted(open_calls)} have no result, but the stop waits "
                f"for {sorted(waiting)}"
            )
        return
    if open_calls:
        raise AssertionError(f"tool calls {sorted(open_calls)} have no result")
