"""search: a regex over the files of a tree, with ripgrep when it is installed.

Two engines, one output. When ``rg`` is on ``PATH`` (looked up at each call)
the tool runs it with ``--json`` and reads its messages as they come; otherwise
it searches in Python, in worker threads. Both show the same lines for the same
tree, in the same order:

- Files: what ``list_files`` would list (no max depth): not in
  :data:`~agentloop.tools.SKIP_DIRS`, not in a virtualenv, not .gitignore'd,
  no symlinks, in ``rg --sort path`` order. ripgrep does the pruning itself
  (``--no-require-git``, no parent, global or ``.ignore`` files) and every
  file it reports is checked again by :class:`~agentloop.tools._ignore.IgnoreTree`,
  which has the last word (ripgrep lets a ``--glob`` override .gitignore, and
  does not know about virtualenvs nor about the ``.gitignore`` files above the
  path searched). ripgrep 13 also honours ``.rgignore`` files, and no flag turns
  them off alone: the Python engine does not read them.
- Binary files: a file whose first 8 KiB hold a NUL byte is skipped. ripgrep
  runs with ``--text`` so that it never decides this itself (its own rule
  depends on its buffer size).
- Text: lines split on ``\\n``; a UTF-8 byte order mark is dropped; bytes that
  are not UTF-8 become U+FFFD; a trailing ``\\r`` is not shown.
- The regex: ripgrep's (Rust ``regex`` syntax) or Python's ``re``. They agree on
  the common ground (literals, classes, ``\\w \\d \\s \\b``, repetition,
  alternation, groups, ``(?i)``), not on the rest: Python has look-around and
  back-references, Rust has ``\\p{Greek}`` and ``[[:alpha:]]``. A pattern the
  engine in use rejects is an :class:`~agentloop.InvalidArgs` that says why.
  A match never spans lines.

With a :class:`~agentloop.tools.Sandbox` (``SearchTool(root, sandbox=...)``,
as ``default_tools`` passes it), ripgrep runs confined, read-only: it may read
what the sandbox lets commands read, write nothing (but ``/dev/null``) and open
no TCP connection. Where the sandbox is unavailable it runs as it would without
one (search only reads, under the root); if confining it fails, the Python
engine searches instead.

The cap counts matching lines over all files; each match's context lines
(``context`` before and after) come with it. The search stops when the cap is
passed or after ``time_limit`` seconds, and says so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import attrs
import trio

from ... import _process
from ..._tool import InvalidArgs, ToolContext, ToolError, ToolResult, format_duration
from .._ignore import Glob, IgnoreTree
from .._listing import (
    display,
    glob_param,
    int_param,
    locate,
    run_in_slices,
    str_param,
    tree_path,
)
from .._sandbox import Sandbox, as_sandbox, failure_message, warn_unavailable
from .._workspace import PathTool, Workspace, as_workspace
from ._common import (
    _READ_CHUNK,
    _REAP_SECONDS,
    _Collector,
    log,
)
from ._python import (
    _Matcher,
    _python_lines,
    _PythonSearch,
)
from ._rg import (
    _drain,
    _rg_argv,
    _rg_failure,
    _RgReader,
    _top_venvs,
)

__all__ = ["SearchTool"]

# --------------------------------------------------------------------------- the tool

_SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "minLength": 1,
            "description": "The regular expression to look for, one line at a time.",
        },
        "path": {
            "type": "string",
            "default": ".",
            "description": "The directory (or file) to search, relative to the working directory.",
        },
        "include": {
            "type": "string",
            "description": (
                "Only search files matching this glob: `*.py` in any directory, "
                "`src/**/*.ts` from the working directory, `*.{js,ts}`; `!*.min.js` excludes."
            ),
        },
        "case_sensitive": {
            "type": "boolean",
            "default": False,
            "description": "Match case exactly (default: ignore case).",
        },
        "context": {
            "type": "integer",
            "minimum": 0,
            "maximum": 10,
            "default": 0,
            "description": "Lines to show before and after each match.",
        },
        "max_results": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "default": 100,
            "description": "Stop after this many matching lines (over all files).",
        },
    },
    "required": ["pattern"],
    "additionalProperties": False,
}


@attrs.frozen(eq=False)
class SearchTool(PathTool):
    """The ``search`` tool: lines matching a regex, in the files ``list_files`` would list.

    Output: ``path:line:text`` for each match, ``path-line-text`` for context
    lines, ``--`` between groups of lines of a file that are not adjacent;
    lines longer than ``max_line_chars`` are cut with ``…``. Then ``(N matches
    in M files)``, or, past ``max_results``, a note that there are more.
    ``details`` is ``{"matches", "files", "truncated", "engine", "timed_out"}``
    (engine: ``"rg"`` or ``"python"``). See the module docstring for the
    engines and where they differ.

    Args:
        workspace: The root every path is confined to (a :class:`Workspace` or a path).
        time_limit: Seconds; a longer search stops there and says its results are incomplete.
        max_line_chars: Longer lines are cut.
        timeout: Seconds, or None to use the loop's ``tool_timeout``.
        sandbox: A :class:`~agentloop.tools.Sandbox` to run ripgrep in, read-only
            (True: ``Sandbox()``), or None. Unavailable here: a WARNING, logged
            once, and ripgrep runs unconfined.

    Raises:
        TypeError: ``sandbox`` is not a Sandbox, a bool or None.
    """

    workspace: Workspace = attrs.field(factory=Workspace, converter=as_workspace)
    time_limit: float = attrs.field(default=30.0, kw_only=True)
    max_line_chars: int = attrs.field(default=500, kw_only=True)
    timeout: float | None = attrs.field(default=None, kw_only=True)
    sandbox: Sandbox | None = attrs.field(default=None, kw_only=True, converter=as_sandbox)
    _launcher: tuple[str, ...] | None = attrs.field(init=False, repr=False)

    name = "search"
    replay_safe = True  # read-only: safe to run again after a crash
    label = "Search"
    description = (
        "Search file contents for a regular expression (case-insensitive unless "
        "case_sensitive is true) under a directory of the working directory. Shows "
        "`path:line:text` for each matching line, and `path-line-text` for the `context` "
        "lines around it. Leaves out .git, node_modules, virtualenvs, .gitignore'd and binary "
        "files. Filter files with an `include` glob (`*.py`). A pattern starting with `-` is "
        "fine. Shows the first `max_results` matches (default 100): narrow the pattern, path "
        "or include to see the rest."
    )
    parameters_schema = _SEARCH_SCHEMA

    @_launcher.default
    def _launcher_prefix(self) -> tuple[str, ...] | None:
        """The sandbox launcher's command line up to ``--``; None: rg runs unconfined."""
        if self.sandbox is None:
            return None
        status = self.sandbox.status()
        if not status.available:
            warn_unavailable(status)
            return None
        return tuple(self.sandbox.wrap([], self.workspace.root, read_only=True))

    default_path = "."

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Search; see the class docstring."""
        pattern = str_param(params, "pattern")
        if not pattern:
            raise InvalidArgs("'pattern' must be a non-empty string")
        raw = str_param(params, "path", ".") or "."
        glob = glob_param(params, "include")
        case_sensitive = params.get("case_sensitive", False)
        if not isinstance(case_sensitive, bool):
            raise InvalidArgs(f"'case_sensitive' must be true or false, got {case_sensitive!r}")
        context = int_param(params, "context", 0, 0, 10)
        max_results = int_param(params, "max_results", 100, 1, 1000)

        shown, kind = await trio.to_thread.run_sync(locate, self.workspace, raw)
        if kind == "missing":
            raise ToolError(f"Path not found: {display(shown)}")
        if kind == "other":
            raise ToolError(f"Not a file or directory: {display(shown)}")
        start = tree_path(shown)
        workspace = self.workspace
        if kind == "file" and workspace.strict:  # refused as read_file refuses it
            path = workspace.root / start
            await trio.to_thread.run_sync(
                lambda: workspace.check_file(path, os.stat(path), display(shown))
            )
        tree = IgnoreTree(workspace.root, glob, workspace.hides if workspace.strict else None)
        collector = _Collector(max_results, context, self.max_line_chars)
        rg = shutil.which("rg")
        engine = "rg" if rg is not None else "python"
        finished = True
        if not (kind == "file" and glob is not None and not glob.accepts(start)):
            outcome = None
            if rg is not None:
                outcome = await self._search_rg(
                    rg, pattern, shown, kind, tree, collector, case_sensitive, context
                )
            if outcome is None:  # no rg, or an rg that cannot run
                engine = "python"
                outcome = await self._search_python(
                    pattern, start, kind, tree, collector, case_sensitive, context
                )
            finished = outcome
        return self._report(collector, pattern, shown, glob, engine, finished)

    async def _search_python(
        self,
        pattern: str,
        start: str,
        kind: str,
        tree: IgnoreTree,
        collector: _Collector,
        case_sensitive: bool,
        context: int,
    ) -> bool:
        matcher = _Matcher.compile(pattern, case_sensitive)
        lines = _python_lines(tree, start, kind == "file", matcher, context)
        try:
            return await run_in_slices(_PythonSearch(lines, collector).step, self.time_limit)
        finally:
            lines.close()

    async def _search_rg(
        self,
        rg: str,
        pattern: str,
        shown: str,
        kind: str,
        tree: IgnoreTree,
        collector: _Collector,
        case_sensitive: bool,
        context: int,
    ) -> bool | None:
        """Run rg: True if it ran to the end or to the cap, False if the time limit stopped
        it, None if it could not run (not executable, flags it does not know...)."""
        start = tree_path(shown)
        venvs = await trio.to_thread.run_sync(_top_venvs, tree.root, start) if kind == "dir" else []
        include = tree.glob.pattern if tree.glob is not None else None
        argv = _rg_argv(
            rg,
            pattern,
            shown,
            case_sensitive=case_sensitive,
            context=context,
            include=include,
            venvs=venvs,
        )
        reader = _RgReader(tree, start, collector)
        stderr = bytearray()
        try:
            process = await _process.start(
                [*(self._launcher or ()), *argv],
                cwd=str(tree.root),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError as error:
            log.warning("search: cannot run %s, using the Python engine instead: %s", rg, error)
            return None
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_drain, process.stderr, stderr)
                with trio.move_on_after(self.time_limit) as scope:
                    assert process.stdout is not None
                    while not collector.full:
                        chunk = await process.stdout.receive_some(_READ_CHUNK)
                        if not chunk:
                            break
                        await trio.to_thread.run_sync(reader.feed, bytes(chunk))
                    if not collector.full:
                        await process.wait()
                if process.returncode is None:
                    _process.kill_group(
                        process
                    )  # the cap or the time limit: rg's work is not wanted
        finally:
            if process.returncode is None:
                _process.kill_group(process)
            with trio.CancelScope(shield=True):
                with trio.move_on_after(_REAP_SECONDS):
                    await process.wait()
                for stream in (process.stdout, process.stderr):
                    if stream is not None:
                        await stream.aclose()
        if scope.cancelled_caught:
            return False
        if self._launcher is not None:
            why = failure_message(process.returncode, b"", bytes(stderr))
            if why is not None and not reader.saw_summary:
                log.warning("search: rg could not be sandboxed, using the Python engine: %s", why)
                return None
        if process.returncode == 2 and not reader.saw_summary:
            _rg_failure(pattern, stderr.decode("utf-8", "replace"))
            return None
        return True

    def _report(
        self,
        collector: _Collector,
        pattern: str,
        shown: str,
        glob: Glob | None,
        engine: str,
        finished: bool,
    ) -> ToolResult:
        if collector.matches == 0:
            text = f"No matches for '{pattern}' in {display(shown)}"
            if glob is not None:
                text += f" (files matching {glob.pattern})"
        elif collector.full:
            matches = "match" if collector.matches == 1 else "matches"
            text = "\n".join(collector.lines) + (
                f"\n\n(showing the first {collector.matches} {matches}; there are more — "
                "narrow the pattern or path)"
            )
        else:
            matches = "match" if collector.matches == 1 else "matches"
            files = "file" if collector.files == 1 else "files"
            text = "\n".join(collector.lines) + (
                f"\n\n({collector.matches} {matches} in {collector.files} {files})"
            )
        if not finished:
            text += (
                f"\n(search stopped after {format_duration(self.time_limit)}; "
                "results are incomplete)"
            )
        details = {
            "matches": collector.matches,
            "files": collector.files,
            "truncated": collector.full,
            "engine": engine,
            "timed_out": not finished,
        }
        return ToolResult.text(text, details=details)
