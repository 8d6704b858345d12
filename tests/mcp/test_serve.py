"""``agentloop mcp-serve`` driven by the official MCP Python SDK client, over stdio.

The real program runs as a child process (``python -m agentloop mcp-serve``)
with a scripted model; the client is the SDK's ``Client`` over its stdin and
stdout. Tool calls run for real (bash, in ``tmp_path``). Waits on processes are
bounded with ``fail_after`` and poll /proc; none asserts on wall-clock time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
import trio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp_fixtures import kill_quietly, process_alive, wait_for_file, wait_until_dead

from agentloop.mcp._serve import OUTPUT_SCHEMA

BOUND = 60.0  # seconds: a ceiling on real-process waits, never the expected time

INPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "prompt": {"type": "string", "description": "What to ask the agent."},
        "conversation_id": {
            "type": "string",
            "description": "Continue the conversation an earlier call returned "
            "(its conversation_id); leave it out to start a new one.",
        },
    },
    "required": ["prompt"],
    "additionalProperties": False,
}


def serve_env(tmp_path: Path) -> dict[str, str]:
    drop = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"AGENTLOOP_HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path)}


def serve_command(tmp_path: Path, turns: list[dict[str, Any]], *extra: str) -> list[str]:
    """``python -m agentloop mcp-serve`` on a scripted model, working in ``tmp_path/work``."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(turns), encoding="utf-8")
    return [
        sys.executable,
        "-m",
        "agentloop",
        "mcp-serve",
        "-m",
        f"scripted:{script}",
        "-C",
        str(work),
        *extra,
    ]


def serve_params(tmp_path: Path, turns: list[dict[str, Any]]) -> StdioServerParameters:
    command = serve_command(tmp_path, turns)
    return StdioServerParameters(
        command=command[0], args=command[1:], env=serve_env(tmp_path), cwd=str(tmp_path)
    )


class Recorder:
    """The progress messages of calls, and the elicitation requests (answered by ``answer``)."""

    def __init__(self, answer: types.ElicitResult | None = None) -> None:
        self.progress: list[tuple[float, str | None]] = []
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.answer = answer

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, message))

    async def elicit(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append((params.message, params.requested_schema))
        assert self.answer is not None
        return self.answer

    def client(self, server: StdioServerParameters | str) -> Client:
        if self.answer is None:
            return Client(server)
        return Client(server, elicitation_callback=self.elicit)


def messages(recorder: Recorder) -> list[str | None]:
    """The progress messages after the first, which names the conversation (checked)."""
    assert [step for step, _ in recorder.progress] == list(range(1, len(recorder.progress) + 1))
    first = recorder.progress[0][1]
    assert first is not None
    assert first.startswith("conversation: ")
    assert len(first) == len("conversation: ") + 32
    return [message for _, message in recorder.progress[1:]]


APPROVAL_SCHEMA = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Approve",
            "description": "Let the agent make this tool call.",
        }
    },
    "required": ["approve"],
}
ACCEPT = types.ElicitResult(action="accept", content={"approve": True})


def structured(result: types.CallToolResult) -> dict[str, Any]:
    """The structured content, its usage checked for shape and taken out."""
    assert result.structured_content is not None
    content = dict(result.structured_content)
    usage = content.pop("usage")
    assert sorted(usage) == ["cache_read", "cache_write", "input", "output", "total_tokens"]
    assert usage["total_tokens"] == usage["input"] + usage["output"] > 0
    return content


# --------------------------------------------------------------------------- listing


async def test_the_server_lists_one_tool_with_its_schemas(tmp_path: Path) -> None:
    """tools/list: run_agent with its input and output schemas; the handshake era."""
    with trio.fail_after(BOUND):
        async with Client(serve_params(tmp_path, [])) as client:
            assert client.protocol_version == "2025-11-25"
            assert client.session.initialize_result is not None
            assert client.session.initialize_result.server_info.name == "agentloop"
            listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == ["run_agent"]
    tool = listed.tools[0]
    assert tool.input_schema == INPUT_SCHEMA
    assert tool.output_schema == OUTPUT_SCHEMA
    assert tool.description == (
        "Run an agent on a prompt: it may use its tools, and answers when it is done. "
        "Pass the conversation_id of an earlier answer to continue that conversation."
    )


# --------------------------------------------------------------------------- a run


async def test_a_run_tells_its_events_as_progress_and_answers_with_structured_content(
    tmp_path: Path,
) -> None:
    """Progress: texts, the tool's start and end; the elicitation approves bash; the answer."""
    turns = [
        {"text": "Let me look.", "calls": [{"name": "bash", "args": {"command": "echo hi > out"}}]},
        {"text": "Done: wrote out."},
    ]
    recorder = Recorder(ACCEPT)
    with trio.fail_after(BOUND):
        async with recorder.client(serve_params(tmp_path, turns)) as client:
            result = await client.call_tool(
                "run_agent", {"prompt": "write it"}, progress_callback=recorder.on_progress
            )
    assert messages(recorder) == [
        "text: Let me look.",
        'tool start: bash {"command": "echo hi > out"}',
        "tool end: bash ok",
        "text: Done: wrote out.",
    ]
    assert recorder.asked == [
        ("The agent asks to run bash 'echo hi > out'. Approve this tool call?", APPROVAL_SCHEMA)
    ]
    assert (tmp_path / "work" / "out").read_text() == "hi\n"
    assert result.is_error is False
    assert [block.model_dump() for block in result.content] == [
        {"type": "text", "text": "Done: wrote out.", "annotations": None, "meta": None}
    ]
    content = structured(result)
    conversation = content.pop("conversation_id")
    assert len(conversation) == 32
    assert content == {"answer": "Done: wrote out.", "stop_reason": "completed", "stop_message": ""}


async def test_a_declined_elicitation_refuses_the_call(tmp_path: Path) -> None:
    """The user declines: bash is not run (denied), and the run goes on."""
    turns = [
        {"calls": [{"name": "bash", "args": {"command": "echo hi > out"}}]},
        {"text": "It was refused."},
    ]
    recorder = Recorder(types.ElicitResult(action="decline"))
    with trio.fail_after(BOUND):
        async with recorder.client(serve_params(tmp_path, turns)) as client:
            result = await client.call_tool(
                "run_agent", {"prompt": "write it"}, progress_callback=recorder.on_progress
            )
    assert messages(recorder) == [
        'tool start: bash {"command": "echo hi > out"}',
        "tool end: bash denied",
        "text: It was refused.",
    ]
    assert len(recorder.asked) == 1
    assert not (tmp_path / "work" / "out").exists()
    assert structured(result)["stop_reason"] == "completed"


async def test_without_elicitation_asked_calls_are_refused(tmp_path: Path) -> None:
    """A client that declares no elicitation is not asked: the call is refused."""
    turns = [
        {"calls": [{"name": "bash", "args": {"command": "echo hi > out"}}]},
        {"text": "It was refused."},
    ]
    recorder = Recorder()
    with trio.fail_after(BOUND):
        async with recorder.client(serve_params(tmp_path, turns)) as client:
            await client.call_tool(
                "run_agent", {"prompt": "write it"}, progress_callback=recorder.on_progress
            )
    assert messages(recorder) == [
        'tool start: bash {"command": "echo hi > out"}',
        "tool end: bash denied",
        "text: It was refused.",
    ]
    assert not (tmp_path / "work" / "out").exists()


async def test_a_conversation_goes_on_by_its_id(tmp_path: Path) -> None:
    """The second call with the first's conversation_id continues it; an unknown id is an error."""
    turns = [{"text": "First."}, {"text": "Second."}, {"text": "New."}]
    with trio.fail_after(BOUND):
        async with Client(serve_params(tmp_path, turns)) as client:
            first = await client.call_tool("run_agent", {"prompt": "one"})
            conversation = structured(first)["conversation_id"]
            second = await client.call_tool(
                "run_agent", {"prompt": "two", "conversation_id": conversation}
            )
            unknown = await client.call_tool(
                "run_agent", {"prompt": "three", "conversation_id": "nope"}
            )
            fresh = await client.call_tool("run_agent", {"prompt": "three"})
    assert structured(second) == {
        "answer": "Second.",
        "stop_reason": "completed",
        "stop_message": "",
        "conversation_id": conversation,
    }
    assert unknown.is_error is True
    assert unknown.structured_content is None
    assert [block.model_dump()["text"] for block in unknown.content] == [
        "Unknown conversation: nope (leave conversation_id out to start a new one)"
    ]
    assert structured(fresh)["conversation_id"] != conversation


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"prompt": ""}, "Invalid arguments: prompt must be a non-empty string"),
        ({"prompt": 3}, "Invalid arguments: prompt must be a non-empty string"),
        (
            {"prompt": "x", "conversation_id": 3},
            "Invalid arguments: conversation_id must be a string",
        ),
        ({"prompt": "x", "other": 1}, "Invalid arguments: unknown argument 'other'"),
    ],
)
async def test_invalid_arguments_are_error_results(
    tmp_path: Path, arguments: dict[str, Any], error: str
) -> None:
    with trio.fail_after(BOUND):
        async with Client(serve_params(tmp_path, [])) as client:
            result = await client.call_tool("run_agent", arguments)
    assert result.is_error is True
    assert [block.model_dump()["text"] for block in result.content] == [error]


# --------------------------------------------------------------------------- cancellation


def sleeper_turns(pid_file: Path) -> list[dict[str, Any]]:
    command = f"sleep 300 & echo $! > {pid_file}; wait"
    return [
        {"text": "Waiting.", "calls": [{"name": "bash", "args": {"command": command}}]},
        {"text": "Back again."},
    ]


async def test_the_clients_cancellation_aborts_the_run(tmp_path: Path) -> None:
    """notifications/cancelled: bash's sleep is killed, and the conversation goes on."""
    pid_file = tmp_path / "sleep.pid"
    recorder = Recorder(ACCEPT)
    with trio.fail_after(BOUND):
        async with recorder.client(serve_params(tmp_path, sleeper_turns(pid_file))) as client:
            async with trio.open_nursery() as nursery:

                async def call() -> None:
                    await client.call_tool(
                        "run_agent", {"prompt": "wait"}, progress_callback=recorder.on_progress
                    )
                    raise AssertionError("the cancelled call answered")

                nursery.start_soon(call)
                text = await wait_for_file(pid_file, BOUND)
                assert text is not None
                nursery.cancel_scope.cancel()
            pid = int(text)
            try:
                assert await wait_until_dead(pid, BOUND)
            finally:
                kill_quietly(pid)
            conversation = recorder.progress[0][1]
            assert conversation is not None
            again = await client.call_tool(
                "run_agent",
                {"prompt": "and now?", "conversation_id": conversation.partition(": ")[2]},
            )
    assert messages(recorder) == [
        "text: Waiting.",
        f'tool start: bash {{"command": "sleep 300 & echo $! > {pid_file}; wait"}}',
    ]
    assert structured(again)["answer"] == "Back again."


# --------------------------------------------------------------------------- the wire


class Wire:
    """The program's stdin and stdout, one JSON line at a time."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.buffer = b""

    async def send(self, data: str | dict[str, Any]) -> None:
        line = data if isinstance(data, str) else json.dumps(data)
        await self.stdin.send_all(line.encode() + b"\n")

    async def receive(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = await self.stdout.receive_some()
            if not chunk:
                raise EOFError(f"stdout ended; left: {self.buffer!r}")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    async def initialize(self, **capabilities: Any) -> None:
        await self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": capabilities,
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        answer = await self.receive()
        assert answer["id"] == 0
        assert answer["result"]["protocolVersion"] == "2025-06-18"
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


async def open_wire(tmp_path: Path, turns: list[dict[str, Any]], nursery: trio.Nursery) -> Wire:
    process = await nursery.start(
        partial(
            trio.run_process,
            serve_command(tmp_path, turns),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=serve_env(tmp_path),
            check=False,
        )
    )
    return Wire(process)


async def test_malformed_lines_get_json_rpc_errors_and_the_server_goes_on(tmp_path: Path) -> None:
    """Not JSON: -32700 with a null id; JSON but no message: -32600 with its id; then it serves."""
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            wire = await open_wire(tmp_path, [], nursery)
            await wire.send("this is not json")
            assert await wire.receive() == {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32700, "message": "Parse error"},
            }
            await wire.send({"jsonrpc": "2.0", "id": 7, "method": 5})
            assert await wire.receive() == {
                "jsonrpc": "2.0",
                "id": 7,
                "error": {"code": -32600, "message": "Invalid Request"},
            }
            await wire.send("[1, 2")
            assert (await wire.receive())["error"]["code"] == -32700
            await wire.initialize()
            await wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            listed = await wire.receive()
            assert [tool["name"] for tool in listed["result"]["tools"]] == ["run_agent"]
            await wire.send({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})
            assert (await wire.receive())["error"]["code"] == -32601
            await wire.stdin.aclose()
            assert await wire.process.wait() == 0


async def test_a_vanishing_client_ends_the_run_and_the_server(tmp_path: Path) -> None:
    """The client's pipes close mid-run: bash's sleep is killed and the server exits."""
    pid_file = tmp_path / "sleep.pid"
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            wire = await open_wire(tmp_path, sleeper_turns(pid_file), nursery)
            await wire.initialize(elicitation={})
            call = {"name": "run_agent", "arguments": {"prompt": "wait"}}
            await wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
            asked = await wire.receive()
            assert asked["method"] == "elicitation/create"
            answer = {"action": "accept", "content": {"approve": True}}
            await wire.send({"jsonrpc": "2.0", "id": asked["id"], "result": answer})
            text = await wait_for_file(pid_file, BOUND)
            assert text is not None
            pid = int(text)
            try:
                assert process_alive(pid)
                await wire.stdin.aclose()
                await wire.stdout.aclose()
                assert await wire.process.wait() == 0
                assert await wait_until_dead(pid, BOUND)
            finally:
                kill_quietly(pid)
