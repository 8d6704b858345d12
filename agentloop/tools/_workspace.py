"""Workspace: the directory the built-in tools are confined to.

Every path a model gives a tool goes through :meth:`Workspace.resolve`: it is
taken relative to the root (absolute paths are accepted too), resolved with
symlinks followed, and refused when the result is outside the root. So
``../x``, ``/etc/passwd`` and a symlink pointing out of the tree all fail with
a clear error, while symlinks that stay inside work.

(A path checked here could be swapped for a symlink before the tool opens it;
the tools confine honest mistakes and ordinary models, not a hostile process
racing them on the same machine.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._tool import ToolError

__all__ = ["SKIP_DIRS", "Workspace", "as_workspace", "path_subject"]

#: Directories the listing and search tools never enter (besides .gitignore'd ones).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)


class Workspace:
    """The root directory tools work in; resolves and confines paths.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> Workspace(root).resolve("notes/a.txt") == Path(root).resolve() / "notes" / "a.txt"
    True
    """

    __slots__ = ("root",)

    def __init__(self, root: str | os.PathLike[str] = ".") -> None:
        path = Path(root).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"the tools' root must be a directory: {str(path)!r}")
        self.root = path

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free path ``path`` names, which must be inside the root.

        Raises:
            ToolError: the path is empty, contains a NUL, or leaves the root.
        """
        if not path or "\x00" in path:
            raise ToolError(f"Invalid path: {path!r}")
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.root / candidate
        try:
            resolved = _resolve(candidate)
        except (OSError, RuntimeError) as error:  # a symlink loop (RuntimeError before 3.13)
            raise ToolError(f"Cannot resolve path '{path}': {error}") from error
        if resolved != self.root and self.root not in resolved.parents:
            shown = (
                f"'{path}' resolves to '{resolved}', which is"
                if str(resolved) != path
                else (f"'{path}' is")
            )
            raise ToolError(f"Access denied: {shown} outside the working directory '{self.root}'")
        return resolved

    def relative(self, path: Path) -> str:
        """``path`` as shown to the model: relative to the root, with ``/`` separators."""
        if path == self.root:
            return "."
        return path.relative_to(self.root).as_posix()


def _resolve(path: Path) -> Path:
    """``path`` with symlinks resolved; a path that does not exist (yet) is allowed.

    Strict first, so that a symlink loop raises on every Python version (since
    3.13 a non-strict resolve leaves a loop in place instead of raising).
    """
    try:
        return path.resolve(strict=True)
    except FileNotFoundError:
        return path.resolve()


def as_workspace(value: Workspace | str | os.PathLike[str]) -> Workspace:
    """``value`` if it is a Workspace, else a Workspace rooted at it."""
    return value if isinstance(value, Workspace) else Workspace(value)


def path_subject(workspace: Workspace, params: Mapping[str, Any]) -> tuple[str, str]:
    """A path tool's permission subject: ``("path", <root-relative resolved path>)``.

    The ``path`` argument defaults to ``"."``; one that cannot be resolved inside
    the root is given as written (the tool refuses it anyway).
    """
    raw = params.get("path", ".")
    if not isinstance(raw, str):
        return ("path", str(raw))
    try:
        return ("path", workspace.relative(workspace.resolve(raw)))
    except (ToolError, OSError, RuntimeError, ValueError):
        return ("path", raw)
