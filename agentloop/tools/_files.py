"""read_file and write_file, and :func:`atomic_write`, which every file-changing tool uses.

Paths go through :class:`~agentloop.tools.Workspace`; all file I/O runs in
``trio.to_thread.run_sync``, never on the trio thread.
"""

from __future__ import annotations

import base64
import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from .._tool import InvalidArgs, ToolContext, ToolError, ToolResult
from .._types import ImageContent, TextContent
from .._words import plural as _plural
from ._workspace import PathTool, Workspace, as_workspace, path_lock

__all__ = ["ReadFileTool", "WriteFileTool", "atomic_write"]

KiB = 1024
MiB = 1024 * KiB

#: How many leading bytes are sniffed for image magic numbers and NUL bytes.
SNIFF_BYTES = 8 * KiB


# --------------------------------------------------------------------------- shared helpers


def path_param(params: Mapping[str, Any], key: str = "path") -> str:
    """The string argument ``key``, or :class:`InvalidArgs` naming it."""
    value = params.get(key)
    if not isinstance(value, str):
        raise InvalidArgs(f"'{key}' must be a string (a file path relative to the working root)")
    return value


def int_param(params: Mapping[str, Any], key: str, default: int) -> int:
    """The integer argument ``key`` (>= 1), ``default`` when absent."""
    value = params.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgs(f"'{key}' must be an integer >= 1, got {value!r}")
    return value


async def resolve(workspace: Workspace, raw: str) -> tuple[Path, str]:
    """The resolved path and how results show it; resolving (lstat, readlink) runs in a thread."""
    path = await trio.to_thread.run_sync(workspace.resolve, raw)
    return path, workspace.relative(path)


def size_text(n: int) -> str:
    """``256 KiB``, ``50 MiB``, or ``1234 bytes``."""
    if n >= MiB and n % MiB == 0:
        return f"{n // MiB} MiB"
    if n >= KiB and n % KiB == 0:
        return f"{n // KiB} KiB"
    return plural(n, "byte")


def plural(n: int, word: str) -> str:
    """``1 line``, ``2 lines`` (:func:`agentloop._words.plural`)."""
    return _plural(n, word)


def numbered(number: int, line: str, max_chars: int) -> str:
    """One line as read_file shows it: ``cat -n`` numbering, long lines cut."""
    if len(line) > max_chars:
        more = plural(len(line) - max_chars, "more character")
        line = f"{line[:max_chars]}… [line truncated: {more}]"
    return f"{number:>6}\t{line}"


def split_lines(text: str) -> list[str]:
    """The lines of ``text``, split on ``\\n`` only, each without its trailing ``\\r``.

    A final newline ends the last line rather than starting an empty one.
    """
    if not text:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def line_endings(text: str) -> str:
    """``"crlf"``, ``"mixed"`` or ``"lf"``: how ``text`` ends its lines."""
    crlf = text.count("\r\n")
    if not crlf:
        return "lf"
    return "crlf" if crlf == text.count("\n") else "mixed"


def sniff_image(head: bytes) -> str | None:
    """The MIME type of a PNG, JPEG, GIF or WEBP image from its first bytes, else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def os_error(action: str, shown: str, error: OSError, *, missing_hint: str = "") -> ToolError:
    """A ToolError for an OSError the model can act on: it names the path and the cause."""
    if isinstance(error, PermissionError):
        return ToolError(f"Cannot {action} {shown}: permission denied")
    if isinstance(error, FileNotFoundError | NotADirectoryError):
        return ToolError(f"File not found: {shown}{missing_hint}")
    reason = error.strerror or str(error)
    return ToolError(f"Cannot {action} {shown}: {reason}")


def stat_file(
    path: Path, shown: str, *, action: str, directory_hint: str, missing_hint: str = ""
) -> os.stat_result:
    """``os.stat(path)``, checked to be a regular file. Blocking: call it in a thread."""
    try:
        info = os.stat(path)
    except OSError as error:
        raise os_error(action, shown, error, missing_hint=missing_hint) from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory, not a file. {directory_hint}")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is not a regular file (a device, socket or pipe)")
    return info


# --------------------------------------------------------------------------- atomic_write


def atomic_write_sync(path: Path, data: bytes) -> None:
    """Blocking :func:`atomic_write`, for code already running in a worker thread."""
    target = Path(os.path.realpath(path))
    directory = target.parent
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None  # a new file: O_CREAT with 0o666 applies the umask
    else:
        if not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, "the file is read-only", str(target))
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        temp = directory / f".{target.name[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(temp, flags, 0o666)
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
        break
    else:  # pragma: no cover
        raise FileExistsError(errno.EEXIST, "could not create a temporary file", str(directory))
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            if mode is not None:
                os.fchmod(file.fileno(), mode)
            os.fsync(file.fileno())
        os.replace(temp, target)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
    # Make the rename itself durable; a directory that cannot be fsynced is no error.
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(dir_fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(dir_fd)


async def atomic_write(path: Path, data: bytes) -> None:
    """Replace the file at ``path`` with ``data``, all at once, in a worker thread.

    The bytes go to a temporary file in the same directory
    (``.<name>.<random>.tmp``), which is flushed, fsynced and given the mode of
    the file it replaces (a new file gets ``0o666`` minus the umask), then
    renamed over ``path`` with :func:`os.replace`. A reader sees the old
    content or the new, never a mix; on any failure the temporary file is
    removed and ``path`` is untouched.

    A symlink at ``path`` is followed: its target is replaced. The parent
    directory must exist. A file without write permission is refused with
    :class:`PermissionError`, as ``open(path, "w")`` would.

    Raises:
        OSError: the write failed (``path`` is unchanged).

    Cancellation waits for the worker thread: the write completes whole, or
    fails and leaves ``path`` unchanged, before :exc:`trio.Cancelled` is raised.
    """
    await trio.to_thread.run_sync(atomic_write_sync, path, data)


# --------------------------------------------------------------------------- read_file

_READ_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "The file to read, relative to the working directory.",
        },
        "offset": {
            "type": "integer",
            "minimum": 1,
            "default": 1,
            "description": "The first line to show (1-based).",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "default": 2000,
            "description": "How many lines to show at most.",
        },
    },
    "required": ["path"],
    "additionalProperties": False,
}

_DIRECTORY_HINT = "Use list_files to see what it contains."


@attrs.frozen(eq=False)
class ReadFileTool(PathTool):
    """The ``read_file`` tool: a text file with numbered lines, or an image.

    Text comes back like ``cat -n`` (``f"{n:>6}\\t{line}"``) under a header line
    (``[notes.txt: 12 lines]``), a page at a time for long files. Undecodable
    bytes show as U+FFFD; ``\\r\\n`` endings are dropped from the lines and
    noted in the header. PNG, JPEG, GIF and WEBP files (recognised by their
    content) come back as an :class:`~agentloop.ImageContent`. Other binary
    files are refused.

    Args:
        workspace: The root every path is confined to (a :class:`Workspace` or a path).
        max_bytes: Larger text files are refused.
        max_image_bytes: Larger images are refused.
        max_output_bytes: One call shows at most this much text (UTF-8).
        max_line_chars: Longer lines are cut, with a marker saying how much.
        default_limit: Lines per call when the model gives no ``limit``.
        timeout: Seconds, or None to use the loop's ``tool_timeout``.
    """

    workspace: Workspace = attrs.field(factory=Workspace, converter=as_workspace)
    max_bytes: int = attrs.field(default=50 * MiB, kw_only=True)
    max_image_bytes: int = attrs.field(default=20 * MiB, kw_only=True)
    max_output_bytes: int = attrs.field(default=256 * KiB, kw_only=True)
    max_line_chars: int = attrs.field(default=2000, kw_only=True)
    default_limit: int = attrs.field(default=2000, kw_only=True)
    timeout: float | None = attrs.field(default=None, kw_only=True)

    name = "read_file"
    replay_safe = True  # read-only: safe to run again after a crash
    label = "Read file"
    description = (
        "Read a file in the working directory. Text is returned with line numbers, "
        "like `cat -n` (`     1<TAB>first line`); the numbers and the tab are not part of "
        "the file, so leave them out of edit_file's old_text. Shows up to 2000 lines "
        "starting at `offset` (1-based); for long files the header says which offset "
        "reads on. Lines over 2000 characters are cut. PNG, JPEG, GIF and WEBP images "
        "are returned as images. Other binary files cannot be read."
    )
    parameters_schema = _READ_SCHEMA

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Read the file; see the class docstring."""
        raw = path_param(params)
        offset = int_param(params, "offset", 1)
        limit = int_param(params, "limit", self.default_limit)
        path, shown = await resolve(self.workspace, raw)
        files = self.workspace.files
        if files is not None:  # an editor's buffers
            text = await files.read_text(path)
            if len(text) > self.max_bytes:
                raise self._too_large(shown, len(text))
            return self._page(text, shown, offset, limit)
        return await trio.to_thread.run_sync(self._read, path, shown, offset, limit)

    def _read(self, path: Path, shown: str, offset: int, limit: int) -> ToolResult:
        info = stat_file(path, shown, action="read", directory_hint=_DIRECTORY_HINT)
        self.workspace.check_file(path, info, shown)
        try:
            with open(path, "rb") as file:
                head = file.read(SNIFF_BYTES)
                mime = sniff_image(head)
                if mime is not None:
                    cap = self.max_image_bytes
                    if info.st_size > cap:
                        raise ToolError(
                            f"{shown} is an image of {info.st_size} bytes, over the "
                            f"{size_text(cap)} that read_file sends to the model"
                        )
                    data = head + file.read(cap + 1 - len(head))
                elif b"\x00" in head:
                    raise ToolError(
                        f"{shown} is a binary file ({plural(info.st_size, 'byte')}); "
                        "read_file shows text and images only"
                    )
                else:
                    if info.st_size > self.max_bytes:
                        raise self._too_large(shown, info.st_size)
                    data = head + file.read(self.max_bytes + 1 - len(head))
        except OSError as error:
            raise os_error("read", shown, error) from None
        if mime is not None:
            if len(data) > self.max_image_bytes:  # it grew since the stat
                raise ToolError(f"{shown} is an image over {size_text(self.max_image_bytes)}")
            return ToolResult(
                (
                    ImageContent(base64.b64encode(data).decode("ascii"), mime),
                    TextContent(f"[{shown}: {mime}, {len(data)} bytes]"),
                ),
                details={"path": shown, "mime_type": mime, "bytes": len(data)},
            )
        if len(data) > self.max_bytes:
            raise self._too_large(shown, len(data))
        return self._page(data.decode("utf-8", errors="replace"), shown, offset, limit)

    def _too_large(self, shown: str, size: int) -> ToolError:
        return ToolError(
            f"{shown} is too large to read ({size} bytes; the limit is "
            f"{size_text(self.max_bytes)}). Use search to find the lines you need, or bash "
            "(head, tail, sed -n 'START,ENDp') to read part of it."
        )

    def _page(self, text: str, shown: str, offset: int, limit: int) -> ToolResult:
        text = text.removeprefix("\ufeff")
        lines = split_lines(text)
        total = len(lines)
        if total == 0:
            return ToolResult.text(
                f"[{shown}: empty file]",
                details={"path": shown, "start_line": 0, "end_line": 0, "total_lines": 0},
            )
        if offset > total:
            raise ToolError(
                f"offset {offset} is past the end of {shown}, which has {plural(total, 'line')}. "
                f"Use an offset from 1 to {total}."
            )
        budget = self.max_output_bytes
        body: list[str] = []
        capped = False
        for number in range(offset, min(offset + limit, total + 1)):
            line = numbered(number, lines[number - 1], self.max_line_chars)
            size = len(line.encode("utf-8", errors="surrogatepass")) + 1
            if body and size > budget:
                capped = True
                break
            budget -= size
            body.append(line)
        end = offset + len(body) - 1
        endings = {"crlf": " (CRLF line endings)", "mixed": " (mixed CRLF and LF line endings)"}
        note = endings.get(line_endings(text), "")
        span = f"line {offset}" if end == offset else f"lines {offset}-{end}"
        if offset == 1 and end == total:
            header = f"[{shown}: {plural(total, 'line')}{note}]"
        elif capped:
            header = (
                f"[{shown}: {span} of {total}{note}. Output stopped at "
                f"{size_text(self.max_output_bytes)}; use offset={end + 1} to read more.]"
            )
        elif end < total:
            header = f"[{shown}: {span} of {total}{note}. Use offset={end + 1} to read more.]"
        else:
            header = f"[{shown}: {span} of {total}{note}]"
        return ToolResult.text(
            "\n".join([header, *body]),
            details={"path": shown, "start_line": offset, "end_line": end, "total_lines": total},
        )


# --------------------------------------------------------------------------- write_file

_WRITE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {
            "type": "string",
            "description": "The file to write, relative to the working directory.",
        },
        "content": {
            "type": "string",
            "description": "The complete new content of the file.",
        },
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


@attrs.frozen(eq=False)
class WriteFileTool(PathTool):
    """The ``write_file`` tool: create or replace a whole file, atomically.

    Missing parent directories are created. An existing file keeps its mode.
    Writing through a symlink that stays inside the root replaces its target.

    Args:
        workspace: The root every path is confined to (a :class:`Workspace` or a path).
        timeout: Seconds, or None to use the loop's ``tool_timeout``.
    """

    workspace: Workspace = attrs.field(factory=Workspace, converter=as_workspace)
    timeout: float | None = attrs.field(default=None, kw_only=True)

    name = "write_file"
    label = "Write file"
    description = (
        "Create a file, or replace all of an existing file's content, in the working "
        "directory. Missing parent directories are created. The write is atomic. To change "
        "part of an existing file, prefer edit_file."
    )
    parameters_schema = _WRITE_SCHEMA

    writes = True

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Write the file; see the class docstring."""
        raw = path_param(params)
        content = params.get("content")
        if not isinstance(content, str):
            raise InvalidArgs("'content' must be a string: the complete new file content")
        try:
            data = content.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidArgs(
                "'content' contains a lone surrogate (an invalid \\ud800-\\udfff escape); "
                "send valid Unicode text"
            ) from None
        path, shown = await resolve(self.workspace, raw)
        if raw.endswith(("/", os.sep)):
            raise ToolError(f"{raw} ends with '/', so it names a directory; give a file path")
        files = self.workspace.files
        async with path_lock(path):  # never interleaved with another change of this file
            if files is not None:  # an editor's buffers
                created = not await trio.Path(path).exists()
                await files.write_text(path, content)
            else:
                created = await trio.to_thread.run_sync(self._prepare, path, shown)
                try:
                    await atomic_write(path, data)
                except OSError as error:
                    raise os_error("write", shown, error) from None
        state = "new file" if created else "replaced"
        return ToolResult.text(
            f"Wrote {plural(len(data), 'byte')} to {shown} ({state})",
            details={"bytes": len(data), "created": created},
        )

    def _prepare(self, path: Path, shown: str) -> bool:
        """Check the target and make its parents; True if the file is new."""
        try:
            self.workspace.check_file(path, os.stat(path), shown)
        except OSError:
            pass  # a new file, or one the write will report on
        if path.is_dir():
            raise ToolError(
                f"{shown} is a directory; write_file writes files. Give a file path, "
                f"such as {shown}/<name>."
            )
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ToolError(
                f"Cannot write {shown}: a parent of it is a file, not a directory"
            ) from None
        except OSError as error:
            raise os_error("write", shown, error) from None
        return not path.exists()
