"""Driving ``python -m agentloop acp`` with the official ACP client, and checking its messages.

:func:`run_client` runs ``acp_client.mjs`` (the official ``@agentclientprotocol/sdk``
client, on Node 22 from ``node_tools``) through a plan of steps and returns what it
printed. Every line the agent wrote to its stdout is recorded in a transcript, and
:func:`check_transcript` validates each against the official JSON schema shipped in
the npm package (per method: requests' params, notifications' params, the results
of the client's requests, errors).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import node_tools

HERE = Path(__file__).parent

#: The agent's requests to the client, and the schema of their params.
AGENT_REQUESTS = {
    "session/request_permission": "RequestPermissionRequest",
    "fs/read_text_file": "ReadTextFileRequest",
    "fs/write_text_file": "WriteTextFileRequest",
    "terminal/create": "CreateTerminalRequest",
    "terminal/output": "TerminalOutputRequest",
    "terminal/wait_for_exit": "WaitForTerminalExitRequest",
    "terminal/kill": "KillTerminalRequest",
    "terminal/release": "ReleaseTerminalRequest",
}
#: The agent's notifications.
AGENT_NOTIFICATIONS = {"session/update": "SessionNotification"}
#: The client's requests, and the schema of the agent's result.
AGENT_RESULTS = {
    "initialize": "InitializeResponse",
    "session/new": "NewSessionResponse",
    "session/load": "LoadSessionResponse",
    "session/prompt": "PromptResponse",
    "session/set_mode": "SetSessionModeResponse",
}


def client_script() -> Path:
    """The client script, next to the installed ``node_modules`` (so its import resolves)."""
    root = node_tools.ensure_node_tools()
    target = root / "agentloop_acp_client.mjs"
    source = (HERE / "acp_client.mjs").read_bytes()
    if not target.exists() or target.read_bytes() != source:
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(source)
        tmp.replace(target)
    return target


@functools.cache
def _schema() -> dict[str, Any]:
    root = node_tools.ensure_node_tools()
    path = root / "node_modules" / "@agentclientprotocol" / "sdk" / "schema" / "v1" / "schema.json"
    return json.loads(path.read_text())  # type: ignore[no-any-return]


def validate(definition: str, value: Any) -> None:
    """Validate ``value`` against the official schema's ``$defs[definition]``."""
    schema = _schema()
    jsonschema.validate(
        value,
        {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"},
        cls=jsonschema.Draft202012Validator,
    )


def check_transcript(path: Path) -> list[dict[str, Any]]:
    """Validate every line the agent sent (in the transcript at ``path``); return them.

    Each line is one JSON-RPC 2.0 object; requests and notifications of known methods
    are validated against their params' schema, results against the schema of the
    answered request's result, errors against ``Error``. An unknown method fails.
    """
    sent: dict[Any, str] = {}
    messages: list[dict[str, Any]] = []
    for entry in map(json.loads, path.read_text().splitlines()):
        line = entry["line"]
        if entry["from"] == "client":
            try:
                message = json.loads(line)
            except ValueError:
                continue  # the malformed input the test sent on purpose
            if isinstance(message, dict) and "method" in message and "id" in message:
                sent[message["id"]] = message["method"]
            continue
        message = json.loads(line)  # the agent writes JSON, nothing else
        assert isinstance(message, dict), line
        assert message.get("jsonrpc") == "2.0", line
        messages.append(message)
        method = message.get("method")
        if method is not None and "id" in message:
            validate(AGENT_REQUESTS[method], message["params"])
        elif method is not None:
            validate(AGENT_NOTIFICATIONS[method], message["params"])
        elif "error" in message:
            validate("Error", message["error"])
            assert set(message) == {"jsonrpc", "id", "error"}, line
        else:
            assert set(message) == {"jsonrpc", "id", "result"}, line
            answered = sent.get(message["id"])
            assert answered is not None, f"a result for no request: {line}"
            validate(AGENT_RESULTS[answered], message["result"])
    return messages


def acp_env(home: Path) -> dict[str, str]:
    """The agent's environment: no API key, its sessions and settings under ``home``."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["AGENTLOOP_HOME"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / "config")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_client(
    tmp_path: Path,
    work: Path,
    script: list[dict[str, Any]],
    steps: list[dict[str, Any]],
    *,
    permissions: list[str] = (),  # type: ignore[assignment]
    capabilities: dict[str, Any] | None = None,
    buffers: dict[str, str] | None = None,
    agent_args: tuple[str, ...] = (),
    home: Path | None = None,
    timeout: float = 60,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the official client against ``agentloop acp --model scripted:...`` in ``work``.

    Returns what the client printed (its events) and the agent's messages (each checked
    against the schema).
    """
    model = tmp_path / f"script-{len(list(tmp_path.glob('script-*')))}.json"
    model.write_text(json.dumps(script))
    transcript = tmp_path / f"transcript-{len(list(tmp_path.glob('transcript-*')))}.jsonl"
    plan = {
        "server": [
            sys.executable,
            "-m",
            "agentloop",
            "acp",
            f"--model=scripted:{model}",
            *agent_args,
        ],
        "cwd": str(work),
        "env": acp_env(home or tmp_path / "home"),
        "transcript": str(transcript),
        "capabilities": capabilities or {},
        "permissions": list(permissions),
        "buffers": buffers or {},
        "steps": steps,
    }
    node = node_tools.node_bin("node")
    assert shutil.which(node) is not None
    done = subprocess.run(
        [node, str(client_script()), json.dumps(plan)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=node_tools.node_env(),
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    return events, check_transcript(transcript)


def updates(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``session/update`` payloads the client saw, in order."""
    return [event["update"] for event in events if event["event"] == "update"]


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid is still there (and not a zombie)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"
