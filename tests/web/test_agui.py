"""The AG-UI endpoint, driven by the official client (@ag-ui/client) on a real server.

Every event the client sees is validated with the official Python types
(``ag-ui-protocol``); the model is scripted.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import node_tools
import pydantic
import pytest
import trio
from ag_ui.core import Event

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.web import serve_agui

HERE = Path(__file__).parent
EVENT = pydantic.TypeAdapter(Event)


def client_script() -> Path:
    """The client script, next to the installed ``node_modules`` (so its import resolves)."""
    root = node_tools.ensure_node_tools()
    target = root / "agentloop_agui_client.mjs"
    source = (HERE / "agui_client.mjs").read_bytes()
    if not target.exists() or target.read_bytes() != source:
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(source)
        tmp.replace(target)
    return target


async def drive(url: str, steps: list[dict[str, Any]], thread: str = "t1") -> list[dict[str, Any]]:
    """Run the official client through ``steps``; every line it printed, events validated."""
    node = node_tools.node_bin("node")
    assert shutil.which(node) is not None
    plan = {"url": url, "threadId": thread, "steps": steps}
    done = await trio.run_process(
        [node, str(client_script()), json.dumps(plan)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        env=node_tools.node_env(),
    )
    assert done.returncode == 0, done.stderr.decode()
    lines = [json.loads(line) for line in done.stdout.decode().splitlines()]
    for line in lines:
        if "event" in line:
            EVENT.validate_python(line["event"])
    return lines


def seen(lines: list[dict[str, Any]], step: int = 0) -> list[tuple[Any, ...]]:
    """The events of ``step``: their type and the field that says what each one is."""
    out: list[tuple[Any, ...]] = []
    for line in lines:
        if line.get("step") != step or "event" not in line:
            continue
        event = line["event"]
        kind = event["type"]
        detail = [
            event[key]
            for key in ("delta", "toolCallName", "stepName", "content", "toolCallId", "name")
            if key in event and not (key == "toolCallId" and kind == "TOOL_CALL_ARGS")
        ]
        if kind == "RUN_FINISHED":
            detail = [event.get("outcome", {}).get("type", "success"), event["result"]]
        if kind == "RUN_ERROR":
            detail = [event["message"]]
        out.append((kind, *detail))
    return out


@al.tool
async def read(path: str) -> str:
    """Read a file."""
    return f"(contents of {path})"


async def test_a_run_streams_its_events_to_the_official_client(
    nursery: trio.Nursery,
) -> None:
    model = ScriptedProvider(
        [reply("Let me read.", call("read", {"path": "a.md"}, id="c1")), reply("It says hi.")]
    )
    url = await nursery.start(serve_agui, lambda: al.Agent(model, tools=[read]))
    lines = await drive(url, [{"user": "What does a.md say?"}])
    assert seen(lines) == [
        ("RUN_STARTED",),
        ("STEP_STARTED", "turn 0"),
        ("TEXT_MESSAGE_START",),
        ("TEXT_MESSAGE_CONTENT", "Let "),
        ("TEXT_MESSAGE_CONTENT", "me "),
        ("TEXT_MESSAGE_CONTENT", "read."),
        ("TEXT_MESSAGE_END",),
        ("TOOL_CALL_START", "read", "c1"),
        ("TOOL_CALL_ARGS", '{"path":'),
        ("TOOL_CALL_ARGS", ' "a.md"}'),
        ("TOOL_CALL_END", "c1"),
        ("TOOL_CALL_RESULT", "(contents of a.md)", "c1"),
        ("STEP_FINISHED", "turn 0"),
        ("STEP_STARTED", "turn 1"),
        ("TEXT_MESSAGE_START",),
        ("TEXT_MESSAGE_CONTENT", "It "),
        ("TEXT_MESSAGE_CONTENT", "says "),
        ("TEXT_MESSAGE_CONTENT", "hi."),
        ("TEXT_MESSAGE_END",),
        ("STEP_FINISHED", "turn 1"),
        ("RUN_FINISHED", "success", {"stopReason": "completed", "message": ""}),
    ]
    messages = lines[-1]["messages"]
    assert [(m["role"], m.get("content")) for m in messages] == [
        ("user", "What does a.md say?"),
        ("assistant", "Let me read."),
        ("tool", "(contents of a.md)"),
        ("assistant", "It says hi."),
    ]
    assert messages[1]["toolCalls"][0]["function"] == {
        "name": "read",
        "arguments": '{"path": "a.md"}',
    }
