"""``agentloop.mcp.serve_agent`` over streamable HTTP on 127.0.0.1, in this process.

The server runs in the test's trio nursery (Hypercorn's trio worker); the
client is the official SDK's ``Client`` on its URL. The agents are the
factory's, so the tests can read their histories.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.client import Client

import agentloop as al
from agentloop.mcp import ServeOptions, serve_agent
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import BashTool

BOUND = 30.0

# Under trio, the SDK's streamable-HTTP client leaves httpx2/httpcore2 async generators
# unfinished when it closes them (the client's leak, as in test_mcp.py); let that pass.
pytestmark = pytest.mark.filterwarnings("ignore:Async generator 'http(x|core)2[.]:ResourceWarning")


class Factory:
    """Agents on one scripted model; each one made is kept, to read its history."""

    def __init__(self, turns: list[Any], **settings: Any) -> None:
        self.provider = ScriptedProvider(turns)
        self.settings = settings
        self.agents: list[al.Agent] = []

    def __call__(self) -> al.Agent:
        agent = al.Agent(self.provider, **self.settings)
        self.agents.append(agent)
        return agent


async def serving(nursery: trio.Nursery, factory: Any, **options: Any) -> str:
    url: str = await nursery.start(partial(serve_agent, factory, http=("127.0.0.1", 0), **options))
    return url


def text_of(result: types.CallToolResult) -> str:
    (block,) = result.content
    assert isinstance(block, types.TextContent)
    return block.text


async def test_a_conversation_over_http_keeps_its_history() -> None:
    """Two calls, one conversation: the agent's history holds both exchanges."""
    factory = Factory([reply("One."), reply("Two.")])
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            url = await serving(nursery, factory)
            assert url.startswith("http://127.0.0.1:")
            assert url.endswith("/mcp")
            async with Client(url) as client:
                assert client.protocol_version == "2025-11-25"
                first = await client.call_tool("run_agent", {"prompt": "first"})
                assert first.structured_content is not None
                conversation = first.structured_content["conversation_id"]
                second = await client.call_tool(
                    "run_agent", {"prompt": "second", "conversation_id": conversation}
                )
            nursery.cancel_scope.cancel()
    assert (text_of(first), text_of(second)) == ("One.", "Two.")
    (agent,) = factory.agents
    assert [type(m).__name__ for m in agent.messages] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    # The model's second request carried the first exchange.
    assert len(factory.provider.requests[1].messages) == 3


async def test_a_conversation_belongs_to_its_mcp_session() -> None:
    """Another HTTP session cannot continue it: to that one it is unknown."""
    factory = Factory([reply("Mine.")])
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            url = await serving(nursery, factory)
            async with Client(url) as owner:
                first = await owner.call_tool("run_agent", {"prompt": "first"})
                assert first.structured_content is not None
                conversation = first.structured_content["conversation_id"]
                async with Client(url) as other:
                    stolen = await other.call_tool(
                        "run_agent", {"prompt": "x", "conversation_id": conversation}
                    )
            nursery.cancel_scope.cancel()
    assert stolen.is_error is True
    assert text_of(stolen) == (
        f"Unknown conversation: {conversation} (leave conversation_id out to start a new one)"
    )


async def test_progress_and_elicitation_over_http(tmp_path: Any) -> None:
    """The ask goes to the client; its answer decides; progress tells the run."""
    factory = Factory(
        [reply(call("bash", {"command": "echo hi > out"})), reply("Wrote it.")],
        tools=[BashTool(workspace=tmp_path)],
        permissions=al.Permissions(ask=["bash"]),
    )
    progress: list[str | None] = []
    asked: list[str] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            url = await serving(nursery, factory)
            async with Client(url, elicitation_callback=elicit) as client:
                result = await client.call_tool(
                    "run_agent", {"prompt": "go"}, progress_callback=on_progress
                )
            nursery.cancel_scope.cancel()
    assert asked == ["The agent asks to run bash 'echo hi > out'. Approve this tool call?"]
    assert progress[1:] == [
        'tool start: bash {"command": "echo hi > out"}',
        "tool end: bash ok",
        "text: Wrote it.",
    ]
    assert text_of(result) == "Wrote it."
    assert (tmp_path / "out").read_text() == "hi\n"


async def test_without_elicitation_the_agents_own_approver_decides(tmp_path: Any) -> None:
    """No elicitation: the configured approver answers; with none, the refusal says why."""
    seen: list[str] = []

    def approver(request: al.PermissionRequest) -> bool:
        seen.append(request.tool_name)
        return request.arguments["command"] == "echo yes"

    factory = Factory(
        [
            reply(call("bash", {"command": "echo yes"})),
            reply(call("bash", {"command": "echo no"})),
            reply("Done."),
        ],
        tools=[BashTool(workspace=tmp_path)],
        permissions=al.Permissions(ask=["bash"], approver=approver),
    )
    bare = Factory(
        [reply(call("bash", {"command": "echo yes"})), reply("Done.")],
        tools=[BashTool(workspace=tmp_path)],
        permissions=al.Permissions(ask=["bash"]),
    )
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            url = await serving(nursery, factory)
            bare_url = await serving(nursery, bare, path="/other")
            assert bare_url.endswith("/other")
            async with Client(url) as client:
                await client.call_tool("run_agent", {"prompt": "go"})
            async with Client(bare_url) as client:
                await client.call_tool("run_agent", {"prompt": "go"})
            nursery.cancel_scope.cancel()
    assert seen == ["bash", "bash"]
    results = [m for m in factory.agents[0].messages if isinstance(m, al.ToolResultMessage)]
    assert [(r.is_error, r.text) for r in results] == [
        (False, "Exit code: 0\nyes\n"),
        (True, "Permission denied: bash 'echo no' was not approved"),
    ]
    (refused,) = [m for m in bare.agents[0].messages if isinstance(m, al.ToolResultMessage)]
    assert refused.text == (
        "Permission denied: bash 'echo yes' needs approval (the rule ask(bash)), and the MCP "
        "client cannot be asked (it takes no elicitation)"
    )


async def test_server_options_name_the_server_and_the_tool() -> None:
    factory = Factory([reply("Hi.")])
    options = ServeOptions(name="helper", tool_name="ask_helper", description="Ask it.")
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            url = await serving(nursery, factory, options=options)
            async with Client(url) as client:
                info = client.session.initialize_result
                listed = await client.list_tools()
                result = await client.call_tool("ask_helper", {"prompt": "hi"})
            nursery.cancel_scope.cancel()
    assert info is not None
    assert info.server_info.name == "helper"
    assert [(t.name, t.description) for t in listed.tools] == [("ask_helper", "Ask it.")]
    assert text_of(result) == "Hi."


async def test_a_cancelled_call_aborts_its_run_softly(tmp_path: Any) -> None:
    """The client cancels: the run is aborted, the bash call gets its result, and the
    conversation goes on with the next call (which waits for the abort to end)."""
    from mcp_fixtures import kill_quietly, wait_for_file, wait_until_dead

    pid_file = tmp_path / "sleep.pid"
    command = f"sleep 300 & echo $! > {pid_file}; wait"
    factory = Factory(
        [reply("Waiting.", call("bash", {"command": command})), reply("Back.")],
        tools=[BashTool(workspace=tmp_path)],
    )
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            url = await serving(nursery, factory)
            async with Client(url) as client:
                async with trio.open_nursery() as calls:

                    async def run() -> None:
                        await client.call_tool(
                            "run_agent", {"prompt": "wait"}, progress_callback=on_progress
                        )

                    calls.start_soon(run)
                    text = await wait_for_file(pid_file, BOUND)
                    assert text is not None
                    calls.cancel_scope.cancel()
                first = progress[0]
                assert first is not None
                again = await client.call_tool(
                    "run_agent",
                    {"prompt": "and?", "conversation_id": first.partition(": ")[2]},
                )
            nursery.cancel_scope.cancel()
    try:
        assert await wait_until_dead(int(text), BOUND)
    finally:
        kill_quietly(int(text))
    assert text_of(again) == "Back."
    (agent,) = factory.agents
    kinds = [
        (type(m).__name__, m.outcome.value if isinstance(m, al.ToolResultMessage) else None)
        for m in agent.messages
    ]
    assert kinds == [
        ("UserMessage", None),
        ("AssistantMessage", None),
        ("ToolResultMessage", "cancelled"),
        ("UserMessage", None),
        ("AssistantMessage", None),
    ]
