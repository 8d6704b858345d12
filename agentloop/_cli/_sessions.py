"""The terminal agent's session file: recording the runs, resuming a session, listing them.

Each event of a run is written to the session's file as it happens (see
:mod:`agentloop.session`), so a crash loses nothing; ``--resume`` and
``/resume`` load a session back into the agent and record to its file from
then on. A session whose last run stopped to await approval comes back with
its pending calls (``agent.pending``), never run by the loading.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import trio

from .. import _events as ev
from .._agent import Agent
from .._types import ToolOutcome, ToolResultMessage
from .._words import plural
from ..session import (
    SessionLockedError,
    SessionRecorder,
    list_sessions,
    load_session,
    new_session_path,
)
from ._commands import ANY_DIRECTORY, choose_session, session_lines
from ._render import Screen
from ._setup import SetupError, describe_call

__all__ = ["SessionLog"]


class SessionLog:
    """The session of one invocation of the terminal agent, in its file.

    The file is opened at the first run (:meth:`open`), a new one in the
    sessions' directory unless a session was resumed (:meth:`resume`); the
    agent's journal (:meth:`record`) writes each event to it. When the file
    cannot be opened or written, the error is said on ``screen`` once and
    the session is not recorded from then on (:attr:`failed`); the run goes on.

    Args:
        screen: Where the errors and the resumed session's notes go.
        directory: The directory the agent works in: its sessions are the ones
            listed and resumed, and a new session's file says it.
        model: The model's label, for a new session's file.
    """

    def __init__(self, screen: Screen, *, directory: Path, model: str) -> None:
        self.screen = screen
        self.directory = directory
        self.model = model
        #: The session's file; None: a new file at the first run.
        self.path: Path | None = None
        #: Recording failed: nothing more is recorded (until another session is resumed).
        self.failed = False
        self._elsewhere = False  # the session was started in another directory
        self._recorder: SessionRecorder | None = None

    @property
    def session_id(self) -> str | None:
        """The id of the session being recorded; None: none is (yet, or any more)."""
        return self.path.stem if self.path is not None and not self.failed else None

    def open(self) -> None:
        """Start recording (a new file, or the resumed session's), unless it is already on.

        An error is said on the screen, and the session is not recorded.
        """
        if self._recorder is not None or self.failed:
            return
        try:
            path = self.path or new_session_path()
            self._recorder = SessionRecorder(
                path, meta={"cwd": str(self.directory), "model": self.model}
            )
        except SessionLockedError as error:
            self.failed = True
            self.screen.error(f"agentloop: this session is not recorded: {error}")
            return
        except OSError as error:
            self.failed = True
            self.screen.error(
                f"agentloop: this session is not recorded: {error} (set AGENTLOOP_HOME to a "
                "directory you can write to)"
            )
            return
        self.path = path

    def record(self, event: ev.AgentEvent) -> None:
        """The agent's journal: write ``event`` to the file (when recording)."""
        if self._recorder is None:
            return
        try:
            self._recorder.record(event)
        except OSError as error:
            self.failed = True
            self.close()
            self.screen.error(f"agentloop: recording stopped: {error}")

    def close(self) -> None:
        """Stop recording and close the file (an error is said on the screen)."""
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            try:
                recorder.close()
            except OSError as error:
                self.screen.error(f"agentloop: the session file could not be closed: {error}")

    async def resume(
        self, agent: Agent, session_id: str, *, any_directory: bool, listing: str
    ) -> None:
        """Load a session (``""``: the latest) into the idle ``agent``; record to its file
        from now on. What was restored is said on the screen.

        Only the sessions started in this directory, unless ``any_directory``;
        ``listing`` is the command that lists them, for the messages.

        Raises:
            SetupError: there is no such session, or it cannot be read.
        """
        here = self.directory
        try:
            sessions = await trio.to_thread.run_sync(list_sessions)
            info = choose_session(
                sessions, session_id, here=here, any_directory=any_directory, listing=listing
            )
            session = await trio.to_thread.run_sync(load_session, info.path)
        except LookupError as error:
            raise SetupError(str(error)) from error
        except (OSError, ValueError) as error:
            raise SetupError(f"cannot resume the session: {error}") from error
        self.close()
        self.path = info.path
        self._elsewhere = info.cwd != here
        self.failed = False
        recovered: tuple[ToolResultMessage, ...] = ()
        if session.suspended is not None:  # its calls wait for decisions: none runs now
            session.restore(agent)
        elif session.interrupted:
            # Calls the stopped process left open: answered now, and recorded.
            self.open()
            recovered = await session.recover(agent)
        else:
            session.restore(agent)
        restored = f"{plural(len(agent.messages), 'message')} restored"
        pending = agent.pending
        if pending:
            calls = ", ".join(f"{describe_call(call)} ({call.tool_call_id})" for call in pending)
            verb = "awaits" if len(pending) == 1 else "await"
            restored += f"; {plural(len(pending), 'call')} {verb} approval: {calls}"
        if info.cwd == here:
            said = f"agentloop: resumed session {session.session_id}: {restored}."
        else:
            of = f"of {info.cwd}" if info.cwd is not None else "of an unknown directory"
            said = (
                f"agentloop: resumed session {session.session_id} {of}: {restored}; "
                f"the agent works in {here}."
            )
        self.screen.line(said)
        for warning in session.warnings:
            self.screen.line(f"agentloop: {warning}", "yellow")
        for result in recovered:
            what = "not run again (it may not be safe to repeat)"
            if result.outcome is not ToolOutcome.NOT_RUN_AGAIN:
                what = "run again"
            self.screen.line(
                f"agentloop: {result.tool_name} was cut short by the stop; {what}.", "yellow"
            )

    async def listing(self, *, any_directory: bool) -> list[str]:
        """The saved sessions, a line each (see :func:`~._commands.session_lines`)."""
        sessions = await trio.to_thread.run_sync(list_sessions)
        return session_lines(sessions, self.path, here=self.directory, any_directory=any_directory)

    def where_saved(self) -> str:
        """The text of ``/save``: where the session is saved, or why it is not."""
        if self.failed:
            return "This session is not being recorded (see the error above)."
        if self._recorder is None or self.path is None:
            return "Nothing is recorded yet; the session is saved from the first prompt on."
        return f"This session is saved as it goes, in {self.path} (id {self._recorder.session_id})."

    def saved_note(self) -> str | None:
        """The last line of an interactive session: where it is saved, how to continue it."""
        if self.path is None or self.failed:
            return None
        return (
            f"agentloop: session saved in {self.path} (continue it with: {self.resume_command()})"
        )

    def resume_command(self) -> str:
        """The command line that continues this session from the shell."""
        assert self.path is not None
        words = ["agentloop"]
        try:
            elsewhere = self.directory != Path.cwd().resolve()
        except OSError:  # the current directory is gone
            elsewhere = True
        if elsewhere:
            words += ["-C", str(self.directory)]
        words += ["--resume", self.path.stem]
        if self._elsewhere:
            words.append(ANY_DIRECTORY)
        return shlex.join(words)
