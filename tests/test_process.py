"""agentloop._process: every child process in a group of its own, the group ended for sure."""

from __future__ import annotations

import os
import subprocess
import time

import trio
from server_common import process_alive

from agentloop import _process

#: A leader with two children: one dies on SIGTERM, one ignores it.
STUBBORN = "trap '' TERM; (trap '' TERM; sleep 600) & sleep 600 & echo $! ; wait"


async def children_of(process: trio.Process) -> list[int]:
    assert process.stdout is not None
    line = await process.stdout.receive_some(100)
    return [int(line.split()[0])]


async def test_a_group_that_obeys_sigterm_ends_at_once() -> None:
    process = await _process.start(
        ["bash", "-c", "sleep 600 & echo $!; wait"], stdout=subprocess.PIPE
    )
    (child,) = await children_of(process)
    assert os.getpgid(child) == process.pid
    started = time.monotonic()
    await _process.end_group(process, grace=10)
    assert time.monotonic() - started < 5  # not the grace: SIGTERM was enough
    assert process.returncode is not None
    assert not process_alive(child)
    assert not _process.group_alive(process.pid)


async def test_what_ignores_sigterm_is_killed_after_the_grace() -> None:
    process = await _process.start(["bash", "-c", STUBBORN], stdout=subprocess.PIPE)
    (child,) = await children_of(process)
    started = time.monotonic()
    await _process.end_group(process, grace=0.3)
    assert time.monotonic() - started >= 0.3
    assert not process_alive(child)
    assert not _process.group_alive(process.pid)


async def test_ending_a_group_cannot_be_cancelled_away() -> None:
    """A caller cancelled meanwhile still leaves no process behind (shielded, bounded)."""
    process = await _process.start(["bash", "-c", STUBBORN], stdout=subprocess.PIPE)
    (child,) = await children_of(process)
    with trio.CancelScope() as scope:
        scope.cancel()
        await _process.end_group(process, grace=0.2)
    assert not process_alive(child)
    assert process.returncode is not None


async def test_children_of_a_leader_that_already_exited_are_ended_too() -> None:
    process = await _process.start(["bash", "-c", "sleep 600 & echo $!"], stdout=subprocess.PIPE)
    (child,) = await children_of(process)
    await process.wait()  # the leader is gone; its child is still in the group
    assert process_alive(child)
    await _process.end_group(process, grace=5)
    assert not process_alive(child)


async def test_kill_group_stops_the_work_now() -> None:
    process = await _process.start(["sleep", "600"])
    _process.kill_group(process)
    await process.wait()
    assert process.returncode == -9
