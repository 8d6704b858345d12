"""Listing and finding saved sessions."""

from __future__ import annotations

import datetime
import os
from pathlib import Path

import attrs

from .._types import UserMessage as _UserMessage
from ._load import load_session
from ._record import session_directory


@attrs.frozen
class SessionInfo:
    """A saved session, as :func:`list_sessions` describes it.

    Attributes:
        session_id: The session's id.
        path: Its file.
        modified: When the file was last written.
        title: The first user prompt, on one line, cut at 60 characters.
        messages: How many messages the conversation has.
        cwd: The directory the session was started in (the ``cwd`` of its
            header's ``meta``), or None when the file does not say (a file
            written by an older version, or by a recorder given no ``cwd``).
    """

    session_id: str
    path: Path
    modified: datetime.datetime
    title: str
    messages: int
    cwd: Path | None = None


def list_sessions(directory: str | os.PathLike[str] | None = None) -> list[SessionInfo]:
    """The sessions in ``directory`` (default: :func:`session_directory`), newest first.

    ``title`` is the first user prompt (cut at 60 characters); ``cwd`` the
    directory the session was started in, when its header says. Files that
    are not sessions are left out.
    """
    folder = Path(directory) if directory is not None else session_directory()
    if not folder.is_dir():
        return []
    found: list[SessionInfo] = []
    for path in folder.glob("*.jsonl"):
        try:
            session = load_session(path)
        except (OSError, ValueError):
            continue
        title = next(
            (m.text for m in session.messages if isinstance(m, _UserMessage) and m.text), ""
        )
        title = " ".join(title.split())
        if len(title) > 60:
            title = title[:59] + "…"
        modified = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.UTC)
        cwd = session.meta.get("cwd")
        found.append(
            SessionInfo(
                session.session_id,
                path,
                modified,
                title,
                len(session.messages),
                Path(cwd) if isinstance(cwd, str) and cwd else None,
            )
        )
    found.sort(key=lambda info: (info.modified, info.session_id), reverse=True)
    return found


def find_session(session_id: str, directory: str | os.PathLike[str] | None = None) -> Path:
    """The file of the session ``session_id`` (or the only one whose id starts with it).

    Raises:
        LookupError: no session has that id, or several start with it.
    """
    folder = Path(directory) if directory is not None else session_directory()
    exact = folder / f"{session_id}.jsonl"
    if exact.is_file():
        return exact
    matches = sorted(folder.glob(f"{session_id}*.jsonl")) if folder.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise LookupError(f"no session {session_id!r} in {folder}")
    names = ", ".join(p.stem for p in matches)
    raise LookupError(f"several sessions start with {session_id!r}: {names}")
