"""`python -m agentloop` without an API key: the offline demo, run as a real process.

The demo's scripted model fixes a bug in a scratch project with the real tools,
through the real permission questions. The terminal agent's options, model
choice, rendering and interactive use are tested in ``test_cli.py`` (the demo in
a real terminal too).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers import in_call_order

import agentloop as al
from agentloop._cli import choose_model, parse_args
from agentloop._cli._demo import CALC_PY, FIXED_CALC_PY, TEST_CALC_PY, demo_provider, make_project
from agentloop._cli._models import ModelChoice, demo_workspace
from agentloop.providers import ModelRequest
from agentloop.tools import default_tools

STATUS = re.compile(r"^\[\d+ turns, \d+ tokens in, \d+ tokens out\]$")
NO_KEY = "(no ANTHROPIC_API_KEY or OPENAI_API_KEY set)"
REAL_MODEL = (
    "To work on your own code with a real model, set ANTHROPIC_API_KEY or OPENAI_API_KEY, or "
    "choose one with --model (agentloop --help lists them), and run agentloop in your project."
)
#: What every demo run shows first, up to the question before running the check.
UP_TO_THE_CHECK = [
    "This is agentloop's offline demo: I am a scripted model, not a real one, so I do the same "
    "small task whatever you ask: make the check of this scratch project pass. First, the "
    "files.",
    "→ list_files()",
    "✓ list_files: calc.py (+3 lines)",
    "Two files: the code and its check. I read both at once: calls of one reply run side by side.",
    '→ read_file(path="calc.py")',
    '→ read_file(path="test_calc.py")',
    "✓ read_file: [calc.py: 12 lines] (+12 lines)",
    "✓ read_file: [test_calc.py: 24 lines] (+24 lines)",
    "calc.py has add() and mean(); the check runs three cases and exits with status 1 when "
    "one fails. Let me run it: a command needs your permission first.",
]
FAILING_RUN = [
    '→ bash(command="python3 test_calc.py")',
    "  │ ok    add(2, 3) == 5",
    "  │ FAIL  mean([1, 2, 3, 4]) == 2.25, expected 2.5",
    "  │ FAIL  mean([5]) == 0.0, expected 5",
    "  │ 1 passed, 2 failed",
    "✓ bash: Exit code: 1 (+4 lines)",
    "mean() is wrong: mean([1, 2, 3, 4]) gives 2.25 (expected 2.5) and mean([5]) gives 0.0 "
    "(expected 5). It adds up numbers[1:], which skips the first number, and then divides by "
    "the count of all of them. The fix is one line:",
    "--- calc.py",
    "+++ calc.py",
    "@@ -8,5 +8,5 @@",
    " def mean(numbers):",
    "     total = 0",
    "-    for n in numbers[1:]:",
    "+    for n in numbers:",
    "         total += n",
    "     return total / len(numbers)",
    "Changing a file needs your permission too.",
]


def run_cli(
    *args: str, cwd: Path, input: str | None = None
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The program, with no API key and its temporary files in a folder of the test's own.

    Returns the finished process and the scratch project it made there.
    """
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["AGENTLOOP_HOME"] = str(cwd.parent / f"{cwd.name}-agentloop-home")  # sessions go here
    temp = cwd.parent / f"{cwd.name}-tmp"
    temp.mkdir()
    env["TMPDIR"] = str(temp)
    result = subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        cwd=cwd,
        env=env,
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    [scratch] = temp.iterdir()
    return result, scratch


def a_users_directory(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    """The directory the user runs the demo in, and what is in it."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text("# mine: the demo must not touch it\n")
    (work / "notes.md").write_text("one\ntwo\n")
    return work, {path.name: path.read_bytes() for path in work.iterdir()}


def test_demo_one_shot_without_input_is_refused_the_command(tmp_path: Path) -> None:
    """`agentloop PROMPT` with nothing to read: the check is not allowed to run, and the
    model says what it would have done; the user's directory is not touched."""
    work, before = a_users_directory(tmp_path)
    result, scratch = run_cli("fix", "the", "bug", cwd=work)
    assert result.returncode == 0
    assert scratch.name.startswith("agentloop-demo-")
    lines = in_call_order(result.stderr.splitlines())  # the run; the answer alone on stdout
    assert result.stdout == "\n".join(lines[-4:-1]) + "\n"
    assert lines[:-1] == [
        f"agentloop: offline demo {NO_KEY}: a scripted model works on a scratch project in "
        f"{scratch}; nothing of yours is touched.",
        "",
        *UP_TO_THE_CHECK,
        "Allow bash(python3 test_calc.py)? [y/N] ",
        "  not allowed (no more input)",
        '→ bash(command="python3 test_calc.py")',
        "✗ bash: Permission denied: bash 'python3 test_calc.py' was not approved",
        "You did not allow the command, so I stop here. With a yes, I would have run python3 "
        "test_calc.py, seen mean() fail, fixed calc.py with edit_file (asking you first) and run "
        "the check again. That refusal is agentloop's permission check at work: the model is "
        "told, and nothing runs.",
        "",
        REAL_MODEL,
    ]
    assert STATUS.match(lines[-1])
    assert lines[-1].startswith("[4 turns, ")
    assert {path.name: path.read_bytes() for path in work.iterdir()} == before
    assert (scratch / "calc.py").read_text() == CALC_PY
    assert (scratch / "test_calc.py").read_text() == TEST_CALC_PY


def test_demo_piped_runs_the_check_shows_the_fix_and_takes_no_for_an_answer(
    tmp_path: Path,
) -> None:
    """Piped lines: the prompt, yes to the command (its output streams), no to the edit
    (its diff was shown first): the file stays as it was."""
    work, before = a_users_directory(tmp_path)
    result, scratch = run_cli(cwd=work, input="fix it\ny\nn\n")
    assert (result.returncode, result.stderr) == (0, "")
    lines = in_call_order(result.stdout.splitlines())
    status = lines.index(REAL_MODEL) + 1
    assert lines[:status] == [
        f"agentloop: offline demo {NO_KEY}: a scripted model works on a scratch project in "
        f"{scratch}; nothing of yours is touched.",
        "Type a prompt; /help lists the commands. Ctrl-C stops a run; Ctrl-D quits.",
        "",
        "\u203a fix it",
        *UP_TO_THE_CHECK,
        "Allow bash(python3 test_calc.py)? [y/N] y",
        *FAILING_RUN,
        "Allow edit_file(calc.py)? [y/N] n",
        "  not allowed",
        '→ edit_file(path="calc.py", old_text="    for n in numbers[1:]:\\n", new…)',
        "✗ edit_file: Permission denied: edit_file on 'calc.py' was not approved",
        "You did not allow the edit, so calc.py is unchanged: the diff above is the change I "
        "would have made, and then I would have run the check again. That refusal is "
        "agentloop's permission check at work: the model is told, and nothing runs.",
        "",
        REAL_MODEL,
    ]
    assert STATUS.match(lines[status])
    assert lines[status].startswith("[5 turns, ")
    assert lines[status + 1] == "\u203a "  # the end of the input: the session ends
    assert {path.name: path.read_bytes() for path in work.iterdir()} == before
    assert (scratch / "calc.py").read_text() == CALC_PY


def test_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    """-C with a path that is not a directory exits 2 with a clear message."""
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    result = subprocess.run(
        [sys.executable, "-m", "agentloop", "-C", str(tmp_path / "nope"), "hi"],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert f"not a directory: {tmp_path / 'nope'}" in result.stderr


def test_printer_shows_thinking_and_retries() -> None:
    """Thinking streams inline (plain when not a terminal); a retry gets its own line."""
    import io

    from agentloop._cli import Renderer, Screen, make_console

    out = io.StringIO()
    printer = Renderer(Screen(make_console(out)))
    message = al.AssistantMessage((), al.StopReason.STOP)
    for delta in (
        al.ThinkingDelta(delta="hmm"),
        al.StreamRestart(attempt=2, delay=1.5, error="Anthropic API error 529: Overloaded"),
        al.TextDelta(delta="Hi"),
    ):
        printer.show(al.MessageUpdate(loop_id="l", message=message, delta=delta))
    assert out.getvalue() == (
        "hmm\n  ↻ Anthropic API error 529: Overloaded; retrying in 1.5s (attempt 2)\nHi"
    )


def test_the_demo_works_on_a_scratch_project_unless_it_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new demo session gets a new scratch project, and a note that says where; resuming
    or listing sessions stays in the directory; other models are not concerned."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    options = parse_args(["-C", str(tmp_path)])
    moved, choice = demo_workspace(options, choose_model({}))
    [scratch] = tmp_path.iterdir()
    assert moved == parse_args(["-C", str(scratch)])
    assert choice.note == (
        f"agentloop: offline demo {NO_KEY}: a scripted model works on a scratch project in "
        f"{scratch}; nothing of yours is touched."
    )
    assert sorted(p.name for p in scratch.iterdir()) == ["calc.py", "test_calc.py"]
    _, named = demo_workspace(parse_args(["--model", "demo"]), choose_model({}, model="demo"))
    assert named.note.startswith("agentloop: offline demo: a scripted model works on a scratch ")
    for argv in (["--resume"], ["--sessions"]):
        unmoved = parse_args(argv)
        assert demo_workspace(unmoved, choice) == (unmoved, choice)
    other = ModelChoice(provider=choice.provider, label="x", note="x")
    assert demo_workspace(options, other) == (options, other)
    assert len(list(tmp_path.iterdir())) == 2  # the two scratch projects, no more


async def test_the_demo_finds_a_fixed_project_and_says_so(tmp_path: Path) -> None:
    """A second prompt after the fix (here: a project already fixed): the model reads,
    runs the check, sees it pass and has nothing to do."""
    project = make_project(tmp_path)
    (project / "calc.py").write_text(FIXED_CALC_PY)
    agent = al.Agent(demo_provider(paced=False), tools=default_tools(project))
    messages = await agent.run("again")
    calls = [c.name for m in messages if isinstance(m, al.AssistantMessage) for c in m.tool_calls]
    assert calls == ["list_files", "read_file", "read_file", "bash"]
    assert messages[-2].text.startswith("Exit code: 0\nok    add(2, 3) == 5\n")
    assert messages[-1].text == (
        "The check passes already: calc.py is fixed (an earlier run did it), so there is "
        f"nothing left to do.\n\n{REAL_MODEL}"
    )


def user(text: str) -> al.UserMessage:
    return al.UserMessage.text(text)


def asked(name: str, call_id: str, stop: al.StopReason = al.StopReason.TOOL_USE) -> Any:
    return al.AssistantMessage((al.ToolCall(call_id, name, {}),), stop)


def answered(
    name: str, call_id: str, text: str, outcome: al.ToolOutcome = al.ToolOutcome.OK
) -> al.ToolResultMessage:
    return al.ToolResultMessage(
        call_id, name, (al.TextContent(text),), is_error=outcome.is_error, outcome=outcome
    )


LISTED = "calc.py\ntest_calc.py\n\n(2 files)"
DENIED = "Permission denied: bash 'python3 test_calc.py' was not approved"


@pytest.mark.parametrize(
    ("messages", "text", "calls"),
    [
        pytest.param(
            [
                user("go"),
                asked("list_files", "demo_1"),
                answered("list_files", "demo_1", LISTED),
                user("hurry up"),
                user("please"),
            ],
            '(You wrote "hurry up" / "please": a scripted model cannot act on it, so I go on.)\n'
            "Two files: the code and its check. I read both at once: calls of one reply run "
            "side by side.",
            [
                ("demo_2", "read_file", {"path": "calc.py"}),
                ("demo_3", "read_file", {"path": "test_calc.py"}),
            ],
            id="steering is heard, and the plan goes on",
        ),
        pytest.param(
            [
                user("go"),
                asked("list_files", "demo_1", al.StopReason.ABORTED),
                answered(
                    "list_files",
                    "demo_1",
                    "Cancelled: the run was aborted.",
                    al.ToolOutcome.CANCELLED,
                ),
                user("again"),
            ],
            UP_TO_THE_CHECK[0],
            [("demo_2", "list_files", {})],
            id="a prompt after a stopped run starts over",
        ),
        pytest.param(
            [
                user("go"),
                asked("list_files", "demo_1"),
                answered("list_files", "demo_1", "notes.md\n\n(1 file)"),
            ],
            "There is no calc.py and test_calc.py here: this is not the demo's scratch project, "
            "and the scripted demo knows only that one task, so it stops here.\n\n" + REAL_MODEL,
            [],
            id="not the demo's project",
        ),
        pytest.param(
            [
                user("go"),
                asked("bash", "demo_4"),
                answered(
                    "bash", "demo_4", "Exit code: 127\nSTDOUT:\n\nSTDERR:\npython3: not found"
                ),
            ],
            "The check could not run: python3 is not on the PATH (exit code 127). The demo "
            "needs it, so it stops here.\n\n" + REAL_MODEL,
            [],
            id="a check that cannot run",
        ),
        pytest.param(
            [
                user("go"),
                asked("bash", "demo_4"),
                answered(
                    "bash", "demo_4", "Command blocked by safety policy: x.", al.ToolOutcome.ERROR
                ),
            ],
            "bash failed: Command blocked by safety policy: x.\nThe scripted demo cannot work "
            "around that, so it stops here.\n\n" + REAL_MODEL,
            [],
            id="a tool error",
        ),
        pytest.param(
            [
                user("go"),
                asked("bash", "demo_4"),
                answered("bash", "demo_4", "Exit code: 1\nSyntaxError"),
            ],
            "The check did not pass (Exit code: 1), and that is not the failure the scripted "
            "demo knows how to fix, so it stops here.\n\n" + REAL_MODEL,
            [],
            id="another failure",
        ),
        pytest.param(
            [
                user("go"),
                asked("edit_file", "demo_5"),
                answered("edit_file", "demo_5", "Edited calc.py: replaced 1 occurrence"),
                asked("bash", "demo_6"),
                answered("bash", "demo_6", DENIED, al.ToolOutcome.DENIED),
            ],
            "You did not allow the second run of the check. calc.py is fixed all the same: "
            "python3 test_calc.py in the scratch project shows it. That refusal is agentloop's "
            "permission check at work: the model is told, and nothing runs.\n\n" + REAL_MODEL,
            [],
            id="the second run refused",
        ),
    ],
)
async def test_the_demo_model_reacts_to_the_conversation(
    messages: list[al.Message], text: str, calls: list[tuple[str, str, dict[str, Any]]]
) -> None:
    """Each turn follows from this run's messages: steering, a new prompt, what it found."""

    async def ignore(delta: al.StreamDelta) -> None:
        pass

    reply = await demo_provider(paced=False).stream(
        ModelRequest(system_prompt="", messages=messages), ignore
    )
    assert reply.text == text
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == calls
