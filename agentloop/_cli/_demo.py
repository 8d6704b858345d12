"""The offline demo: a scripted model fixes a bug in a scratch project, with the real tools.

:func:`make_project` writes a tiny project into a new temporary directory:
``calc.py``, whose ``mean()`` has a bug, and ``test_calc.py``, a plain script
that checks it (a line per case, exit status 1 when one fails). The model of
:func:`demo_provider` works on it the way a coding agent would: it lists the
files, reads them, runs the check with ``bash``, fixes the bug with
``edit_file`` (showing the change as a diff first), runs the check again and
explains what the user saw. The ``bash`` and ``edit_file`` calls go through the
terminal's permission question; when one is refused, the model says what it
would have done and stops.

Each turn is worked out from the conversation (what the tools returned, in this
run), so the text is the same every time for the same results, and a model that
finds something else (another directory, a file already fixed, a refused call)
says so instead of going on blindly.
"""

from __future__ import annotations

import difflib
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from .._types import (
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    ToolOutcome,
    ToolResultMessage,
    UserMessage,
)
from ..providers import ModelRequest, ScriptedProvider, ScriptedTurn, call, reply

__all__ = ["CALC_PY", "CHECK", "FIXED_CALC_PY", "TEST_CALC_PY", "demo_provider", "make_project"]

CALC_PY = '''\
"""A tiny calculator: the project of agentloop's offline demo."""


def add(a, b):
    return a + b


def mean(numbers):
    total = 0
    for n in numbers[1:]:
        total += n
    return total / len(numbers)
'''

_BUG, _FIX = "    for n in numbers[1:]:\n", "    for n in numbers:\n"
FIXED_CALC_PY = CALC_PY.replace(_BUG, _FIX)

TEST_CALC_PY = '''\
"""Checks calc.py: python3 test_calc.py (exit status 1 when a case fails)."""

import sys
import time

from calc import add, mean

CASES = [
    ("add(2, 3)", lambda: add(2, 3), 5),
    ("mean([1, 2, 3, 4])", lambda: mean([1, 2, 3, 4]), 2.5),
    ("mean([5])", lambda: mean([5]), 5),
]

failed = 0
for name, run, expected in CASES:
    time.sleep(0.12)  # a slow check, to watch its output arrive
    got = run()
    if got == expected:
        print(f"ok    {name} == {expected!r}", flush=True)
    else:
        failed += 1
        print(f"FAIL  {name} == {got!r}, expected {expected!r}", flush=True)
print(f"{len(CASES) - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
'''

#: The command that runs the project's check.
CHECK = "python3 test_calc.py"

_REAL_MODEL = (
    "To work on your own code with a real model, set ANTHROPIC_API_KEY or OPENAI_API_KEY, "
    "or choose one with --model (agentloop --help lists them), and run agentloop in your "
    "project."
)
_FAILED_CASE = re.compile(r"^FAIL\s+(.+) == (.+), expected (.+)$")
_EXIT_CODE = re.compile(r"^Exit code: (-?\d+)")


def make_project(parent: str | Path | None = None) -> Path:
    """A new directory (in ``parent``, or the system's temporary one) holding the demo project.

    Raises:
        OSError: the directory or its files cannot be written.
    """
    directory = Path(tempfile.mkdtemp(prefix="agentloop-demo-", dir=parent)).resolve()
    (directory / "calc.py").write_text(CALC_PY, encoding="utf-8")
    (directory / "test_calc.py").write_text(TEST_CALC_PY, encoding="utf-8")
    return directory


@attrs.frozen
class _Done:
    """A tool call of this run and its result."""

    name: str
    args: dict[str, Any]
    text: str
    is_error: bool
    outcome: ToolOutcome


def _run_start(messages: Sequence[Message]) -> int:
    """Where this run's prompt is: steering (a user message after a tool result) is not one."""
    start = 0
    after_calls = False  # the last turn asked for tools: a user message now is steering
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage):
            if not after_calls and (index == 0 or not isinstance(messages[index - 1], UserMessage)):
                start = index
        elif isinstance(message, AssistantMessage):
            after_calls = message.stop_reason is StopReason.TOOL_USE
    return start


def _this_run(request: ModelRequest) -> tuple[list[_Done], list[str]]:
    """The tool calls of this run with their results, and the steering sent since the last."""
    messages = request.messages[_run_start(request.messages) :]
    calls: dict[str, ToolCall] = {}
    done: list[_Done] = []
    steering: list[str] = []
    for message in messages[1:]:
        if isinstance(message, AssistantMessage):
            calls.update((c.id, c) for c in message.tool_calls)
            steering.clear()
        elif isinstance(message, ToolResultMessage):
            made = calls.get(message.tool_call_id)
            args = dict(made.arguments) if made is not None else {}
            done.append(
                _Done(message.tool_name, args, message.text, message.is_error, message.outcome)
            )
            steering.clear()
        else:
            steering.append(message.text)
    return done, steering


def _call_id(request: ModelRequest) -> str:
    """A call id not used in the conversation yet (the same ones every time)."""
    made = sum(len(m.tool_calls) for m in request.messages if isinstance(m, AssistantMessage))
    return f"demo_{made + 1}"


def _file_text(read_result: str) -> str:
    """The text of a file from read_file's result: its numbered lines, without the numbers."""
    lines = read_result.splitlines()[1:]  # after the "[calc.py: 12 lines]" header
    return "".join(line.partition("\t")[2] + "\n" for line in lines if "\t" in line)


def _exit_code(bash_result: str) -> int | None:
    found = _EXIT_CODE.match(bash_result)
    return int(found.group(1)) if found else None


def _failures(bash_result: str) -> list[str]:
    """The failed cases of the check's output, as "mean([5]) gives 0.0 (expected 5)"."""
    found = (_FAILED_CASE.match(line.strip()) for line in bash_result.splitlines())
    return [f"{m.group(1)} gives {m.group(2)} (expected {m.group(3)})" for m in found if m]


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(
        before.splitlines(keepends=True), after.splitlines(keepends=True), "calc.py", "calc.py", n=2
    )
    return "".join(lines).rstrip("\n")


def _edited(done: list[_Done]) -> bool:
    return any(d.name == "edit_file" and not d.is_error for d in done)


def _refused(done: list[_Done], heard: str) -> ScriptedTurn:
    """The last call was refused (or failed): say what would have happened, and stop."""
    last = done[-1]
    if last.outcome is not ToolOutcome.DENIED:
        first = last.text.splitlines()[0] if last.text else "(no message)"
        return reply(
            f"{heard}{last.name} failed: {first}\nThe scripted demo cannot work around that, "
            f"so it stops here.\n\n{_REAL_MODEL}"
        )
    if last.name == "edit_file":
        said = (
            "You did not allow the edit, so calc.py is unchanged: the diff above is the change "
            "I would have made, and then I would have run the check again."
        )
    elif _edited(done):
        said = (
            "You did not allow the second run of the check. calc.py is fixed all the same: "
            f"{CHECK} in the scratch project shows it."
        )
    else:
        said = (
            f"You did not allow the command, so I stop here. With a yes, I would have run "
            f"{CHECK}, seen mean() fail, fixed calc.py with edit_file (asking you first) and "
            "run the check again."
        )
    return reply(
        f"{heard}{said} That refusal is agentloop's permission check at work: the model is "
        f"told, and nothing runs.\n\n{_REAL_MODEL}"
    )


def _next_turn(request: ModelRequest) -> ScriptedTurn:
    """The model's next turn: the step of the plan that follows the last tool result."""
    done, steering = _this_run(request)
    call_id = _call_id(request)
    heard = ""
    if done and steering:
        quoted = " / ".join(f'"{text}"' for text in steering)
        heard = f"(You wrote {quoted}: a scripted model cannot act on it, so I go on.)\n"
    if not done:
        return reply(
            "This is agentloop's offline demo: I am a scripted model, not a real one, so I do "
            "the same small task whatever you ask: make the check of this scratch project "
            "pass. First, the files.",
            call("list_files", {}, id=call_id),
        )
    last = done[-1]
    if last.is_error:
        return _refused(done, heard)
    if last.name == "list_files":
        listed = set(last.text.splitlines())
        if not {"calc.py", "test_calc.py"} <= listed:
            return reply(
                f"{heard}There is no calc.py and test_calc.py here: this is not the demo's "
                "scratch project, and the scripted demo knows only that one task, so it stops "
                f"here.\n\n{_REAL_MODEL}"
            )
        number = int(call_id.removeprefix("demo_"))
        return reply(
            f"{heard}Two files: the code and its check. I read both at once: calls of one "
            "reply run side by side.",
            call("read_file", {"path": "calc.py"}, id=call_id),
            call("read_file", {"path": "test_calc.py"}, id=f"demo_{number + 1}"),
        )
    if last.name == "read_file":
        return reply(
            f"{heard}calc.py has add() and mean(); the check runs three cases and exits with "
            "status 1 when one fails. Let me run it: a command needs your permission first.",
            call("bash", {"command": CHECK}, id=call_id),
        )
    if last.name == "bash":
        return _after_check(done, heard, call_id)
    if last.name == "edit_file":
        return reply(
            f"{heard}calc.py is edited. Now the check again (it asks again: each command does).",
            call("bash", {"command": CHECK}, id=call_id),
        )
    return reply(f"{heard}That was not in the plan, so the scripted demo stops here.")


def _after_check(done: list[_Done], heard: str, call_id: str) -> ScriptedTurn:
    """After a run of the check: fix what failed, or say it passes."""
    output = done[-1].text
    code = _exit_code(output)
    edited = _edited(done)
    if code == 0 and edited:
        return reply(
            f"{heard}All three cases pass: mean() skipped the first number, and now it does "
            "not.\n\n"
            "That was agentloop at work, with a scripted model in place of a real one. "
            "list_files and read_file ran without asking, since they only read; bash and "
            "edit_file asked you first. Each step reached the screen as an event while it "
            "happened: the tool calls, the command's output line by line, the results, the "
            "run's status. The scratch project stays where the first line says, for you to "
            f"look at.\n\n{_REAL_MODEL}"
        )
    if code == 0:
        return reply(
            f"{heard}The check passes already: calc.py is fixed (an earlier run did it), so "
            f"there is nothing left to do.\n\n{_REAL_MODEL}"
        )
    failures = _failures(output)
    source = next(
        (
            _file_text(d.text)
            for d in done
            if d.name == "read_file" and d.args.get("path") == "calc.py"
        ),
        "",
    )
    if failures and not edited and _BUG in source:
        fixed = source.replace(_BUG, _FIX)
        return reply(
            f"{heard}mean() is wrong: {_and(failures)}. It adds up numbers[1:], which skips "
            "the first number, and then divides by the count of all of them. The fix is one "
            f"line:\n{_diff(source, fixed)}\nChanging a file needs your permission too.",
            call("edit_file", {"path": "calc.py", "old_text": _BUG, "new_text": _FIX}, id=call_id),
        )
    if code == 127:  # the shell's "command not found"
        return reply(
            f"{heard}The check could not run: python3 is not on the PATH (exit code 127). The "
            f"demo needs it, so it stops here.\n\n{_REAL_MODEL}"
        )
    first = output.splitlines()[0] if output else "no output"
    return reply(
        f"{heard}The check did not pass ({first}), and that is not the failure the scripted "
        f"demo knows how to fix, so it stops here.\n\n{_REAL_MODEL}"
    )


_TURNS = 64  # more than a run takes: the turn depends on the conversation, not on its number


def demo_provider(*, paced: bool = True) -> ScriptedProvider:
    """The scripted model of the offline demo; ``paced`` makes it stream like a real one."""
    return ScriptedProvider(
        [_next_turn] * _TURNS,
        delay=0.15 if paced else 0.0,
        delta_delay=0.008 if paced else 0.0,
        model="offline-demo",
    )
