"""``agentloop -p PROMPT --output-format text|json|stream-json`` and the exit status.

The real program runs as a process on a scripted model; standard output is
checked whole: nothing but the chosen output is there (with ``text``, the final
answer alone; the run goes to standard error).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentloop as al
from agentloop._cli import parse_args
from agentloop._cli._output import EXIT_STATUS, exit_status
from agentloop.serialization import from_json

STATUS = re.compile(r"^\[\d+ turns?, \d+ tokens in, \d+ tokens out(, \$\d+\.\d{4})?\]$")


def env_for(home: Path) -> dict[str, str]:
    drop = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_BASE_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {"AGENTLOOP_HOME": str(home), "TMPDIR": str(home.parent)}


def write_script(path: Path, turns: list[Any]) -> Path:
    path.write_text(json.dumps(turns), encoding="utf-8")
    return path


def run(tmp_path: Path, turns: list[Any], *args: str) -> subprocess.CompletedProcess[str]:
    script = write_script(tmp_path / "s.json", turns)
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "agentloop", "--model", f"scripted:{script}", "-C", str(work),
         "-p", "What is here?", *args],
        env=env_for(tmp_path / "home"), stdin=subprocess.DEVNULL, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip


LIST = [
    {"text": "Let me look.", "calls": [{"name": "list_files", "args": {}}]},
    {"text": "Nothing here."},
]
USAGE_KEYS = {"input", "output", "cache_read", "cache_write", "total_tokens", "reasoning", "cost"}


def test_json_is_one_object_and_nothing_else(tmp_path: Path) -> None:
    done = run(tmp_path, LIST, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    result = json.loads(done.stdout)
    [session] = (tmp_path / "home" / "sessions").iterdir()
    script = tmp_path / "s.json"
    assert set(result) == {
        "result", "stop_reason", "usage", "usage_by_model", "num_turns", "pending", "session_id",
        "model", "exit_status",
    }  # fmt: skip
    assert {k: v for k, v in result.items() if not k.startswith("usage")} == {
        "result": "Nothing here.",
        "stop_reason": {"kind": "completed", "message": "", "error": None},
        "num_turns": 2,
        "pending": [],
        "session_id": session.stem,
        "model": f"scripted:{script}",
        "exit_status": 0,
    }
    assert set(result["usage"]) == USAGE_KEYS
    assert result["usage"]["input"] > 0
    assert result["usage_by_model"] == {"s.json": result["usage"]}
    # The notes go to standard error.
    assert done.stderr.splitlines() == [f"agentloop: using the scripted model {script}.", ""]


def test_stream_json_is_every_event_a_line(tmp_path: Path) -> None:
    """Every event a line, then the ``result`` line (see test_cli_deferred)."""
    done = run(tmp_path, LIST, "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    *lines, result = done.stdout.splitlines()
    assert json.loads(result)["type"] == "result"
    events = [from_json(line, al.AgentEvent) for line in lines]
    kinds = [type(event).__name__ for event in events]
    assert kinds[0] == "AgentStart"
    assert kinds[-1] == "AgentEnd"
    assert {"TurnStart", "MessageStart", "MessageUpdate", "MessageEnd", "ToolExecutionStart",
            "ToolExecutionEnd", "TurnEnd"} <= set(kinds)  # fmt: skip
    text = "".join(
        e.delta.delta
        for e in events
        if isinstance(e, al.MessageUpdate) and isinstance(e.delta, al.TextDelta)
    )
    assert text == "Let me look.Nothing here."
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason.kind is al.StopKind.COMPLETED
    # The lines are the serialization's own, field names and all.
    first = json.loads(done.stdout.splitlines()[0])
    assert set(first) == {"type", "loop_id", "parent_loop_id", "timestamp"}


@pytest.mark.parametrize("output", ["text", "json", "stream-json"])
@pytest.mark.parametrize(
    ("turns", "more", "status", "kind"),
    [
        (LIST, [], 0, "completed"),
        ([], [], 1, "error"),  # the script has no turn: the model fails
        (LIST, ["--max-turns", "1"], 3, "max_turns"),
    ],
)
def test_the_exit_status_says_how_the_run_ended(
    tmp_path: Path, output: str, turns: Any, more: list[str], status: int, kind: str
) -> None:
    done = run(tmp_path, turns, "--output-format", output, *more)
    assert done.returncode == status, done.stderr
    if output == "json":
        result = json.loads(done.stdout)
        assert (result["stop_reason"]["kind"], result["exit_status"]) == (kind, status)
    elif output == "stream-json":
        end = from_json(done.stdout.splitlines()[-2], al.AgentEvent)
        assert isinstance(end, al.AgentEnd)
        assert end.stop_reason.kind.value == kind
    else:  # the answer of a run that completed, or nothing
        assert done.stdout == ("Nothing here.\n" if status == 0 else "")
    if status and (output != "text" or kind == "max_turns"):  # said on stderr too
        assert done.stderr.splitlines()[-1].startswith(f"agentloop: the run ended ({kind}): ")


STEPS = [
    {"text": "Let me look.", "calls": [{"name": "list_files", "args": {}}]},
    {"thinking": "Empty?", "text": "Once more.", "calls": [{"name": "list_files", "args": {}}]},
    {"text": "# Nothing here\n\nThe directory is *empty*."},
]


@pytest.mark.parametrize("flags", [[], ["--output-format", "text"]])
def test_text_is_the_final_answer_alone_the_run_on_stderr(tmp_path: Path, flags: list[str]) -> None:
    """`-p "..." > answer.md` leaves the last reply and a newline; banner, intermediate
    text, thinking, tool lines and the status line go to stderr."""
    done = run(tmp_path, STEPS, *flags)
    assert (done.returncode, done.stdout) == (0, "# Nothing here\n\nThe directory is *empty*.\n")
    lines = done.stderr.splitlines()
    assert lines[:-1] == [
        f"agentloop: using the scripted model {tmp_path / 's.json'}.",
        "",
        "Let me look.",
        "→ list_files()",
        "✓ list_files: No files found in .",
        "Empty?",
        "Once more.",
        "→ list_files()",
        "✓ list_files: No files found in .",
        "# Nothing here",
        "",
        "The directory is *empty*.",
    ]
    assert STATUS.match(lines[-1])


def test_text_adds_no_second_newline_and_keeps_the_answer_as_written(tmp_path: Path) -> None:
    """An answer that ends its last line is written as is, control characters and all
    (into a file: only a terminal gets them escaped)."""
    done = run(tmp_path, [{"text": "line one\nline\ttwo \x1b[1mbold\x1b[0m\n"}])
    assert (done.returncode, done.stdout) == (0, "line one\nline\ttwo \x1b[1mbold\x1b[0m\n")
    assert done.stderr.splitlines()[2:4] == ["line one", "line    two \\x1b[1mbold\\x1b[0m"]


def test_ctrl_c_aborts_with_130_and_still_writes_the_object(tmp_path: Path) -> None:
    script = write_script(tmp_path / "s.json", [{"text": "Slow.", "delay": 30}])
    process = subprocess.Popen(
        [sys.executable, "-m", "agentloop", "--model", f"scripted:{script}", "-C", str(tmp_path),
         "-p", "hi", "--output-format", "json"],
        env=env_for(tmp_path / "home"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stderr is not None
        assert process.stderr.readline().startswith("agentloop: using the scripted model")
        time.sleep(0.5)  # the run has started: it waits for the model
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    result = json.loads(stdout)
    assert (result["stop_reason"]["kind"], result["exit_status"]) == ("aborted", 130)


def test_asked_calls_are_refused_with_json_output(tmp_path: Path) -> None:
    """Nobody can answer: the call is refused, stderr says so, the model is told."""
    turns = [
        {"text": "Let me run it.", "calls": [{"name": "bash", "args": {"command": "echo hi"}}]},
        {"text": "I could not."},
    ]
    done = run(tmp_path, turns, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "I could not."
    assert done.stderr.splitlines()[-1] == (
        "agentloop: bash(echo hi) was refused: it needs approval, and with --output-format "
        "json nobody is asked (allow it in the settings' [permissions])"
    )
    streamed = run(tmp_path, turns, "--output-format", "stream-json")
    events = [from_json(line, al.AgentEvent) for line in streamed.stdout.splitlines()[:-1]]
    ends = [event for event in events if isinstance(event, al.ToolExecutionEnd)]
    assert [(e.is_error, e.result.text_content) for e in ends] == [
        (True, "Permission denied: bash 'echo hi' was not approved")
    ]


def test_json_output_needs_a_prompt(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--output-format", "json"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "agentloop: error: --output-format json goes with a prompt (-p PROMPT): an "
        "interactive session is shown as text"
    )
    assert parse_args(["--output-format", "text"]).format == "text"


def test_every_stop_kind_has_a_status() -> None:
    assert set(EXIT_STATUS) == set(al.StopKind)
    assert exit_status(al.AgentStop(al.StopKind.DEADLINE)) == 3
    assert exit_status(al.AgentStop(al.StopKind.ABORTED)) == 130
    assert exit_status(al.AgentStop(al.StopKind.AWAITING_APPROVAL)) == 4
