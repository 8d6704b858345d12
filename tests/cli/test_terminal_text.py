"""What a model, a tool or a server sent reaches the terminal escaped, never obeyed.

Exact strings for :func:`agentloop._visible.visible` and ``visible_line``; the
screen's lines for events carrying escape sequences; and the real program in a
real terminal (tmux), where a command hiding ``ESC [2K`` and ``\\r`` is shown as
it is in the permission question, and the command that runs is the one shown.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from test_cli import PROMPT, STATUS, Terminal, run_cli, terminal, write_script

import agentloop as al
from agentloop._cli import Renderer, Screen
from agentloop._visible import visible, visible_line

__all__ = ["terminal"]  # the fixture, imported

ESC = "\x1b"


# --------------------------------------------------------------------------- the functions


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text\nand\ttabs", "plain text\nand\ttabs"),
        ("a\x1b[2Kb", "a\\x1b[2Kb"),  # erase the line
        ("rm -rf ~\rls", "rm -rf ~\\rls"),  # back to the line's start
        ("line\r\nnext\r\n", "line\nnext\n"),  # CR LF is a newline
        ("x\x08\x08y\x07", "x\\x08\\x08y\\x07"),  # backspaces, the bell
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),  # the window's title
        ("\x1b]52;c;ZXZpbA==\x07", "\\x1b]52;c;ZXZpbA==\\x07"),  # the clipboard
        ("\x9b2K\x9d0;t\x9c", "\\x9b2K\\x9d0;t\\x9c"),  # C1: CSI, OSC, ST
        ("\x00\x7f\x0b\x0c", "\\x00\\x7f\\x0b\\x0c"),
        ("safe \u202eevil\u202c", "safe \\u202eevil\\u202c"),  # right-to-left override
        ("\u2066a\u2069\u200e\u200f\u061c", "\\u2066a\\u2069\\u200e\\u200f\\u061c"),
        (
            "zero\u200bwidth, emoji 👨\u200d👩\u200d👧, é",
            "zero\u200bwidth, emoji 👨\u200d👩\u200d👧, é",
        ),
    ],
)
def test_visible_escapes_what_a_terminal_acts_on(text: str, shown: str) -> None:
    assert visible(text) == shown


def test_visible_returns_clean_text_itself() -> None:
    text = "nothing to escape: é, 👋, \t and \n"
    assert visible(text) is text


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("ls -la", "ls -la"),
        ("echo 'é 👋'", "echo 'é 👋'"),
        ("touch x # \x1b[2K\rls", "touch x # \\x1b[2K\\rls"),
        ("cat <<EOF\n\tline\nEOF\r\n", "cat <<EOF\\n\\tline\\nEOF\\r\\n"),
        ("rm\u200b -rf\u00ad ~\ufeff", "rm\\u200b -rf\\xad ~\\ufeff"),  # invisible characters
        ("a\u2028b\u2029c", "a\\u2028b\\u2029c"),  # line and paragraph separators
        ("tag\U000e0041\U000e007f", "tag\\U000e0041\\U000e007f"),  # ASCII smuggled in tags
        ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
        ("\u202egnp.exe", "\\u202egnp.exe"),
    ],
)
def test_visible_line_shows_everything_on_one_line(text: str, shown: str) -> None:
    assert visible_line(text) == shown


# --------------------------------------------------------------------------- the screen


def screen_of(width: int = 200) -> tuple[Screen, io.StringIO]:
    out = io.StringIO()
    return Screen(Console(file=out, force_terminal=True, width=width, color_system=None)), out


def test_the_screen_escapes_streamed_text_lines_and_questions() -> None:
    """Even on a terminal (colours on), the only escape sequences out are the styles'."""
    screen, out = screen_of()
    screen.write(f"model{ESC}[2J text\r\n")
    screen.line(f"a tool's {ESC}[1A line", "green")
    screen.error(f"error: \x9b31m{ESC}]8;;http://evil{ESC}\\link")
    screen.ask(f"Allow bash(touch x # {ESC}[2K\rls\n)? [y/N] ")
    screen.answered(f"y{ESC}[A")
    assert out.getvalue() == (
        "model\\x1b[2J text\n"
        "a tool's \\x1b[1A line\n"
        "error: \\x9b31m\\x1b]8;;http://evil\\x1b\\link\n"
        "Allow bash(touch x # \\x1b[2K\\rls\\n)? [y/N] y\\x1b[A\n"
    )


def rendered(*events: al.AgentEvent) -> list[str]:
    console = Console(file=io.StringIO(), force_terminal=False, width=200)
    renderer = Renderer(Screen(console))
    for event in events:
        renderer.show(event)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined]


def test_tool_lines_results_and_output_are_escaped() -> None:
    args = {"command": f"printf 'x' # {ESC}[2K\r\u202e"}
    result = al.ToolResult.text(f"first{ESC}[2K\rline\nsecond")
    output = al.ToolResult.text(f"out{ESC}]0;t\x07put\n", details={"stream": "stdout"})
    failed = al.ToolResult.text(f"\x9b2Jfailed{ESC}c")
    assert rendered(
        al.ToolExecutionStart(loop_id="L", tool_call_id="c1", tool_name="bash", args=args),
        al.ToolExecutionUpdate(
            loop_id="L", tool_call_id="c1", tool_name="bash", partial_result=output
        ),
        al.ToolExecutionEnd(
            loop_id="L", tool_call_id="c1", tool_name="bash", result=result, is_error=False
        ),
        al.ProgressMessage(loop_id="L", tool_call_id="c2", tool_name="web", text=f"{ESC}[5m50%"),
        al.ToolExecutionEnd(
            loop_id="L", tool_call_id="c2", tool_name=f"web{ESC}[8m", result=failed, is_error=True
        ),
    ) == [
        "→ bash(command=\"printf 'x' # \\u001b[2K\\r\\u202e\")",
        "  │ out\\x1b]0;t\\x07put",
        "✓ bash: first\\x1b[2K (+2 lines)",  # a CR ends a line here
        "  … \\x1b[5m50%",
        "✗ web\\x1b[8m: \\x9b2Jfailed\\x1bc",
    ]


# --------------------------------------------------------------------------- a real terminal


def test_terminal_a_command_cannot_hide_from_the_question(
    terminal: Terminal, tmp_path: Path
) -> None:
    """The model's text, the question, the tool line and the command's output show their
    escape sequences; the command that runs (it plants a file) is the one shown."""
    hidden = f"touch planted # {ESC}[2K\r\x9b1A{ESC}[32mls"
    script = write_script(
        tmp_path / "s.json",
        [
            {
                "text": f"Checking.{ESC}]0;pwned\x07 \u202eevil\u202c",
                "calls": [{"name": "bash", "args": {"command": hidden}}],
            },
            {"calls": [{"name": "bash", "args": {"command": "printf 'a\\033[2Jb\\n'"}}]},
            {"text": f"Done.{ESC}[2J{ESC}[H"},
        ],
    )
    terminal.start(
        ["--model", f"scripted:{script}", "-C", str(tmp_path)], cwd=tmp_path, home=tmp_path / "h"
    )
    terminal.wait(lambda lines: lines[-1:] == [PROMPT], "the prompt")
    terminal.type("go")
    question = "Allow bash(touch planted # \\x1b[2K\\r\\x9b1A\\x1b[32mls)? [y/N]"
    terminal.wait_for(question)
    assert not (tmp_path / "planted").exists()
    terminal.type("y")
    terminal.wait_for("Allow bash(printf 'a\\033[2Jb\\n')? [y/N]")
    terminal.type("y")
    lines = terminal.wait_for_prompt("Done.\\x1b[2J\\x1b[H")
    assert lines[lines.index(f"{PROMPT} go") :] == [
        f"{PROMPT} go",
        "Checking.\\x1b]0;pwned\\x07 \\u202eevil\\u202c",
        f"{question} y",
        '→ bash(command="touch planted # \\u001b[2K\\r\\x9b1A\\u001b[32mls")',
        "✓ bash: Exit code: 0",
        "Allow bash(printf 'a\\033[2Jb\\n')? [y/N] y",
        "→ bash(command=\"printf 'a\\\\033[2Jb\\\\n'\")",
        "  │ a\\x1b[2Jb",
        "✓ bash: Exit code: 0 (+1 lines)",
        "Done.\\x1b[2J\\x1b[H",
        PROMPT,
    ]
    assert (tmp_path / "planted").exists()  # what was shown is what ran
    assert STATUS.match((terminal.bar or "").partition("  ")[0])
    terminal.send("C-d")
    terminal.wait_for("[exited 0]")


# --------------------------------------------------------------------------- a server's question


def test_a_servers_url_question_shows_its_escapes(tmp_path: Path) -> None:
    """ "Open this page?": the message and the URL a server (server-everything) sends are
    shown escaped, so neither can pass for another page."""
    from node_tools import node_bin, node_env

    server = {
        "command": node_bin("mcp-server-everything"),
        "args": ["stdio"],
        "env": {"PATH": node_env()["PATH"]},
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"everything": server}}))
    args = {
        "url": f"https://evil.test/pay{ESC}[2K{ESC}[1Ahttps://bank.test/",
        "message": f"Pay here{ESC}]8;;https://bank.test{ESC}\\ now\x9b2K",
    }
    script = write_script(
        tmp_path / "s.json",
        [
            {"calls": [{"name": "everything__trigger-url-elicitation", "args": args}]},
            {"text": "Declined."},
        ],
    )
    result = run_cli(
        "--model", f"scripted:{script}", "--mcp-config", str(config), "-p", "pay",
        home=tmp_path / "h", cwd=tmp_path, input="y\nn\n",
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (0, "Declined.\n"), result.stderr
    lines = result.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("MCP server"))
    assert lines[start : start + 4] == [
        "MCP server 'everything' asks: Pay here\\x1b]8;;https://bank.test\\x1b\\ now\\x9b2K",
        "  https://evil.test/pay\\x1b[2K\\x1b[1Ahttps://bank.test/",
        "Open this page? [y/N] n",
        "  declined",
    ]


# --------------------------------------------------------------------------- one prompt


def test_terminal_one_prompt_shows_the_run_once(terminal: Terminal, tmp_path: Path) -> None:
    """`agentloop -p` with stdout and stderr the same terminal: the run as on the screen,
    the answer in it once (not again after it)."""
    script = write_script(
        tmp_path / "s.json",
        [
            {"text": "Let me look.", "calls": [{"name": "list_files", "args": {}}]},
            {"text": "Nothing here."},
        ],
    )
    work = tmp_path / "work"
    work.mkdir()
    terminal.start(
        ["--model", f"scripted:{script}", "-C", str(work), "-p", "go"], cwd=tmp_path,
        home=tmp_path / "h",
    )  # fmt: skip
    lines = terminal.wait_for("[exited 0]")
    assert lines[:6] == [
        f"agentloop: using the scripted model {script}.",
        "",
        "Let me look.",
        "→ list_files()",
        "✓ list_files: No files found in .",
        "Nothing here.",
    ]
    assert STATUS.match(lines[6])
    assert lines[7:] == ["[exited 0]"]


def test_an_answer_on_a_terminal_is_escaped_in_a_file_as_written(tmp_path: Path) -> None:
    """stdout a terminal (a pty), stderr a pipe: the answer alone, escaped; the run on
    stderr."""
    import os
    import pty
    import subprocess
    import sys

    from test_cli import cli_env

    script = write_script(tmp_path / "s.json", [{"text": f"red {ESC}[31mtext{ESC}[0m\r\n"}])
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "agentloop", "--model", f"scripted:{script}", "-C", str(tmp_path),
         "-p", "go"],
        env=cli_env(tmp_path / "h"), stdin=subprocess.DEVNULL, stdout=follower,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    os.close(follower)
    try:
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # EIO: the terminal's other side is closed
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert process.returncode == 0, stderr
    assert shown.decode() == "red \\x1b[31mtext\\x1b[0m\r\n"  # the terminal's own CR LF
    assert stderr.decode().splitlines()[2] == "red \\x1b[31mtext\\x1b[0m"


def test_a_settings_error_names_a_path_escaped(tmp_path: Path) -> None:
    """A directory's name is anyone's (a cloned repository's, say): the error shows
    its control characters escaped."""
    import subprocess
    import sys

    from test_cli import cli_env

    home = tmp_path / f"home{ESC}]0;pwned\x07{ESC}[2J"
    home.mkdir()
    (home / "settings.toml").write_text('base_url = 3\nmodel = "openai:x"\n')
    env = {**cli_env(home), "AGENTLOOP_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-m", "agentloop", "-p", "hi"], cwd=tmp_path, env=env,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (2, "")
    shown = f"{tmp_path}/home\\x1b]0;pwned\\x07\\x1b[2J/settings.toml"
    assert done.stderr.startswith(f"agentloop: {shown}: ")
    assert ESC not in done.stderr
