"""The AG-UI endpoint, driven by the official client (@ag-ui/client) on a real server.

Every event the client sees is validated with the official Python types
(``ag-ui-protocol``); the model is scripted.
"""

from __future__ import annotations

import json
import os
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import node_tools
import pydantic
import pytest
import trio
from ag_ui.core import Event

import agentloop as al
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.tools import BashTool
from agentloop.web import serve_agui
from agentloop.web._agui import APPROVAL_SCHEMA

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


CONFIRM = {
    "name": "confirm",
    "description": "Ask the user a yes/no question.",
    "parameters": {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
    },
}


async def test_a_frontend_tool_ends_the_run_and_its_result_comes_in_the_next_request(
    nursery: trio.Nursery,
) -> None:
    model = ScriptedProvider(
        [reply(call("confirm", {"question": "Go?"}, id="f1")), reply("The user said yes.")]
    )
    url = await nursery.start(serve_agui, lambda: al.Agent(model))
    lines = await drive(
        url,
        [
            {"user": "Ask me first", "tools": [CONFIRM]},
            {"toolResults": [{"toolCallId": "f1", "content": "yes"}], "tools": [CONFIRM]},
        ],
    )
    assert seen(lines, 0) == [
        ("RUN_STARTED",),
        ("STEP_STARTED", "turn 0"),
        ("TOOL_CALL_START", "confirm", "f1"),
        ("TOOL_CALL_ARGS", '{"questi'),
        ("TOOL_CALL_ARGS", 'on": "Go'),
        ("TOOL_CALL_ARGS", '?"}'),
        ("TOOL_CALL_END", "f1"),
        ("STEP_FINISHED", "turn 0"),
        (
            "RUN_FINISHED",
            "success",
            {"stopReason": "awaiting_approval", "message": "Awaiting approval: confirm (f1)"},
        ),
    ]
    finished = [
        line["event"] for line in lines if line.get("event", {}).get("type") == "RUN_FINISHED"
    ]
    assert finished[0]["outcome"] == {"type": "success", "pendingToolCallIds": ["f1"]}
    # The resumed run ends turn 0 (the frontend call's result: no event) and goes on.
    assert seen(lines, 1) == [
        ("RUN_STARTED",),
        ("STEP_STARTED", "turn 0"),
        ("STEP_FINISHED", "turn 0"),
        ("STEP_STARTED", "turn 1"),
        ("TEXT_MESSAGE_START",),
        ("TEXT_MESSAGE_CONTENT", "The "),
        ("TEXT_MESSAGE_CONTENT", "user "),
        ("TEXT_MESSAGE_CONTENT", "said "),
        ("TEXT_MESSAGE_CONTENT", "yes."),
        ("TEXT_MESSAGE_END",),
        ("STEP_FINISHED", "turn 1"),
        ("RUN_FINISHED", "success", {"stopReason": "completed", "message": ""}),
    ]
    # The model was offered the client's tool, and read the client's answer as its result.
    assert [tool.name for tool in model.requests[0].tools] == ["confirm"]
    last = model.requests[1].messages[-1]
    assert isinstance(last, al.ToolResultMessage)
    assert (last.tool_call_id, last.text, last.is_error) == ("f1", "yes", False)


@al.tool
async def delete(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@pytest.mark.parametrize(
    ("payload", "result"),
    [
        ({"approved": True}, "deleted build/"),
        ({"approved": False, "reason": "Keep it."}, "Permission denied: Keep it."),
    ],
)
async def test_an_approval_is_an_interrupt_answered_by_the_next_request(
    nursery: trio.Nursery, payload: dict[str, Any], result: str
) -> None:
    model = ScriptedProvider([reply(call("delete", {"path": "build/"}, id="d1")), reply("Done.")])

    def factory() -> al.Agent:
        return al.Agent(model, tools=[delete], permissions=al.Permissions(ask=["delete"]))

    url = await nursery.start(serve_agui, factory)
    lines = await drive(
        url,
        [
            {"user": "Clean up"},
            {"resume": [{"interruptId": "d1", "status": "resolved", "payload": payload}]},
        ],
    )
    interrupts = [line["pendingInterrupts"] for line in lines if line.get("done")]
    assert interrupts[0] == [
        {
            "id": "d1",
            "reason": "tool_approval",
            "message": 'Approve delete {"path": "build/"}?',
            "toolCallId": "d1",
            "responseSchema": APPROVAL_SCHEMA,
            "metadata": {"toolName": "delete", "arguments": {"path": "build/"}},
        }
    ]
    assert interrupts[1] == []
    assert seen(lines, 0) == [
        ("RUN_STARTED",),
        ("STEP_STARTED", "turn 0"),
        ("TOOL_CALL_START", "delete", "d1"),
        ("TOOL_CALL_ARGS", '{"path":'),
        ("TOOL_CALL_ARGS", ' "build/'),
        ("TOOL_CALL_ARGS", '"}'),
        ("TOOL_CALL_END", "d1"),
        ("STEP_FINISHED", "turn 0"),
        (
            "RUN_FINISHED",
            "interrupt",
            {"stopReason": "awaiting_approval", "message": "Awaiting approval: delete (d1)"},
        ),
    ]
    assert seen(lines, 1) == [
        ("RUN_STARTED",),
        ("STEP_STARTED", "turn 0"),
        ("TOOL_CALL_RESULT", result, "d1"),
        ("STEP_FINISHED", "turn 0"),
        ("STEP_STARTED", "turn 1"),
        ("TEXT_MESSAGE_START",),
        ("TEXT_MESSAGE_CONTENT", "Done."),
        ("TEXT_MESSAGE_END",),
        ("STEP_FINISHED", "turn 1"),
        ("RUN_FINISHED", "success", {"stopReason": "completed", "message": ""}),
    ]


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid is still there (and not a zombie)."""
    try:
        status = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return status.rsplit(")", 1)[1].split()[0] != "Z"


async def test_a_client_that_goes_away_aborts_its_run(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    model = ScriptedProvider(
        [reply(call("bash", {"command": "echo $$; exec sleep 60"}, id="b1")), reply("Never.")]
    )
    agents: list[al.Agent] = []
    ended = trio.Event()

    def factory() -> al.Agent:
        agents.append(
            al.Agent(model, tools=[BashTool(tmp_path)], after_loop=lambda *_: ended.set())
        )
        return agents[-1]

    # A long grace: the run must end by the abort, not by being cancelled after it.
    url = await nursery.start(partial(serve_agui, factory, abort_grace=600))
    lines = await drive(
        url, [{"user": "Nap", "abortOn": {"type": "CUSTOM", "name": "agentloop.tool_update"}}]
    )
    update = next(line["event"] for line in lines if line.get("event", {}).get("type") == "CUSTOM")
    pid = int(update["value"]["text"].strip())
    (agent,) = agents
    with trio.fail_after(10):
        await ended.wait()
    assert not pid_alive(pid)
    result = agent.messages[-1]
    assert isinstance(result, al.ToolResultMessage)
    assert (result.tool_call_id, result.is_error, result.outcome) == (
        "b1",
        True,
        al.ToolOutcome.CANCELLED,
    )
    assert len(model.requests) == 1
