"""Folder trust: a project's files act only in a folder the user trusted.

A project's folder (the top of its repository, else the working directory)
brings files the user did not write: its ``.agentloop/settings.toml`` (and the
``mcp_servers`` file it names; later its hooks and skills). What in them only
narrows what the agent may do applies anyway (see ``_widening``); what widens
it applies only when the folder is trusted *for those files as they are now*:

- the user's own settings list it (``[trust] folders = ["~/src/work"]``: those
  folders and every folder under them), or
- ``--trust`` is given (this run only; nothing is written), or
- the user said yes when asked: the interactive agent asks once, showing what
  the files would change, and remembers the answer with the SHA-256 of each
  file in ``trusted-folders.json``, next to the user's settings file. A file
  that changed since (or appeared since) makes the folder untrusted again,
  until the user says yes to the new contents.

Without a terminal to ask on (``-p``, standard input not a terminal), the
widening part is left out with one warning on stderr.

:class:`TrustStore`, :class:`FolderTrust`, :func:`ask_trust` and
:func:`ignoring_warning` are for any kind of project file (hooks and skills
too): :meth:`TrustStore.check` takes the files' fingerprints (``{path:
sha256}``, of the bytes that were read, so that what is trusted is what is
used), and the question takes their :class:`~._widening.Widening` items, so
that one question covers them all.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

import attrs

from .._text import loads
from .._visible import visible_line
from ._args import Options
from ._settings import (
    Settings,
    SettingsFiles,
    inside,
    merge_settings,
    read_settings_files,
    user_settings_path,
)
from ._widening import ProjectReview, Widening, review_project

__all__ = [
    "TRUST_FILE",
    "FolderTrust",
    "TrustStore",
    "load_settings",
    "settle_settings",
]

#: The file, next to the user's settings, that remembers the folders trusted.
TRUST_FILE = "trusted-folders.json"
_YES = frozenset({"y", "yes"})


def trust_store_path(environ: Mapping[str, str]) -> Path:
    """Where the trusted folders are remembered: beside the user's settings file."""
    return user_settings_path(environ).with_name(TRUST_FILE)


@attrs.frozen(kw_only=True)
class FolderTrust:
    """Whether a folder is trusted for some of its files, as they are now.

    Attributes:
        folder: The project's folder.
        trusted: Its files may widen what the agent does.
        how: Why it is trusted: ``"settings"`` (the user's settings list it),
            ``"remembered"`` (the user said yes to these very files); None: it is not.
        changed: The files that are not as they were when the folder was
            trusted (changed, or new since); empty when it is trusted.
        known: The folder was trusted before, for other contents of the files.
    """

    folder: Path
    trusted: bool
    how: Literal["settings", "remembered"] | None = None
    changed: tuple[Path, ...] = ()
    known: bool = False


class TrustStore:
    """The folders the user trusted, and the files each was trusted for.

    The file is JSON: ``{"version": 1, "folders": {FOLDER: {"files": {RELATIVE_PATH:
    "sha256:..."}, "trusted": ISO_TIME}}}``. It is written atomically (a new file
    renamed over the old one), readable by its owner only, under a lock so that
    two agents do not lose each other's answers. A file that others can write,
    or that is not JSON, is not used (see :attr:`warning`).

    Args:
        path: The file (see :func:`trust_store_path`).
        folders: Folders the user's settings trust (``[trust] folders``), with
            everything under them.
    """

    def __init__(self, path: Path, *, folders: Sequence[Path] = ()) -> None:
        self.path = path
        self.folders = tuple(folders)
        #: Why the file was not used, for the user; None: it was, or there is none.
        self.warning: str | None
        self._entries, self.warning = self._load()

    def _load(self) -> tuple[dict[str, Any], str | None]:
        """The file's folders, or none and why the file is not used."""
        try:
            with self.path.open("rb") as file:
                info = os.fstat(file.fileno())
                raw = file.read()
        except FileNotFoundError:
            return {}, None
        except OSError as error:
            return {}, f"agentloop: cannot read {self.path}: {error.strerror or error}"
        if info.st_mode & 0o022 or (hasattr(os, "getuid") and info.st_uid != os.getuid()):
            why = "other users can change it (it must be yours, and writable by you only)"
            return {}, f"agentloop: {self.path} is not used: {why}"
        try:
            data = loads(raw.decode("utf-8"))
        except ValueError as error:  # not UTF-8, not JSON, nested too deep
            return {}, f"agentloop: {self.path} is not used: it is not valid JSON ({error})"
        folders = data.get("folders") if isinstance(data, dict) else None
        if not isinstance(folders, dict):
            return {}, f"agentloop: {self.path} is not used: it has no 'folders' object"
        return folders, None

    def check(self, folder: Path, fingerprints: Mapping[Path, str]) -> FolderTrust:
        """Whether ``folder`` is trusted for its files as ``fingerprints`` give them.

        ``fingerprints`` maps each project file that acts (absolute paths under
        ``folder``) to the ``sha256`` of its bytes, as read. A file the folder was
        not trusted for, or that changed since, makes it untrusted.
        """
        if any(inside(folder, trusted) for trusted in self.folders):
            return FolderTrust(folder=folder, trusted=True, how="settings")
        entry = self._entries.get(str(folder))
        files = entry.get("files") if isinstance(entry, dict) else None
        if not isinstance(files, dict):
            return FolderTrust(folder=folder, trusted=False, changed=tuple(fingerprints))
        changed = tuple(
            path for path, digest in fingerprints.items() if files.get(_key(folder, path)) != digest
        )
        if changed:
            return FolderTrust(folder=folder, trusted=False, changed=changed, known=True)
        return FolderTrust(folder=folder, trusted=True, how="remembered", known=True)

    def remember(self, folder: Path, fingerprints: Mapping[Path, str]) -> None:
        """Trust ``folder`` for its files as ``fingerprints`` give them; write it down.

        The fingerprints of other files the folder was trusted for are kept.

        Raises:
            OSError: the file cannot be written.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with self._locked():
            entries, _ = self._load()  # another agent may have written it since
            entry = entries.get(str(folder))
            old = entry.get("files") if isinstance(entry, dict) else None
            files = dict(old) if isinstance(old, dict) else {}
            files.update({_key(folder, path): digest for path, digest in fingerprints.items()})
            now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
            entries[str(folder)] = {"files": files, "trusted": now.isoformat()}
            self._write({"version": 1, "folders": entries})  # an unusable file is replaced
            self._entries, self.warning = entries, None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            yield
            return
        lock = self.path.with_name(self.path.name + ".lock")
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _write(self, data: Mapping[str, Any]) -> None:
        text = json.dumps(data, indent=2, sort_keys=True) + "\n"
        fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as file:
                file.write(text)
                file.flush()
                os.fsync(file.fileno())
            os.chmod(temporary, 0o600)
            os.replace(temporary, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise


def _key(folder: Path, path: Path) -> str:
    try:
        return path.relative_to(folder).as_posix()
    except ValueError:
        return str(path)


def _user_folders(files: SettingsFiles) -> tuple[Path, ...]:
    trust = (files.user or {}).get("trust", {})
    return tuple(trust.get("folders", ()))


def _review(
    files: SettingsFiles, options: Options, *, any_run: bool = False
) -> ProjectReview | None:
    if files.project is None:
        return None
    return review_project(
        files.user,
        files.project,
        root=options.directory,
        sandbox_flag=options.sandbox_flag,
        model_flag=options.model is not None,
        mcp_flag=options.mcp_config is not None,
        any_run=any_run,
    )


def load_settings(
    directory: Path,
    environ: Mapping[str, str],
    *,
    trusted: bool,
    sandbox_flag: Literal["on", "auto"] | None = None,
) -> Settings:
    """The user's settings with the project's over them: all of the project's when
    ``trusted``, else only what narrows (asks nothing, warns of nothing).

    Raises:
        SettingsError: a file cannot be used.
    """
    files = read_settings_files(directory, environ)
    options = Options(directory=Path(directory).resolve(), sandbox_flag=sandbox_flag)
    review = _review(files, options)
    project = files.project if trusted or review is None else review.narrowing
    return merge_settings(files, project, sandbox_flag=sandbox_flag)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, OSError, ValueError):
        return False


def settle_settings(
    options: Options,
    environ: Mapping[str, str],
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> Settings:
    """The settings of this run, the folder's trust settled first (see the module docstring).

    When the project's file would widen what the agent may do and the folder is
    not trusted for it: in an interactive session on a terminal (``stdin`` and
    ``stdout``), the user is asked on it, shown all the file could widen in any
    run (with other options too), and a yes is remembered; otherwise
    only the narrowing part applies, and ``stderr`` says what was left out
    (``--sessions``: silently, as nothing runs). Notes about files not read go
    to ``stderr``.

    Raises:
        SettingsError: a settings file cannot be used.
        SystemExit: Ctrl-C at the question (status 130).
    """
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    files = read_settings_files(options.directory, environ)
    for note in files.notes:
        print(note, file=stderr, flush=True)
    review = _review(files, options)
    project = files.project
    if review is not None and review.widening and not options.trust:
        store = TrustStore(trust_store_path(environ), folders=_user_folders(files))
        if store.warning is not None:
            print(store.warning, file=stderr, flush=True)
        trust = store.check(files.folder, files.fingerprints)
        if trust.trusted:
            pass
        elif options.sessions:
            project = review.narrowing
        elif not options.one_shot and _is_terminal(stdin) and _is_terminal(stdout):
            # A yes trusts the file for every run: show all it could widen, not only
            # what widens with this run's options.
            every = _review(files, options, any_run=True)
            assert every is not None
            trusted = ask_trust(
                trust,
                store,
                files.fingerprints,
                source=str(files.project_path),
                items=every.widening,
                stdin=stdin,
                stdout=stdout,
            )
            if not trusted:
                project = review.narrowing
        else:
            project = review.narrowing
            warning = ignoring_warning(trust, source=str(files.project_path), items=review.widening)
            print(warning, file=stderr, flush=True)
    return merge_settings(files, project, sandbox_flag=options.sandbox_flag)


def ignoring_warning(trust: FolderTrust, *, source: str, items: Sequence[Widening]) -> str:
    """The warning of a run that leaves out ``items``, what the untrusted folder's
    ``source`` (a file's path, or a few files) would allow."""
    if trust.known:
        why = (
            f"{_changed(trust)} since the folder was trusted; run agentloop there to "
            "trust it again, or pass --trust"
        )
    else:
        why = "the folder is not trusted; run agentloop there once to trust it, or pass --trust"
    what = ", ".join(item.text for item in items)
    return visible_line(f"agentloop: ignoring what {source} would allow ({why}): {what}")


def _changed(trust: FolderTrust) -> str:
    names = [_key(trust.folder, path) for path in trust.changed]
    return f"{' and '.join(names)} changed" if names else "the files changed"


def ask_trust(
    trust: FolderTrust,
    store: TrustStore,
    fingerprints: Mapping[Path, str],
    *,
    source: str,
    items: Sequence[Widening],
    stdin: TextIO,
    stdout: TextIO,
) -> bool:
    """Ask on the terminal whether to trust ``trust.folder``, showing ``items`` (what its
    ``source`` would allow); remember a yes for the files of ``fingerprints``.

    Whether the folder is trusted. Any project file that acts (settings, and
    later hooks or skills) can be asked about in the one question: give all
    their items and fingerprints.

    Raises:
        SystemExit: Ctrl-C at the question (status 130).
    """
    folder = trust.folder
    if trust.known:
        head = (
            f"agentloop: {_changed(trust)} since you trusted {folder}; {source} would now "
            "change what the agent may do:"
        )
    else:
        head = f"agentloop: {source} would change what the agent may do in {folder}:"
    lines = [head, *(f"  {item.line}" for item in items), "Trust this folder? [y/N] "]
    stdout.write("\n".join(map(visible_line, lines)))
    stdout.flush()
    try:
        answer = stdin.readline()
    except KeyboardInterrupt:
        stdout.write("\n")
        stdout.flush()
        raise SystemExit(130) from None
    if not answer.endswith("\n"):
        stdout.write("\n")  # the end of the input: the answer's line was not ended
    if answer.strip().lower() not in _YES:
        print(
            visible_line(
                f"agentloop: not trusted: of {source}, only what narrows what the agent may "
                "do applies, for this run."
            ),
            file=stdout,
            flush=True,
        )
        return False
    try:
        store.remember(folder, fingerprints)
    except OSError as error:
        print(
            f"agentloop: trusted for this run; it cannot be remembered ({store.path}: "
            f"{error.strerror or error}).",
            file=stdout,
            flush=True,
        )
    else:
        print(f"agentloop: trusted; remembered in {store.path}.", file=stdout, flush=True)
    return True
