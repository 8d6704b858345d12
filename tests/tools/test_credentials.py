"""The agent's credentials stay out of what its commands can read in /proc.

``hide_process_credentials`` in a real process (its /proc/self/environ and cmdline),
and the real terminal agent: started with its key in the environment, talking to an
HTTP server on 127.0.0.1 that streams Anthropic's events, it runs a command that reads
the agent's /proc files; the key is nowhere in what the command printed (which the
server receives as the tool's result), and the server sees it in every request's header.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from sse_server import Reply, serve
from test_cli import cli_env

import agentloop as al
from agentloop.tools import BashTool, _environ, sandbox_status

KEY = "canary-key-0123456789"
OTHER = "ghp_" + "c" * 36  # a token by its value, under a harmless name


def hide(script: str, env: dict[str, str], *args: str) -> dict[str, Any]:
    """Run ``script`` after hide_process_credentials() in a fresh Python; its JSON."""
    code = (
        "import ctypes, json, os, subprocess, sys\n"
        "from agentloop.tools import hide_process_credentials as hide\n" + script
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stderr == ""
    result: dict[str, Any] = json.loads(done.stdout)
    return result


REPORT = """
hidden = hide(also=sys.argv[1:2])
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
child = subprocess.run(["sh", "-c", "echo $MY_API_KEY $ROUTER"], capture_output=True, text=True)
print(json.dumps({
    "hidden": hidden,
    "environ": open("/proc/self/environ", "rb").read().decode(),
    "cmdline": open("/proc/self/cmdline", "rb").read().decode(),
    "os.environ": [os.environ.get("MY_API_KEY"), os.environ.get("ROUTER")],
    "getenv": [libc.getenv(b"MY_API_KEY").decode(), libc.getenv(b"ROUTER").decode()],
    "child": child.stdout,
    "argv": sys.argv[1:],
}))
"""


def test_the_initial_environment_loses_the_credentials_and_python_keeps_them() -> None:
    env = {"PATH": "/usr/bin:/bin", "MY_API_KEY": KEY, "ROUTER": "r-" + KEY, "NOTES": OTHER,
           "HOME": "/nowhere"}  # fmt: skip
    report = hide(REPORT, env, "ROUTER", f"--base-url=https://me:{KEY}@host/v1", "plain")
    assert report["hidden"] == ["MY_API_KEY", "NOTES", "ROUTER"]
    # what /proc shows: the entries are NUL bytes now, the rest is as it was
    entries = [entry for entry in report["environ"].split("\0") if entry]
    assert entries == ["PATH=/usr/bin:/bin", "HOME=/nowhere"]
    assert KEY not in report["environ"]
    assert OTHER not in report["environ"]
    # the program still has them: os.environ, the C library, children started plainly
    assert report["os.environ"] == [KEY, "r-" + KEY]
    assert report["getenv"] == [KEY, "r-" + KEY]
    assert report["child"] == f"{KEY} r-{KEY}\n"
    # the command line: the secret after '=' is masked in /proc, sys.argv keeps it
    assert report["cmdline"].split("\0")[-4:] == [
        "ROUTER",
        "--base-url=" + "*" * len(f"https://me:{KEY}@host/v1"),
        "plain",
        "",
    ]
    assert report["argv"] == ["ROUTER", f"--base-url=https://me:{KEY}@host/v1", "plain"]


def test_names_says_exactly_which() -> None:
    script = (
        "print(json.dumps({'hidden': hide(['NOTES']),"
        " 'environ': open('/proc/self/environ', 'rb').read().decode()}))\n"
    )
    report = hide(script, {"MY_API_KEY": KEY, "NOTES": "x", "KEEP": "y"})
    assert report["hidden"] == ["NOTES"]
    assert [e for e in report["environ"].split("\0") if e] == [f"MY_API_KEY={KEY}", "KEEP=y"]


async def test_hidden_variables_are_withheld_from_commands(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A variable hidden by name (the model's key under any name) is not passed on."""
    monkeypatch.setattr(_environ, "_hidden", {"ROUTER"})
    monkeypatch.setenv("ROUTER", KEY)
    monkeypatch.setenv("PLAIN", "seen")
    tool = BashTool(tmp_path, exclusive=False)
    ctx = al.ToolContext("id", "bash", trio.CancelScope())
    result = await tool.execute({"command": "echo [$ROUTER] [$PLAIN]"}, ctx)
    assert result.text_content == "Exit code: 0\n[] [seen]\n"
    allowed = BashTool(tmp_path, exclusive=False, env_allow=("ROUTER",))
    result = await allowed.execute({"command": "echo [$ROUTER]"}, ctx)
    assert result.text_content == f"Exit code: 0\n[{KEY}]\n"


# --------------------------------------------------------------------------- the terminal agent


def events(*blocks: dict[str, Any], stop: str) -> bytes:
    """An Anthropic event stream holding ``blocks`` (text or tool_use)."""
    items: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {"id": "msg_1", "type": "message", "role": "assistant",
                        "model": "claude-x", "content": [], "stop_reason": None,
                        "usage": {"input_tokens": 5, "output_tokens": 1}},
        }
    ]  # fmt: skip
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        items += [
            {"type": "content_block_start", "index": index, "content_block": start},
            {"type": "content_block_delta", "index": index, "delta": delta},
            {"type": "content_block_stop", "index": index},
        ]
    items += [
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in items)


# Everything of the agent's that a command could read: its environment, each thread's,
# its command line; then what the environment filter passed on.
READ_ALL = (
    "for f in /proc/$PPID/environ /proc/$PPID/task/*/environ /proc/$PPID/cmdline; "
    "do tr '\\0' '\\n' < $f; done; echo ROUTER=[$ROUTER] ANTHROPIC=[$ANTHROPIC_API_KEY]"
)


async def run_agent(tmp_path: Path, *flags: str) -> tuple[str, list[Any]]:
    """The agent runs READ_ALL once; what the command printed, and the requests."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    # bash asks unless an allow rule names it; then the default decides
    (home / "settings.toml").write_text('[permissions]\nallow = ["bash(*)"]\ndefault = "allow"\n')
    call = {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": READ_ALL}}
    replies = [
        Reply([events(call, stop="tool_use")]),
        Reply([events({"type": "text", "text": "Done."}, stop="end_turn")]),
    ]
    async with serve(*replies) as server:
        env = {**cli_env(home), "ROUTER": KEY, "ANTHROPIC_API_KEY": "sk-ant-" + KEY,
               "ANTHROPIC_BASE_URL": server.url}  # fmt: skip
        with trio.fail_after(60):
            done = await trio.run_process(
                [sys.executable, "-m", "agentloop", "--model", "anthropic:claude-x",
                 "--api-key-env", "ROUTER", "-C", str(work), *flags, "-p", "go"],
                env=env, stdin=subprocess.DEVNULL, capture_stdout=True,
                capture_stderr=True, check=False,
            )  # fmt: skip
    assert (done.returncode, done.stdout.decode()) == (0, "Done.\n")
    assert KEY not in done.stderr.decode()
    assert [request.headers["x-api-key"] for request in server.requests] == [KEY, KEY]
    result = server.requests[1].json()["messages"][2]["content"][0]
    assert result["type"] == "tool_result"
    return result["content"][0]["text"], server.requests


async def test_an_unsandboxed_command_reads_no_key_in_proc(tmp_path: Path) -> None:
    """The command runs as the same user, unconfined: it reads the agent's /proc files,
    and finds no credential in them (nor in its own environment)."""
    output, _requests = await run_agent(tmp_path)
    assert KEY not in output
    assert output.startswith("Exit code: 0\n")
    lines = output.splitlines()
    assert any(line.startswith("PATH=") for line in lines)  # the files were read
    assert "-p" in lines  # the command line too
    assert lines[-1] == "ROUTER=[] ANTHROPIC=[]"
    assert not any(line.startswith(("ROUTER=", "ANTHROPIC_API_KEY=")) for line in lines[:-1])


@pytest.mark.skipif(not sandbox_status().available, reason="no sandbox here")
async def test_a_sandboxed_command_cannot_open_them(tmp_path: Path) -> None:
    output, _requests = await run_agent(tmp_path, "--sandbox")
    assert KEY not in output
    out, _, err = output.partition("\nSTDERR:\n")
    assert out.splitlines()[-1] == "ROUTER=[] ANTHROPIC=[]"
    assert err.splitlines()  # each file of the agent's environment is refused
    assert all(line.endswith("/environ: Permission denied") for line in err.splitlines())
