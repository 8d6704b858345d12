"""Credentials in URLs are never written out: redacted wherever a URL is shown or stored.

Exact strings for :func:`agentloop._secrets.redact_url` and its relatives; the
reprs, errors and records that name a URL; and the real program with
``--base-url 'http://user:password@127.0.0.1:PORT/v1?key=...'`` against a real
server on 127.0.0.1, in each output format: the request carries the credentials,
and no output, no error and no session file does.
"""

from __future__ import annotations

import base64
import io
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from rich.console import Console
from sse_server import Reply, serve
from test_cli import cli_env

from agentloop._cli import App, Screen, choose_model, parse_args
from agentloop._cli._commands import error_hint
from agentloop._secrets import (
    is_secret_param,
    redact_secrets,
    redact_url,
    redact_urls,
    url_secrets,
)
from agentloop.openapi import OpenApiConfig, OpenApiError, OpenApiToolAdapter
from agentloop.providers import (
    ModelConfig,
    OpenAIProvider,
    ProviderError,
    RetryConfig,
)
from agentloop.providers._http import join_url
from agentloop.session import SessionRecorder

PASSWORD = "PASSCANARY77"
KEY = "KEYCANARY42"
CANARIES = (PASSWORD, KEY)
STREAM = (Path(__file__).parent / "fixtures" / "openai" / "text_usage.sse").read_bytes()
ANSWER = "Héllo wörld 👋!"


# --------------------------------------------------------------------------- the functions


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.test/v1", "https://api.test/v1"),
        ("http://user:pa55@127.0.0.1:8080/v1", "http://user:***@127.0.0.1:8080/v1"),
        ("http://user@host/v1", "http://user@host/v1"),  # a name, no password
        ("http://user:@host/", "http://user:@host/"),  # an empty password
        ("https://ghp_0123456789abcdefghij0123@github.com/o/r", "https://***@github.com/o/r"),
        ("https://9f8e7d6c5b4a39281706f5e4@host/", "https://***@host/"),  # a token as user
        ("https://x-access-token:t0ken@host/", "https://x-access-token:***@host/"),
        ("https://h/p?key=abc&page=2", "https://h/p?key=***&page=2"),
        (
            "https://h/p?api_key=a&apikey=b&token=c&access_token=d&secret=e&password=f&x=1",
            "https://h/p?api_key=***&apikey=***&token=***&access_token=***&secret=***"
            "&password=***&x=1",
        ),
        (
            "https://h/p?sig=a&signature=b&code=c&auth=d",
            "https://h/p?sig=***&signature=***&code=***&auth=***",
        ),
        (
            "https://s3.test/o?X-Amz-Signature=ab&X-Amz-Date=1",
            "https://s3.test/o?X-Amz-Signature=***&X-Amz-Date=1",
        ),
        ("https://h/?q=sk-abcdefghijklmnopqrst", "https://h/?q=***"),  # a token, any name
        ("https://h/?empty=&key=", "https://h/?empty=&key="),
        ("https://h/cb#access_token=t&state=s", "https://h/cb#access_token=***&state=s"),
        ("https://h/page#section-2", "https://h/page#section-2"),
        ("https://h/bot/sk-abcdefghijklmnopqrst/x", "https://h/bot/***/x"),  # in the path
        ("http://u:p%40ss@[::1]:9/?KEY=v", "http://u:***@[::1]:9/?KEY=***"),
        ("/v1/chat?key=abc", "/v1/chat?key=***"),  # no scheme: the query still counts
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # once is enough


def test_url_secrets_are_each_credential_as_written_and_decoded() -> None:
    assert url_secrets("http://me:p%40ss@h/v1?key=a%2Bb&page=2&token=t+t") == [
        "p%40ss",
        "p@ss",
        "a%2Bb",
        "a+b",
        "t+t",
        "t t",
    ]
    assert url_secrets("https://api.test/v1?page=2") == []


def test_secret_params() -> None:
    names = ["key", "KEY", "api-key", "client_secret", "pwd", "session_id", "sig", "id_token"]
    assert [n for n in names if not is_secret_param(n)] == []
    assert [n for n in ["page", "q", "state", "format", "country_code"] if is_secret_param(n)] == []


def test_redact_urls_in_text_and_the_logs_forms() -> None:
    assert (
        redact_urls(
            f"GET http://u:{PASSWORD}@h/x?key={KEY} \"HTTP/1.1 200\"; URL('http://h/?token={KEY}')"
        )
        == "GET http://u:***@h/x?key=*** \"HTTP/1.1 200\"; URL('http://h/?token=***')"
    )
    assert redact_secrets(
        "receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', "
        "[(b'Set-Cookie', b'session=abc123; Path=/'), (b'Content-Type', b'text/plain')])"
    ) == (
        "receive_response_headers.complete return_value=(b'HTTP/1.1', 200, b'OK', "
        "[(b'Set-Cookie', b'***'), (b'Content-Type', b'text/plain')])"
    )
    assert redact_secrets("{'authorization': 'Bearer abc', 'accept': 'json'}") == (
        "{'authorization': '***', 'accept': 'json'}"
    )
    assert redact_secrets("sent Bearer eyJhbGciOi.x-y_z= then ghp_0123456789abcdefghijkl") == (
        "sent Bearer *** then ***"
    )


def test_join_url_keeps_the_query_last() -> None:
    assert join_url(f"http://h:1/v1?key={KEY}", "/chat/completions") == (
        f"http://h:1/v1/chat/completions?key={KEY}"
    )
    assert join_url("http://h:1/v1/", "/responses") == "http://h:1/v1/responses"
    assert join_url("http://h:1#frag", "/v1/messages") == "http://h:1/v1/messages#frag"


# --------------------------------------------------------------------------- where URLs are shown

URL = f"http://user:{PASSWORD}@127.0.0.1:9/v1?key={KEY}&page=2"
SHOWN = "http://user:***@127.0.0.1:9/v1?key=***&page=2"


def test_reprs_name_the_url_without_its_credentials() -> None:
    from agentloop.mcp import HttpServer, SseServer

    config = ModelConfig.openai_compatible("m", URL)
    assert repr(OpenAIProvider(config)) == f"OpenAIProvider(model='m', base_url={SHOWN!r})"
    assert f"base_url={SHOWN!r}" in repr(config)
    assert f"base_url={SHOWN!r}" in repr(OpenApiConfig(base_url=URL))
    assert repr(HttpServer(URL)) == f"HttpServer(url={SHOWN!r})"
    assert repr(SseServer(URL)) == f"SseServer(url={SHOWN!r})"
    assert all(c not in repr(x) for c in CANARIES for x in (config, OpenApiConfig(base_url=URL)))


def test_the_model_choice_names_the_server_without_its_credentials() -> None:
    choice = choose_model({}, model="openai:qwen3", base_url=URL)
    assert (choice.label, choice.note) == (
        f"openai:qwen3@{SHOWN}",
        f"agentloop: using model qwen3 at {SHOWN}.",
    )
    moved = choose_model({"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": URL}, model="openai:q")
    assert (moved.note, moved.base_url_env) == (
        f"agentloop: using OpenAI model q at {SHOWN} (OPENAI_BASE_URL).",
        ("OPENAI_BASE_URL", SHOWN),
    )
    assert isinstance(moved.provider, OpenAIProvider)
    assert moved.provider.model.base_url == URL  # the requests still carry them
    hint = error_hint("cannot connect to 127.0.0.1:9", provider="openai", base_url=URL)
    assert hint == f"Is the server at {SHOWN} running? Start it, or check --base-url."
    env_hint = error_hint(
        "cannot connect to 127.0.0.1:9", provider="openai", base_url_env=("OPENAI_BASE_URL", URL)
    )
    assert env_hint == f"Is the server at {SHOWN} running? Start it, or check OPENAI_BASE_URL."


def test_the_session_header_keeps_no_credential(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with SessionRecorder(path, meta={"model": f"openai:m@{URL}", "urls": [URL], "n": 1}):
        pass
    header = json.loads(path.read_text().splitlines()[0])
    assert header["meta"] == {"model": f"openai:m@{SHOWN}", "urls": [SHOWN], "n": 1}


async def test_a_provider_error_that_quotes_the_url_is_redacted() -> None:
    """The server echoes the query's key in its error: the message says ***."""
    body = json.dumps({"error": {"message": f"key {KEY} is not valid", "type": "auth"}})
    async with serve(Reply([body.encode()], status=400, headers={})) as server:
        url = f"{server.url.replace('http://', f'http://user:{PASSWORD}@')}/v1?key={KEY}"
        provider = OpenAIProvider(ModelConfig.openai_compatible("m", url))
        with pytest.raises(ProviderError) as raised:
            await provider.stream(_request(), _ignore)
        await provider.aclose()
        [seen] = server.requests
    assert seen.path == f"/v1/chat/completions?key={KEY}"
    host = server.url.removeprefix("http://")
    assert (
        str(raised.value)
        == f"openai-compatible ({host}) API error 400 (auth): key *** is not valid"
    )


async def test_openapi_errors_and_claims_name_the_url_without_its_credentials() -> None:
    url = f"http://user:{PASSWORD}@127.0.0.1:9/openapi.json?token={KEY}"
    with pytest.raises(OpenApiError) as raised:
        await OpenApiToolAdapter.from_url(url, OpenApiConfig(timeout=5))
    assert str(raised.value).startswith(
        "cannot fetch http://user:***@127.0.0.1:9/openapi.json?token=***: ConnectError"
    )
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/x": {"get": {"operationId": "getX", "responses": {"200": {}}}}},
    }
    (tool,) = OpenApiToolAdapter.from_spec(spec, OpenApiConfig(base_url=URL))
    assert tool.resources({}).reads == frozenset({f"openapi:{SHOWN}"})


async def test_a_server_that_is_not_there_is_named_without_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first line, the retries, the error and the hint: the URL without its secrets."""
    monkeypatch.setenv("AGENTLOOP_HOME", str(tmp_path / "home"))
    options = parse_args(["--model", "openai:x", "--base-url", URL, "-C", str(tmp_path), "hi"])
    choice = choose_model({}, model=options.model, base_url=options.base_url)
    assert isinstance(choice.provider, OpenAIProvider)
    choice.provider.retry = RetryConfig(max_retries=0)
    console = Console(file=io.StringIO(), force_terminal=False, width=300)
    code = await App(options, choice, Screen(console), stderr=io.StringIO()).run()
    assert code == 1
    assert console.file.getvalue().splitlines() == [  # type: ignore[attr-defined]
        f"agentloop: using model x at {SHOWN}.",
        "",
        "error: cannot connect to 127.0.0.1:9: connection refused",
        f"  Is the server at {SHOWN} running? Start it, or check --base-url.",
        "[1 turn, 0 tokens in, 0 tokens out]",
    ]
    [session] = (tmp_path / "home" / "sessions").iterdir()
    assert all(c not in session.read_text() for c in CANARIES)


def _request() -> Any:
    import agentloop as al
    from agentloop.providers import ModelRequest

    return ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))


async def _ignore(delta: object) -> None:
    pass


# --------------------------------------------------------------------------- the program


@pytest.mark.parametrize("output", ["text", "json", "stream-json"])
async def test_base_url_credentials_reach_the_server_and_nothing_else(
    tmp_path: Path, output: str
) -> None:
    home = tmp_path / "home"
    async with serve(Reply([STREAM])) as server:
        base = server.url.replace("http://", f"http://user:{PASSWORD}@") + f"/v1?key={KEY}"
        done = await trio.run_process(
            [sys.executable, "-m", "agentloop", "--model", "openai:m", "--base-url", base,
             "-C", str(tmp_path), "-p", "hi", "--output-format", output],
            env=cli_env(home), stdin=b"", capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
        [seen] = server.requests
    stdout, stderr = done.stdout.decode(), done.stderr.decode()
    assert done.returncode == 0, stderr
    # The request went out with the credentials: the query, and the user as Basic auth.
    assert seen.path == f"/v1/chat/completions?key={KEY}"
    assert (
        seen.headers["authorization"]
        == "Basic " + base64.b64encode(f"user:{PASSWORD}".encode()).decode()
    )
    [session] = (home / "sessions").iterdir()
    written = {"stdout": stdout, "stderr": stderr, "session": session.read_text()}
    leaks = [(c, where) for c in CANARIES for where, text in written.items() if c in text]
    assert leaks == []
    shown = base.replace(PASSWORD, "***").replace(KEY, "***")
    assert stderr.splitlines()[0] == f"agentloop: using model m at {shown}."
    header = json.loads(session.read_text().splitlines()[0])
    assert header["meta"]["model"] == f"openai:m@{shown}"
    if output == "json":
        assert json.loads(stdout)["model"] == f"openai:m@{shown}"
    elif output == "text":
        assert stdout == ANSWER + "\n"


def test_a_setup_error_names_the_openapi_url_without_its_credentials(tmp_path: Path) -> None:
    import subprocess

    url = f"http://user:{PASSWORD}@127.0.0.1:9/openapi.json?token={KEY}"
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "--model", "demo", "--openapi", url, "-p", "hi"],
        cwd=tmp_path, env=cli_env(tmp_path / "h"), stdin=subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    shown = "http://user:***@127.0.0.1:9/openapi.json?token=***"
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == (
        f"agentloop: --openapi {shown}: cannot fetch {shown}: ConnectError: all attempts to "
        "connect to 127.0.0.1:9 failed"
    )
    assert all(c not in done.stderr for c in CANARIES)
