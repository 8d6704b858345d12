"""The terminal agent's session file on its own: :class:`SessionLog`.

Real files (``AGENTLOOP_HOME`` in ``tmp_path``), a real agent on a scripted
model; the screen a console on a string.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
from test_cli import cli_env, write_script

import agentloop as al
from agentloop._cli._render import Screen, make_console
from agentloop._cli._sessions import SessionLog
from agentloop._cli._setup import SetupError
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.session import NOT_RUN_AGAIN, load_session


class Place:
    """A directory to work in, its sessions in ``home``, and a screen on a string."""

    def __init__(self, tmp_path: Path, name: str = "work") -> None:
        self.directory = tmp_path / name
        self.directory.mkdir()
        self.out = io.StringIO()
        self.screen = Screen(make_console(self.out))

    def log(self) -> SessionLog:
        return SessionLog(self.screen, directory=self.directory, model="scripted:m")

    @property
    def shown(self) -> str:
        return self.out.getvalue()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTLOOP_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def agent(log: SessionLog, *turns: Any, tools: Sequence[al.AgentTool] = ()) -> al.Agent:
    """An agent on a scripted model, its events recorded by ``log``."""
    return al.Agent(ScriptedProvider(list(turns)), tools=list(tools), journal=log.record)


async def recorded(place: Place, prompt: str = "hello") -> tuple[SessionLog, al.Agent]:
    """A session with one run in it, its file closed."""
    log = place.log()
    talker = agent(log, reply(f"hi, {prompt}"))
    log.open()
    await talker.run(prompt)
    log.close()
    return log, talker


async def test_a_session_is_recorded_from_the_first_run_on(tmp_path: Path, home: Path) -> None:
    place = Place(tmp_path)
    log = place.log()
    assert (log.path, log.session_id, log.saved_note()) == (None, None, None)
    assert log.where_saved() == (
        "Nothing is recorded yet; the session is saved from the first prompt on."
    )
    talker = agent(log, reply("hi"))
    log.open()
    await talker.run("hello")
    assert log.path is not None
    assert log.path.parent == home / "sessions"
    session_id = log.path.stem
    assert log.session_id == session_id
    assert log.where_saved() == (
        f"This session is saved as it goes, in {log.path} (id {session_id})."
    )
    assert log.saved_note() == (
        f"agentloop: session saved in {log.path} (continue it with: agentloop -C "
        f"{place.directory} --resume {session_id})"
    )
    log.close()
    session = load_session(log.path)
    assert session.messages == tuple(talker.messages)
    assert session.meta["cwd"] == str(place.directory)
    assert session.meta["model"] == "scripted:m"
    assert place.shown == ""


async def test_a_session_is_resumed_into_the_agent_and_recorded_to_its_file(
    tmp_path: Path, home: Path
) -> None:
    place = Place(tmp_path)
    first, talker = await recorded(place)
    assert first.path is not None
    log = place.log()
    later = agent(log, reply("again"))
    await log.resume(later, "", any_directory=False, listing="/sessions")
    assert place.shown == f"agentloop: resumed session {first.path.stem}: 2 messages restored.\n"
    assert later.messages == talker.messages
    assert log.path == first.path
    log.open()
    await later.run("more")
    log.close()
    assert len(load_session(first.path).messages) == 4  # the same file, appended to


async def test_listing_marks_the_session_being_recorded(tmp_path: Path, home: Path) -> None:
    place = Place(tmp_path)
    older, _ = await recorded(place, "older")
    log, _ = await recorded(place, "newer")
    assert log.path is not None
    assert older.path is not None
    lines = await log.listing(any_directory=False)
    assert [line.split()[0] for line in lines] == [log.path.stem, older.path.stem]
    assert lines[0].endswith("  newer (this one)")
    assert not lines[1].endswith("(this one)")


async def test_a_session_of_another_directory_needs_the_flag(tmp_path: Path, home: Path) -> None:
    there = Place(tmp_path, "there")
    theirs, _ = await recorded(there)
    assert theirs.path is not None
    session_id = theirs.path.stem
    here = Place(tmp_path, "here")
    log = here.log()
    with pytest.raises(SetupError) as caught:
        await log.resume(agent(log), session_id, any_directory=False, listing="/sessions")
    assert str(caught.value) == (
        f"session {session_id} belongs to {there.directory}, not {here.directory}: continue "
        f"it there (cd {there.directory} && agentloop --resume {session_id}), or add "
        f"--any-directory to continue it in {here.directory}"
    )
    assert log.path is None
    await log.resume(agent(log), session_id, any_directory=True, listing="/sessions")
    assert here.shown == (
        f"agentloop: resumed session {session_id} of {there.directory}: 2 messages restored; "
        f"the agent works in {here.directory}.\n"
    )
    assert log.resume_command() == (
        f"agentloop -C {here.directory} --resume {session_id} --any-directory"
    )


async def test_resuming_what_is_not_there_is_a_setup_error(tmp_path: Path, home: Path) -> None:
    place = Place(tmp_path)
    log = place.log()
    with pytest.raises(SetupError) as caught:
        await log.resume(agent(log), "", any_directory=False, listing="agentloop --sessions")
    assert str(caught.value) == (
        f"there is no saved session of {place.directory} to resume: run agentloop without "
        "--resume to start one"
    )
    with pytest.raises(SetupError) as caught:
        await log.resume(agent(log), "0123", any_directory=False, listing="/sessions")
    assert str(caught.value) == (
        f"no saved session '0123' (/sessions lists the sessions of {place.directory}; add "
        "--any-directory for every directory)"
    )
    assert (log.path, place.shown) == (None, "")


@pytest.fixture
def unwritable(home: Path) -> Path:
    """The sessions' directory cannot be made: a file has its name."""
    home.mkdir()
    (home / "sessions").write_text("a file where the directory would be")
    return home


async def test_a_session_that_cannot_be_recorded_says_so_once_and_the_run_goes_on(
    tmp_path: Path, unwritable: Path
) -> None:
    home = unwritable
    place = Place(tmp_path)
    log = place.log()
    talker = agent(log, reply("hi"), reply("hi again"))
    log.open()
    await talker.run("hello")
    log.open()  # the next run: not tried again
    await talker.run("hello again")
    assert place.shown == (
        f"agentloop: this session is not recorded: [Errno 17] File exists: "
        f"'{home / 'sessions'}' (set AGENTLOOP_HOME to a directory you can write to)\n"
    )
    assert (log.failed, log.path, log.session_id, log.saved_note()) == (True, None, None, None)
    assert log.where_saved() == "This session is not being recorded (see the error above)."
    assert len(talker.messages) == 4
    # Resuming a session (once there can be some) records again, to its file.
    os.remove(home / "sessions")
    other, _ = await recorded(Place(tmp_path, "other"))
    await log.resume(talker, "", any_directory=True, listing="/sessions")
    log.open()
    log.close()
    assert (log.failed, log.path, log.session_id) == (False, other.path, other.session_id)


@al.tool
async def hold(what: str) -> str:
    """Hold on to something until cancelled."""
    await trio.sleep_forever()
    raise AssertionError("not reached")


async def test_a_call_the_stopped_process_left_open_is_answered_and_said(
    tmp_path: Path, home: Path
) -> None:
    """The process stopped during a call (here: the run cancelled, its file closed): on
    resuming, the call gets its result now, recorded, and the screen says which."""
    place = Place(tmp_path)
    log = place.log()
    talker = agent(log, reply("Holding.", call("hold", {"what": "it"}, id="c1")), tools=[hold])
    log.open()
    with trio.CancelScope() as scope:
        async with talker.prompt("go") as events:
            async for event in events:
                if isinstance(event, al.ToolExecutionStart):
                    scope.cancel()
    log.close()
    assert log.path is not None
    assert load_session(log.path).interrupted != ()
    again = place.log()
    later = agent(again, tools=[hold])
    await again.resume(later, "", any_directory=False, listing="/sessions")
    assert place.shown == (
        f"agentloop: resumed session {log.path.stem}: 3 messages restored.\n"
        "agentloop: hold was cut short by the stop; not run again (it may not be safe to "
        "repeat).\n"
    )
    result = later.messages[-1]
    assert isinstance(result, al.ToolResultMessage)
    assert result.text == NOT_RUN_AGAIN
    again.close()
    assert load_session(log.path).interrupted == ()  # the answer is in the file


def _small_files() -> None:
    """In the child: files may not grow past 2000 bytes (a full disk, as far as it can tell)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))


def test_a_session_file_that_stops_taking_writes_stops_the_recording_not_the_run(
    tmp_path: Path,
) -> None:
    """The program with a file size limit: the session's first events fit, the long answer
    does not; the recording stops (said on stderr), the run ends well, and the JSON
    result names no session, since the file does not hold it."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    script = write_script(tmp_path / "script.json", [{"text": "x" * 3000}])
    env = {**cli_env(home), "PYTHONDONTWRITEBYTECODE": "1"}
    program = [sys.executable, "-m", "agentloop", "--model", f"scripted:{script}"]
    done = subprocess.run(
        [*program, "-p", "go", "--output-format", "json"],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_small_files,  # no threads in the child yet
    )
    assert done.returncode == 0
    result = json.loads(done.stdout)
    assert (result["result"], result["session_id"]) == ("x" * 3000, None)
    assert done.stderr == (
        f"agentloop: using the scripted model {script}.\n\n"
        "agentloop: the session file could not be closed: [Errno 27] File too large\n"
        "agentloop: recording stopped: [Errno 27] File too large\n"
    )
    (saved,) = (home / "sessions").iterdir()
    assert saved.stat().st_size == 2000
