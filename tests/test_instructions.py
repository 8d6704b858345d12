"""``agentloop.project_instructions``: AGENTS.md and CLAUDE.md, from the repository's top down."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import agentloop as al
from agentloop._instructions import find_repository_top


def repo(tmp_path: Path, files: dict[str, str], *, git: str = "dir") -> Path:
    top = tmp_path / "repo"
    top.mkdir()
    if git == "dir":
        (top / ".git").mkdir()
    elif git == "file":  # a worktree or a submodule
        (top / ".git").write_text("gitdir: /elsewhere\n")
    for name, text in files.items():
        path = top / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return top


def test_from_the_top_down_to_the_start(tmp_path: Path) -> None:
    """Top first, the start directory's last; AGENTS.md before CLAUDE.md; the text names each."""
    top = repo(
        tmp_path,
        {
            "AGENTS.md": "Run nox.\n",
            "CLAUDE.md": "Be brief.\n",
            "pkg/AGENTS.md": "No new dependencies.\n",
            "pkg/sub/CLAUDE.md": "Tabs here.\n",
            "other/AGENTS.md": "Not read: not on the way.\n",
        },
    )
    found = al.project_instructions(top / "pkg" / "sub")
    assert found is not None
    assert found.root == top
    assert found.files == (
        top / "AGENTS.md",
        top / "CLAUDE.md",
        top / "pkg" / "AGENTS.md",
        top / "pkg" / "sub" / "CLAUDE.md",
    )
    assert found.text == (
        "# Instructions from AGENTS.md\n\nRun nox.\n\n"
        "# Instructions from CLAUDE.md\n\nBe brief.\n\n"
        "# Instructions from pkg/AGENTS.md\n\nNo new dependencies.\n\n"
        "# Instructions from pkg/sub/CLAUDE.md\n\nTabs here."
    )
    assert (found.truncated, found.size) == (False, 8 + 9 + 20 + 10)


def test_nothing_found_is_none_and_outside_a_repository_only_the_start(tmp_path: Path) -> None:
    top = repo(tmp_path, {"src/main.py": ""})
    assert al.project_instructions(top / "src") is None
    loose = tmp_path / "loose" / "deeper"
    loose.mkdir(parents=True)
    (tmp_path / "loose" / "AGENTS.md").write_text("not read: no repository above")
    (loose / "AGENTS.md").write_text("read")
    found = al.project_instructions(loose)
    assert found is not None
    assert (found.root, found.files, found.text) == (
        loose,
        (loose / "AGENTS.md",),
        "# Instructions from AGENTS.md\n\nread",
    )


def test_a_git_file_marks_the_top_too(tmp_path: Path) -> None:
    top = repo(tmp_path, {"AGENTS.md": "worktree", "a/b/x.txt": ""}, git="file")
    assert find_repository_top(top / "a" / "b") == top
    found = al.project_instructions(top / "a" / "b")
    assert found is not None
    assert found.files == (top / "AGENTS.md",)


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_a_linked_copy_and_empty_files_are_left_out(tmp_path: Path) -> None:
    top = repo(tmp_path, {"AGENTS.md": "Once.", "sub/AGENTS.md": "  \n\n"})
    (top / "CLAUDE.md").symlink_to("AGENTS.md")
    found = al.project_instructions(top / "sub")
    assert found is not None
    assert (found.files, found.text) == (
        (top / "AGENTS.md",),
        "# Instructions from AGENTS.md\n\nOnce.",
    )


def test_cut_at_the_limit_with_a_note(tmp_path: Path) -> None:
    top = repo(tmp_path, {"AGENTS.md": "é" * 100, "sub/AGENTS.md": "more", "sub/CLAUDE.md": "x"})
    found = al.project_instructions(top / "sub", max_bytes=80)
    assert found is not None
    assert found.truncated
    assert found.size == 200 + 4 + 1
    heading = "# Instructions from AGENTS.md\n\n"
    kept = (80 - len(heading)) // 2  # two bytes a character; never half of one
    assert found.text == (
        heading + "é" * kept + "\n\n[The project instructions are cut here: they are 205 bytes, "
        "over the limit of 80; sub/AGENTS.md, sub/CLAUDE.md left out.]"
    )
    assert len(found.files) == 3  # all found; the text says which were left out
    with pytest.raises(ValueError, match="max_bytes must be positive"):
        al.project_instructions(top, max_bytes=0)


def test_other_names(tmp_path: Path) -> None:
    top = repo(tmp_path, {"AGENTS.md": "a", "CONVENTIONS.md": "c"})
    found = al.project_instructions(top, names=("CONVENTIONS.md",))
    assert found is not None
    assert found.text == "# Instructions from CONVENTIONS.md\n\nc"


def test_the_terminal_agent_puts_them_in_its_system_prompt(tmp_path: Path) -> None:
    from agentloop._cli._setup import instructions_note, system_prompt

    top = repo(tmp_path, {"AGENTS.md": "Run nox.", "CLAUDE.md": "Be brief."})
    found = al.project_instructions(top)
    assert found is not None
    assert instructions_note(found) == (
        "agentloop: project instructions from AGENTS.md, CLAUDE.md."
    )
    prompt = system_prompt(top, found)
    assert prompt.startswith(system_prompt(top) + "\n\nThe project's instructions follow")
    assert prompt.endswith(found.text)
    big = al.project_instructions(top, max_bytes=40)
    assert big is not None
    assert instructions_note(big) == (
        "agentloop: project instructions from AGENTS.md, CLAUDE.md; cut at the size limit "
        "(the files hold 17 bytes)."
    )


# --------------------------------------------------------------------------- links out


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_a_link_to_a_file_outside_the_repository_is_not_read(tmp_path: Path) -> None:
    """AGENTS.md -> ~/.aws/credentials: left out, and said; a link inside the tree is read."""
    secret = tmp_path / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text("aws_secret_access_key = SECRET\n")
    top = repo(tmp_path, {"docs/rules.md": "Use tabs.", "sub/x.txt": ""})
    (top / "AGENTS.md").symlink_to(secret)
    (top / "CLAUDE.md").symlink_to("docs/rules.md")  # inside the tree: read
    (top / "sub" / "AGENTS.md").symlink_to("../../home/.aws/credentials")
    found = al.project_instructions(top / "sub")
    assert found is not None
    assert found.files == (top / "CLAUDE.md",)
    assert found.text == "# Instructions from CLAUDE.md\n\nUse tabs."
    assert found.skipped == (
        (top / "AGENTS.md", f"it leads to {secret}, outside {top}"),
        (top / "sub" / "AGENTS.md", f"it leads to {secret}, outside {top}"),
    )
    assert "SECRET" not in found.text


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_only_links_out_is_an_empty_text_that_says_why(tmp_path: Path) -> None:
    from agentloop._cli._setup import instructions_note, system_prompt

    outside = tmp_path / "notes.md"
    outside.write_text("SECRET")
    loose = tmp_path / "work"  # no repository: the tree is the directory's
    loose.mkdir()
    (loose / "AGENTS.md").symlink_to(outside)
    found = al.project_instructions(loose)
    assert found == al.ProjectInstructions(
        root=loose,
        files=(),
        text="",
        size=0,
        skipped=((loose / "AGENTS.md", f"it leads to {outside}, outside {loose}"),),
    )
    assert system_prompt(loose, found) == system_prompt(loose)
    assert instructions_note(found) == (
        "agentloop: no project instructions read; left out: AGENTS.md (it leads to "
        f"{outside}, outside {loose})."
    )


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
def test_the_note_shows_a_link_targets_control_characters_escaped(tmp_path: Path) -> None:
    from agentloop._cli._setup import instructions_note

    outside = tmp_path / "x\x1b[2Jy"
    outside.write_text("SECRET")
    top = repo(tmp_path, {"AGENTS.md": "Run nox."})
    (top / "CLAUDE.md").symlink_to(outside)
    found = al.project_instructions(top)
    assert found is not None
    assert instructions_note(found) == (
        "agentloop: project instructions from AGENTS.md; left out: CLAUDE.md (it leads to "
        f"{tmp_path}/x\\x1b[2Jy, outside {top})."
    )


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks")
async def test_the_terminal_agent_sends_no_file_from_outside_to_the_model(tmp_path: Path) -> None:
    """The real program, a real server for the model: the request holds no byte of the
    linked file, and the first lines say which file was left out and why."""
    import trio
    from sse_server import Reply, serve

    fixture = Path(__file__).parent / "fixtures" / "openai" / "text_usage.sse"
    secret = tmp_path / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text("aws_secret_access_key = SECRET-KEY-123\n")
    top = repo(tmp_path, {"AGENTS.md": "Run nox."})
    (top / "CLAUDE.md").symlink_to(secret)
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env |= {"AGENTLOOP_HOME": str(tmp_path / "config"), "OPENAI_API_KEY": "sk-test"}
    async with serve(Reply([fixture.read_bytes()])) as server:
        done = await trio.run_process(
            [sys.executable, "-m", "agentloop", "--model", "openai:qwen3", "--base-url",
             f"{server.url}/v1", "-p", "hi"],
            cwd=top, env=env, stdin=b"", capture_stdout=True, capture_stderr=True, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert len(server.requests) == 1
    assert b"Run nox." in server.requests[0].body
    assert b"SECRET-KEY-123" not in server.requests[0].body
    assert done.stderr.decode().splitlines()[1] == (
        f"agentloop: project instructions from AGENTS.md; left out: CLAUDE.md (it leads to "
        f"{secret}, outside {top})."
    )
