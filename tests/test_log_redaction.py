"""No credential reaches a log record, whatever the application's logging configuration.

The HTTP client logs every request's URL at INFO (``httpx2``), its connection
layer the response headers at DEBUG (``httpcore2.*``), the MCP SDK the server's
URL and the messages it sends (``mcp.*``). Real servers on 127.0.0.1 (an
OpenAPI echo server, an OpenAI-style SSE server, an MCP HTTP server, an OAuth
authorization server); a handler on the *root* logger at DEBUG, which receives
the records as they propagate (no logger filter of an ancestor applies to them),
gets every record; no canary is in any of them, formatted or not.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp_fixtures import serve_http
from openapi_fixtures import serve_openapi_echo
from sse_server import Reply, serve

import agentloop as al
from agentloop._log import redact_record
from agentloop.mcp import HttpServer, OAuth, open_mcp
from agentloop.openapi import OpenApiConfig, OpenApiToolAdapter
from agentloop.providers import ModelConfig, ModelRequest, OpenAIProvider

STREAM = (Path(__file__).parent / "fixtures" / "openai" / "text_usage.sse").read_bytes()
BOUND = 30.0  # seconds: a ceiling on real-process waits, never the expected time
FORMAT = logging.Formatter("%(name)s %(levelname)s %(message)s")


class Records(logging.Handler):
    """Keeps every record it is handed."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def texts(self, record: logging.LogRecord) -> list[str]:
        """Everything of ``record`` a handler could write out."""
        texts = [str(record.msg), repr(record.args), record.getMessage(), FORMAT.format(record)]
        if record.exc_info:
            texts.append(FORMAT.formatException(record.exc_info))
        return texts

    def leaks(self, *canaries: str) -> list[tuple[str, str]]:
        """(logger, canary) for each record that carries a canary, in any form."""
        return [
            (record.name, canary)
            for record in self.records
            for canary in canaries
            if any(canary in text for text in self.texts(record))
        ]

    def messages(self, name: str) -> list[str]:
        return [r.getMessage() for r in self.records if r.name == name]


@pytest.fixture
def root() -> Iterator[Records]:
    """A handler on the root logger, everything at DEBUG (as an application may set it)."""
    handler = Records()
    logger = logging.getLogger()
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def context(tool: al.AgentTool) -> al.ToolContext:
    return al.ToolContext("c1", tool.name, trio.CancelScope())


# --------------------------------------------------------------------------- OpenAPI

QUERY_KEY = "QUERYKEYCANARY1"  # in a parameter named like a key
PLAIN_KEY = "PLAINKEYCANARY2"  # in a parameter named "k": only the adapter knows it is one


def spec(base: str) -> dict[str, Any]:
    def get(operation: str, scheme: str) -> dict[str, Any]:
        return {"get": {"operationId": operation, "security": [{scheme: []}],
                        "responses": {"200": {"description": "ok"}}}}  # fmt: skip

    return {
        "openapi": "3.1.0",
        "info": {"title": "Echo", "version": "1"},
        "servers": [{"url": base}],
        "components": {
            "securitySchemes": {
                "named": {"type": "apiKey", "in": "query", "name": "api_key"},
                "plain": {"type": "apiKey", "in": "query", "name": "k"},
            }
        },
        "paths": {"/echo": get("echo", "named"), "/cookie-set": get("cookie", "plain")},
    }


async def test_an_openapi_key_in_the_query_is_in_no_record(root: Records) -> None:
    async with serve_openapi_echo() as base:
        config = OpenApiConfig(credentials={"named": QUERY_KEY, "plain": PLAIN_KEY})
        echo, cookie = OpenApiToolAdapter.from_spec(spec(base), config)
        with trio.fail_after(BOUND):
            await echo.execute({}, context(echo))
            await cookie.execute({}, context(cookie))
    assert root.leaks(QUERY_KEY, PLAIN_KEY, "abc123") == []
    assert root.messages("httpx2") == [
        f'HTTP Request: GET {base}/echo?api_key=*** "HTTP/1.1 200 OK"',
        f'HTTP Request: GET {base}/cookie-set?k=*** "HTTP/1.1 200 OK"',
    ]
    headers = [m for m in root.messages("httpcore2.http11") if "Set-Cookie" in m]
    assert len(headers) == 1
    assert "(b'Set-Cookie', b'***')" in headers[0]


# --------------------------------------------------------------------------- providers

URL_KEY = "URLKEYCANARY3"
API_KEY = "sk-APIKEYCANARY4-abcdefghijklmnop"


async def test_a_providers_key_in_the_base_url_is_in_no_record(root: Records) -> None:
    async with serve(Reply([STREAM])) as server:
        config = ModelConfig.openai_compatible(
            "m", f"{server.url}/v1?key={URL_KEY}", api_key=API_KEY
        )
        provider = OpenAIProvider(config)
        request = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))

        async def ignore(delta: object) -> None:
            pass

        with trio.fail_after(BOUND):
            message = await provider.stream(request, ignore)
        await provider.aclose()
    assert message.stop_reason is al.StopReason.STOP
    assert root.leaks(URL_KEY, API_KEY) == []
    url = f"{server.url}/v1/chat/completions?key=***"
    assert root.messages("httpx2") == [f'HTTP Request: POST {url} "HTTP/1.1 200 OK"']
    assert root.messages("agentloop.providers") == [f"openai-compatible model 'm': POST {url}"]


# --------------------------------------------------------------------------- MCP

URL_TOKEN = "URLTOKENCANARY5"
HEADER = "HEADERCANARY6-abcdef"


async def test_an_mcp_servers_url_token_and_header_are_in_no_record(root: Records) -> None:
    """The URL (logged by the SDK and the HTTP client) and the header (in a tool's
    arguments, which the SDK logs as it sends them) are redacted."""
    async with serve_http("http") as (url, _process):
        server = HttpServer(f"{url}?token={URL_TOKEN}", headers={"X-Api-Key": HEADER})
        with trio.fail_after(BOUND):
            async with open_mcp(server, name="srv") as connection:
                await connection.call_tool("echo", {"text": f"key {HEADER}"})
    assert root.leaks(URL_TOKEN, HEADER) == []
    sdk = root.messages("mcp.client.streamable_http")
    assert f"Connecting to StreamableHTTP endpoint: {url}?token=***" in sdk
    assert any("key ***" in message for message in sdk)  # the arguments, as sent
    assert f'HTTP Request: POST {url}?token=*** "HTTP/1.1 200 OK"' in root.messages("httpx2")


# --------------------------------------------------------------------------- OAuth


async def test_no_oauth_token_code_or_verifier_is_in_any_record(
    root: Records, tmp_path: Path
) -> None:
    """The sign-in goes over HTTP as a browser's would; the HTTP client logs it all."""
    from test_mcp_oauth import Consent, auth_server, whoami

    async with auth_server(expires_in=0) as server:
        oauth = OAuth(token_store=tmp_path, authorize=Consent())
        with trio.fail_after(BOUND):
            await whoami(HttpServer(server.url, oauth=oauth))
            await whoami(HttpServer(server.url, oauth=oauth))
    seen = [*server.access, *server.refresh]
    for grant in server.grants:
        seen += [grant[k] for k in ("code", "code_verifier", "refresh_token") if k in grant]
    assert len(seen) == 6
    assert root.leaks(*seen) == []
    assert any(m.startswith("HTTP Request: GET ") for m in root.messages("httpx2"))


# --------------------------------------------------------------------------- the records


def record(name: str, msg: str, *args: object, exc: BaseException | None = None) -> Any:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    made = logging.getLogger(name).makeRecord(name, logging.INFO, "f.py", 1, msg, args, exc_info)
    return made


def test_a_record_is_redacted_where_it_is_made() -> None:
    """Message and arguments become one redacted text; a traceback that names a
    credential is kept as redacted text; other loggers' records are untouched."""
    try:
        raise ValueError(f"cannot fetch http://u:{URL_KEY}@h/")
    except ValueError as error:
        made = record("httpcore2.http11", "GET %s", f"http://h/?token={URL_KEY}", exc=error)
    assert (made.msg, made.args, made.exc_info) == ("GET http://h/?token=***", (), None)
    assert made.exc_text.endswith("ValueError: cannot fetch http://u:***@h/")
    clean = record("httpx2", "HTTP Request: %s %s", "GET", "http://h/?page=2")
    assert (clean.msg, clean.args) == ("HTTP Request: %s %s", ("GET", "http://h/?page=2"))
    other = record("myapp.http", "GET %s", f"http://h/?token={URL_KEY}")
    assert other.args == (f"http://h/?token={URL_KEY}",)
    broken = logging.LogRecord("agentloop", logging.INFO, "f.py", 1, "%d", ("x",), None)
    redact_record(broken)  # a malformed record stays as it is: the handler reports it
    assert (broken.msg, broken.args) == ("%d", ("x",))


def test_whatever_the_configuration_in_a_fresh_interpreter() -> None:
    """basicConfig on stderr, a handler of its own on httpcore2 that does not propagate,
    dictConfig that resets the loggers: the URL's key is in no line written."""
    code = textwrap.dedent(
        f"""
        import logging, logging.config, sys
        import agentloop
        logging.config.dictConfig({{
            "version": 1,
            "handlers": {{"err": {{"class": "logging.StreamHandler", "stream": "ext://sys.stderr"}}}},
            "loggers": {{"httpx2": {{"level": "DEBUG", "handlers": ["err"], "propagate": False}}}},
            "root": {{"level": "DEBUG", "handlers": ["err"]}},
        }})
        logging.getLogger("httpx2").info("HTTP Request: GET %s", "http://h/?api_key={URL_KEY}")
        logging.getLogger("httpcore2.http11").debug("url=%r", "http://u:{URL_KEY}@h/")
        logging.getLogger("mcp.client.sse").warning("endpoint http://h/?sig={URL_KEY}")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stderr.splitlines() == [
        "HTTP Request: GET http://h/?api_key=***",
        "url='http://u:***@h/'",
        "endpoint http://h/?sig=***",
    ]
