"""``ANTHROPIC_BASE_URL`` and ``OPENAI_BASE_URL``: read as the official SDKs read them.

The presets (and so the provider classes given a model id, and the terminal
agent) take the API's root from the variable when it is set, at the time the
config is made; an explicit ``base_url`` wins. The requests are checked on a
real HTTP server on 127.0.0.1, and the URLs against the SDKs' own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from sse_server import Reply, serve

import agentloop as al
from agentloop._cli._models import choose_model
from agentloop.providers import (
    DEFAULT_ANTHROPIC_URL,
    DEFAULT_OPENAI_URL,
    AnthropicProvider,
    ModelConfig,
    ModelRequest,
    OpenAIProvider,
    OpenAIResponsesProvider,
    RetryConfig,
    base_url_from_env,
)

FIXTURES = Path(__file__).parent.parent / "fixtures"


def fixture(name: str) -> Reply:
    return Reply([(FIXTURES / name).read_bytes()])


async def ignore(delta: al.StreamDelta) -> None:
    pass


REQUEST = ModelRequest(system_prompt="", messages=(al.UserMessage.text("hi"),))


@pytest.fixture(autouse=True)
def no_base_urls(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_presets_read_the_variables_when_the_config_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Set after import: still honoured; unset: the official roots."""
    assert ModelConfig.anthropic().base_url == DEFAULT_ANTHROPIC_URL == "https://api.anthropic.com"
    assert ModelConfig.openai().base_url == DEFAULT_OPENAI_URL == "https://api.openai.com/v1"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.test:8080")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.test/openai/v1")
    assert ModelConfig.anthropic().base_url == "http://gateway.test:8080"
    assert ModelConfig.openai("gpt-5.4-mini").base_url == "http://proxy.test/openai/v1"
    assert ModelConfig.openai_responses().base_url == "http://proxy.test/openai/v1"
    # An id given to a provider class goes through the preset too.
    assert AnthropicProvider("claude-opus-5", api_key="k").model.base_url == (
        "http://gateway.test:8080"
    )
    # A generic server's URL is always the one given.
    assert ModelConfig.openai_compatible("m", "http://local:1/v1").base_url == "http://local:1/v1"


def test_an_explicit_base_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://gateway.test")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://proxy.test/v1")
    assert ModelConfig.anthropic(base_url="http://mine.test").base_url == "http://mine.test"
    assert ModelConfig.openai(base_url="http://mine.test/v1").base_url == "http://mine.test/v1"
    assert ModelConfig.openai_responses(base_url="http://r.test/v1").base_url == "http://r.test/v1"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "https://api.anthropic.com"),
        ("", "https://api.anthropic.com"),  # empty: unset (the SDKs would fail)
        ("http://h:1", "http://h:1"),
        ("http://h:1/", "http://h:1"),
        ("http://h:1/proxy/", "http://h:1/proxy"),
    ],
)
def test_the_value_as_the_sdks_read_it(value: str | None, expected: str) -> None:
    environ = {} if value is None else {"ANTHROPIC_BASE_URL": value}
    assert base_url_from_env("ANTHROPIC_BASE_URL", DEFAULT_ANTHROPIC_URL, environ) == expected


@pytest.mark.parametrize(
    "value", ["http://h:1", "http://h:1/", "http://h:1/proxy", "http://h:1/p/"]
)
def test_request_urls_are_the_sdks_own(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    """For each value, agentloop posts where the official SDKs post."""
    anthropic = pytest.importorskip("anthropic")
    openai = pytest.importorskip("openai")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", value)
    monkeypatch.setenv("OPENAI_BASE_URL", value)
    sdk_anthropic = anthropic.Anthropic(api_key="k")
    sdk_openai = openai.OpenAI(api_key="k")
    options = anthropic._base_client.FinalRequestOptions
    expected_messages = sdk_anthropic._build_request(options(method="post", url="/v1/messages"))
    options = openai._base_client.FinalRequestOptions
    expected_chat = sdk_openai._build_request(options(method="post", url="/chat/completions"))
    expected_responses = sdk_openai._build_request(options(method="post", url="/responses"))
    assert AnthropicProvider("claude-sonnet-5", api_key="k").url() == str(expected_messages.url)
    assert OpenAIProvider("gpt-5.4", api_key="k").url() == str(expected_chat.url)
    assert OpenAIResponsesProvider("gpt-5.4", api_key="k").url() == str(expected_responses.url)


async def test_requests_reach_the_server_the_variables_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real server on 127.0.0.1: each provider's request arrives there, at its path."""
    async with serve(
        fixture("anthropic/text.sse"),
        fixture("openai/text_usage.sse"),
        fixture("responses/text_usage.sse"),
    ) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1/")
        none = RetryConfig.none()
        providers = [
            AnthropicProvider("claude-sonnet-5", api_key="sk-ant", retry=none),
            OpenAIProvider("gpt-5.4", api_key="sk-oa", retry=none),
            OpenAIResponsesProvider("gpt-5.4", api_key="sk-oa", retry=none),
        ]
        texts = []
        for provider in providers:
            async with provider:
                texts.append((await provider.stream(REQUEST, ignore)).text)
    assert [(r.method, r.path) for r in server.requests] == [
        ("POST", "/v1/messages"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/responses"),
    ]
    assert server.requests[0].headers["x-api-key"] == "sk-ant"
    assert server.requests[1].headers["authorization"] == "Bearer sk-oa"
    assert texts[0].startswith("Hello! Café")
    assert texts[1:] == ["Héllo wörld 👋!", "Héllo wörld 👋!"]


def test_the_terminal_agent_says_where_the_model_is() -> None:
    """The CLI's choice reads the variables from its environment; --base-url wins."""
    env = {
        "ANTHROPIC_API_KEY": "k",
        "OPENAI_API_KEY": "k",
        "ANTHROPIC_BASE_URL": "http://gw.test/",
        "OPENAI_BASE_URL": "http://oa.test/v1",
    }
    choice = choose_model(env, model="anthropic")
    assert isinstance(choice.provider, AnthropicProvider)
    assert choice.provider.model.base_url == "http://gw.test"
    assert choice.note == (
        "agentloop: using Anthropic model claude-sonnet-5 at http://gw.test (ANTHROPIC_BASE_URL)."
    )
    assert choice.base_url_env == ("ANTHROPIC_BASE_URL", "http://gw.test")
    choice = choose_model(env)  # by the keys set: Anthropic
    assert isinstance(choice.provider, AnthropicProvider)
    assert choice.provider.model.base_url == "http://gw.test"
    choice = choose_model(env, model="openai-responses:gpt-5.4-mini")
    assert isinstance(choice.provider, OpenAIResponsesProvider)
    assert choice.provider.model.base_url == "http://oa.test/v1"
    assert choice.note == (
        "agentloop: using OpenAI model gpt-5.4-mini (Responses API) at http://oa.test/v1 "
        "(OPENAI_BASE_URL)."
    )
    choice = choose_model(env, model="openai:qwen3", base_url="http://local.test/v1")
    assert isinstance(choice.provider, OpenAIProvider)
    assert (choice.provider.model.base_url, choice.base_url_env) == ("http://local.test/v1", None)
    # Set to the official root, or unset: nothing to say.
    official = {**env, "ANTHROPIC_BASE_URL": "https://api.anthropic.com/"}
    choice = choose_model(official, model="anthropic")
    assert (choice.note, choice.base_url_env) == (
        "agentloop: using Anthropic model claude-sonnet-5.",
        None,
    )


async def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [sys.executable, "-m", "agentloop", *args],
        env=env,
        cwd=cwd,
        stdin=b"",
        capture_stdout=True,
        capture_stderr=True,
        check=False,
    )


def clean_env(home: Path) -> dict[str, str]:
    drop = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["AGENTLOOP_HOME"] = str(home)
    return env


async def test_the_terminal_agent_talks_to_the_server_of_the_variable(tmp_path: Path) -> None:
    """`agentloop -p` with ANTHROPIC_BASE_URL on a local server: no flag needed."""
    async with serve(fixture("anthropic/text.sse")) as server:
        env = clean_env(tmp_path / "home")
        env |= {"ANTHROPIC_API_KEY": "sk-ant-local", "ANTHROPIC_BASE_URL": server.url}
        done = await cli("-p", "hi", "--output-format", "json", env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/v1/messages")]
    assert server.requests[0].headers["x-api-key"] == "sk-ant-local"
    assert done.stderr.decode().splitlines()[0] == (
        f"agentloop: using Anthropic model claude-sonnet-5 at {server.url} (ANTHROPIC_BASE_URL)."
    )
    assert b'"result":"Hello! Caf' in done.stdout


async def test_the_base_url_flag_wins_over_the_variable(tmp_path: Path) -> None:
    async with serve(fixture("openai/text_usage.sse")) as flagged, serve() as variable:
        env = clean_env(tmp_path / "home") | {"OPENAI_BASE_URL": variable.url + "/v1"}
        done = await cli(
            "--model", "openai:qwen3", "--base-url", flagged.url + "/v1", "-p", "hi",
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert (len(flagged.requests), len(variable.requests)) == (1, 0)
    assert flagged.requests[0].path == "/v1/chat/completions"
    assert "Héllo wörld 👋!" in done.stdout.decode()
