"""The terminal agent (``python -m agentloop``): options, models, rendering, and real runs.

The last tests drive the real program in a real terminal (tmux): typing, Ctrl-C,
steering, and resuming after the process was killed.
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from helpers import in_call_order
from rich.console import Console
from server_common import process_alive

import agentloop as al
from agentloop._cli import App, Renderer, Screen, make_console, parse_args
from agentloop._cli._commands import (
    choose_session,
    error_hint,
    permission_lines,
    session_lines,
    tool_lines,
)
from agentloop._cli._editor import _Above
from agentloop._cli._input import LineReader
from agentloop._cli._models import DEMO_NOTE, ModelError, ScriptEnd, choose_model, load_script
from agentloop._cli._render import summarize_args
from agentloop._cli._setup import SetupError, describe_request, make_permissions, openapi_tools
from agentloop.providers import (
    AnthropicProvider,
    ModelRequest,
    OpenAIProvider,
    OpenAIResponsesProvider,
    RetryConfig,
    call,
    reply,
)
from agentloop.session import (
    INTERRUPTED,
    NOT_RUN_AGAIN,
    SessionInfo,
    SessionRecorder,
    list_sessions,
    load_session,
)
from agentloop.tools import default_tools

DATA = Path(__file__).parent.parent / "data" / "openapi"
MCP_SERVERS = Path(__file__).parent.parent / "mcp_servers.py"
PROMPT = "\u203a"  # the idle prompt, a single right-pointing angle quotation mark
STATUS = re.compile(r"^\[\d+ turns?, \d+ tokens in, \d+ tokens out\]$")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # a colour or an attribute, in captured escapes


# --------------------------------------------------------------------------- helpers


def bash_turn(text: str, command: str, **more: Any) -> dict[str, Any]:
    """A scripted turn: ``text``, then a bash call running ``command``."""
    return {"text": text, "calls": [{"name": "bash", "args": {"command": command}}], **more}


def write_script(path: Path, turns: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps(turns), encoding="utf-8")
    return path


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["AGENTLOOP_HOME"] = str(home)
    env["TMPDIR"] = str(home.parent)  # the offline demo's scratch projects: not in /tmp
    return env


def run_cli(
    *args: str, home: Path, cwd: Path, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """The program as a process, its stdin a pipe with ``input`` (or /dev/null)."""
    return subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        cwd=cwd,
        env=cli_env(home),
        input=input,
        stdin=subprocess.DEVNULL if input is None else None,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def render(*events: al.AgentEvent, console: Console | None = None) -> str:
    """What the events look like on a console (by default: not a terminal, 100 wide)."""
    if console is None:
        console = Console(file=io.StringIO(), force_terminal=False, width=100)
    renderer = Renderer(Screen(console))
    for event in events:
        renderer.show(event)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


L = "run.1"
PARTIAL = al.AssistantMessage((), al.StopReason.STOP)


def update(delta: Any) -> al.MessageUpdate:
    return al.MessageUpdate(loop_id=L, message=PARTIAL, delta=delta)


def assistant(*content: Any, stop: al.StopReason = al.StopReason.STOP, **kw: Any) -> Any:
    return al.AssistantMessage(tuple(content), stop, **kw)


# --------------------------------------------------------------------------- options


def test_no_prompt_is_an_interactive_session_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a prompt: interactive, here, the model chosen by the keys, a new session."""
    monkeypatch.chdir(tmp_path)
    options = parse_args([])
    assert (options.prompt, options.directory, options.model, options.resume) == (
        None,
        tmp_path.resolve(),
        None,
        None,
    )
    assert (options.openapi, options.mcp_config, options.base_url) == ((), None, None)


def test_the_prompt_is_the_words_or_dash_p(tmp_path: Path) -> None:
    """The README's bare words still work; -p says the same; -C picks the directory."""
    assert parse_args(["What", "is", "in", "this", "directory?"]).prompt == (
        "What is in this directory?"
    )
    options = parse_args(["-p", "fix it", "-C", str(tmp_path), "--model", "demo"])
    assert (options.prompt, options.directory, options.model) == ("fix it", tmp_path, "demo")


def test_resume_latest_or_an_id_and_repeatable_openapi() -> None:
    """--resume alone means the latest session; --openapi may be given more than once."""
    assert parse_args(["--resume"]).resume == ""
    assert parse_args(["--resume", "20260101-abc"]).resume == "20260101-abc"
    options = parse_args(["--openapi", "a.yaml", "--openapi", "https://x/o.json"])
    assert options.openapi == ("a.yaml", "https://x/o.json")
    options = parse_args(["--model", "openai:qwen3", "--base-url", "http://localhost:11434/v1"])
    assert (options.model, options.base_url) == ("openai:qwen3", "http://localhost:11434/v1")
    options = parse_args(["--resume", "--any-directory"])
    assert (options.resume, options.any_directory, options.sessions) == ("", True, False)
    options = parse_args(["--sessions"])
    assert (options.resume, options.any_directory, options.sessions) == (None, False, True)


BASE_URL_NEEDS = "--base-url needs --model openai:MODEL (the model's name on that server)"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "a", "b"], "give the prompt once: either -p PROMPT or the words of the prompt"),
        (
            ["-p", " "],
            "the prompt is empty: give the text to run, or no prompt at all for an interactive "
            "session",
        ),
        (["--base-url", "http://h/v1"], BASE_URL_NEEDS),
        (["--model", "anthropic", "--base-url", "http://h/v1"], BASE_URL_NEEDS),
        (
            ["--openapi-base-url", "http://h"],
            "--openapi-base-url needs --openapi URL_OR_FILE (the API's document)",
        ),
        (
            ["--any-directory"],
            "--any-directory goes with --resume or --sessions (it lets them reach the sessions "
            "of other directories)",
        ),
        (["--sessions", "hi"], "--sessions lists the sessions and exits: give it without a prompt"),
        (
            ["--sessions", "--resume"],
            "--sessions lists the sessions and exits: give it without --resume",
        ),
    ],
)
def test_usage_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A contradictory command line is a usage error with a message that says what to do."""
    with pytest.raises(SystemExit) as exit_info:
        parse_args(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"agentloop: error: {message}"


def test_a_directory_that_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """-C with a path that is no directory says so, and what -C wants."""
    with pytest.raises(SystemExit):
        parse_args(["-C", str(tmp_path / "nope")])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"agentloop: error: not a directory: {tmp_path / 'nope'} (give -C an existing "
        "directory to work in)"
    )


# --------------------------------------------------------------------------- models


def test_model_is_chosen_by_the_key_that_is_set() -> None:
    """Without --model: Anthropic's key wins, then OpenAI's, else the offline demo."""
    both = {"ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_API_KEY": "sk-oa-x"}
    choice = choose_model(both)
    assert isinstance(choice.provider, AnthropicProvider)
    assert (choice.label, choice.note, choice.demo) == (
        "anthropic:claude-sonnet-5",
        "agentloop: using Anthropic model claude-sonnet-5.",
        False,
    )
    assert choice.provider.model.resolve_api_key() == "sk-ant-x"
    choice = choose_model({"OPENAI_API_KEY": "sk-oa-x"})
    assert isinstance(choice.provider, OpenAIProvider)
    assert (choice.label, choice.note) == (
        "openai:gpt-5.4",
        "agentloop: using OpenAI model gpt-5.4.",
    )
    choice = choose_model({})
    assert isinstance(choice.provider, ScriptEnd)
    assert (choice.label, choice.note, choice.demo) == ("demo", DEMO_NOTE, True)
    assert DEMO_NOTE == (
        "agentloop: using the offline demo model (no ANTHROPIC_API_KEY or OPENAI_API_KEY set)."
    )


def test_model_named_on_the_command_line() -> None:
    """provider:model picks the model; --api-key-env names the key's variable."""
    env = {"ANTHROPIC_API_KEY": "sk-ant-x", "MY_KEY": "sk-mine", "OPENAI_API_KEY": "sk-oa"}
    choice = choose_model(env, model="anthropic:claude-haiku-4-5")
    assert isinstance(choice.provider, AnthropicProvider)
    assert choice.provider.model.id == "claude-haiku-4-5"
    assert choice.note == "agentloop: using Anthropic model claude-haiku-4-5."
    choice = choose_model(env, model="openai:gpt-5.4-mini", api_key_env="MY_KEY")
    assert isinstance(choice.provider, OpenAIProvider)
    assert (choice.provider.model.id, choice.provider.model.resolve_api_key()) == (
        "gpt-5.4-mini",
        "sk-mine",
    )
    choice = choose_model(env, model="openai-responses")
    assert isinstance(choice.provider, OpenAIResponsesProvider)
    assert (choice.provider.model.id, choice.provider.model.api) == ("gpt-5.4", "openai-responses")
    assert (choice.label, choice.note) == (
        "openai-responses:gpt-5.4",
        "agentloop: using OpenAI model gpt-5.4 (Responses API).",
    )
    choice = choose_model(env, model="demo")
    assert (choice.note, choice.demo) == ("agentloop: using the offline demo model.", True)


def test_an_openai_compatible_server_needs_no_key_unless_one_is_named() -> None:
    """--base-url: a local server gets no key; OPENAI_API_KEY or --api-key-env sends one."""
    choice = choose_model({}, model="openai:qwen3", base_url="http://localhost:11434/v1/")
    assert isinstance(choice.provider, OpenAIProvider)
    model = choice.provider.model
    assert (model.id, model.base_url, model.resolve_api_key()) == (
        "qwen3",
        "http://localhost:11434/v1",
        None,
    )
    assert choice.label == "openai:qwen3@http://localhost:11434/v1"
    assert choice.note == "agentloop: using model qwen3 at http://localhost:11434/v1."
    keyed = choose_model({"OPENAI_API_KEY": "sk-oa"}, model="openai:q", base_url="http://h/v1")
    assert isinstance(keyed.provider, OpenAIProvider)
    assert keyed.provider.model.resolve_api_key() == "sk-oa"
    with pytest.raises(ModelError) as error:
        choose_model({}, model="openai:q", base_url="http://h/v1", api_key_env="ROUTER_KEY")
    assert str(error.value) == (
        "--model openai:q needs an API key: set ROUTER_KEY (or name another variable with "
        "--api-key-env)"
    )


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (
            "gemini:pro",
            "unknown model provider 'gemini' in --model gemini:pro (use anthropic[:MODEL], "
            "openai[:MODEL], openai-responses[:MODEL], demo or scripted:FILE)",
        ),
        (
            "anthropic",
            "--model anthropic needs an API key: set ANTHROPIC_API_KEY (or name another "
            "variable with --api-key-env)",
        ),
        ("scripted", "--model scripted:FILE needs the script's path"),
    ],
)
def test_model_errors(model: str, message: str) -> None:
    """An unknown provider or a missing key is a clear error, before anything runs."""
    with pytest.raises(ModelError) as error:
        choose_model({}, model=model)
    assert str(error.value) == message


def test_a_script_file_becomes_scripted_turns(tmp_path: Path) -> None:
    """thinking, then text, then calls, with the turn's delay."""
    path = write_script(
        tmp_path / "s.json",
        [
            {
                "thinking": "Hmm.",
                "text": "Looking.",
                "calls": [{"name": "bash", "args": {"command": "ls"}}],
            },
            {"text": "Done.", "delay": 0.5},
            {
                "calls": [
                    {"name": "list_files"},
                    {"name": "search", "args": {"pattern": "x"}, "id": "c9"},
                ]
            },
        ],
    )
    assert load_script(path) == [
        reply(al.ThinkingContent("Hmm."), "Looking.", call("bash", {"command": "ls"})),
        reply("Done.", delay=0.5),
        reply(call("list_files"), call("search", {"pattern": "x"}, id="c9")),
    ]


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("[", "is not JSON: Expecting value: line 1 column 2 (char 1)"),
        ('{"text": "x"}', ": expected a list of turns"),
        ('[{"txt": "x"}]', ": turn 1: unknown key 'txt' (a turn has calls, delay, text, thinking)"),
        ('[{"text": 3}]', ": turn 1: 'text' is a string"),
        ('[{}, {"calls": [{"args": {}}]}]', ": turn 2, call 1: a call needs a 'name' string"),
        ('[{"calls": [{"name": "x", "args": [1]}]}]', ": turn 1, call 1: 'args' is an object"),
        ('[{"delay": -1}]', ": turn 1: 'delay' is a number of seconds >= 0"),
    ],
)
def test_a_bad_script_says_where(tmp_path: Path, content: str, problem: str) -> None:
    """A malformed script names the turn and the problem."""
    path = tmp_path / "s.json"
    path.write_text(content)
    with pytest.raises(ModelError) as error:
        load_script(path)
    prefix = f"the script {path} " if problem.startswith("is") else f"the script {path}"
    assert str(error.value) == prefix + problem


def test_a_missing_script_file() -> None:
    """A script that cannot be read says so."""
    with pytest.raises(ModelError) as error:
        choose_model({}, model="scripted:/nonexistent/s.json")
    assert (
        str(error.value) == "cannot read the script /nonexistent/s.json: No such file or directory"
    )


async def test_the_scripted_model_streams_and_says_when_the_script_ends(tmp_path: Path) -> None:
    """Text streams word by word; past the last turn, the run ends with an error saying so."""
    path = write_script(tmp_path / "s.json", [{"text": "One two three."}])
    choice = choose_model({}, model=f"scripted:{path}")
    assert (choice.label, choice.note) == (
        f"scripted:{path}",
        f"agentloop: using the scripted model {path}.",
    )
    agent = al.Agent(choice.provider)
    deltas: list[str] = []
    async with agent.prompt("go") as events:
        async for event in events:
            if isinstance(event, al.MessageUpdate) and isinstance(event.delta, al.TextDelta):
                deltas.append(event.delta.delta)
    assert deltas == ["One ", "two ", "three."]
    messages = await agent.run("more")
    last = messages[-1]
    assert isinstance(last, al.AssistantMessage)
    assert (last.stop_reason, last.error_message) == (
        al.StopReason.ERROR,
        f"the script {path} has no turn left (all 1 played)",
    )


async def test_the_demo_model_starts_its_plan_over_for_each_prompt(tmp_path: Path) -> None:
    """The demo follows its plan again for each prompt, for as long as the session goes on
    (here it stops early each time: the directory is not its scratch project)."""
    (tmp_path / "a.txt").write_text("x\n")
    agent = al.Agent(choose_model({}).provider, tools=default_tools(tmp_path))
    for prompt in ("first", "second", "third"):
        messages = await agent.run(prompt)
        assert [type(m).__name__ for m in messages] == [
            "UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage"
        ]  # fmt: skip
        assert messages[1].text.startswith("This is agentloop's offline demo: ")
        assert messages[-1].text.startswith("There is no calc.py and test_calc.py here: ")
    ids = [c.id for m in agent.messages if isinstance(m, al.AssistantMessage) for c in m.tool_calls]
    assert ids == ["demo_1", "demo_2", "demo_3"]


async def test_the_demo_model_tells_a_refusal_from_a_failure_by_its_outcome() -> None:
    """A tool's own error that reads like the permission check's ("Permission denied: ...")
    is a failure the demo reports, not a refusal by the user: it reads the outcome."""
    provider = choose_model({}).provider

    async def ignore(delta: al.StreamDelta) -> None:
        pass

    async def after(outcome: al.ToolOutcome) -> str:
        edit = al.ToolCall("demo_1", "edit_file", {"path": "calc.py"})
        messages = [
            al.UserMessage.text("fix it"),
            al.AssistantMessage((edit,), al.StopReason.TOOL_USE),
            al.ToolResultMessage(
                "demo_1",
                "edit_file",
                (al.TextContent("Permission denied: calc.py is read-only"),),
                is_error=True,
                outcome=outcome,
            ),
        ]
        request = ModelRequest(system_prompt="", messages=messages)
        return (await provider.stream(request, ignore)).text

    failed = await after(al.ToolOutcome.ERROR)
    assert failed.startswith(
        "edit_file failed: Permission denied: calc.py is read-only\n"
        "The scripted demo cannot work around that, so it stops here."
    )
    refused = await after(al.ToolOutcome.DENIED)
    assert refused.startswith("You did not allow the edit, so calc.py is unchanged")


# --------------------------------------------------------------------------- rendering


def test_streamed_text_thinking_and_retries() -> None:
    """Text and thinking stream inline, each on lines of its own; a retry gets a line."""
    assert render(
        update(al.ThinkingDelta(delta="Let me ")),
        update(al.ThinkingDelta(delta="think.")),
        update(al.TextDelta(delta="Hello ")),
        update(al.TextDelta(delta="world.\nSecond ")),
        update(al.StreamRestart(attempt=2, delay=1.5, error="Anthropic API error 529: Overloaded")),
        update(al.TextDelta(delta="Hi.")),
    ) == (
        "Let me think.\n"
        "Hello world.\nSecond \n"
        "  ↻ Anthropic API error 529: Overloaded; retrying in 1.5s (attempt 2)\n"
        "Hi."
    )


def test_retry_lines_say_the_error_once_with_rounded_waits() -> None:
    """The error on the first retry line of a call, "same error" after; waits to 0.1 s."""
    console = Console(file=io.StringIO(), force_terminal=False, width=100)
    renderer = Renderer(Screen(console), max_attempts=4)
    refused = "cannot connect to 127.0.0.1:9: connection refused"
    for attempt, delay, error in [
        (2, 1.04, refused),
        (3, 1.9837, refused),
        (4, 4.25, "OpenAI API error 503: busy"),
        (2, 0.04, refused),  # the next model call: said again
    ]:
        renderer.show(update(al.StreamRestart(attempt=attempt, delay=delay, error=error)))
    assert isinstance(console.file, io.StringIO)
    assert console.file.getvalue().splitlines() == [
        f"  ↻ {refused}; retrying in 1s (attempt 2 of 4)",
        "  ↻ same error; retrying in 2s (attempt 3 of 4)",
        "  ↻ OpenAI API error 503: busy; retrying in 4.2s (attempt 4 of 4)",
        f"  ↻ {refused}; retrying in 0s (attempt 2 of 4)",
    ]


def test_tool_calls_progress_output_and_results() -> None:
    """A call with its arguments, progress, output as it comes, and ✓/✗ with the first line."""
    output = render(
        update(al.TextDelta(delta="Let me look.")),
        al.ToolExecutionStart(
            loop_id=L, tool_call_id="c1", tool_name="bash", args={"command": "ls -la"}
        ),
        al.ProgressMessage(loop_id=L, tool_call_id="c1", tool_name="bash", text="started"),
        al.ToolExecutionUpdate(
            loop_id=L, tool_call_id="c1", tool_name="bash",
            partial_result=al.ToolResult.text("a\nb", details={"stream": "stdout"}),
        ),
        al.ToolExecutionUpdate(
            loop_id=L, tool_call_id="c1", tool_name="bash",
            partial_result=al.ToolResult.text("c\nd", details={"stream": "stdout"}),
        ),
        al.ToolExecutionUpdate(
            loop_id=L, tool_call_id="c1", tool_name="bash",
            partial_result=al.ToolResult.text("warning\n", details={"stream": "stderr"}),
        ),
        al.ToolExecutionEnd(
            loop_id=L, tool_call_id="c1", tool_name="bash",
            result=al.ToolResult.text("Exit code: 0\na\nbc\nd"), is_error=False,
        ),
        al.ToolExecutionUpdate(
            loop_id=L, tool_call_id="c2", tool_name="count_lines",
            partial_result=al.ToolResult.text("notes.md: 2 lines", details={"done": 1}),
        ),
        al.ToolExecutionEnd(
            loop_id=L, tool_call_id="c3", tool_name="read_file",
            result=al.ToolResult.text("File not found: x.py"), is_error=True,
        ),
        al.ToolExecutionStart(
            loop_id=L, tool_call_id="c4", tool_name="write_file",
            args={"path": "notes/today.md", "content": "x" * 80},
        ),
    )  # fmt: skip
    assert output.splitlines() == [
        "Let me look.",
        '→ bash(command="ls -la")',
        "  … started",
        "  │ a",
        "  │ bc",
        "  │ d",
        "  │ warning",
        "✓ bash: Exit code: 0 (+3 lines)",
        "  · notes.md: 2 lines",
        "✗ read_file: File not found: x.py",
        f'→ write_file(path="notes/today.md", content="{"x" * 27}…)',
    ]


def test_calls_waiting_for_the_schedule_say_so() -> None:
    """ToolCallQueued says what the call waits for; ToolCallDequeued how long it waited."""
    output = render(
        al.ToolCallQueued(
            loop_id=L, tool_call_id="c2", tool_name="write_file",
            reason="waiting for write_file (c1): both use /w/a.md",
        ),
        al.ToolCallDequeued(loop_id=L, tool_call_id="c2", tool_name="write_file", waited=1.5),
    )  # fmt: skip
    assert output.splitlines() == [
        "  ⏸ write_file is waiting for write_file (c1): both use /w/a.md",
        "  ▶ write_file starts (waited 1.5s)",
    ]


def test_errors_stops_queued_messages_and_context_events() -> None:
    """Model errors in red, a stopped run, steering the loop took, compaction and pruning."""
    prompt = al.UserMessage.text("start")
    steering = al.UserMessage.text("also check y")
    assert render(
        al.AgentStart(loop_id=L),
        al.MessageStart(loop_id=L, message=prompt),
        al.MessageEnd(loop_id=L, message=prompt),
        al.MessageStart(loop_id=L, message=PARTIAL),
        al.MessageEnd(loop_id=L, message=steering),
        al.MessageEnd(
            loop_id=L,
            message=assistant(stop=al.StopReason.ERROR, error_message="OpenAI API error 500"),
        ),
        al.MessageEnd(loop_id=L, message=assistant(stop=al.StopReason.ABORTED)),
        al.CompactionStarted(
            loop_id=L, estimated_tokens=190_000, message_count=40, context_window=200_000
        ),
        al.CompactionEnded(
            loop_id=L, record=al.CompactionRecord(), messages_before=40, messages_after=12,
            estimated_tokens_before=190_000, estimated_tokens_after=30_000,
        ),
        al.PrunApplied(
            loop_id=L,
            record=al.PrunRecord(pruned_timestamps=(1, 2), tokens_removed=9),
            messages_removed=2,
        ),
    ).splitlines() == [
        "↪ also check y",
        "error: OpenAI API error 500",
        "stopped",
        "  ⋯ compacting the context (190000 of 200000 tokens)",
        "  ⋯ compacted: 40 messages → 12",
        "  ⋯ pruned 2 messages from the context",
    ]  # fmt: skip


def test_status_line_counts_turns_tokens_and_cost() -> None:
    """After each run: turns, tokens in and out, and the cost when the prices are known."""
    one = (al.UserMessage.text("hi"), assistant(al.TextContent("Hello")))
    two = (*one, assistant(al.TextContent("More")))
    assert render(
        al.AgentEnd(loop_id=L, messages=one, usage=al.Usage(input=12, output=3)),
        al.AgentEnd(loop_id=L, messages=two, usage=al.Usage(input=1200, output=80, cost=0.0031)),
    ).splitlines() == [
        "[1 turn, 12 tokens in, 3 tokens out]",
        "[2 turns, 1200 tokens in, 80 tokens out, $0.0031]",
    ]


def test_model_text_is_never_markup_and_plain_off_a_terminal() -> None:
    """[bold] and :emoji: in model text print as they are; no ANSI codes off a terminal."""
    out = io.StringIO()
    console = make_console(out)
    text = "[bold]x[/bold] :smile: " + "long " * 40
    assert render(update(al.TextDelta(delta=text)), console=console) == text
    Screen(console).error("error: boom")
    assert "\x1b" not in out.getvalue()
    colour = io.StringIO()
    render(
        update(al.ThinkingDelta(delta="hmm")),
        console=Console(file=colour, force_terminal=True, color_system="standard"),
    )
    assert colour.getvalue() == "\x1b[2;3mhmm\x1b[0m"


def test_argument_summaries_are_json_and_cut() -> None:
    """Arguments show as key=<JSON>; past the limit they are cut with an ellipsis."""
    assert summarize_args({"paths": ["a.md", "b é.py"], "n": 3}) == 'paths=["a.md", "b é.py"], n=3'
    assert summarize_args({"command": "x" * 70}, limit=20) == 'command="xxxxxxxxxx…'


# --------------------------------------------------------------------------- commands, policy


def test_tool_and_permission_listings(tmp_path: Path) -> None:
    """/tools: each name and the first line of its description; /permissions: the rules."""
    policy = make_permissions(lambda request: False)
    assert tool_lines(default_tools(tmp_path))[-2:] == [
        "  list_files  List the files under a directory of the working directory, recursively "
        "(5 level…",
        "  search      Search file contents for a regular expression (case-insensitive unless "
        "case_sen…",
    ]
    assert tool_lines([]) == ["The agent has no tools."]
    assert permission_lines(policy) == [
        "  allow: read_file, list_files, search",
        "  ask:   bash, write_file, edit_file",
        "  deny:  (none)",
        "  any other tool: ask",
        "Asked calls wait for your answer: y runs the call; anything else refuses it.",
    ]
    assert policy.decide("read_file", ("path", "a"))[0] == "allow"
    assert policy.decide("bash", ("command", "ls"))[0] == "ask"
    assert policy.decide("mcp__github__create_issue", None)[0] == "ask"


def test_permission_questions_name_the_call() -> None:
    """The question shows the call's subject, or its arguments."""

    def request(name: str, subject: tuple[str, str] | None) -> al.PermissionRequest:
        return al.PermissionRequest(
            tool_name=name, tool_call_id="c", arguments={"q": 1}, subject=subject, rule=None
        )

    assert describe_request(request("bash", ("command", "rm -r build"))) == "bash(rm -r build)"
    assert describe_request(request("write_file", ("path", "a/b.md"))) == "write_file(a/b.md)"
    assert describe_request(request("api__search", None)) == "api__search(q=1)"


def test_session_listing(tmp_path: Path) -> None:
    """/sessions: this directory's sessions (id, time, messages, title), the current one
    marked, and how many others there are; with --any-directory, all, by directory."""
    import datetime

    when = datetime.datetime(2026, 3, 4, 5, 6, tzinfo=datetime.UTC)
    local = when.astimezone().strftime("%Y-%m-%d %H:%M")
    here, there = tmp_path / "here", tmp_path / "there"
    infos = [
        SessionInfo("s4", tmp_path / "s4.jsonl", when, "Elsewhere", 2, there),
        SessionInfo("s3", tmp_path / "s3.jsonl", when, "Old", 3),  # no directory recorded
        SessionInfo("s2", tmp_path / "s2.jsonl", when, "Fix the tests", 12, here),
        SessionInfo("s1", tmp_path / "s1.jsonl", when, "Hello", 1, here),
    ]
    assert session_lines(infos, tmp_path / "s1.jsonl", here=here) == [
        f"  s2  {local}   12 messages  Fix the tests",
        f"  s1  {local}     1 message  Hello (this one)",
        "(2 more sessions in other directories: add --any-directory to list them)",
    ]
    assert session_lines(infos, None, here=here, any_directory=True) == [
        f"In {here} (this directory):",
        f"  s2  {local}   12 messages  Fix the tests",
        f"  s1  {local}     1 message  Hello",
        f"In {there}:",
        f"  s4  {local}    2 messages  Elsewhere",
        "In an unknown directory (recorded by an older agentloop):",
        f"  s3  {local}    3 messages  Old",
    ]
    assert session_lines(infos[:1], None, here=here) == [
        f"No saved sessions in {here} yet.",
        "(1 more session in other directories: add --any-directory to list them)",
    ]
    assert session_lines([], None, here=here) == [f"No saved sessions in {here} yet."]
    assert session_lines([], None, here=here, any_directory=True) == ["No saved sessions yet."]


def test_choosing_the_session_to_resume(tmp_path: Path) -> None:
    """This directory's sessions only, unless --any-directory; each refusal says what to do."""
    import datetime

    when = datetime.datetime(2026, 3, 4, 5, 6, tzinfo=datetime.UTC)
    here, there = tmp_path / "here", tmp_path / "the re"
    infos = [
        SessionInfo("a-new", tmp_path / "1", when, "", 2, there),
        SessionInfo("a-old", tmp_path / "2", when, "", 2, there),
        SessionInfo("b-old", tmp_path / "3", when, "", 2),
        SessionInfo("c-mine", tmp_path / "4", when, "", 2, here),
        SessionInfo("c-two", tmp_path / "5", when, "", 2, here),
    ]

    def choose(session_id: str, any_directory: bool = False, found: Any = infos) -> str:
        return choose_session(
            found, session_id, here=here, any_directory=any_directory, listing="/sessions"
        ).session_id

    def refusal(session_id: str, any_directory: bool = False, found: Any = infos) -> str:
        with pytest.raises(LookupError) as error:
            choose(session_id, any_directory, found)
        return str(error.value)

    assert (choose(""), choose("", any_directory=True)) == ("c-mine", "a-new")
    assert (choose("c-t"), choose("a-new", any_directory=True)) == ("c-two", "a-new")
    assert choose("b", any_directory=True) == "b-old"
    assert refusal("a-new") == (
        f"session a-new belongs to {there}, not {here}: continue it there "
        f"(cd '{there}' && agentloop --resume a-new), or add --any-directory to continue it "
        f"in {here}"
    )
    assert refusal("b") == (
        "session b-old does not say which directory it belongs to (it was recorded by an "
        f"older agentloop): add --any-directory to continue it in {here}"
    )
    assert refusal("a") == (
        f"no session of {here} starts with 'a', but 2 sessions of other directories do: add "
        "--any-directory and more of the id (/sessions --any-directory lists them)"
    )
    assert refusal("c") == "several sessions start with 'c': c-mine, c-two (give more of the id)"
    assert refusal("zz") == (
        f"no saved session 'zz' (/sessions lists the sessions of {here}; add --any-directory "
        "for every directory)"
    )
    assert refusal("", found=infos[:3]) == (
        f"there is no saved session of {here} to resume: run agentloop without --resume to "
        "start one (/sessions --any-directory lists the sessions of other directories)"
    )
    assert refusal("", found=[]) == (
        f"there is no saved session of {here} to resume: run agentloop without --resume to "
        "start one"
    )


@pytest.mark.parametrize(
    ("message", "options", "hint"),
    [
        (
            "cannot connect to 127.0.0.1:9: connection refused (gave up after 3 retries)",
            {"provider": "openai", "base_url": "http://127.0.0.1:9/v1"},
            "Is the server at http://127.0.0.1:9/v1 running? Start it, or check --base-url.",
        ),
        (
            "cannot connect to api.anthropic.com: unknown host (gave up after 3 retries)",
            {"provider": "anthropic"},
            "Check your network connection (and any proxy settings), then try again.",
        ),
        (
            "Anthropic API error 401 (authentication_error): invalid x-api-key",
            {"provider": "anthropic"},
            "Check the API key in ANTHROPIC_API_KEY (or name another variable with --api-key-env).",
        ),
        (
            "OpenAI API error 403: forbidden",
            {"provider": "openai", "api_key_env": "MY_KEY"},
            "Check the API key in MY_KEY.",
        ),
        (
            "openai-compatible (h) API error 401: no key",
            {"provider": "openai", "base_url": "http://h/v1"},
            "If the server needs an API key, set OPENAI_API_KEY or name its variable with "
            "--api-key-env.",
        ),
        (
            "openai-compatible (h) API error 404: not found",
            {"provider": "openai", "base_url": "http://h"},
            "Check the model's name on that server (--model openai:NAME) and --base-url (it "
            "often ends in /v1).",
        ),
        (
            "OpenAI API error 404 (model_not_found): no such model",
            {"provider": "openai-responses"},
            "Check the model's name in --model openai-responses:MODEL.",
        ),
        (
            "OpenAI API error 429 (insufficient_quota): You exceeded your current quota",
            {"provider": "openai"},
            "The account has no credit left: check its plan and billing.",
        ),
        (
            "Anthropic API error 529 (overloaded_error): Overloaded (gave up after 3 retries)",
            {"provider": "anthropic"},
            "The API kept failing; try again in a while.",
        ),
        ("Anthropic API error 400: bad", {"provider": "anthropic"}, None),
        ("the script s.json has no turn left (all 0 played)", {"provider": "scripted"}, None),
    ],
)
def test_a_model_error_says_what_to_do(message: str, options: Any, hint: str | None) -> None:
    """After a model error, a line on what to check, in the words of the options given."""
    assert error_hint(message, **options) == hint


async def test_openapi_documents_from_files_and_urls(tmp_path: Path) -> None:
    """A file gives its operations; a URL is fetched; failures name the document."""
    from openapi_fixtures import serve_openapi_echo

    tools = await openapi_tools([str(DATA / "petstore-3.0.yaml")], "http://pets.example/v3")
    assert [tool.name for tool in tools][:2] == ["updatePet", "addPet"]
    with pytest.raises(SetupError) as error:
        await openapi_tools([str(DATA / "petstore-3.0.yaml")], None)
    assert str(error.value) == (
        f"--openapi {DATA / 'petstore-3.0.yaml'}: {DATA / 'petstore-3.0.yaml'}: the server URL "
        "'/api/v3' is relative and the document was not loaded from a URL; give "
        "OpenApiConfig(base_url=...) (--openapi-base-url URL gives it)"
    )
    with pytest.raises(SetupError) as error:
        await openapi_tools([str(tmp_path / "none.yaml")], None)
    assert str(error.value) == f"--openapi {tmp_path / 'none.yaml'}: No such file or directory"
    async with serve_openapi_echo() as base:
        with pytest.raises(SetupError) as error:
            await openapi_tools([f"{base}/status/404"], None)
    assert (
        str(error.value) == f"--openapi {base}/status/404: cannot fetch {base}/status/404: HTTP 404"
    )


# --------------------------------------------------------------------------- input


async def test_line_reader_splits_lines_across_reads_and_ends_with_none() -> None:
    """Lines come whole, decoded across chunk boundaries; then None, and None again."""
    read_fd, write_fd = os.pipe()
    try:
        async with trio.open_nursery() as nursery:
            reader = LineReader(nursery, read_fd)
            os.write(write_fd, b"one\r\ntw")
            assert await reader.readline() == "one"
            os.write(write_fd, b"o caf\xc3")
            os.write(write_fd, b"\xa9\nlast")
            assert await reader.readline() == "two café"
            os.close(write_fd)
            write_fd = -1
            assert await reader.readline() == "last"
            assert await reader.readline() is None
            assert await reader.readline() is None
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)


def test_output_above_the_prompt_is_whole_lines_and_rows() -> None:
    """Under the line editor, output waits as whole lines; an unfinished line that grows
    taller than the rows it may take gives up its first rows, cut where the terminal
    would wrap them (wide characters take two columns), its colour going on after."""
    woken: list[bool] = []
    out = io.StringIO()
    above = _Above(out, lambda: woken.append(True))
    above.write("one\ntw")
    above.write("o\nthr")
    assert (above.take(10, 2), above.partial, len(woken)) == ("one\ntwo\n", "thr", 2)
    above.write("ee " + "x" * 30)
    assert above.take(10, 2) == "three " + "x" * 14 + "\n"  # two rows of ten
    assert above.partial == "x" * 16
    above.partial = ""
    above.write("\x1b[2m" + "界" * 12 + "\x1b[0m")  # 24 columns: 5, 5, then 2 a row
    assert above.take(10, 2) == "\x1b[2m" + "界" * 10 + "\x1b[0m\n"
    assert above.partial == "\x1b[2m界界\x1b[0m"
    above.go_direct()
    above.write("and on\n")
    assert (out.getvalue(), above.take(10, 2)) == ("\x1b[2m界界\x1b[0mand on\n", "")


# --------------------------------------------------------------------------- the program, piped


ECHO_HI = [
    bash_turn("Let me run it.", "echo hi", thinking="The user wants hi."),
    {"text": "The command printed hi."},
]


def test_piped_session_asks_runs_and_records(tmp_path: Path) -> None:
    """Piped lines are prompts, answers and commands, in order; the session is recorded."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    script = write_script(tmp_path / "s.json", ECHO_HI)
    result = run_cli(
        "--model", f"scripted:{script}", "-C", str(work), home=home, cwd=tmp_path,
        input="hello\ny\n/save\n",
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    [session] = list_sessions(home / "sessions")
    lines = result.stdout.splitlines()
    assert lines[:12] == [
        f"agentloop: using the scripted model {script}.",
        "Type a prompt; /help lists the commands. Ctrl-C stops a run; Ctrl-D quits.",
        "",
        f"{PROMPT} hello",
        "The user wants hi.",
        "Let me run it.",
        "Allow bash(echo hi)? [y/N] y",
        '→ bash(command="echo hi")',
        "  │ hi",
        "✓ bash: Exit code: 0 (+1 lines)",
        "The command printed hi.",
        lines[11],
    ]
    assert STATUS.match(lines[11])
    assert lines[11].startswith("[2 turns, ")
    assert lines[12:] == [
        f"{PROMPT} /save",
        f"This session is saved as it goes, in {session.path} (id {session.session_id}).",
        f"{PROMPT} ",
        f"agentloop: session saved in {session.path} "  # -C: run from elsewhere, it says so
        f"(continue it with: agentloop -C {work} --resume {session.session_id})",
    ]
    loaded = load_session(session.path)
    assert loaded.meta == {"cwd": str(work), "model": f"scripted:{script}"}
    assert [type(m).__name__ for m in loaded.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]
    assert (session.title, session.messages) == ("hello", 4)


def test_one_shot_refuses_asked_calls_without_input(tmp_path: Path) -> None:
    """-p with nothing to read: the asked call is refused, the model hears why, exit 0;
    the run on stderr, the answer alone on stdout."""
    script = write_script(tmp_path / "s.json", ECHO_HI)
    result = run_cli(
        "--model", f"scripted:{script}", "-p", "hello", home=tmp_path / "h", cwd=tmp_path
    )
    assert (result.returncode, result.stdout) == (0, "The command printed hi.\n")
    lines = result.stderr.splitlines()
    assert lines[:9] == [
        f"agentloop: using the scripted model {script}.",
        "",
        "The user wants hi.",
        "Let me run it.",
        "Allow bash(echo hi)? [y/N] ",
        "  not allowed (no more input)",
        '→ bash(command="echo hi")',
        "✗ bash: Permission denied: bash 'echo hi' was not approved",
        "The command printed hi.",
    ]
    assert STATUS.match(lines[9])
    assert len(lines) == 10


def test_one_shot_exits_1_when_the_model_fails(tmp_path: Path) -> None:
    """A run that ends in a model error exits with status 1, the error in the output."""
    script = write_script(tmp_path / "s.json", [])
    result = run_cli("--model", f"scripted:{script}", "go", home=tmp_path / "h", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (1, "")  # no answer
    assert result.stderr.splitlines()[2:] == [
        f"error: the script {script} has no turn left (all 0 played)",
        "[1 turn, 0 tokens in, 0 tokens out]",
    ]


def test_resume_continues_the_latest_session_in_the_same_file(tmp_path: Path) -> None:
    """--resume loads the latest session, says how much it restored, and records on in it."""
    home = tmp_path / "home"
    first = write_script(tmp_path / "1.json", [{"text": "One."}])
    second = write_script(tmp_path / "2.json", [{"text": "Two."}])
    assert (
        run_cli("--model", f"scripted:{first}", "-p", "first", home=home, cwd=tmp_path).returncode
        == 0
    )
    [session] = list_sessions(home / "sessions")
    result = run_cli(
        "--model", f"scripted:{second}", "--resume", "-p", "second", home=home, cwd=tmp_path
    )
    assert (result.returncode, result.stdout) == (0, "Two.\n")
    assert result.stderr.splitlines()[:4] == [
        f"agentloop: using the scripted model {second}.",
        f"agentloop: resumed session {session.session_id}: 2 messages restored.",
        "",
        "Two.",
    ]
    [after] = list_sessions(home / "sessions")
    assert after.path == session.path
    assert [m.text for m in load_session(after.path).messages] == [
        "first",
        "One.",
        "second",
        "Two.",
    ]


def test_resume_in_the_session_and_errors(tmp_path: Path) -> None:
    """/sessions and /resume ID in a session; a session that is not there is an error."""
    home, here = tmp_path / "home", tmp_path.resolve()
    script = write_script(tmp_path / "1.json", [{"text": "One."}, {"text": "Again."}])
    run_cli("--model", f"scripted:{script}", "-p", "first", home=home, cwd=tmp_path)
    [session] = list_sessions(home / "sessions")
    result = run_cli(
        "--model", f"scripted:{script}", home=home, cwd=tmp_path,
        input=f"/resume nope\n/resume {session.session_id}\n/resume\n/sessions all\n",
    )  # fmt: skip
    assert result.returncode == 0
    assert result.stdout.splitlines()[3:11] == [
        f"{PROMPT} /resume nope",
        f"agentloop: no saved session 'nope' (/sessions lists the sessions of {here}; add "
        "--any-directory for every directory)",
        f"{PROMPT} /resume {session.session_id}",
        f"agentloop: resumed session {session.session_id}: 2 messages restored.",
        f"{PROMPT} /resume",
        "usage: /resume ID [--any-directory] (/sessions lists them)",
        f"{PROMPT} /sessions all",
        "usage: /sessions [--any-directory]",
    ]
    missing = run_cli("--resume", "nope", home=home, cwd=tmp_path)
    assert (missing.returncode, missing.stderr) == (
        2,
        f"agentloop: no saved session 'nope' (agentloop --sessions lists the sessions of "
        f"{here}; add --any-directory for every directory)\n",
    )
    empty = run_cli("--resume", home=tmp_path / "empty", cwd=tmp_path)
    assert (empty.returncode, empty.stderr) == (
        2,
        f"agentloop: there is no saved session of {here} to resume: run agentloop without "
        "--resume to start one\n",
    )


def old_session(folder: Path, session_id: str, prompt: str) -> None:
    """A session file as older versions wrote them: no directory in its header."""
    with SessionRecorder(folder / f"{session_id}.jsonl", meta={"model": "x"}) as rec:
        rec.record(al.MessageEnd(loop_id="run.1", message=al.UserMessage.text(prompt)))


def listed(info: SessionInfo) -> str:
    """The line --sessions and /sessions show for ``info``."""
    when = info.modified.astimezone().strftime("%Y-%m-%d %H:%M")
    count = f"{info.messages} message{'' if info.messages == 1 else 's'}"
    return f"  {info.session_id}  {when}  {count:>12}  {info.title}"


def test_sessions_belong_to_the_directory_they_were_started_in(tmp_path: Path) -> None:
    """--sessions and --resume see this directory's sessions; --any-directory reaches the
    others (and older ones that do not say), and the program says whose they were."""
    home, a, b = tmp_path / "home", tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    script = write_script(tmp_path / "1.json", [{"text": "One."}])
    assert run_cli("--model", f"scripted:{script}", "-p", "in a", home=home, cwd=a).returncode == 0
    [started] = list_sessions(home / "sessions")
    sid = started.session_id
    old_session(home / "sessions", "20200101-000000-0ld0ff", "from long ago")
    os.utime(home / "sessions" / "20200101-000000-0ld0ff.jsonl", (1, 1))
    infos = {info.session_id: info for info in list_sessions(home / "sessions")}
    assert infos[sid].cwd == a
    assert infos["20200101-000000-0ld0ff"].cwd is None

    def cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, home=home, cwd=b, input=input)

    assert cli("--sessions").stdout.splitlines() == [
        f"No saved sessions in {b} yet.",
        "(2 more sessions in other directories: add --any-directory to list them)",
    ]
    assert cli("--sessions", "--any-directory").stdout.splitlines() == [
        f"In {a}:",
        listed(infos[sid]),
        "In an unknown directory (recorded by an older agentloop):",
        listed(infos["20200101-000000-0ld0ff"]),
    ]
    refusals = [cli("--resume", *more) for more in ([], [sid], [sid[:10]], ["2020"])]
    assert [(r.returncode, r.stdout, r.stderr) for r in refusals] == [
        (
            2,
            DEMO_NOTE + "\n",
            f"agentloop: there is no saved session of {b} to resume: run agentloop without "
            "--resume to start one (agentloop --sessions --any-directory lists the sessions of "
            "other directories)\n",
        ),
        *[
            (
                2,
                DEMO_NOTE + "\n",
                f"agentloop: session {sid} belongs to {a}, not {b}: continue it there "
                f"(cd {a} && agentloop --resume {sid}), or add --any-directory to continue it "
                f"in {b}\n",
            )
        ]
        * 2,
        (
            2,
            DEMO_NOTE + "\n",
            "agentloop: session 20200101-000000-0ld0ff does not say which directory it belongs "
            "to (it was recorded by an older agentloop): add --any-directory to continue it in "
            f"{b}\n",
        ),
    ]

    second = write_script(tmp_path / "2.json", [{"text": "Here in b."}])
    resumed = cli("--model", f"scripted:{second}", "--resume", sid, "--any-directory", "-p", "go")
    assert (resumed.returncode, resumed.stdout) == (0, "Here in b.\n")
    assert resumed.stderr.splitlines()[:4] == [
        f"agentloop: using the scripted model {second}.",
        f"agentloop: resumed session {sid} of {a}: 2 messages restored; the agent works in {b}.",
        "",
        "Here in b.",
    ]
    old = cli("--model", f"scripted:{second}", "--resume", "2020", "--any-directory", input="")
    assert old.stdout.splitlines()[1] == (
        "agentloop: resumed session 20200101-000000-0ld0ff of an unknown directory: 1 message "
        f"restored; the agent works in {b}."
    )

    # In a session: /sessions, /resume; the way back names the flag.
    piped = cli(
        "--model", f"scripted:{second}",
        input=f"/sessions\n/resume {sid}\n/resume --any-directory {sid}\n",
    )  # fmt: skip
    [session_file] = [info.path for info in list_sessions(home / "sessions") if info.cwd == a]
    assert piped.stdout.splitlines()[3:] == [
        f"{PROMPT} /sessions",
        f"No saved sessions in {b} yet.",
        "(2 more sessions in other directories: add --any-directory to list them)",
        f"{PROMPT} /resume {sid}",
        f"agentloop: session {sid} belongs to {a}, not {b}: continue it there (cd {a} && "
        f"agentloop --resume {sid}), or add --any-directory to continue it in {b}",
        f"{PROMPT} /resume --any-directory {sid}",
        f"agentloop: resumed session {sid} of {a}: 4 messages restored; the agent works in {b}.",
        f"{PROMPT} ",
        f"agentloop: session saved in {session_file} "
        f"(continue it with: agentloop --resume {sid} --any-directory)",
    ]
    # The session stays of the directory it was started in.
    back = run_cli("--model", f"scripted:{second}", "--resume", "-p", "hi", home=home, cwd=a)
    assert back.stderr.splitlines()[1] == f"agentloop: resumed session {sid}: 4 messages restored."


def dead_port() -> int:
    """A port on 127.0.0.1 that nothing listens on: bound, then closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_server_that_is_not_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--base-url of a dead port: said once, waits rounded, then what to do (real sockets)."""
    monkeypatch.setenv("AGENTLOOP_HOME", str(tmp_path / "home"))
    url = f"http://127.0.0.1:{dead_port()}/v1"
    options = parse_args(["--model", "openai:x", "--base-url", url, "-C", str(tmp_path), "hi"])
    choice = choose_model({}, model=options.model, base_url=options.base_url)
    assert isinstance(choice.provider, OpenAIProvider)
    # The program's own retries, with exact waits of 0.04, 0.08 and 0.16 s.
    choice.provider.retry = RetryConfig(initial_delay=0.04, jitter=0)
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    stderr = io.StringIO()
    code = await App(options, choice, Screen(console), stderr=stderr).run()
    assert (code, stderr.getvalue()) == (1, "")
    where = url.removeprefix("http://").removesuffix("/v1")
    assert console.file.getvalue().splitlines() == [  # type: ignore[attr-defined]
        f"agentloop: using model x at {url}.",
        "",
        f"  ↻ cannot connect to {where}: connection refused; retrying in 0s (attempt 2 of 4)",
        "  ↻ same error; retrying in 0.1s (attempt 3 of 4)",
        "  ↻ same error; retrying in 0.2s (attempt 4 of 4)",
        f"error: cannot connect to {where}: connection refused (gave up after 3 retries)",
        f"  Is the server at {url} running? Start it, or check --base-url.",
        "[1 turn, 0 tokens in, 0 tokens out]",
    ]


def test_mcp_servers_tools_and_the_ones_that_fail(tmp_path: Path) -> None:
    """--mcp-config: a real stdio server's tools are added; a server that fails is named."""
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "t": {"command": sys.executable, "args": [str(MCP_SERVERS), "stdio"]},
                    "gone": {"command": str(tmp_path / "no-such-server")},
                }
            }
        )
    )
    script = write_script(tmp_path / "s.json", [])
    result = run_cli(
        "--model", f"scripted:{script}", "--mcp-config", str(config), home=tmp_path / "h",
        cwd=tmp_path, input="/tools\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"agentloop: using the scripted model {script}."
    assert lines[1].startswith("agentloop: MCP server 'gone' is left out: ")
    assert "  t__echo " in result.stdout
    assert "  read_file " in result.stdout


def test_mcp_config_without_the_sdk(tmp_path: Path) -> None:
    """Without the mcp package, --mcp-config says what to install."""
    code = (
        "import sys; sys.modules['mcp'] = None; from agentloop._cli import main; "
        f"sys.exit(main(['--model', 'demo', '--mcp-config', {str(tmp_path / 'x.json')!r}, 'hi']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=cli_env(tmp_path), capture_output=True,
        text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines()[-1] == (
        "agentloop: --mcp-config: agentloop.mcp needs the MCP SDK, which is not installed: "
        "pip install 'agentloop[mcp]' (or: pip install 'mcp>=2.3')"
    )


def test_openapi_tools_on_the_command_line(tmp_path: Path) -> None:
    """--openapi adds the operations; a document that cannot be used stops with status 2."""
    result = run_cli(
        "--model", "demo", "--openapi", str(DATA / "petstore-3.0.yaml"),
        "--openapi-base-url", "http://pets.example/v3",
        home=tmp_path, cwd=tmp_path, input="/tools\n",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "  addPet " in result.stdout
    failed = run_cli(
        "--model", "demo", "--openapi", "missing.yaml", "hi", home=tmp_path, cwd=tmp_path
    )
    assert (failed.returncode, failed.stdout) == (2, "")
    assert failed.stderr.splitlines()[-1] == (
        "agentloop: --openapi missing.yaml: No such file or directory"
    )


# --------------------------------------------------------------------------- a real terminal


class Terminal:
    """The program in a tmux pane of its own server: type, read the screen, wait."""

    def __init__(self) -> None:
        self.socket = f"agentloop-test-{uuid.uuid4().hex[:12]}"
        self.bar: str | None = None  # the toolbar below the prompt, at the last look

    def tmux(self, *args: str, check: bool = True) -> str:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True, text=True, timeout=10, check=check,
        ).stdout  # fmt: skip

    def start(self, args: list[str], *, cwd: Path, home: Path, keep: bool = True) -> None:
        """Run agentloop in a 120x40 pane; with ``keep``, the pane shows its exit status."""
        command = shlex.join(
            ["env", "-u", "ANTHROPIC_API_KEY", "-u", "OPENAI_API_KEY", f"AGENTLOOP_HOME={home}",
             sys.executable, "-m", "agentloop", *args]
        )  # fmt: skip
        shell = f"cd {shlex.quote(str(cwd))} && "
        shell += f'{command}; echo "[exited $?]"; exec sleep 600' if keep else f"exec {command}"
        self.tmux("new-session", "-d", "-x", "120", "-y", "40", "-s", "t", shell)

    def pid(self) -> int:
        return int(self.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())

    def send(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "t", *keys)

    def type(self, line: str) -> None:
        self.send("-l", line)
        self.send("Enter")

    def lines(self) -> list[str]:
        """The pane's lines (the scrollback too), without the line editor's toolbar.

        The toolbar (the row in reverse video below the prompt) is kept in :attr:`bar`.
        """
        text = self.tmux("capture-pane", "-p", "-e", "-J", "-S", "-", "-t", "t", check=False)
        lines, self.bar = [], None
        for row in text.splitlines():
            plain = SGR.sub("", row).rstrip()
            leading = re.match(r"(?:\x1b\[[0-9;]*m)*", row)
            codes = SGR.findall(leading.group() if leading else "")
            if any("7" in code[2:-1].split(";") for code in codes):  # reverse video
                self.bar = plain.strip()
            else:
                lines.append(plain)
        while lines and not lines[-1]:
            lines.pop()
        return lines

    def wait(
        self, test: Callable[[list[str]], bool], what: str, timeout: float = 20.0
    ) -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            lines = self.lines()
            if test(lines):
                return lines
            if time.monotonic() > deadline:
                screen = "\n".join(lines)
                raise AssertionError(f"not on the screen after {timeout:g} s: {what}\n{screen}")
            time.sleep(0.05)

    def wait_for(self, line: str, timeout: float = 20.0) -> list[str]:
        return self.wait(lambda lines: line in lines, repr(line), timeout)

    def wait_for_prompt(self, after: str) -> list[str]:
        """Wait until the idle prompt is the last line, after the line ``after``, and no
        run is going on (the prompt is there during a run too, to steer it)."""

        def ready(lines: list[str]) -> bool:
            return (
                after in lines
                and lines[-1] == PROMPT
                and lines.index(after) < len(lines) - 1
                and not self.running
            )

        return self.wait(ready, f"the prompt after {after!r}")

    @property
    def running(self) -> bool:
        """Whether the toolbar said, at the last look, that a run is going on."""
        return self.bar is not None and "running:" in self.bar

    def close(self) -> None:
        """Stop the server (and what runs in it); remove its socket."""
        socket_path = self.tmux("display-message", "-p", "#{socket_path}", check=False).strip()
        self.tmux("kill-server", check=False)
        if socket_path:
            Path(socket_path).unlink(missing_ok=True)


@pytest.fixture
def terminal() -> Any:
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed: the real-terminal tests need it")
    term = Terminal()
    try:
        yield term
    finally:
        term.close()


def wait_until(test: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not test():
        if time.monotonic() > deadline:
            raise AssertionError(f"not after {timeout:g} s: {what}")
        time.sleep(0.05)


def test_terminal_run_streams_text_and_a_bash_call(terminal: Terminal, tmp_path: Path) -> None:
    """Typed prompt, thinking and text, the permission question, the output; the status
    in the toolbar below the prompt; Ctrl-D quits."""
    script = write_script(tmp_path / "s.json", ECHO_HI)
    terminal.start(
        ["--model", f"scripted:{script}", "-C", str(tmp_path)], cwd=tmp_path, home=tmp_path / "h"
    )
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("hello")
    terminal.wait_for("Allow bash(echo hi)? [y/N]")
    terminal.type("y")
    lines = terminal.wait_for_prompt("The command printed hi.")
    start = lines.index(f"{PROMPT} hello")
    assert lines[start:] == [
        f"{PROMPT} hello",
        "The user wants hi.",
        "Let me run it.",
        "Allow bash(echo hi)? [y/N] y",
        '→ bash(command="echo hi")',
        "  │ hi",
        "✓ bash: Exit code: 0 (+1 lines)",
        "The command printed hi.",
        PROMPT,
    ]
    status, _, model = (terminal.bar or "").partition("  ")
    assert model.startswith("scripted:")
    assert model == f"scripted:{script}"[: len(model)]  # as much as fits
    assert STATUS.match(status)
    assert status.startswith("[2 turns, ")
    terminal.send("C-d")
    terminal.wait_for("[exited 0]")


def test_terminal_ctrl_c_stops_a_long_command(terminal: Terminal, tmp_path: Path) -> None:
    """Ctrl-C in a run: the command's process is killed and the prompt is back; at the
    prompt, Ctrl-C quits with status 130."""
    script = write_script(
        tmp_path / "s.json", [bash_turn("Sleeping.", "echo $$ > pid; exec sleep 300")]
    )
    terminal.start(
        ["--model", f"scripted:{script}", "-C", str(tmp_path)], cwd=tmp_path, home=tmp_path / "h"
    )
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("sleep")
    terminal.wait_for("Allow bash(echo $$ > pid; exec sleep 300)? [y/N]")
    terminal.type("y")
    pid_file = tmp_path / "pid"
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip().isdigit(), "the pid file")
    pid = int(pid_file.read_text())
    assert process_alive(pid)
    terminal.wait_for('→ bash(command="echo $$ > pid; exec sleep 300")')
    terminal.send("C-c")
    lines = terminal.wait_for_prompt("✗ bash: Cancelled: the run was aborted.")
    assert any(line.endswith("stopping the run (Ctrl-C again quits)") for line in lines)
    wait_until(lambda: not process_alive(pid), f"sleep (pid {pid}) gone")
    terminal.send("C-c")
    terminal.wait_for("[exited 130]")


def test_terminal_a_line_typed_during_a_run_steers_it(terminal: Terminal, tmp_path: Path) -> None:
    """A line typed mid-run is acknowledged, delivered at the tool boundary, and recorded."""
    home = tmp_path / "h"
    script = write_script(
        tmp_path / "s.json",
        [
            bash_turn("Waiting.", "while [ ! -e go ]; do sleep 0.05; done"),
            {"text": "Noted."},
        ],
    )  # fmt: skip
    terminal.start(["--model", f"scripted:{script}", "-C", str(tmp_path)], cwd=tmp_path, home=home)
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("start")
    terminal.wait_for("Allow bash(while [ ! -e go ]; do sleep 0.05; done)? [y/N]")
    terminal.type("y")
    terminal.wait_for('→ bash(command="while [ ! -e go ]; do sleep 0.05; done")')
    terminal.type("also say hi")
    terminal.wait_for("  (steering queued: also say hi)")
    (tmp_path / "go").touch()
    lines = terminal.wait_for_prompt("Noted.")
    assert lines[lines.index("✓ bash: Exit code: 0") :][:3] == [
        "✓ bash: Exit code: 0",
        "↪ also say hi",
        "Noted.",
    ]
    terminal.type("/quit")
    terminal.wait_for("[exited 0]")
    [session] = list_sessions(home / "sessions")
    messages = load_session(session.path).messages
    assert [(type(m).__name__, m.text) for m in messages] == [
        ("UserMessage", "start"),
        ("AssistantMessage", "Waiting."),
        ("ToolResultMessage", "Exit code: 0\n"),
        ("UserMessage", "also say hi"),
        ("AssistantMessage", "Noted."),
    ]


def test_terminal_typing_while_text_streams_keeps_both_intact(
    terminal: Terminal, tmp_path: Path
) -> None:
    """What is typed while the answer streams stays on the prompt line, below the
    stream, which is never cut by it; Enter then sends it as the next prompt."""
    home = tmp_path / "h"
    words = " ".join(f"w{n}" for n in range(80))  # a word every 20 ms: over 1.5 seconds
    script = write_script(
        tmp_path / "s.json", [{"text": f"Streaming: {words} done."}, {"text": "Got it."}]
    )
    terminal.start(["--model", f"scripted:{script}"], cwd=tmp_path, home=home)
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("go")
    terminal.wait(lambda lines: any(line.startswith("Streaming: w0") for line in lines), "w0")
    terminal.send("-l", "a draft typed mid-stream")
    lines = terminal.wait(
        lambda lines: lines[-1] == f"{PROMPT} a draft typed mid-stream", "the draft at the prompt"
    )
    assert terminal.running  # the answer is still streaming, above
    assert not any("draft" in line for line in lines[:-1])
    lines = terminal.wait(
        lambda lines: lines[-1] == f"{PROMPT} a draft typed mid-stream" and not terminal.running,
        "the draft at the prompt after the run",
    )
    assert lines[lines.index(f"{PROMPT} go") :] == [
        f"{PROMPT} go",
        f"Streaming: {words} done.",
        f"{PROMPT} a draft typed mid-stream",
    ]
    terminal.send("Enter")
    terminal.wait_for_prompt("Got it.")
    terminal.send("C-d")
    terminal.wait_for("[exited 0]")
    [session] = list_sessions(home / "sessions")
    assert [m.text for m in load_session(session.path).messages] == [
        "go",
        f"Streaming: {words} done.",
        "a draft typed mid-stream",
        "Got it.",
    ]


def test_terminal_history_new_lines_paste_and_ctrl_c_at_the_prompt(
    terminal: Terminal, tmp_path: Path
) -> None:
    """Up recalls the last message; Esc Enter starts a new line and a bracketed paste of
    several lines is one message; Ctrl-C clears what is typed at the prompt."""
    home = tmp_path / "h"
    script = write_script(tmp_path / "s.json", [{"text": "One."}, {"text": "Two."}])
    terminal.start(["--model", f"scripted:{script}"], cwd=tmp_path, home=home)
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("first message")
    terminal.wait_for_prompt("One.")
    terminal.send("Up")
    terminal.wait(lambda lines: lines[-1] == f"{PROMPT} first message", "the message recalled")
    terminal.send("C-c")
    terminal.wait(lambda lines: lines[-2:] == ["One.", PROMPT], "the line cleared")

    terminal.send("-l", "line one")
    terminal.send("Escape", "Enter")
    terminal.send("-l", "line two")
    terminal.wait(lambda lines: lines[-2:] == [f"{PROMPT} line one", "  line two"], "two lines")
    terminal.send("Enter")
    terminal.wait_for_prompt("Two.")

    terminal.tmux("set-buffer", "-b", "p", "pasted one\npasted two")
    terminal.tmux("paste-buffer", "-p", "-d", "-b", "p", "-t", "t")  # -p: bracketed
    terminal.wait(lambda lines: lines[-2:] == [f"{PROMPT} pasted one", "  pasted two"], "paste")
    terminal.send("Enter")
    lines = terminal.wait_for(f"error: the script {script} has no turn left (all 2 played)")
    assert lines[lines.index("Two.") + 1 :][:2] == [f"{PROMPT} pasted one", "  pasted two"]
    terminal.wait(lambda lines: lines[-1] == PROMPT and not terminal.running, "the prompt")
    terminal.send("C-d")
    terminal.wait_for("[exited 0]")
    [session] = list_sessions(home / "sessions")
    messages = load_session(session.path).messages
    users = [m.text for m in messages if isinstance(m, al.UserMessage)]
    assert users == ["first message", "line one\nline two", "pasted one\npasted two"]
    history = (home / "history").read_text(encoding="utf-8")
    assert "+line one\n+line two\n" in history


def test_terminal_a_question_takes_the_prompt_and_gives_the_draft_back(
    terminal: Terminal, tmp_path: Path
) -> None:
    """A permission question is asked on the prompt line; what was being typed there
    waits, and is back once the question is answered."""
    script = write_script(
        tmp_path / "s.json", [bash_turn("Let me run it.", "echo hi", delay=1), {"text": "Done."}]
    )
    terminal.start(
        ["--model", f"scripted:{script}", "-C", str(tmp_path)], cwd=tmp_path, home=tmp_path / "h"
    )
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("hello")
    terminal.send("-l", "my draft")
    terminal.wait(lambda lines: lines[-1] == f"{PROMPT} my draft", "the draft")
    terminal.wait(lambda lines: lines[-1] == "Allow bash(echo hi)? [y/N]", "the question")
    terminal.type("y")
    lines = terminal.wait(
        lambda lines: lines[-1] == f"{PROMPT} my draft" and not terminal.running,
        "the draft back after the run",
    )
    assert lines[lines.index(f"{PROMPT} hello") :] == [
        f"{PROMPT} hello",
        "Let me run it.",
        "Allow bash(echo hi)? [y/N] y",
        '→ bash(command="echo hi")',
        "  │ hi",
        "✓ bash: Exit code: 0 (+1 lines)",
        "Done.",
        f"{PROMPT} my draft",
    ]


def test_terminal_resume_after_the_process_was_killed(terminal: Terminal, tmp_path: Path) -> None:
    """SIGKILL mid-turn; --resume restores what was recorded and the conversation goes on."""
    home = tmp_path / "h"
    first = write_script(
        tmp_path / "1.json",
        [
            bash_turn("Step one.", "echo one"),
            bash_turn("Step two.", "echo $$ > pid; exec sleep 300"),
        ],
    )  # fmt: skip
    terminal.start(
        ["--model", f"scripted:{first}", "-C", str(tmp_path)], cwd=tmp_path, home=home, keep=False
    )
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("do it")
    terminal.wait_for("Allow bash(echo one)? [y/N]")
    terminal.type("y")
    terminal.wait_for("Allow bash(echo $$ > pid; exec sleep 300)? [y/N]")  # turn one is recorded
    terminal.type("y")
    pid_file = tmp_path / "pid"
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip().isdigit(), "the pid file")
    sleeper = int(pid_file.read_text())
    try:
        agent_pid = terminal.pid()
        os.kill(agent_pid, signal.SIGKILL)
        wait_until(lambda: not process_alive(agent_pid), "the agent killed")
    finally:
        os.kill(sleeper, signal.SIGKILL)  # its own process group: the kill left it running
    [session] = list_sessions(home / "sessions")
    recorded = load_session(session.path).messages
    assert [m.text for m in recorded][:3] == ["do it", "Step one.", "Exit code: 0\none\n"]

    second = write_script(tmp_path / "2.json", [{"text": "Resumed and done."}])
    terminal.close()
    terminal.start(
        ["--model", f"scripted:{second}", "-C", str(tmp_path), "--resume"], cwd=tmp_path, home=home
    )
    count = len(recorded)
    terminal.wait_for(
        f"agentloop: resumed session {session.session_id}: {count} messages restored."
    )
    terminal.wait_for(
        "agentloop: bash was cut short by the stop; not run again (it may not be safe to repeat)."
    )
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("go on")
    terminal.wait_for_prompt("Resumed and done.")
    terminal.type("/quit")
    terminal.wait_for("[exited 0]")
    [after] = list_sessions(home / "sessions")
    assert after.path == session.path
    texts = [m.text for m in load_session(after.path).messages]
    # The command that was running when the process died is answered, not run again.
    assert recorded[-1].text == INTERRUPTED
    assert texts[: len(recorded)] == [m.text for m in recorded[:-1]] + [NOT_RUN_AGAIN]
    assert texts[len(recorded) :] == ["go on", "Resumed and done."]


def test_terminal_resume_of_another_directory(terminal: Terminal, tmp_path: Path) -> None:
    """--resume ID of another directory is refused, saying where it belongs; with
    --any-directory it goes on here, and the way back names the flag."""
    home, a, b = tmp_path / "h", tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = write_script(tmp_path / "1.json", [{"text": "One."}])
    assert run_cli("--model", f"scripted:{first}", "-p", "in a", home=home, cwd=a).returncode == 0
    [started] = list_sessions(home / "sessions")
    sid = started.session_id

    terminal.start(["--model", "demo", "--resume", sid], cwd=b, home=home)
    assert terminal.wait_for("[exited 2]") == [
        "agentloop: using the offline demo model.",
        f"agentloop: session {sid} belongs to {a}, not {b}: continue it there (cd {a} && "
        f"agentloop --resume {sid}), or add --any-directory to continue it in {b}",
        "[exited 2]",
    ]
    terminal.close()

    second = write_script(tmp_path / "2.json", [{"text": "Here in b."}])
    terminal.start(
        ["--model", f"scripted:{second}", "--resume", sid, "--any-directory"], cwd=b, home=home
    )
    terminal.wait_for_prompt(
        f"agentloop: resumed session {sid} of {a}: 2 messages restored; the agent works in {b}."
    )
    terminal.type("go on")
    terminal.wait_for_prompt("Here in b.")
    terminal.type("/quit")
    lines = terminal.wait_for("[exited 0]")
    assert lines[-2:] == [
        f"agentloop: session saved in {started.path} "
        f"(continue it with: agentloop --resume {sid} --any-directory)",
        "[exited 0]",
    ]
    assert [m.text for m in load_session(started.path).messages] == [
        "in a",
        "One.",
        "go on",
        "Here in b.",
    ]


def test_terminal_offline_demo_fixes_a_bug_in_a_scratch_project(
    terminal: Terminal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No API key: the offline demo works on a scratch project in the temporary directory;
    it reads, asks before the command and the edit, streams the check's output, shows the
    fix as a diff, and the check passes; the user's directory is left alone."""
    from agentloop._cli._demo import FIXED_CALC_PY

    work, temp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    temp.mkdir()
    (work / "calc.py").write_text("# mine: the demo must not touch it\n")
    monkeypatch.setenv("TMPDIR", str(temp))  # the tmux server, and so the program, get it
    terminal.start([], cwd=work, home=tmp_path / "h")
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    [scratch] = temp.iterdir()
    assert scratch.name.startswith("agentloop-demo-")
    terminal.type("fix it")
    for question in (
        "bash(python3 test_calc.py)",
        "edit_file(calc.py)",
        "bash(python3 test_calc.py)",
    ):
        terminal.wait_for(f"Allow {question}? [y/N]")  # asked, not answered yet
        terminal.type("y")
    real_model = (
        "To work on your own code with a real model, set ANTHROPIC_API_KEY or OPENAI_API_KEY, "
        "or choose one with --model (agentloop --help lists them), and run agentloop in your "
        "project."
    )
    lines = in_call_order(terminal.wait_for_prompt(real_model))
    assert lines[:3] == [
        "agentloop: offline demo (no ANTHROPIC_API_KEY or OPENAI_API_KEY set): a scripted model "
        f"works on a scratch project in {scratch}; nothing of yours is touched.",
        "Type a prompt; /help lists the commands. Ctrl-C stops a run; Ctrl-D quits.",
        "",
    ]
    assert lines[3:] == [
        f"{PROMPT} fix it",
        "This is agentloop's offline demo: I am a scripted model, not a real one, so I do the "
        "same small task whatever you ask: make the check of this scratch project pass. First, "
        "the files.",
        "→ list_files()",
        "✓ list_files: calc.py (+3 lines)",
        "Two files: the code and its check. I read both at once: calls of one reply run side "
        "by side.",
        '→ read_file(path="calc.py")',
        '→ read_file(path="test_calc.py")',
        "✓ read_file: [calc.py: 12 lines] (+12 lines)",
        "✓ read_file: [test_calc.py: 24 lines] (+24 lines)",
        "calc.py has add() and mean(); the check runs three cases and exits with status 1 when "
        "one fails. Let me run it: a command needs your permission first.",
        "Allow bash(python3 test_calc.py)? [y/N] y",
        '→ bash(command="python3 test_calc.py")',
        "  │ ok    add(2, 3) == 5",
        "  │ FAIL  mean([1, 2, 3, 4]) == 2.25, expected 2.5",
        "  │ FAIL  mean([5]) == 0.0, expected 5",
        "  │ 1 passed, 2 failed",
        "✓ bash: Exit code: 1 (+4 lines)",
        "mean() is wrong: mean([1, 2, 3, 4]) gives 2.25 (expected 2.5) and mean([5]) gives 0.0 "
        "(expected 5). It adds up numbers[1:], which skips the first number, and then divides "
        "by the count of all of them. The fix is one line:",
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
        "Allow edit_file(calc.py)? [y/N] y",
        '→ edit_file(path="calc.py", old_text="    for n in numbers[1:]:\\n", new…)',
        "✓ edit_file: Edited calc.py: replaced 1 occurrence (+6 lines)",
        "calc.py is edited. Now the check again (it asks again: each command does).",
        "Allow bash(python3 test_calc.py)? [y/N] y",
        '→ bash(command="python3 test_calc.py")',
        "  │ ok    add(2, 3) == 5",
        "  │ ok    mean([1, 2, 3, 4]) == 2.5",
        "  │ ok    mean([5]) == 5",
        "  │ 3 passed, 0 failed",
        "✓ bash: Exit code: 0 (+4 lines)",
        "All three cases pass: mean() skipped the first number, and now it does not.",
        "",
        "That was agentloop at work, with a scripted model in place of a real one. list_files "
        "and read_file ran without asking, since they only read; bash and edit_file asked you "
        "first. Each step reached the screen as an event while it happened: the tool calls, the "
        "command's output line by line, the results, the run's status. The scratch project "
        "stays where the first line says, for you to look at.",
        "",
        real_model,
        PROMPT,
    ]
    status, _, model = (terminal.bar or "").partition("  ")
    assert STATUS.match(status)
    assert (status.startswith("[6 turns, "), model) == (True, "demo")
    terminal.type("/quit")
    terminal.wait_for("[exited 0]")
    assert (scratch / "calc.py").read_text() == FIXED_CALC_PY
    assert [(p.name, p.read_text()) for p in work.iterdir()] == [
        ("calc.py", "# mine: the demo must not touch it\n")
    ]
