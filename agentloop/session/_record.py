"""Recording a session: the file, its lock, where sessions live."""

from __future__ import annotations

import datetime
import fcntl
import json
import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Literal

from .. import _events as ev
from .._errors import AgentloopError
from .._secrets import redact_urls
from .._text import checked_text
from ..serialization import to_dict

log = logging.getLogger("agentloop.session")

SESSION_FORMAT = 1
"""The version of the file format, in each file's header."""

INTERRUPTED = "The session ended before this tool call finished; it has no result."
"""The result given, on loading, to a tool call the recording has no result for."""

NOT_RUN_AGAIN = (
    "The process stopped while this tool call ran, so its result is unknown; it was not "
    "run again because it may not be safe to repeat. Check its effects before retrying."
)
"""The result :meth:`Session.recover` gives a call that had started and is not safe to repeat."""

Fsync = Literal["call", "turn", "never"]


class SessionLockedError(AgentloopError):
    """Another process has the session open (its recorder holds the session's lock)."""


_KEPT = (
    ev.AgentStart,
    ev.AgentEnd,
    ev.TurnEnd,
    ev.MessageEnd,
    ev.ToolExecutionStart,
    ev.ToolExecutionEnd,
    ev.ToolApprovalRequested,
    ev.ToolApprovalDecided,
    ev.PrunApplied,
    ev.CompactionEnded,
)


# --------------------------------------------------------------------------- where


def session_directory() -> Path:
    """Where sessions are kept: ``$AGENTLOOP_HOME/sessions``, else under the user's data directory.

    The data directory is ``$XDG_DATA_HOME/agentloop``, else
    ``~/.local/share/agentloop``. The directory is not created here.
    """
    home = os.environ.get("AGENTLOOP_HOME")
    if home:
        return Path(home) / "sessions"
    data = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "agentloop" / "sessions"


def new_session_path(directory: str | os.PathLike[str] | None = None) -> Path:
    """A path for a new session file: ``<UTC time>-<random>.jsonl``, in ``directory``.

    The directory (default: :func:`session_directory`) is created if needed.
    """
    folder = Path(directory) if directory is not None else session_directory()
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%d-%H%M%S")
    return folder / f"{stamp}-{secrets.token_hex(3)}.jsonl"


# --------------------------------------------------------------------------- recording


def _redact_meta(value: Any) -> Any:
    """A header's ``meta`` with the credentials of the URLs in its strings redacted."""
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, Mapping):
        return {key: _redact_meta(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_redact_meta(item) for item in value]
    return value


class SessionRecorder:
    """Writes the events of runs to a session file, one JSON object per line.

    Give it every event (:meth:`record` keeps those that matter), or give
    ``recorder.record`` to the loop as its ``journal`` (``Agent(...,
    journal=recorder.record)``): the loop then hands it each event as it
    happens, before the consumer sees it, so a tool call's intent is on file
    before the tool starts and its result as soon as it ends. It writes the
    header first, with ``meta`` (its strings' URLs without their credentials:
    a password, ``?key=``..., see :func:`agentloop._secrets.redact_url`). An
    existing file is appended to (a resumed session goes on
    in the same file; a line torn by a crash is ended first). A sub-agent's
    events can be recorded too (its own ``journal``, or ``on_event``): they
    carry their own ``loop_id`` and are linked by the parent's
    ``ToolExecutionEnd.child_loop_id``.

    Every line is handed to the operating system as it is written, so a killed
    process loses nothing written. ``fsync`` says when the file is also forced
    to the disk (against a power cut): ``"turn"`` (default) at each ``TurnEnd``
    and ``AgentEnd``, ``"call"`` also at each tool call's start and end and
    each message, ``"never"``.

    One process at a time: the recorder holds a lock on the session (an
    ``flock`` on the file, released by the system when the process dies, so a
    dead owner's lock is taken over at once) until :meth:`close`.

    Use it as a context manager, or call :meth:`close`.

    Raises:
        SessionLockedError: another process has the session open.
        OSError: the file cannot be opened or written.
        ValueError: ``fsync`` is not one of the three.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        meta: Mapping[str, Any] | None = None,
        fsync: Fsync = "turn",
    ) -> None:
        if fsync not in ("call", "turn", "never"):
            raise ValueError(f"fsync must be 'call', 'turn' or 'never', got {fsync!r}")
        self.path = Path(path)
        self.fsync: Fsync = fsync
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] | None = self.path.open("a", encoding="utf-8")
        try:
            _lock(self._file.fileno(), self.path)
            exists = os.fstat(self._file.fileno()).st_size > 0
            torn = exists and not _ends_with_newline(self.path)
        except BaseException:
            self._file.close()
            raise
        if torn:  # the last run died mid-line: start on a line of our own
            self._file.write("\n")
        if exists:
            self.session_id = _read_header(self.path).get("id") or self.path.stem
        else:
            self.session_id = self.path.stem
            self._write(
                {
                    "type": "session",
                    "format": SESSION_FORMAT,
                    "id": self.session_id,
                    "created": datetime.datetime.now(datetime.UTC).isoformat(),
                    "meta": _redact_meta(dict(meta or {})),
                }
            )
            self.flush()

    def __repr__(self) -> str:
        return f"<SessionRecorder {str(self.path)!r}>"

    def record(self, event: ev.AgentEvent) -> None:
        """Write ``event`` if it is one a session keeps.

        Raises:
            ValueError: the recorder is closed.
            OSError: the file cannot be written.
        """
        if not isinstance(event, _KEPT):
            return
        self._write(to_dict(event))
        if self.fsync == "never":
            return
        if self.fsync == "call" or isinstance(event, ev.TurnEnd | ev.AgentEnd):
            self.flush()

    def flush(self) -> None:
        """Force what was written to the disk (``fsync``)."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Flush and close the file and release the session; later events are not recorded."""
        if self._file is not None:
            try:
                self.flush()
            finally:
                self._file.close()  # releases the flock
                self._file = None

    def __enter__(self) -> SessionRecorder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _write(self, data: Mapping[str, Any]) -> None:
        if self._file is None:
            raise ValueError(f"the session recorder for {self.path} is closed")
        self._file.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
        self._file.flush()  # to the operating system: a killed process loses nothing


def _lock(fd: int, path: Path) -> None:
    """Take the session's lock (an ``flock`` on its file), or raise SessionLockedError."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SessionLockedError(
            f"session {path} is open in another process; close it there first, or wait "
            "for that process to end"
        ) from None


# --------------------------------------------------------------------------- loading


def _read_header(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8", errors="replace") as file:
        first = file.readline()
    try:
        data = json.loads(checked_text(first))
    except ValueError:
        return {}
    return data if isinstance(data, dict) and data.get("type") == "session" else {}


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as file:
        file.seek(-1, os.SEEK_END)
        return file.read(1) == b"\n"
