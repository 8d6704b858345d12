"""Logging: one ``agentloop.*`` logger per area, quiet unless the application configures it.

Exact records (logger, level, message) for a provider's retry, an MCP stdio
server's restart and a lingering server's end, an OpenAPI request and a session's
recovery; no credential in any record of a failing request, even at DEBUG; and, in
a fresh interpreter, one NullHandler on ``agentloop`` and nothing on stderr unless
logging is configured.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp_fixtures import process_alive, stdio_command

import agentloop as al
from agentloop.mcp import StdioServer, open_mcp
from agentloop.openapi import OpenApiConfig, OpenApiToolAdapter
from agentloop.providers import (
    AuthenticationError,
    ModelConfig,
    ModelRequest,
    OpenAIProvider,
    RetryConfig,
    ScriptedProvider,
)
from agentloop.session import NOT_RUN_AGAIN, SessionRecorder, load_session

KEY = "sk-test-LOGGING-SECRET-77"
MODEL = ModelConfig.openai("gpt-5.4", api_key=KEY)
URL = "https://api.openai.com/v1/chat/completions"
STREAM = (Path(__file__).parent / "fixtures" / "openai" / "text_usage.sse").read_bytes()
REQUEST = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))
BOUND = 30.0  # seconds: a ceiling on real-process waits, never the expected time

Record = tuple[str, int, str]


def records(caplog: pytest.LogCaptureFixture, prefix: str = "agentloop") -> list[Record]:
    return [
        (r.name, r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == prefix or r.name.startswith(prefix + ".")
    ]


def openai_error(status: int, message: str, kind: str) -> httpx2.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return httpx2.Response(status, json=body)


def stream() -> httpx2.Response:
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=STREAM)


def provider(*answers: httpx2.Response | Exception) -> OpenAIProvider:
    """An OpenAIProvider whose server gives ``answers`` in turn (an exception is raised)."""
    pending = list(answers)

    async def handler(request: httpx2.Request) -> httpx2.Response:
        answer = pending.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return OpenAIProvider(MODEL, retry=RetryConfig(jitter=0), client=client)


async def ignore(delta: al.StreamDelta) -> None:
    pass


# --------------------------------------------------------------------------- providers


async def test_a_retry_is_a_warning_with_the_error_class_and_the_delay(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentloop")
    model = provider(openai_error(529, "Overloaded", "overloaded_error"), stream())
    message = await model.stream(REQUEST, ignore)
    assert message.stop_reason == al.StopReason.STOP
    assert records(caplog) == [
        ("agentloop.providers", logging.DEBUG, f"openai model 'gpt-5.4': POST {URL}"),
        (
            "agentloop.providers",
            logging.WARNING,
            "openai model 'gpt-5.4': OverloadedError, retrying in 1s (retry 1 of 3): "
            "OpenAI API error 529 (overloaded_error): Overloaded",
        ),
        ("agentloop.providers", logging.DEBUG, f"openai model 'gpt-5.4': POST {URL}"),
    ]


async def test_the_api_key_is_in_no_record_of_a_failing_request(
    autojump_clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The server echoes the key in each failure; no record, at any level, carries it."""
    caplog.set_level(logging.DEBUG, logger="agentloop")
    model = provider(
        openai_error(500, f"upstream rejected Bearer {KEY}", "server_error"),
        httpx2.ConnectError(f"proxy refused authorization: Bearer {KEY}"),
        httpx2.ReadError(f"connection reset while sending {KEY}"),
        openai_error(401, f"Incorrect API key provided: {KEY}", "invalid_request_error"),
    )
    with pytest.raises(AuthenticationError) as caught:
        await model.stream(REQUEST, ignore)
    assert KEY not in str(caught.value)
    found = records(caplog)
    assert [level for _, level, _ in found] == [
        logging.DEBUG,
        logging.WARNING,
        logging.DEBUG,
        logging.WARNING,
        logging.DEBUG,
        logging.WARNING,
        logging.DEBUG,
    ]
    assert found[1][2] == (
        "openai model 'gpt-5.4': ServerError, retrying in 1s (retry 1 of 3): "
        "OpenAI API error 500 (server_error): upstream rejected Bearer ***"
    )
    assert all(KEY not in text for _, _, text in found)
    assert KEY not in caplog.text


# --------------------------------------------------------------------------- MCP


def stdio_server(*extra: str) -> StdioServer:
    command, args = stdio_command("stdio", *extra)
    return StdioServer(command, args)


async def call_text(connection: Any, tool: str, args: dict[str, Any]) -> str:
    result = await connection.call_tool(tool, args)
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_a_restarted_stdio_server_is_a_warning_then_an_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentloop")
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server(), name="srv") as srv:
            with pytest.raises(al.ToolError):
                await srv.call_tool("die", {})
            pid = int(await call_text(srv, "pid", {}))  # started again
            assert srv.connections == 2
            seen = records(caplog)
    assert seen == [
        (
            "agentloop.mcp",
            logging.WARNING,
            "MCP server 'srv': the connection was lost (the server process exited with "
            "status 3); restarting it at the next call",
        ),
        ("agentloop.mcp", logging.INFO, f"MCP server 'srv': restarted (pid {pid})"),
    ]


async def test_a_server_that_lingers_after_eof_is_ended_with_an_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="agentloop")
    with trio.fail_after(BOUND):
        async with open_mcp(stdio_server("--linger", "600"), name="srv") as srv:
            pid = int(await call_text(srv, "pid", {}))
            assert records(caplog) == []
    assert not process_alive(pid)
    assert records(caplog) == [
        (
            "agentloop.mcp",
            logging.INFO,
            f"MCP server 'srv': process {pid} still runs 2s after its stdin closed; "
            "ending its process group",
        )
    ]


# --------------------------------------------------------------------------- OpenAPI

PETS = {
    "openapi": "3.1.0",
    "info": {"title": "Pets", "version": "1"},
    "servers": [{"url": "https://pets.test/v1"}],
    "components": {
        "securitySchemes": {"key": {"type": "apiKey", "in": "query", "name": "api_key"}}
    },
    "security": [{"key": []}],
    "paths": {
        "/pets/{id}": {
            "get": {
                "operationId": "getPet",
                "parameters": [
                    {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}}
                ],
                "responses": {"200": {"description": "a pet"}},
            }
        }
    },
}


async def test_an_openapi_request_is_a_debug_record_without_its_credential(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentloop")

    async def server(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"name": "Rex"})

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(server))
    config = OpenApiConfig(credentials={"key": KEY}, client=client)
    (tool,) = OpenApiToolAdapter.from_spec(PETS, config)
    await tool.execute({"id": 7}, al.ToolContext("c1", tool.name, trio.CancelScope()))
    url = "https://pets.test/v1/pets/7?api_key=***"
    assert records(caplog) == [
        ("agentloop.openapi", logging.DEBUG, f"getPet: GET {url}"),
        ("agentloop.openapi", logging.DEBUG, f"getPet: GET {url} -> 200"),
    ]


# --------------------------------------------------------------------------- sessions


@al.tool
async def effect() -> str:
    """Change something (not safe to repeat)."""
    return "changed"


@al.tool(replay_safe=True)
async def read() -> str:
    """Read something."""
    return "read"


async def test_recovering_a_session_logs_each_interrupted_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agentloop")
    path = tmp_path / "s1.jsonl"
    calls = [al.ToolCall(id, name, {}) for id, name in [("c1", "effect"), ("c2", "read")]]
    calls += [al.ToolCall("c3", "read", {}), al.ToolCall("c4", "gone", {})]
    with SessionRecorder(path) as recorder:
        for event in [
            al.AgentStart(loop_id="L"),
            al.MessageEnd(loop_id="L", message=al.UserMessage.text("go")),
            al.MessageEnd(
                loop_id="L", message=al.AssistantMessage(tuple(calls), al.StopReason.TOOL_USE)
            ),
            al.ToolExecutionStart(loop_id="L", tool_call_id="c1", tool_name="effect", args={}),
            al.ToolExecutionStart(loop_id="L", tool_call_id="c2", tool_name="read", args={}),
        ]:
            recorder.record(event)
    session = load_session(path)
    results = await session.recover(al.Agent(ScriptedProvider([]), tools=[effect, read]))
    assert [r.text for r in results] == [NOT_RUN_AGAIN, "read", "read", "Tool not found: gone"]
    assert records(caplog) == [
        ("agentloop.session", logging.INFO, f"session s1: interrupted call {text}")
        for text in [
            "c1 of 'effect': it had started; not running it again",
            "c2 of 'read': replay-safe; running it again",
            "c3 of 'read': not started; running it",
            "c4 of 'gone': no such tool",
        ]
    ]


# --------------------------------------------------------------------------- quiet by default

# A run whose provider retries once (a WARNING record) and then answers.
RUN = textwrap.dedent(
    f"""
    import logging, sys
    import httpx2, trio
    import agentloop as al
    from agentloop.providers import ModelConfig, OpenAIProvider, RetryConfig

    if sys.argv[1:] == ["configured"]:
        logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    answers = [
        httpx2.Response(529, json={{"error": {{"message": "Overloaded", "type": "overloaded"}}}}),
        httpx2.Response(
            200, headers={{"content-type": "text/event-stream"}}, content={STREAM!r}
        ),
    ]

    async def handler(request):
        return answers.pop(0)

    async def main():
        client = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
        model = ModelConfig.openai("gpt-5.4", api_key={KEY!r})
        retry = RetryConfig(initial_delay=0.01, jitter=0)
        agent = al.Agent(OpenAIProvider(model, retry=retry, client=client))
        await agent.run("hi")
        print(ascii(agent.messages[-1].text))

    trio.run(main)
    """
)


ANSWER = ascii("Héllo wörld 👋!") + "\n"


def test_importing_agentloop_adds_one_null_handler() -> None:
    script = (
        "import logging, agentloop, agentloop.mcp, agentloop.openapi, agentloop.tools\n"
        "print([type(h).__name__ for h in logging.getLogger('agentloop').handlers])\n"
        "print(logging.getLogger().handlers)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert (result.stdout, result.stderr) == ("['NullHandler']\n[]\n", "")
    handlers = logging.getLogger("agentloop").handlers
    assert [type(h) for h in handlers if isinstance(h, logging.NullHandler)] == [
        logging.NullHandler
    ]


def test_a_run_prints_nothing_to_stderr_unless_logging_is_configured(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Without configuration the retry's warning goes nowhere; with it, to the handler."""
    subprocess.run([sys.executable, "-c", RUN], check=True)
    out, err = capfd.readouterr()
    assert (out, err) == (ANSWER, "")
    subprocess.run([sys.executable, "-c", RUN, "configured"], check=True)
    out, err = capfd.readouterr()
    assert out == ANSWER
    assert err == (
        "WARNING agentloop.providers: openai model 'gpt-5.4': OverloadedError, retrying in "
        "10ms (retry 1 of 3): OpenAI API error 529 (overloaded): Overloaded\n"
    )
