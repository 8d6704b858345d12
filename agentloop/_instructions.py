"""Project instructions: the ``AGENTS.md`` (and ``CLAUDE.md``) files of a repository.

``AGENTS.md`` is the file that coding agents (Codex, Cursor, Jules, Aider...)
read for a project's conventions: how to build it, test it, what to avoid.
:func:`project_instructions` finds them from a directory up to the top of its
repository and joins them into one text for a system prompt.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import attrs

__all__ = [
    "DEFAULT_INSTRUCTION_FILES",
    "DEFAULT_MAX_INSTRUCTION_BYTES",
    "ProjectInstructions",
    "find_repository_top",
    "project_instructions",
]

#: The files read in each directory, in this order.
DEFAULT_INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
#: At most this many bytes of instructions in all (Codex's limit, 32 KiB).
DEFAULT_MAX_INSTRUCTION_BYTES = 32 * 1024


@attrs.frozen(kw_only=True)
class ProjectInstructions:
    """The project's instruction files and their text, joined.

    Attributes:
        root: The top of the repository (the nearest directory up from the start
            holding ``.git``), or the start directory when it is in none.
        files: The files read, from the top down to the start directory
            (absolute paths; empty files are left out).
        text: Each file's text under a heading naming it (its path relative to
            ``root``), in the order of ``files``; cut at ``max_bytes`` with a
            note saying so.
        size: The files' size in all, in bytes (before any cut).
        truncated: The text was cut at ``max_bytes``.
        skipped: The instruction files not read, each with why, as
            ``(path, "it leads to /home/me/.aws/credentials, outside /src/project")``:
            links to files outside ``root``.
    """

    root: Path
    files: tuple[Path, ...]
    text: str
    size: int
    truncated: bool = False
    skipped: tuple[tuple[Path, str], ...] = ()


def find_repository_top(start: str | os.PathLike[str]) -> Path | None:
    """The nearest directory from ``start`` up holding ``.git`` (a directory or a file).

    A ``.git`` file marks a worktree or a submodule: its directory is the top.
    None when ``start`` is in no repository.
    """
    here = Path(start).resolve()
    for directory in (here, *here.parents):
        if (directory / ".git").exists():
            return directory
    return None


def _same_file(path: Path, seen: list[Path]) -> bool:
    """Whether ``path`` is one of ``seen`` (a ``CLAUDE.md`` linked to ``AGENTS.md``, say)."""
    for other in seen:
        try:
            if path.samefile(other):
                return True
        except OSError:
            continue
    return False


def _under(real: str, root: Path) -> bool:
    """Whether the real path ``real`` is in the tree of ``root`` (itself resolved)."""
    top = os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _cut(data: bytes, limit: int) -> str:
    """The first ``limit`` bytes of ``data`` as text, never splitting a character."""
    return data[:limit].decode("utf-8", errors="ignore")


def project_instructions(
    start: str | os.PathLike[str] = ".",
    *,
    names: Sequence[str] = DEFAULT_INSTRUCTION_FILES,
    max_bytes: int = DEFAULT_MAX_INSTRUCTION_BYTES,
) -> ProjectInstructions | None:
    """The instruction files from the repository's top down to ``start``, joined.

    In each directory from the top of ``start``'s repository (see
    :func:`find_repository_top`; outside a repository, ``start`` alone) down
    to ``start``, the files named ``names`` (``AGENTS.md``, then ``CLAUDE.md``)
    are read. A file linked to one already read, an empty file and one that
    cannot be read are left out. So is a file whose real path (all links
    followed) is outside the repository (or ``start``, outside one): a
    repository's ``AGENTS.md`` may be a link to ``~/.aws/credentials``, which
    must not reach a model; those are listed in ``skipped``. The more specific
    files come last, so a model reading the text top to bottom meets them last.

    The text is cut at ``max_bytes`` (of UTF-8), with a last line saying how
    much was left out: instruction files are meant to be short.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as top:
    ...     (Path(top) / ".git").mkdir()
    ...     _ = (Path(top) / "AGENTS.md").write_text("Run the tests with nox.")
    ...     (Path(top) / "src").mkdir()
    ...     _ = (Path(top) / "src" / "AGENTS.md").write_text("No new dependencies.")
    ...     found = project_instructions(Path(top) / "src")
    >>> print(found.text)
    # Instructions from AGENTS.md
    <BLANKLINE>
    Run the tests with nox.
    <BLANKLINE>
    # Instructions from src/AGENTS.md
    <BLANKLINE>
    No new dependencies.

    Returns:
        The instructions, or None when there are none. When every file found
        was skipped, the value has no ``files`` and an empty ``text``.

    Raises:
        ValueError: ``max_bytes`` is not positive.
    """
    if max_bytes <= 0:
        raise ValueError(f"max_bytes must be positive, got {max_bytes}")
    here = Path(start).resolve()
    top = find_repository_top(here)
    root = top if top is not None else here
    chain = [root]
    for part in here.relative_to(root).parts:
        chain.append(chain[-1] / part)
    files: list[Path] = []
    parts: list[tuple[Path, bytes]] = []
    skipped: list[tuple[Path, str]] = []
    for directory in chain:
        for name in names:
            path = directory / name
            if not path.is_file() or _same_file(path, files):
                continue
            real = os.path.realpath(path)
            if not _under(real, root):
                skipped.append((path, f"it leads to {real}, outside {root}"))
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if not data.strip():
                continue
            files.append(path)
            parts.append((path, data.strip()))
    if not parts:
        if skipped:
            return ProjectInstructions(root=root, files=(), text="", size=0, skipped=tuple(skipped))
        return None
    size = sum(len(data) for _, data in parts)
    sections: list[str] = []
    used = 0
    truncated = False
    for number, (path, data) in enumerate(parts):
        heading = f"# Instructions from {path.relative_to(root).as_posix()}\n\n"
        room = max_bytes - used - len(heading.encode())
        if room <= 0 or len(data) > room:
            truncated = True
            if room > 0:
                sections.append(heading + _cut(data, room).rstrip())
            left = [p.relative_to(root).as_posix() for p, _ in parts[number + 1 :]]
            also = f"; {', '.join(left)} left out" if left else ""
            sections.append(
                f"[The project instructions are cut here: they are {size} bytes, over the "
                f"limit of {max_bytes}{also}.]"
            )
            break
        sections.append(heading + data.decode("utf-8", errors="replace"))
        used += len(heading.encode()) + len(data) + 2
    return ProjectInstructions(
        root=root,
        files=tuple(files),
        text="\n\n".join(sections),
        size=size,
        truncated=truncated,
        skipped=tuple(skipped),
    )
