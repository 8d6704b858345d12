"""Under asyncio, agentloop's entry points say at once that it runs under trio."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

import agentloop as al
from agentloop.providers import ScriptedProvider, reply

ADVICE = (
    ", but agentloop runs under trio. From an asyncio program, run the agent in a thread "
    "with its own trio loop: `await asyncio.to_thread(trio.run, main)`, where main is an "
    "async function that uses the agent; or use trio-asyncio. See 'Calling agentloop "
    "from asyncio' in the docs (docs/guides/asyncio.md)."
)


def agent() -> al.Agent:
    return al.Agent(ScriptedProvider([reply("Hi!")]))


async def run(a: al.Agent) -> None:
    await a.run("hello")


async def prompt(a: al.Agent) -> None:
    async with a.prompt("hello") as events:
        async for _ in events:
            pass


async def loop(a: al.Agent) -> None:
    send, _ = trio.open_memory_channel[al.AgentEvent](100)
    await al.agent_loop(["hello"], al.AgentContext(), a.config, send)


async def loop_continue(a: al.Agent) -> None:
    send, _ = trio.open_memory_channel[al.AgentEvent](100)
    context = al.AgentContext(messages=[al.UserMessage.text("hello")])
    await al.agent_loop_continue(context, a.config, send)


async def mcp(a: al.Agent) -> None:
    from agentloop.mcp import StdioServer, open_mcp

    async with open_mcp(StdioServer("never-started")):
        pass


async def openapi(a: al.Agent) -> None:
    from agentloop.openapi import OpenApiToolAdapter

    await OpenApiToolAdapter.from_url("http://127.0.0.1:9/never-fetched.json")


async def provider(a: al.Agent) -> None:
    from agentloop.providers import AnthropicProvider, ModelRequest

    model = AnthropicProvider("claude-sonnet-5", api_key="sk-never-sent")
    request = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))

    async def emit(delta: al.StreamDelta) -> None:
        pass

    await model.stream(request, emit)


CASES: list[tuple[str, Callable[[al.Agent], Awaitable[None]]]] = [
    ("Agent.run()", run),
    ("Agent.prompt()", prompt),
    ("agent_loop()", loop),
    ("agent_loop_continue()", loop_continue),
    ("open_mcp()", mcp),
    ("OpenApiToolAdapter.from_url()", openapi),
    ("AnthropicProvider.stream()", provider),
]


@pytest.mark.parametrize(("name", "entry"), CASES, ids=[name for name, _ in CASES])
def test_each_entry_point_under_asyncio_says_how_to_call_it(
    name: str, entry: Callable[[al.Agent], Awaitable[None]]
) -> None:
    a = agent()
    with pytest.raises(al.TrioRequiredError) as caught:
        asyncio.run(entry(a))  # type: ignore[arg-type]
    assert str(caught.value) == f"{name} was awaited under asyncio{ADVICE}"
    assert isinstance(caught.value, RuntimeError)
    assert not a.is_running
    assert a.messages == ()


def test_a_coroutine_driven_by_hand_is_outside_any_trio_run() -> None:
    coroutine = agent().run("hello")
    with pytest.raises(al.TrioRequiredError) as caught:
        coroutine.send(None)
    assert str(caught.value) == f"Agent.run() was awaited outside any trio run{ADVICE}"


def test_the_documented_way_works_from_asyncio() -> None:
    async def ask(question: str) -> str:
        messages = await agent().run(question)
        return messages[-1].text

    async def main() -> Any:
        return await asyncio.to_thread(trio.run, ask, "hello")

    assert asyncio.run(main()) == "Hi!"
