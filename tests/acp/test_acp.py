"""``agentloop acp`` driven by the official ACP client (npm ``@agentclientprotocol/sdk``).

The real ``python -m agentloop acp`` process, the model scripted (``--model
scripted:FILE``); every message the agent sends is checked against the official
JSON schema (``acp_tools.check_transcript``).
"""

from __future__ import annotations

import json
import os
import select
from pathlib import Path
from typing import Any

from acp_tools import pid_alive, run_client, updates

PERMISSION_OPTIONS = [
    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
    {
        "optionId": "allow_always",
        "name": "Always allow bash 'echo hi' in this session",
        "kind": "allow_always",
    },
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
]

BASH_TURNS = [
    {
        "thinking": "hmm",
        "text": "Hello",
        "calls": [{"name": "bash", "args": {"command": "echo hi"}, "id": "c1"}],
    },
    {"text": "done"},
]


def _work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


def _bash_call(status: str = "pending") -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "bash: echo hi",
        "kind": "execute",
        "status": status,
        "locations": [],
        "rawInput": {"command": "echo hi"},
    }


def _text(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _result(text: str) -> list[dict[str, Any]]:
    return [{"type": "content", "content": {"type": "text", "text": text}}]


def test_initialize_says_what_the_agent_does(tmp_path: Path) -> None:
    """The capabilities are the ones handled: load, text and embedded context, stdio+http MCP."""
    events, _ = run_client(tmp_path, _work(tmp_path), [], [])
    (init,) = [e["response"] for e in events if e["event"] == "initialized"]
    assert init["protocolVersion"] == 1
    assert init["agentCapabilities"] == {
        "loadSession": True,
        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": False},
    }
    assert init["agentInfo"]["name"] == "agentloop"


def test_a_granted_call_runs_and_its_updates_stream(tmp_path: Path) -> None:
    """Thought, text, the call, the permission request, its run, the answer, end_turn."""
    events, _ = run_client(
        tmp_path,
        _work(tmp_path),
        BASH_TURNS,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        permissions=["allow_once"],
    )
    (session,) = [e["response"] for e in events if e["event"] == "session"]
    (asked,) = [e["request"] for e in events if e["event"] == "permission"]
    assert asked == {
        "sessionId": session["sessionId"],
        "toolCall": {
            "toolCallId": "c1",
            "title": "bash: echo hi",
            "kind": "execute",
            "status": "pending",
            "rawInput": {"command": "echo hi"},
        },
        "options": PERMISSION_OPTIONS,
    }
    assert updates(events) == [
        _text("agent_thought_chunk", "hmm"),
        _text("agent_message_chunk", "Hello"),
        _bash_call(),
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress"},
        {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "content": _result("hi\n")},
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "completed",
            "content": _result("Exit code: 0\nhi\n"),
        },
        _text("agent_message_chunk", "done"),
    ]
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "end_turn"}]
    assert events[-1] == {"event": "exit", "code": 0}


def test_a_rejected_call_does_not_run(tmp_path: Path) -> None:
    """reject_once: the call fails with the denial, nothing runs, the model goes on."""
    work = _work(tmp_path)
    turns = [
        {"calls": [{"name": "bash", "args": {"command": "touch made"}, "id": "c1"}]},
        {"text": "ok"},
    ]
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        permissions=["reject_once"],
    )
    assert [u for u in updates(events) if u["sessionUpdate"] == "tool_call_update"] == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "failed",
            "content": _result("Permission denied: the user refused"),
        }
    ]
    assert not (work / "made").exists()
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "end_turn"}]


def test_allow_always_is_remembered_for_the_session(tmp_path: Path) -> None:
    """After allow_always, the same command runs again without a question."""
    turns = [
        {"calls": [{"name": "bash", "args": {"command": "echo hi"}, "id": "c1"}]},
        {"calls": [{"name": "bash", "args": {"command": "echo hi"}, "id": "c2"}]},
        {"calls": [{"name": "bash", "args": {"command": "echo other"}, "id": "c3"}]},
        {"text": "ok"},
    ]
    events, _ = run_client(
        tmp_path,
        _work(tmp_path),
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        permissions=["allow_always", "reject_once"],
    )
    asked = [e["request"]["toolCall"]["toolCallId"] for e in events if e["event"] == "permission"]
    assert asked == ["c1", "c3"]
    ends = [
        (u["toolCallId"], u["status"])
        for u in updates(events)
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
    ]
    assert ends == [("c1", "completed"), ("c2", "completed"), ("c3", "failed")]


def test_malformed_input_unknown_methods_and_sessions_are_errors(tmp_path: Path) -> None:
    """-32700 for bad JSON, -32601 for an unknown method, -32002 for an unknown
    session; the server goes on and answers the next prompt."""
    steps = [
        {"op": "new"},
        {"op": "raw", "line": "{not json"},
        {"op": "raw", "line": '{"jsonrpc":"2.0","id":"x1","method":"no/such"}'},
        {"op": "prompt", "text": "go", "sessionId": "nope"},
        {"op": "prompt", "text": "go"},
    ]
    events, messages = run_client(tmp_path, _work(tmp_path), [{"text": "fine"}], steps)
    # Requests are answered as each is done, not in order: match the answers by kind.
    errors = sorted((m for m in messages if "error" in m), key=lambda m: m["error"]["code"])
    assert len(errors) == 3, errors
    assert errors[0] == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32700,
            "message": "Parse error: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        },
    }
    assert errors[1] == {
        "jsonrpc": "2.0",
        "id": "x1",
        "error": {"code": -32601, "message": "Method not found: no/such"},
    }
    assert errors[2]["error"] == {
        "code": -32002,
        "message": "Resource not found: no session 'nope'",
    }
    assert [e for e in events if e["event"] == "error"] == [
        {
            "event": "error",
            "op": "prompt",
            "code": -32002,
            "message": "Resource not found: no session 'nope'",
        }
    ]
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "end_turn"}]
    assert not pid_alive(events[0]["pid"])
    assert json.dumps(events[-1]) == '{"event": "exit", "code": 0}'


def test_a_file_edit_arrives_as_a_diff(tmp_path: Path) -> None:
    """edit_file's update carries the file's old and new text, and its location."""
    work = _work(tmp_path)
    (work / "notes.txt").write_text("one\ntwo\n")
    turns = [
        {
            "calls": [
                {
                    "name": "edit_file",
                    "args": {"path": "notes.txt", "old_text": "two", "new_text": "three"},
                    "id": "e1",
                }
            ]
        },
        {"text": "edited"},
    ]
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        permissions=["allow_once"],
    )
    (call,) = [u for u in updates(events) if u["sessionUpdate"] == "tool_call"]
    assert call["kind"] == "edit"
    assert call["locations"] == [{"path": str(work / "notes.txt")}]
    (end,) = [u for u in updates(events) if u.get("status") == "completed"]
    assert end["content"][0] == {
        "type": "diff",
        "path": str(work / "notes.txt"),
        "oldText": "one\ntwo\n",
        "newText": "one\nthree\n",
    }
    assert (work / "notes.txt").read_text() == "one\nthree\n"


def _wait_gone(pid: int, timeout: float = 15) -> bool:
    """Wait (without sleeping) until the process ``pid`` has ended; whether it did."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return bool(readable) or not pid_alive(pid)


# It says "started" once its pid is on file: the client acts on that first output.
SLEEPER = "sleep 60 & echo $! > sleeper.pid; echo started; wait"


def test_cancel_during_a_tool_stops_it_and_answers_cancelled(tmp_path: Path) -> None:
    """session/cancel while bash sleeps: the command is killed, the call gets its one
    (failed) result, and the prompt answers ``cancelled``."""
    work = _work(tmp_path)
    turns = [{"calls": [{"name": "bash", "args": {"command": SLEEPER}, "id": "s1"}]}, {"text": "x"}]
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go", "cancelOn": "output"}],
        permissions=["allow_once"],
    )
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "cancelled"}]
    ends = [u for u in updates(events) if u.get("status") in ("completed", "failed")]
    assert [(u["toolCallId"], u["status"]) for u in ends] == [("s1", "failed")]
    sleeper = int((work / "sleeper.pid").read_text())
    assert _wait_gone(sleeper)
    assert not pid_alive(events[0]["pid"])


def test_a_vanishing_client_ends_the_run_and_leaves_no_process(tmp_path: Path) -> None:
    """The client exits mid-tool: the agent's input ends, the run and its command are
    stopped, and the agent process exits."""
    work = _work(tmp_path)
    turns = [{"calls": [{"name": "bash", "args": {"command": SLEEPER}, "id": "s1"}]}, {"text": "x"}]
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go", "vanishOn": "output"}],
        permissions=["allow_once"],
    )
    assert events[-1] == {"event": "vanishing"}
    assert _wait_gone(events[0]["pid"])
    assert _wait_gone(int((work / "sleeper.pid").read_text()))


def test_load_replays_a_saved_session_and_goes_on(tmp_path: Path) -> None:
    """session/load of a session saved by an earlier process: its history comes back as
    updates, and the next prompt continues it."""
    work, home = _work(tmp_path), tmp_path / "home"
    first, _ = run_client(
        tmp_path,
        work,
        BASH_TURNS,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        permissions=["allow_once"],
        home=home,
    )
    (session,) = [e["response"]["sessionId"] for e in first if e["event"] == "session"]
    assert (home / "sessions" / f"{session}.jsonl").is_file()
    second, _ = run_client(
        tmp_path,
        work,
        [{"text": "again"}],
        [{"op": "load", "sessionId": session}, {"op": "prompt", "text": "more"}],
        home=home,
    )
    assert updates(second) == [
        _text("user_message_chunk", "go"),
        _text("agent_thought_chunk", "hmm"),
        _text("agent_message_chunk", "Hello"),
        _bash_call(),
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c1",
            "status": "completed",
            "content": _result("Exit code: 0\nhi\n"),
        },
        _text("agent_message_chunk", "done"),
        _text("agent_message_chunk", "again"),
    ]
    (loaded,) = [e["response"] for e in second if e["event"] == "loaded"]
    assert loaded["modes"]["currentModeId"] == "ask"


def test_load_of_an_unknown_session_is_an_error(tmp_path: Path) -> None:
    """-32002, and the server goes on."""
    events, _ = run_client(
        tmp_path,
        _work(tmp_path),
        [{"text": "hi"}],
        [{"op": "load", "sessionId": "nope"}, {"op": "new"}, {"op": "prompt", "text": "x"}],
    )
    (error,) = [e for e in events if e["event"] == "error"]
    assert error["code"] == -32002
    assert error["message"].startswith("Resource not found: ")
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "end_turn"}]


FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


def test_file_tools_go_through_the_clients_buffers(tmp_path: Path) -> None:
    """With fs offered, read_file sees the editor's unsaved text and edit_file writes
    through the editor (the disk is untouched), its diff from the buffer's text."""
    work = _work(tmp_path)
    path = str(work / "a.txt")
    (work / "a.txt").write_text("on disk\n")
    turns = [
        {"calls": [{"name": "read_file", "args": {"path": "a.txt"}, "id": "r1"}]},
        {
            "calls": [
                {
                    "name": "edit_file",
                    "args": {"path": "a.txt", "old_text": "unsaved", "new_text": "edited"},
                    "id": "e1",
                }
            ]
        },
        {"text": "ok"},
    ]
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        permissions=["allow_once"],
        capabilities=FS,
        buffers={path: "unsaved text\n"},
    )
    io = [e for e in events if e["event"] in ("fs_read", "fs_write")]
    assert io == [
        {"event": "fs_read", "path": path},  # read_file
        {"event": "fs_read", "path": path},  # the diff's old text
        {"event": "fs_read", "path": path},  # edit_file
        {"event": "fs_write", "path": path, "content": "edited text\n"},
        {"event": "fs_read", "path": path},  # the diff's new text
    ]
    ends = [u for u in updates(events) if u.get("status") == "completed"]
    assert ends[0]["content"] == _result("[a.txt: 1 line]\n     1\tunsaved text")
    assert ends[1]["content"][0] == {
        "type": "diff",
        "path": path,
        "oldText": "unsaved text\n",
        "newText": "edited text\n",
    }
    assert (work / "a.txt").read_text() == "on disk\n"


def test_a_path_outside_the_root_is_refused_before_the_client_is_asked(tmp_path: Path) -> None:
    """Confinement holds with the client's fs: nothing outside the root is requested."""
    work = _work(tmp_path)
    turns = [
        {"calls": [{"name": "read_file", "args": {"path": "/etc/passwd"}, "id": "r1"}]},
        {"text": "ok"},
    ]
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        capabilities=FS,
    )
    assert [e for e in events if e["event"] == "fs_read"] == []
    (end,) = [u for u in updates(events) if u.get("status") == "failed"]
    assert "/etc/passwd" in end["content"][0]["content"]["text"]


def test_bash_runs_in_the_clients_terminal(tmp_path: Path) -> None:
    """With terminal offered, the command runs in a client terminal, released after."""
    turns = [
        {"calls": [{"name": "bash", "args": {"command": "echo hi"}, "id": "c1"}]},
        {"text": "x"},
    ]
    events, _ = run_client(
        tmp_path,
        _work(tmp_path),
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go"}],
        permissions=["allow_once"],
        capabilities={"terminal": True},
    )
    ops = [(e["op"], e.get("command"), e.get("args")) for e in events if e["event"] == "terminal"]
    assert ops == [
        ("create", "bash", ["-c", "echo hi"]),
        ("pid", None, None),
        ("release", None, None),
    ]
    (end,) = [u for u in updates(events) if u.get("status") == "completed"]
    assert end["content"] == _result("Exit code: 0\nhi\n")


def test_cancel_kills_the_clients_terminal(tmp_path: Path) -> None:
    """session/cancel during a command in the client's terminal: terminal/kill, then
    release; the prompt answers cancelled; the command's process is gone."""
    turns = [
        {"calls": [{"name": "bash", "args": {"command": "sleep 60"}, "id": "c1"}]},
        {"text": "x"},
    ]
    events, _ = run_client(
        tmp_path,
        _work(tmp_path),
        turns,
        [{"op": "new"}, {"op": "prompt", "text": "go", "cancelOn": "in_progress"}],
        permissions=["allow_once"],
        capabilities={"terminal": True},
    )
    ops = [e["op"] for e in events if e["event"] == "terminal"]
    assert ops == ["create", "pid", "kill", "release"]
    (pid,) = [e["pid"] for e in events if e["event"] == "terminal" and e["op"] == "pid"]
    assert _wait_gone(pid)
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "cancelled"}]


def test_set_mode_auto_runs_sandboxed_commands_unasked(tmp_path: Path) -> None:
    """session/new offers the three modes, ask first; after session/set_mode "auto" a
    command runs in the sandbox without a question (where this machine enforces one,
    else it still asks: the mode never runs an unsandboxed command unasked)."""
    from agentloop.tools import BashTool

    work = _work(tmp_path)
    turns = [
        {"calls": [{"name": "bash", "args": {"command": "touch made"}, "id": "c1"}]},
        {"text": "ok"},
    ]
    sandboxed = BashTool(work, sandbox=True).sandboxed
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new"}, {"op": "setMode", "modeId": "auto"}, {"op": "prompt", "text": "go"}],
        permissions=[] if sandboxed else ["allow_once"],
    )
    (session,) = [e["response"] for e in events if e["event"] == "session"]
    modes = session["modes"]
    assert modes["currentModeId"] == "ask"
    assert [mode["id"] for mode in modes["availableModes"]] == ["ask", "sandboxed", "auto"]
    assert [e["event"] for e in events if e["event"] in ("mode", "permission")] == (
        ["mode"] if sandboxed else ["mode", "permission"]
    )
    assert (work / "made").exists()
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "end_turn"}]


def test_the_clients_mcp_servers_serve_the_session_and_stop_with_it(tmp_path: Path) -> None:
    """session/new with a stdio MCP server: its tools are the session's (named
    ``<server>__<tool>``), and the server process ends when the client goes."""
    import sys

    work = _work(tmp_path)
    pidfile = tmp_path / "server.pid"
    server = {
        "name": "t",
        "command": sys.executable,
        "args": [
            str(Path(__file__).resolve().parent.parent / "mcp_servers.py"),
            "stdio",
            "--pidfile",
            str(pidfile),
        ],
        "env": [],
    }
    turns = [
        {"calls": [{"name": "t__echo", "args": {"text": "from mcp"}, "id": "m1"}]},
        {"text": "ok"},
    ]
    events, _ = run_client(
        tmp_path,
        work,
        turns,
        [{"op": "new", "mcpServers": [server]}, {"op": "prompt", "text": "go"}],
        permissions=["allow_once", "allow_once"],
    )
    ended = [u for u in updates(events) if u.get("status") in ("completed", "failed")]
    assert ended == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "m1",
            "status": "completed",
            "content": _result("from mcp"),
        }
    ]
    assert [e["response"] for e in events if e["event"] == "stop"] == [{"stopReason": "end_turn"}]
    assert events[-1] == {"event": "exit", "code": 0}
    assert not pid_alive(int(pidfile.read_text()))
