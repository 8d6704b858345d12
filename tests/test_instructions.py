"""``agentloop.project_instructions``: AGENTS.md and CLAUDE.md, from the repository's top down."""

from __future__ import annotations

import os
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
