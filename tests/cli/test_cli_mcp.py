"""The terminal agent as an MCP client: servers ask the user, the model, and for the roots.

The real program runs with a real stdio server (tests/mcp_asking_server.py, which asks
through the 2026-07-28 input-required flow) and the scripted model; stdin is a pipe.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import trio
from sse_server import Reply, serve
from test_cli import STATUS, run_cli, write_script

ASKING_SERVER = Path(__file__).parent / "mcp_asking_server.py"
FLOOD_SERVER = Path(__file__).parent.parent / "mcp_flood_server.py"


def mcp_config(tmp_path: Path) -> Path:
    config = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": [str(ASKING_SERVER)]}
    config.write_text(json.dumps({"mcpServers": {"shop": server}}))
    return config


def calling(name: str, args: dict[str, Any], then: str) -> list[dict[str, Any]]:
    return [{"text": "On it.", "calls": [{"name": name, "args": args}]}, {"text": then}]


def run(tmp_path: Path, script: list[dict[str, Any]], answers: str, *more: str) -> list[str]:
    path = write_script(tmp_path / "s.json", script)
    result = run_cli(
        "--model", f"scripted:{path}", "--mcp-config", str(mcp_config(tmp_path)), *more,
        "-p", "go", home=tmp_path / "h", cwd=tmp_path, input=answers,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()  # the run; the answer alone on stdout
    assert lines[:2] == [f"agentloop: using the scripted model {path}.", ""]
    assert STATUS.match(lines[-1])
    assert result.stdout == lines[-2] + "\n"
    return lines[2:-1]


def test_a_servers_form_is_asked_field_by_field(tmp_path: Path) -> None:
    answers = "y\ny\n1 Main St\n500\n2\ny\n\n1 Main St\n\n\n"
    lines = run(tmp_path, calling("shop__order", {"item": "desk"}, "Ordered."), answers)
    assert lines == [
        "On it.",
        'Allow shop__order(item="desk")? [y/N] y',
        '→ shop__order(item="desk")',
        "MCP server 'shop' asks: Where should the desk go?",
        "Answer? [y/N] y",
        "  Address: Street and number",
        "  Address (required): 1 Main St",
        "  Floor [0]: 500",
        "    1. normal",
        "    2. express",
        "  Speed [normal]: 2",
        "  that answer does not fit the form:",
        "    $.floor: 500 is greater than the maximum of 200",
        "Answer? [y/N] y",
        "  Address: Street and number",
        "  Address (required): ",
        "    an answer is required",
        "  Address (required): 1 Main St",
        "  Floor [0]: ",
        "    1. normal",
        "    2. express",
        "  Speed [normal]: ",
        "✓ shop__order: desk to 1 Main St, floor 0, normal",
        "Ordered.",
    ]


def test_declining_and_running_out_of_input(tmp_path: Path) -> None:
    declined = run(tmp_path, calling("shop__order", {"item": "desk"}, "No."), "y\nn\n")
    assert declined[3:] == [
        "MCP server 'shop' asks: Where should the desk go?",
        "Answer? [y/N] n",
        "  declined",
        "✓ shop__order: not ordered (decline)",
        "No.",
    ]
    ended = run(tmp_path, calling("shop__order", {"item": "desk"}, "No."), "y\ny\n")
    assert ended[3:] == [
        "MCP server 'shop' asks: Where should the desk go?",
        "Answer? [y/N] y",
        "  Address: Street and number",
        "  Address (required): ",
        "  cancelled (no more input)",
        "✓ shop__order: not ordered (cancel)",
        "No.",
    ]


def test_sampling_asks_the_user_first(tmp_path: Path) -> None:
    script = [
        *calling("shop__title", {"text": "milk, eggs"}, "Titled.")[:1],
        {"text": "Groceries"},  # the model answers the server's request
        {"text": "Titled."},
    ]
    lines = run(tmp_path, script, "y\ny\n")
    assert lines == [
        "On it.",
        'Allow shop__title(text="milk, eggs")? [y/N] y',
        '→ shop__title(text="milk, eggs")',
        "Allow mcp_sampling(shop)? [y/N] y",
        "✓ shop__title: title: Groceries",
        "Titled.",
    ]


def test_a_refused_sampling_request_fails_the_call(tmp_path: Path) -> None:
    lines = run(tmp_path, calling("shop__title", {"text": "x"}, "Oh."), "y\nn\n")
    assert lines[3:] == [
        "Allow mcp_sampling(shop)? [y/N] n",
        "  not allowed",
        "✗ shop__title: MCP server 'shop' refused the call to 'title': The user did not "
        "allow this sampling request: mcp_sampling 'shop' was not approved",
        "Oh.",
    ]


def test_the_root_is_the_servers_root(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    lines = run(tmp_path, calling("shop__roots", {}, "Seen."), "y\n", "-C", str(work))
    assert lines[3] == f'✓ shop__roots: ["file://{work}"]'


async def test_a_server_that_needs_oauth_works_with_no_configuration(tmp_path: Path) -> None:
    """A URL server answering 401: the browser signs in once, the tokens are kept."""
    import trio
    from test_cli import cli_env
    from test_mcp_oauth import auth_server

    browser_log = tmp_path / "browser.log"
    env = {
        **cli_env(tmp_path / "h"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "BROWSER": f"{sys.executable} {Path(__file__).parent / 'fake_browser.py'} %s",
        "FAKE_BROWSER_LOG": str(browser_log),
    }
    script = write_script(tmp_path / "s.json", calling("secure__whoami", {}, "Signed in."))
    async with auth_server() as server:
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"secure": {"url": server.url}}}))
        runs = []
        for _ in range(2):
            done = await trio.run_process(
                [sys.executable, "-m", "agentloop", "--model", f"scripted:{script}",
                 "--mcp-config", str(config), "-p", "who am I"],
                cwd=tmp_path, env=env, stdin=b"y\n", capture_stdout=True, capture_stderr=True,
                check=False,
            )  # fmt: skip
            runs.append(done)
    first, second = runs
    assert (first.returncode, second.returncode) == (0, 0), first.stderr
    urls = browser_log.read_text().splitlines()
    assert len(urls) == 1  # the second run used the kept tokens
    assert urls[0].startswith(f"{server.base}/authorize?")
    for done in runs:  # the answer alone on stdout, the run on stderr
        assert done.stdout == b"Signed in.\n"
        lines = done.stderr.decode().splitlines()
        if done is first:
            assert lines.pop(1) == f"Authorize agentloop in your browser: {urls[0]}"
        assert lines[5] == "✓ secure__whoami: You sent: Bearer ***", lines
    store = tmp_path / "config" / "agentloop" / "mcp-oauth"
    assert oct(store.stat().st_mode & 0o777) == "0o700"
    assert [oct(f.stat().st_mode & 0o777) for f in store.iterdir()] == ["0o600"]
    assert [g["grant_type"] for g in server.grants] == ["authorization_code"]


def openai_reply(delta: dict[str, Any], finish: str) -> Reply:
    """One Chat Completions stream: ``delta``, then the finish reason."""
    chunks = [
        {"id": "r", "model": "local", "choices": [{"index": 0, "delta": delta}]},
        {
            "id": "r",
            "model": "local",
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
        },
    ]
    return Reply(
        [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks] + [b"data: [DONE]\n\n"]
    )


async def test_a_servers_sampling_request_is_capped(tmp_path: Path) -> None:
    """A server asks for a reply of 2**31 - 1 tokens: the agent's model is asked for 4096."""
    config = tmp_path / "mcp.json"
    server = {"command": sys.executable, "args": [str(FLOOD_SERVER)]}
    config.write_text(json.dumps({"mcpServers": {"flood": server}}))
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "flood__once", "arguments": "{}"},
    }
    replies = [
        openai_reply({"role": "assistant", "tool_calls": [{"index": 0, **call}]}, "tool_calls"),
        openai_reply({"role": "assistant", "content": "A poem."}, "stop"),  # the sampling reply
        openai_reply({"role": "assistant", "content": "Done."}, "stop"),
    ]
    async with serve(*replies) as model:
        url = f"{model.url}/v1"
        args = ["--model", "openai:local", "--base-url", url, "--mcp-config", str(config)]
        home = tmp_path / "h"
        result = await trio.to_thread.run_sync(
            lambda: run_cli(*args, "-p", "go", home=home, cwd=tmp_path, input="y\ny\n")
        )
    assert (result.returncode, result.stdout) == (0, "Done.\n"), result.stderr
    assert "✓ flood__once: the model wrote: A poem." in result.stderr.splitlines()
    sampled = model.requests[1].json()  # a local server's field is max_tokens
    assert (sampled["messages"], sampled["max_tokens"]) == (
        [{"role": "user", "content": "Write."}],
        4096,
    )
