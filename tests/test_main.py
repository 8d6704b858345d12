"""`python -m agentloop`: the offline demo, run as a real process.

The terminal agent's options, model choice, rendering and interactive use are
tested in ``test_cli.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    env["AGENTLOOP_HOME"] = str(cwd.parent / f"{cwd.name}-agentloop-home")  # sessions go here
    return subprocess.run(
        [sys.executable, "-m", "agentloop", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_demo_lists_counts_and_summarises(tmp_path: Path) -> None:
    """The demo model calls both tools on the real directory and prints every step."""
    (tmp_path / "notes.md").write_text("one\ntwo\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("import os\n\nprint(os.getcwd())\n")
    (tmp_path / "image.bin").write_bytes(b"\x00\x01")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref\n")

    result = run_cli("What", "is", "here?", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "agentloop: using the offline demo model (no ANTHROPIC_API_KEY or OPENAI_API_KEY set)."
    )
    assert lines[2:] == [
        "I'll look at what is in this directory first.",
        "→ list_directory()",
        f"  … scanning {tmp_path.resolve()}",
        "✓ list_directory: image.bin (+2 lines)",
        "I see 3 entries. Let me count the lines of 2 that look like text.",
        '→ count_lines(paths=["notes.md", "src/app.py"])',
        "  · notes.md: 2 lines",
        "  · src/app.py: 3 lines",
        "✓ count_lines: notes.md: 2 lines (+2 lines)",
        "Here is what I found:",
        "notes.md: 2 lines",
        "src/app.py: 3 lines",
        "total: 5 lines",
        "",
        'You asked: "What is here?". I am agentloop\'s offline demo model, so I follow a fixed '
        "plan rather than answer freely, but every number above came from the tools.",
        lines[-1],
    ]
    assert lines[-1].startswith("[3 turns, ")


def test_demo_on_an_empty_directory(tmp_path: Path) -> None:
    """With nothing to read, the demo says so after one tool call."""
    result = run_cli("hello", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "I found no text files to look into, so I will stop here." in result.stdout
    assert "count_lines" not in result.stdout


def test_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    """-C with a path that is not a directory exits 2 with a clear message."""
    result = run_cli("-C", str(tmp_path / "nope"), "hi", cwd=tmp_path)
    assert result.returncode == 2
    assert f"not a directory: {tmp_path / 'nope'}" in result.stderr


async def test_demo_count_lines_refuses_paths_outside_its_root(tmp_path: Path) -> None:
    """The demo's file tool refuses a path that leaves its directory."""
    import pytest
    import trio

    import agentloop as al
    from agentloop._demo import CountLines

    (tmp_path / "inside.txt").write_text("x\n")
    tool = CountLines(tmp_path)
    ctx = al.ToolContext("c1", "count_lines", trio.CancelScope())
    assert (await tool.execute({"paths": ["inside.txt"]}, ctx)).text_content == (
        "inside.txt: 1 lines\ntotal: 1 lines"
    )
    with pytest.raises(
        al.InvalidArgs, match=r"^Invalid arguments: '\.\./secret' is outside the directory "
    ):
        await tool.execute({"paths": ["../secret"]}, ctx)


def test_printer_shows_thinking_and_retries() -> None:
    """Thinking streams inline (plain when not a terminal); a retry gets its own line."""
    import io

    import agentloop as al
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
