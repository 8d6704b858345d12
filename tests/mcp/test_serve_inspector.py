"""``agentloop mcp-serve`` driven by the MCP Inspector's CLI mode (npm, pinned in node_tools).

Each Inspector run is a real ``mcp-inspector --cli`` process (Node 22) that
starts the real program over stdio, or reaches ``agentloop mcp-serve --http``
on 127.0.0.1; its JSON output is compared.
"""

from __future__ import annotations

import json
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from node_tools import node_bin, node_env
from test_serve import BOUND, INPUT_SCHEMA, serve_command, serve_env

from agentloop.mcp._serve import OUTPUT_SCHEMA

BASH_TURNS = [
    {"text": "Trying.", "calls": [{"name": "bash", "args": {"command": "echo hi > out"}}]},
    {"text": "Refused, then."},
]


def inspector_env(tmp_path: Path) -> dict[str, str]:
    return node_env() | serve_env(tmp_path) | {"HOME": str(tmp_path / "home")}


async def inspect(tmp_path: Path, *args: str) -> dict[str, Any]:
    done = await trio.run_process(
        [node_bin("mcp-inspector"), "--cli", *args],
        capture_stdout=True,
        capture_stderr=True,
        env=inspector_env(tmp_path),
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


async def test_the_inspector_lists_the_tool_over_stdio(tmp_path: Path) -> None:
    with trio.fail_after(BOUND):
        listed = await inspect(
            tmp_path, "--method", "tools/list", "--", *serve_command(tmp_path, [])
        )
    (tool,) = listed["tools"]
    assert tool["name"] == "run_agent"
    assert tool["inputSchema"] == INPUT_SCHEMA
    assert tool["outputSchema"] == OUTPUT_SCHEMA


async def test_the_inspector_calls_the_tool_over_stdio(tmp_path: Path) -> None:
    """The Inspector's CLI takes no elicitation: bash is refused, the run completes."""
    with trio.fail_after(BOUND):
        result = await inspect(
            tmp_path,
            "--method",
            "tools/call",
            "--tool-name",
            "run_agent",
            "--tool-arg",
            "prompt=write it",
            "--",
            *serve_command(tmp_path, BASH_TURNS),
        )
    assert not (tmp_path / "work" / "out").exists()
    structured = result["structuredContent"]
    assert sorted(structured.pop("usage")) == [
        "cache_read",
        "cache_write",
        "input",
        "output",
        "total_tokens",
    ]
    assert len(structured.pop("conversation_id")) == 32
    assert result == {
        "content": [{"type": "text", "text": "Refused, then."}],
        "structuredContent": {
            "answer": "Refused, then.",
            "stop_reason": "completed",
            "stop_message": "",
        },
        "isError": False,
    }


async def read_url(stream: trio.abc.ReceiveStream) -> str:
    """The URL of ``agentloop: serving MCP at URL`` on the program's stderr."""
    buffer = b""
    while True:
        chunk = await stream.receive_some()
        if not chunk:
            raise RuntimeError(f"the server ended; stderr: {buffer!r}")
        buffer += chunk
        for line in buffer.decode(errors="replace").splitlines():
            if line.startswith("agentloop: serving MCP at "):
                return line.rpartition(" ")[2]


@pytest.mark.filterwarnings("ignore::ResourceWarning")
async def test_the_inspector_calls_the_tool_over_http(tmp_path: Path) -> None:
    """``agentloop mcp-serve --http 127.0.0.1:0``: the Inspector reaches it at its URL."""
    command = serve_command(tmp_path, [{"text": "Over HTTP."}], "--http", "127.0.0.1:0")
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            process: trio.Process = await nursery.start(
                partial(
                    trio.run_process,
                    command,
                    stdin=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    env=serve_env(tmp_path),
                    check=False,
                )
            )
            assert process.stderr is not None
            url = await read_url(process.stderr)
            assert url.startswith("http://127.0.0.1:")
            result = await inspect(
                tmp_path,
                "--method",
                "tools/call",
                "--tool-name",
                "run_agent",
                "--tool-arg",
                "prompt=hello",
                "--transport",
                "http",
                "--server-url",
                url,
            )
            process.terminate()
            assert await process.wait() in (0, -15)
    assert result["content"] == [{"type": "text", "text": "Over HTTP."}]
    assert result["structuredContent"]["stop_reason"] == "completed"
