"""Child processes: each in a process group of its own, and the whole group ended for sure.

Every subprocess agentloop starts (a ``bash`` command, an MCP stdio server,
ripgrep) goes through :func:`start` and is ended by :func:`end_group` (or
:func:`kill_group` when its work is simply not wanted any more)::

    process = await start(["bash", "-c", command], cwd=root, stdout=PIPE, stderr=PIPE)
    try:
        ...
    finally:
        await end_group(process, grace=2.0)   # shielded and bounded

Ending a group: SIGTERM to the whole group (children too: a server's helper,
a command's background job); wait up to ``grace`` seconds for the leader to
exit, for an optional condition (its pipes closed, say) and for the rest of
the group to go; SIGKILL whatever is left; reap the leader. It is shielded
from cancellation and bounded (``grace`` plus :data:`REAP_BOUND`), so a
cancelled caller can neither skip it nor hang on it. A process that left the
group on purpose (``setsid``) escapes it.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio

__all__ = ["REAP_BOUND", "end_group", "group_alive", "kill_group", "signal_group", "start"]

#: The default logger of :func:`end_group`; callers pass their area's (``agentloop.mcp``...).
log = logging.getLogger("agentloop.tools")

#: Seconds to wait for the kernel to reap the leader after SIGKILL.
REAP_BOUND = 2.0
_POLL = 0.005  # at most this many seconds between two looks at a group that outlives its leader
_FIRST_POLL = 0.0002


async def start(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: Any = subprocess.DEVNULL,
    stdout: Any = None,
    stderr: Any = None,
) -> trio.Process:
    """Start ``argv`` as the leader of a new session (and so of a new process group).

    Raises:
        OSError: the program cannot be started (not found, not executable...).
    """
    return await trio.lowlevel.open_process(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
    )


def signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the process group ``pgid``; False if it has no process left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # macOS, for a group of zombies: nothing left to signal
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs; zombies (waiting to be reaped) do not.

    Zombies matter in containers whose init reaps late: ``killpg(pgid, 0)`` sees them,
    so where it does, ``/proc`` is asked.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # a member we may not signal, or a zombie: look closer
    try:
        entries = os.listdir("/proc")
    except OSError:  # no procfs (macOS): killpg is all we know
        return True
    group = str(pgid).encode()
    return any(entry.isdigit() and _runs_in(entry, group) for entry in entries)


def _runs_in(pid: str, group: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rpartition(b")")[2].split()
    except OSError:  # it ended meanwhile
        return False
    # After the command name: state, ppid, pgrp, ...
    return len(fields) > 2 and fields[2] == group and fields[0] not in (b"Z", b"X")


def kill_group(process: trio.Process) -> None:
    """SIGKILL the process's group now (its work is not wanted); reap it with ``wait``."""
    signal_group(process.pid, signal.SIGKILL)


async def end_group(
    process: trio.Process,
    *,
    grace: float,
    done: Callable[[], Awaitable[object]] | None = None,
    what: str = "process group",
    logger: logging.Logger = log,
) -> None:
    """End the process's whole group: SIGTERM, up to ``grace`` seconds, SIGKILL, reap.

    ``done``, if given, is awaited too before the group counts as finished
    gracefully (a pipe reader's end, say). Shielded from cancellation and
    bounded: at most ``grace + 2 * REAP_BOUND`` seconds, and more only if ``done``
    ignores cancellation. Safe to call when the process has already exited:
    its children still get the signals. ``logger`` gets a DEBUG record when
    the group outlives SIGTERM and a WARNING when it survives SIGKILL.
    """
    pgid = process.pid  # the leader of a new session: its pid is the group's id
    with trio.CancelScope(shield=True):
        if signal_group(pgid, signal.SIGTERM):
            with trio.move_on_after(grace) as patience:
                await process.wait()
                if done is not None:
                    await done()
                await _group_gone(pgid)
            if patience.cancelled_caught:
                logger.debug("%s %d outlived SIGTERM by %ss; killing it", what, pgid, grace)
            if signal_group(pgid, signal.SIGKILL):  # whatever is left (nothing, usually)
                with trio.move_on_after(REAP_BOUND):  # SIGKILL is delivered, not obeyed
                    await process.wait()
                    await _group_gone(pgid)
        with trio.move_on_after(REAP_BOUND):
            await process.wait()  # reap the leader
        if process.returncode is None or group_alive(pgid):
            logger.warning("%s %d survived SIGKILL", what, pgid)


async def _group_gone(pgid: int) -> None:
    """Return once no process of the group runs; look again from 0.2 ms to 5 ms apart."""
    pause = _FIRST_POLL  # members die within a millisecond, usually
    while group_alive(pgid):
        await trio.sleep(pause)
        pause = min(pause * 2, _POLL)
