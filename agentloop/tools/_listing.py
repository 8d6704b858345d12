"""list_files: the files under a directory, sorted, without what version control ignores.

Also the helpers the listing and search tools share: parameter checks, the
permission subject, and :func:`run_in_slices`, which runs a walk in worker
threads a slice at a time so that cancellation and time limits are noticed
between slices.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import trio

from .._tool import InvalidArgs, ToolContext, ToolError, ToolResult, format_duration
from ._ignore import Glob, IgnoreTree, walk_files
from ._workspace import PathTool, Workspace, as_workspace

__all__ = ["ListFilesTool"]

#: Longest stretch of blocking work in one worker-thread call, in seconds.
SLICE_SECONDS = 0.05


# --------------------------------------------------------------------------- shared helpers


def str_param(params: Mapping[str, Any], key: str, default: str | None = None) -> str | None:
    """The string argument ``key``, ``default`` when absent, or :class:`InvalidArgs`."""
    value = params.get(key, default)
    if value is not None and not isinstance(value, str):
        raise InvalidArgs(f"'{key}' must be a string, got {value!r}")
    return value


def int_param(params: Mapping[str, Any], key: str, default: int, low: int, high: int | None) -> int:
    """The integer argument ``key`` within [low, high], ``default`` when absent."""
    value = params.get(key, default)
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        bounds = f">= {low}" if high is None else f"from {low} to {high}"
        raise InvalidArgs(f"'{key}' must be an integer {bounds}, got {value!r}")
    return value


def glob_param(params: Mapping[str, Any], key: str) -> Glob | None:
    """The glob argument ``key`` compiled, None when absent, or :class:`InvalidArgs`."""
    text = str_param(params, key)
    if text is None:
        return None
    try:
        return Glob.parse(text)
    except ValueError as error:
        raise InvalidArgs(f"invalid glob in '{key}' ({text!r}): {error}") from None


def locate(workspace: Workspace, raw: str) -> tuple[str, str]:
    """Resolve ``raw`` in the workspace: (root-relative path, kind).

    Kind is ``"dir"``, ``"file"``, ``"missing"`` or ``"other"``. Blocking: call it
    in a worker thread.
    """
    path = workspace.resolve(raw)
    shown = workspace.relative(path)
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return shown, "missing"
    if stat.S_ISDIR(mode):
        kind = "dir"
    elif stat.S_ISREG(mode):
        kind = "file"
    else:
        kind = "other"
    return shown, kind


def tree_path(shown: str) -> str:
    """A root-relative path as :class:`IgnoreTree` takes it: ``""`` for the root."""
    return "" if shown == "." else shown


def display(path: str) -> str:
    """A path as shown to the model: undecodable bytes become U+FFFD."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def slice_over(until: float) -> bool:
    """In a slice's worker thread: whether the slice is over (raises Cancelled if the call is).

    Cheap (well under a microsecond): call it between small pieces of work.
    """
    trio.from_thread.check_cancelled()
    return time.monotonic() >= until


async def run_in_slices(step: Callable[[float], bool], time_limit: float) -> bool:
    """Call ``step(until)`` in worker threads until it returns True (done).

    ``step`` does blocking work until :func:`slice_over` says ``until`` has
    passed, and returns whether it finished. Between slices the time limit is
    checked; a cancellation stops a slice at its next :func:`slice_over`.
    Returns False when ``time_limit`` seconds passed first.
    """
    with trio.move_on_after(time_limit) as scope:
        while True:
            remaining = scope.deadline - trio.current_time()
            until = time.monotonic() + max(0.0, min(SLICE_SECONDS, remaining))
            if await trio.to_thread.run_sync(step, until):
                return True
    return False


# --------------------------------------------------------------------------- the tool

_LIST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "default": ".",
            "description": "The directory to list, relative to the working directory.",
        },
        "pattern": {
            "type": "string",
            "description": (
                "Only files matching this glob: `*.py` matches in any directory, a pattern "
                "with a `/` is matched from the working directory (`src/*.py`), `**` crosses "
                "directories (`src/**/test_*.py`), `{a,b}` gives alternatives, a leading `!` "
                "excludes instead."
            ),
        },
        "max_depth": {
            "type": "integer",
            "minimum": 1,
            "default": 5,
            "description": "Directory levels to descend; 1 lists only the files in `path`.",
        },
    },
    "additionalProperties": False,
}


@attrs.define
class _Listing:
    """What a listing walk found so far."""

    files: Iterator[str | None]
    limit: int
    shown: list[str] = attrs.field(factory=list)
    total: int = 0

    def step(self, until: float) -> bool:
        for path in self.files:
            if path is not None:
                self.total += 1
                if len(self.shown) < self.limit:
                    self.shown.append(path)
            if slice_over(until):
                return False
        return True


@attrs.frozen(eq=False)
class ListFilesTool(PathTool):
    """The ``list_files`` tool: the files under a directory, one root-relative path a line.

    Lists files, not directories, depth first with each directory's entries in
    name order (``a/x``, ``a-b/y``, ``a.py``: as ``rg --files --sort path``). Never
    enters :data:`~agentloop.tools.SKIP_DIRS`, virtualenvs (directories holding a
    ``pyvenv.cfg``) or symlinks, and leaves out what the ``.gitignore`` files of
    the listed tree and of its parents up to the root ignore (``.gitignore``
    itself is listed). A file path lists that one file. Ends with ``(N files)``.

    Args:
        workspace: The root every path is confined to (a :class:`Workspace` or a path).
        max_results: At most this many paths are shown; the rest are counted.
        time_limit: Seconds; a longer walk stops there and says its list is incomplete.
        timeout: Seconds, or None to use the loop's ``tool_timeout``.
    """

    workspace: Workspace = attrs.field(factory=Workspace, converter=as_workspace)
    max_results: int = attrs.field(default=1000, kw_only=True)
    time_limit: float = attrs.field(default=30.0, kw_only=True)
    timeout: float | None = attrs.field(default=None, kw_only=True)

    name = "list_files"
    replay_safe = True  # read-only: safe to run again after a crash
    label = "List files"
    description = (
        "List the files under a directory of the working directory, recursively (5 levels by "
        "default), sorted, one path per line relative to the working directory. Leaves out "
        ".git, node_modules, __pycache__, virtualenvs and the like, and whatever .gitignore "
        "files ignore. Filter with a glob `pattern` (`*.py`, `src/**/*.ts`). Very long "
        "listings are cut: narrow the path or the pattern. To search file contents, use search."
    )
    parameters_schema = _LIST_SCHEMA

    default_path = "."

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """List the files; see the class docstring."""
        raw = str_param(params, "path", ".") or "."
        glob = glob_param(params, "pattern")
        max_depth = int_param(params, "max_depth", 5, 1, None)
        shown, kind = await trio.to_thread.run_sync(locate, self.workspace, raw)
        where = display(shown) + (f" matching {glob.pattern}" if glob is not None else "")
        if kind == "missing":
            raise ToolError(f"Directory not found: {display(shown)}")
        if kind == "other":
            raise ToolError(f"Not a file or directory: {display(shown)}")
        tree = IgnoreTree(self.workspace.root, glob)
        if kind == "file":
            files: Iterator[str | None] = iter(
                [shown] if glob is None or glob.accepts(shown) else []
            )
        else:
            files = walk_files(tree, tree_path(shown), max_depth=max_depth)
        listing = _Listing(files, self.max_results)
        finished = await run_in_slices(listing.step, self.time_limit)
        return self._report(listing, where, finished)

    def _report(self, listing: _Listing, where: str, finished: bool) -> ToolResult:
        lines = [display(path) for path in listing.shown]
        hidden = listing.total - len(listing.shown)
        if hidden:
            noun = "file" if hidden == 1 else "files"
            lines.append(f"… and {hidden} more {noun} not shown (narrow the path or pattern)")
        if listing.total:
            noun = "file" if listing.total == 1 else "files"
            text = "\n".join(lines) + f"\n\n({listing.total} {noun})"
        else:
            text = f"No files found in {where}"
        if not finished:
            text += (
                f"\n(listing stopped after {format_duration(self.time_limit)}; "
                "results are incomplete)"
            )
        details = {
            "files": listing.total,
            "shown": len(listing.shown),
            "truncated": bool(hidden),
            "timed_out": not finished,
        }
        return ToolResult.text(text, details=details)
