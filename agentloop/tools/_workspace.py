"""Workspace: the directory the built-in tools are confined to.

Every path a model gives a tool goes through :meth:`Workspace.resolve`: it is
taken relative to the root (absolute paths are accepted too), resolved with
symlinks followed, and refused when the result is outside the root. So
``../x``, ``/etc/passwd`` and a symlink pointing out of the tree all fail with
a clear error, while symlinks that stay inside work.

(A path checked here could be swapped for a symlink before the tool opens it;
the tools confine honest mistakes and ordinary models, not a hostile process
racing them on the same machine.)

Hard links are not symlinks: a hard link inside the root to a file outside it
*is* a file inside the root, as far as paths go. ``Workspace(root,
strict=True)`` refuses regular files with more than one link, or on another
device than the root, so such a file can be neither read nor written.

Writes to one file are serialized: :func:`path_lock` hands out one lock per
resolved path, shared by every tool in the process, so two ``edit_file`` calls
on one file in a parallel batch apply one after the other instead of the
second overwriting the first.

For the scheduler, each path tool declares what a call touches
(:func:`path_claim`): the resolved absolute path, as a key it reads or writes,
so that a write to a file waits for the calls reading or writing that same
path, anywhere in the agent tree.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, ClassVar, Protocol

import trio
from trio.lowlevel import RunVar

from .._tool import NO_CLAIM, Claim, ToolError

__all__ = [
    "SKIP_DIRS",
    "FileAccess",
    "PathTool",
    "Workspace",
    "as_workspace",
    "path_claim",
    "path_lock",
    "path_subject",
]

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


class FileAccess(Protocol):
    """Another way to the files' text: an editor's, say (its unsaved buffers).

    Given to :class:`Workspace` (``files=``), it serves ``read_file``,
    ``write_file`` and ``edit_file`` instead of the disk; the paths it gets are
    absolute and already confined to the workspace's root.
    """

    async def read_text(self, path: Path) -> str:
        """The text of ``path``.

        Raises:
            ToolError: it cannot be read (the message says why, for the model).
        """
        ...

    async def write_text(self, path: Path, text: str) -> None:
        """Replace (or create) ``path`` with ``text``.

        Raises:
            ToolError: it cannot be written.
        """
        ...


class Workspace:
    """The root directory tools work in; resolves and confines paths.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> Workspace(root).resolve("notes/a.txt") == Path(root).resolve() / "notes" / "a.txt"
    True
    """

    __slots__ = ("_device", "files", "root", "strict")

    def __init__(
        self,
        root: str | os.PathLike[str] = ".",
        *,
        strict: bool = False,
        files: FileAccess | None = None,
    ) -> None:
        path = Path(root).expanduser().resolve()
        if not path.is_dir():
            raise ValueError(f"the tools' root must be a directory: {str(path)!r}")
        self.root = path
        self.strict = strict
        #: Where ``read_file``, ``write_file`` and ``edit_file`` read and write text
        #: files (an editor's buffers: see :class:`FileAccess`); None: the disk.
        self.files = files
        self._device = os.stat(path).st_dev

    def __repr__(self) -> str:
        strict = ", strict=True" if self.strict else ""
        return f"Workspace({str(self.root)!r}{strict})"

    def hides(self, path: Path) -> bool:
        """Whether strict confinement keeps the file ``path`` out of listings and searches.

        Blocking (one ``stat``); always False unless ``strict``.
        """
        if not self.strict:
            return False
        try:
            info = os.stat(path)
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and (info.st_nlink > 1 or info.st_dev != self._device)

    def check_file(self, path: Path, info: os.stat_result, shown: str) -> None:
        """With ``strict``, refuse a regular file that may live outside the root.

        A hard link to a file elsewhere looks like any file inside the root; in
        strict mode a regular file with more than one link, or on another device
        than the root (a bind mount), is refused. Blocking: call it in a thread.

        Raises:
            ToolError: strict, and the file has other links or another device.
        """
        if not self.strict or not stat.S_ISREG(info.st_mode):
            return
        if info.st_nlink > 1:
            raise ToolError(
                f"Access denied: {shown} has {info.st_nlink} hard links, so it may be a file "
                "outside the working directory; strict confinement refuses such files"
            )
        if info.st_dev != self._device:
            raise ToolError(
                f"Access denied: {shown} is on another device than the working directory; "
                "strict confinement refuses such files"
            )

    def resolve(self, path: str) -> Path:
        """The absolute, symlink-free path ``path`` names, which must be inside the root.

        Raises:
            ToolError: the path is empty, contains a NUL, cannot be resolved (an
                unknown ``~user``, a symlink loop, text the file system cannot
                encode), or leaves the root.
        """
        if not path or "\x00" in path:
            raise ToolError(f"Invalid path: {path!r}")
        try:
            candidate = Path(path).expanduser()
            if not candidate.is_absolute():
                candidate = self.root / candidate
            resolved = _resolve(candidate)
        except (OSError, RuntimeError, ValueError) as error:
            # RuntimeError: an unknown ~user, a symlink loop before 3.13; ValueError:
            # a lone surrogate the file system cannot encode.
            raise ToolError(f"Cannot resolve path {path!r}: {error}") from error
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


class _PathLock:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = trio.Lock()
        self.users = 0


# One registry per trio run: a trio.Lock must not be shared between runs (threads).
_path_locks: RunVar[dict[str, _PathLock]] = RunVar("agentloop_path_locks")


@asynccontextmanager
async def path_lock(path: Path) -> AsyncIterator[None]:
    """Hold the process-wide lock of ``path`` (a resolved path) for a read-modify-write.

    Every tool that changes a file holds it, so changes to one file never
    interleave, even between tools built separately on the same root. A lock
    exists only while some task holds or waits for it, so nothing accumulates;
    each ``trio.run`` has its own (a lock cannot be shared between runs).

    Cancellation: a task cancelled while waiting leaves without the lock.
    """
    try:
        locks = _path_locks.get()
    except LookupError:
        locks = {}
        _path_locks.set(locks)
    key = str(path)
    entry = locks.get(key)
    if entry is None:
        entry = locks[key] = _PathLock()
    entry.users += 1
    try:
        async with entry.lock:
            yield
    finally:
        entry.users -= 1
        if entry.users == 0:
            del locks[key]


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


def path_claim(
    workspace: Workspace,
    params: Mapping[str, Any],
    *,
    writes: bool = False,
    default: str | None = None,
) -> Claim:
    """A path tool's :class:`~agentloop.Claim`: the path it touches, read or written.

    The key is the absolute path :meth:`Workspace.resolve` makes of the ``path``
    argument (symlinks followed, so two names of one file are one key):
    ``Claim(reads={key})``, or ``Claim(writes={key})`` with ``writes``.
    ``default`` stands for a missing or empty ``path`` (``"."`` for the tools
    that take a directory). A ``path`` that is not a string, or that cannot be
    resolved inside the root, claims nothing: the tool refuses it without
    touching anything. Never raises; blocking (it resolves symlinks), as
    :func:`path_subject` is.
    """
    raw = params.get("path")
    if default is not None and (raw is None or raw == ""):
        raw = default
    if not isinstance(raw, str):
        return NO_CLAIM
    try:
        key = str(workspace.resolve(raw))
    except Exception:  # whatever the argument, scheduling must not fail: claim nothing
        return NO_CLAIM
    return Claim(writes={key}) if writes else Claim(reads={key})


class PathTool:
    """What the built-in tools that take a ``path`` in their workspace share: the
    permission subject and the scheduling claim of a call.

    A subclass sets ``workspace``, and says with ``writes`` whether its calls
    write the path and with ``default_path`` what a missing ``path`` stands for.
    """

    __slots__ = ()

    workspace: Workspace
    #: The calls write the path (else they read it).
    writes: ClassVar[bool] = False
    #: What a missing or empty ``path`` stands for (``"."``: the root); None: nothing.
    default_path: ClassVar[str | None] = None

    def permission_subject(self, params: Mapping[str, Any]) -> tuple[str, str]:
        """``("path", <the root-relative path>)``, or the raw path if it leaves the root."""
        return path_subject(self.workspace, params)

    def resources(self, params: dict[str, Any]) -> Claim:
        """``Claim(reads={<the resolved absolute path>})``, or ``writes`` for the tools
        that write: see :func:`path_claim`."""
        return path_claim(self.workspace, params, writes=self.writes, default=self.default_path)
