"""Deferred approvals in the terminal agent: ``-p ... --defer-approvals`` stops with
status 4 and lists the pending calls; ``--resume ID --approve/--deny...`` decides
them and goes on; an interactive session asks a resumed session's pending calls first.

The real program runs as a process on a scripted model, its sessions in a
``tmp_path`` home; the interactive one also in a real terminal (tmux).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from test_cli import PROMPT, STATUS, Terminal, run_cli, terminal, write_script

import agentloop as al
from agentloop._cli import parse_args
from agentloop._cli._render import Screen, make_console
from agentloop._cli._sessions import SessionLog
from agentloop.providers import ScriptedProvider
from agentloop.serialization import from_json
from agentloop.session import list_sessions, load_session
from agentloop.tools import default_tools

__all__ = ["terminal"]  # the fixture, imported

#: One reply: a read (runs), a command (asks), another read (runs, held back).
ASKING = [
    {
        "text": "Let me look and write.",
        "calls": [
            {"name": "read_file", "args": {"path": "notes.md"}, "id": "c1"},
            {"name": "bash", "args": {"command": "echo hi >> out.txt"}, "id": "c2"},
            {"name": "read_file", "args": {"path": "todo.md"}, "id": "c3"},
        ],
    }
]
#: Two asked calls in one reply.
TWO_ASKED = [
    {
        "text": "Two commands.",
        "calls": [
            {"name": "bash", "args": {"command": "echo one >> out.txt"}, "id": "c1"},
            {"name": "bash", "args": {"command": "echo two >> out.txt"}, "id": "c2"},
        ],
    }
]
DONE = [{"text": "Done."}]


class Place:
    """A directory to work in, the sessions' home, the scripts."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path
        self.work = tmp_path / "work"
        self.work.mkdir()
        (self.work / "notes.md").write_text("remember\n")
        (self.work / "todo.md").write_text("nothing\n")
        self.home = tmp_path / "home"

    def run(self, turns: list[Any], *args: str, input: str | None = None) -> Any:
        script = write_script(self.root / f"s{len(list(self.root.glob('s*.json')))}.json", turns)
        done = run_cli(
            "--model", f"scripted:{script}", "-C", str(self.work), *args,
            home=self.home, cwd=self.root, input=input,
        )  # fmt: skip
        done.script = script
        return done

    def session(self) -> Path:
        [session] = list_sessions(self.home / "sessions")
        return session.path

    @property
    def out(self) -> str:
        path = self.work / "out.txt"
        return path.read_text() if path.exists() else ""


def history(path: Path) -> list[tuple[str, str, str]]:
    """A session's messages: their role, tool call id (or "") and text."""
    roles = {al.UserMessage: "user", al.AssistantMessage: "assistant"}
    return [
        (roles.get(type(m), "tool_result"), getattr(m, "tool_call_id", ""), m.text)
        for m in load_session(path).messages
    ]


def stopped(place: Place, turns: list[Any] = ASKING, *more: str) -> Path:
    """A session whose run stopped awaiting approval; its file."""
    done = place.run(turns, "-p", "go", "--defer-approvals", "--output-format", "json", *more)
    assert done.returncode == 4, done.stderr
    return place.session()


# --------------------------------------------------------------------------- stopping


def test_defer_approvals_stops_with_status_4_and_the_json_lists_the_calls(
    tmp_path: Path,
) -> None:
    place = Place(tmp_path)
    done = place.run(ASKING, "-p", "go", "--defer-approvals", "--output-format", "json")
    assert done.returncode == 4, done.stderr
    path = place.session()
    result = json.loads(done.stdout)
    assert {k: v for k, v in result.items() if not k.startswith("usage")} == {
        "result": "Let me look and write.",
        "stop_reason": {
            "kind": "awaiting_approval",
            "message": "Awaiting approval: bash (c2)",
            "error": None,
        },
        "num_turns": 1,
        "pending": [
            {
                "tool_call_id": "c2",
                "tool_name": "bash",
                "arguments": {"command": "echo hi >> out.txt"},
                "reason": "bash 'echo hi >> out.txt' needs approval (the rule ask(bash))",
                "rule": "bash",
                "subject": ["command", "echo hi >> out.txt"],
            }
        ],
        "session_id": path.stem,
        "model": f"scripted:{done.script}",
        "exit_status": 4,
    }
    assert done.stderr.splitlines() == [
        f"agentloop: using the scripted model {done.script}.",
        "",
        f"agentloop: the run stopped: 1 call awaits approval (session {path.stem}):",
        "  c2  bash(echo hi >> out.txt)",
        f"agentloop: decide with: agentloop -C {place.work} --resume {path.stem} --approve "
        "CALL_ID or --deny CALL_ID[=REASON] for each (or --approve-all, --deny-all)",
    ]
    assert place.out == ""  # the command did not run
    # The file holds the stop; the history ends with the reply and the results made so far.
    session = load_session(path)
    suspended = session.suspended
    assert session.stops[-1].kind is al.StopKind.AWAITING_APPROVAL
    assert suspended is not None
    assert [call.tool_call_id for call in suspended.pending] == ["c2"]
    assert [result.tool_call_id for result in suspended.results] == ["c3"]


def test_defer_approvals_with_stream_json_ends_with_a_result_line(tmp_path: Path) -> None:
    place = Place(tmp_path)
    done = place.run(ASKING, "-p", "go", "--defer-approvals", "--output-format", "stream-json")
    assert done.returncode == 4, done.stderr
    *lines, last = done.stdout.splitlines()
    events = [from_json(line, al.AgentEvent) for line in lines]
    asked = [e for e in events if isinstance(e, al.ToolApprovalRequested)]
    assert [(e.tool_call_id, e.tool_name, e.args) for e in asked] == [
        ("c2", "bash", {"command": "echo hi >> out.txt"})
    ]
    end = events[-1]
    assert isinstance(end, al.AgentEnd)
    assert end.stop_reason.kind is al.StopKind.AWAITING_APPROVAL
    assert [call.tool_call_id for call in end.pending] == ["c2"]
    result = json.loads(last)
    assert (result["type"], result["exit_status"], result["session_id"]) == (
        "result",
        4,
        place.session().stem,
    )
    assert [call["tool_call_id"] for call in result["pending"]] == ["c2"]


def test_stream_json_ends_with_a_result_line_for_every_run(tmp_path: Path) -> None:
    """The last line of stream-json is the object json writes, ``"type": "result"``."""
    place = Place(tmp_path)
    done = place.run(DONE, "-p", "hi", "--output-format", "stream-json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert {k: v for k, v in result.items() if not k.startswith("usage")} == {
        "type": "result",
        "result": "Done.",
        "stop_reason": {"kind": "completed", "message": "", "error": None},
        "num_turns": 1,
        "pending": [],
        "session_id": place.session().stem,
        "model": f"scripted:{done.script}",
        "exit_status": 0,
    }


def test_defer_approvals_with_text_output_says_the_calls_on_stderr(tmp_path: Path) -> None:
    place = Place(tmp_path)
    done = place.run(TWO_ASKED, "-p", "go", "--defer-approvals")
    assert (done.returncode, done.stdout) == (4, "")  # no answer: the run did not complete
    path = place.session()
    lines = done.stderr.splitlines()
    assert STATUS.match(lines[3])
    assert lines[:3] + lines[4:] == [
        f"agentloop: using the scripted model {done.script}.",
        "",
        "Two commands.",
        f"agentloop: the run stopped: 2 calls await approval (session {path.stem}):",
        "  c1  bash(echo one >> out.txt)",
        "  c2  bash(echo two >> out.txt)",
        f"agentloop: decide with: agentloop -C {place.work} --resume {path.stem} --approve "
        "CALL_ID or --deny CALL_ID[=REASON] for each (or --approve-all, --deny-all)",
    ]
    assert place.out == ""


# --------------------------------------------------------------------------- deciding


def uninterrupted(tmp_path: Path, turns: list[Any], answers: str) -> list[tuple[str, str, str]]:
    """The history of the same run with the questions answered as it goes (``answers``)."""
    place = Place(tmp_path / "live")
    done = place.run(turns, input=f"go\n{answers}")
    assert done.returncode == 0, done.stderr
    return history(place.session())


def test_approve_goes_on_and_the_history_is_the_uninterrupted_runs(tmp_path: Path) -> None:
    (tmp_path / "live").mkdir()
    place = Place(tmp_path)
    path = stopped(place)
    done = place.run(DONE, "--resume", path.stem, "--approve", "c2")
    assert (done.returncode, done.stdout) == (0, "Done.\n"), done.stderr
    lines = done.stderr.splitlines()
    assert lines[:-1] == [
        f"agentloop: using the scripted model {done.script}.",
        f"agentloop: resumed session {path.stem}: 3 messages restored; 1 call awaits "
        "approval: bash(echo hi >> out.txt) (c2).",
        "",
        '→ bash(command="echo hi >> out.txt")',
        "✓ bash: Exit code: 0",
        "Done.",
    ]
    assert STATUS.match(lines[-1])
    assert place.out == "hi\n"  # ran once
    assert place.session() == path  # the same file, appended to
    assert history(path) == [
        ("user", "", "go"),
        ("assistant", "", "Let me look and write."),
        ("tool_result", "c1", "[notes.md: 1 line]\n     1\tremember"),
        ("tool_result", "c2", "Exit code: 0\n"),
        ("tool_result", "c3", "[todo.md: 1 line]\n     1\tnothing"),
        ("assistant", "", "Done."),
    ]
    assert history(path) == uninterrupted(tmp_path, ASKING + DONE, "y\n")
    again = place.run(DONE, "--resume", path.stem, "--approve", "c2")
    assert (again.returncode, again.stderr.splitlines()[-1]) == (
        2,
        f"agentloop: session {path.stem}: no call awaits approval: there is nothing to "
        "decide; nothing ran",
    )
    assert place.out == "hi\n"


@pytest.mark.parametrize(
    ("decide", "results", "out"),
    [
        (["--deny", "c1=not today", "--approve", "c2"],
         ["Permission denied: not today", "Exit code: 0\n"], "two\n"),
        (["--deny", "c2", "--approve-all"],
         ["Exit code: 0\n", "Permission denied: bash 'echo two >> out.txt' was not approved"],
         "one\n"),
        (["--deny-all"],
         ["Permission denied: bash 'echo one >> out.txt' was not approved",
          "Permission denied: bash 'echo two >> out.txt' was not approved"], ""),
        (["--approve-all"], ["Exit code: 0\n", "Exit code: 0\n"], "one\ntwo\n"),
        (["--approve", 'c1={"command": "echo edited >> out.txt"}', "--deny", "c2=no"],
         ["Exit code: 0\n", "Permission denied: no"], "edited\n"),
        (["--approve", 'c1={"cmd": 1}', "--deny-all"],
         ["Invalid arguments: $: 'command' is a required property; $: Additional properties "
          "are not allowed ('cmd' was unexpected)",
          "Permission denied: bash 'echo two >> out.txt' was not approved"], ""),
    ],
)  # fmt: skip
def test_decisions_deny_with_reasons_and_edit(
    tmp_path: Path, decide: list[str], results: list[str], out: str
) -> None:
    place = Place(tmp_path)
    path = stopped(place, TWO_ASKED)
    done = place.run(DONE, "--resume", path.stem, *decide, "--output-format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "Done."
    assert [text for role, _, text in history(path) if role == "tool_result"] == results
    assert place.out == out


def test_decisions_that_do_not_fit_are_refused_and_nothing_runs(tmp_path: Path) -> None:
    place = Place(tmp_path)
    path = stopped(place, TWO_ASKED)
    recorded = path.read_bytes()
    for decide, said in [
        (["--approve", "zz", "--approve-all"],
         "no pending call has the id 'zz' (pending: 'c1', 'c2')"),
        (["--approve", "c1", "--deny", "c1"], "'c1' decided more than once; no decision for 'c2'"),
        (["--approve", "c2"], "no decision for 'c1'"),
    ]:  # fmt: skip
        done = place.run(DONE, "--resume", path.stem, *decide, "--output-format", "json")
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.splitlines()[-1] == (
            f"agentloop: session {path.stem}: {said}; nothing ran"
        )
    prompted = place.run(DONE, "--resume", path.stem, "-p", "something else")
    assert (prompted.returncode, prompted.stdout) == (2, "")
    assert prompted.stderr.splitlines()[-1] == (
        f"agentloop: calls of session {path.stem} await approval (c1, c2): decide them first "
        f"(agentloop -C {place.work} --resume {path.stem} --approve CALL_ID, --deny "
        "CALL_ID[=REASON]...); nothing ran"
    )
    assert path.read_bytes() == recorded
    assert place.out == ""


def test_a_resumed_run_that_asks_again_stops_again(tmp_path: Path) -> None:
    """With --defer-approvals on the decided run too, a new asked call stops it again."""
    place = Place(tmp_path)
    path = stopped(place)
    more = [{"text": "Once more.", "calls": [
        {"name": "bash", "args": {"command": "echo again >> out.txt"}, "id": "c9"}]}]  # fmt: skip
    done = place.run(
        more, "--resume", path.stem, "--approve", "c2", "--defer-approvals", "--output-format",
        "json",
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    assert [call["tool_call_id"] for call in json.loads(done.stdout)["pending"]] == ["c9"]
    assert place.out == "hi\n"
    final = place.run(DONE, "--resume", path.stem, "--approve", "c9")
    assert final.returncode == 0, final.stderr
    assert place.out == "hi\nagain\n"


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--approve", "c1"], "--approve, --deny, --approve-all and --deny-all go with --resume "
         "[ID] (the session whose calls await approval)"),
        (["--resume", "x", "--deny-all", "-p", "hi"], "give a prompt or decisions (--approve, "
         "--deny...), not both: the decided run goes on by itself"),
        (["--defer-approvals"], "--defer-approvals goes with a prompt (-p PROMPT) or with "
         "decisions (--resume ID --approve ...): an interactive session asks"),
        (["--resume", "--approve-all", "--deny-all"], "give --approve-all or --deny-all, not both"),
        (["--resume", "--approve", "c1={x"], "--approve c1={x: the arguments are not JSON: "
         "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        (["--resume", "--approve", "c1=[1]"], "--approve c1=[1]: the arguments must be a JSON "
         "object"),
        (["--resume", "--deny", "=why"], "--deny needs the id of a pending call (agentloop "
         "--resume ID lists them)"),
    ],
)  # fmt: skip
def test_usage_errors_of_the_approval_options(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"agentloop: error: {error}"


def test_the_decision_options_parse_in_order() -> None:
    options = parse_args(
        ["--resume", "s1", "--approve", "c1", "--deny", "c2=not now=ever", "--approve",
         'c3={"path": "a"}', "--deny", "c4", "--deny-all", "--output-format", "json"]
    )  # fmt: skip
    assert options.decisions == (
        al.Approve("c1"),
        al.Approve("c3", {"path": "a"}),
        al.Deny("c2", "not now=ever"),
        al.Deny("c4"),
    )
    assert (options.decide_rest, options.one_shot, options.format) == ("deny", True, "json")
    assert not parse_args(["--resume"]).one_shot


# --------------------------------------------------------------------------- interactive


@pytest.mark.parametrize(
    ("answers", "shown", "out"),
    [
        ("y\n", ["Allow bash(echo one >> out.txt)? [y/N] y",
                 "Allow bash(echo two >> out.txt)? [y/N] y"], "one\ntwo\n"),
        ("y\nn\n", ["Allow bash(echo one >> out.txt)? [y/N] y",
                    "Allow bash(echo two >> out.txt)? [y/N] n", "  not allowed"], "one\n"),
    ],
)  # fmt: skip
def test_a_resumed_session_asks_its_pending_calls_first(
    tmp_path: Path, answers: str, shown: list[str], out: str
) -> None:
    place = Place(tmp_path)
    path = stopped(place, TWO_ASKED)
    typed = answers if answers.count("\n") == 2 else answers + "y\n"
    done = place.run(DONE, "--resume", path.stem, input=typed)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    count = len(shown)
    assert lines[: 5 + count] == [
        f"agentloop: using the scripted model {done.script}.",
        f"agentloop: resumed session {path.stem}: 2 messages restored; 2 calls await "
        "approval: bash(echo one >> out.txt) (c1), bash(echo two >> out.txt) (c2).",
        "Type a prompt; /help lists the commands. Ctrl-C stops a run; Ctrl-D quits.",
        "",
        "agentloop: 2 calls of this session await approval.",
        *shown,
    ]
    assert place.out == out
    assert load_session(path).stops[-1].kind is al.StopKind.COMPLETED


def test_the_end_of_input_leaves_the_calls_pending(tmp_path: Path) -> None:
    """No answer: nothing runs, the session still awaits approval and can be decided later."""
    place = Place(tmp_path)
    path = stopped(place, TWO_ASKED)
    done = place.run(DONE, "--resume", path.stem, input="y\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[4:8] == [
        "agentloop: 2 calls of this session await approval.",
        "Allow bash(echo one >> out.txt)? [y/N] y",
        "Allow bash(echo two >> out.txt)? [y/N] ",
        "  left awaiting approval (no more input)",
    ]
    assert place.out == ""
    later = place.run(DONE, "--resume", path.stem, "--approve-all")
    assert later.returncode == 0, later.stderr
    assert place.out == "one\ntwo\n"


def test_slash_resume_asks_the_pending_calls_first(tmp_path: Path) -> None:
    place = Place(tmp_path)
    path = stopped(place)
    done = place.run(DONE, input=f"/resume {path.stem}\ny\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[3:11] == [
        f"{PROMPT} /resume {path.stem}",
        f"agentloop: resumed session {path.stem}: 3 messages restored; 1 call awaits "
        "approval: bash(echo hi >> out.txt) (c2).",
        "agentloop: 1 call of this session awaits approval.",
        "Allow bash(echo hi >> out.txt)? [y/N] y",
        '→ bash(command="echo hi >> out.txt")',
        "✓ bash: Exit code: 0",
        "Done.",
        done.stdout.splitlines()[10],
    ]
    assert place.out == "hi\n"


def test_terminal_resume_asks_the_pending_calls_first(terminal: Terminal, tmp_path: Path) -> None:
    place = Place(tmp_path)
    path = stopped(place)
    script = write_script(tmp_path / "done.json", DONE)
    terminal.start(
        ["--model", f"scripted:{script}", "-C", str(place.work), "--resume", path.stem],
        cwd=tmp_path,
        home=place.home,
    )
    terminal.wait_for("Allow bash(echo hi >> out.txt)? [y/N]")
    terminal.type("y")
    lines = terminal.wait_for_prompt("Done.")
    start = lines.index("agentloop: 1 call of this session awaits approval.")
    assert lines[start - 2 : start + 5] == [
        "Type a prompt; /help lists the commands. Ctrl-C stops a run; Ctrl-D quits.",
        "",
        "agentloop: 1 call of this session awaits approval.",
        "Allow bash(echo hi >> out.txt)? [y/N] y",
        '→ bash(command="echo hi >> out.txt")',
        "✓ bash: Exit code: 0",
        "Done.",
    ]
    terminal.type("/quit")
    terminal.wait_for("[exited 0]")
    assert place.out == "hi\n"
    assert [text for role, _, text in history(path) if role == "tool_result"] == [
        "[notes.md: 1 line]\n     1\tremember",
        "Exit code: 0\n",
        "[todo.md: 1 line]\n     1\tnothing",
    ]


# --------------------------------------------------------------------------- the session


async def test_a_stopped_session_is_restored_with_its_pending_calls_and_never_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The restored history ends as the stopped run left it (the reply, the result made
    before the pending call), the call is pending, and nothing is run."""
    place = Place(tmp_path)
    path = stopped(place)
    monkeypatch.setenv("AGENTLOOP_HOME", str(place.home))
    screen = Screen(make_console(io.StringIO()))
    log = SessionLog(screen, directory=place.work, model="scripted:m")
    agent = al.Agent(ScriptedProvider([]), tools=default_tools(place.work))
    await log.resume(agent, path.stem, any_directory=False, listing="/sessions")
    assert [(type(m).__name__, getattr(m, "tool_call_id", "")) for m in agent.messages] == [
        ("UserMessage", ""),
        ("AssistantMessage", ""),
        ("ToolResultMessage", "c1"),
    ]
    assert [call.tool_call_id for call in agent.pending] == ["c2"]
    assert place.out == ""
    other = al.Agent(ScriptedProvider([]))
    load_session(path).restore(other)
    assert other.messages == agent.messages
    assert other.pending == agent.pending
