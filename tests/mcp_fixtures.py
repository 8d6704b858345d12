"""Trio helpers that launch the MCP test servers of ``mcp_servers.py`` as real processes.

* :func:`serve_http` runs ``python tests/mcp_servers.py http|sse`` and yields
  its URL and process; leaving the block kills and reaps it.
* :func:`stdio_command` / :func:`stdio_params` give the command line of the
  stdio server, for ``StdioServerParameters`` and for the adapter.
* :func:`process_alive`, :func:`wait_until_dead`, :func:`wait_for_file` and
  :func:`kill_quietly` observe and clean up processes and marker files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import trio
from mcp.client.stdio import StdioServerParameters
from server_common import process_alive, read_port, stop_process

__all__ = [
    "SERVERS_PATH",
    "kill_quietly",
    "process_alive",
    "serve_http",
    "stdio_command",
    "stdio_params",
    "wait_for_file",
    "wait_until_dead",
]

SERVERS_PATH: str = str(Path(__file__).resolve().with_name("mcp_servers.py"))
"""Absolute path of the server script."""

_POLL_INTERVAL = 0.01


def stdio_command(mode: str = "stdio", *extra: str) -> tuple[str, list[str]]:
    """``(command, args)`` that run ``mcp_servers.py MODE *extra`` with this interpreter."""
    return sys.executable, [SERVERS_PATH, mode, *extra]


def stdio_params(mode: str = "stdio", *extra: str) -> StdioServerParameters:
    """:func:`stdio_command` as the SDK's ``StdioServerParameters``."""
    command, args = stdio_command(mode, *extra)
    return StdioServerParameters(command=command, args=args)


@asynccontextmanager
async def serve_http(
    mode: str = "http", paged: bool = False, *, port: int = 0, startup_timeout: float = 30.0
) -> AsyncIterator[tuple[str, trio.Process]]:
    """Run the ``http`` (streamable HTTP) or ``sse`` server as a subprocess.

    ``port`` 0 lets the OS choose; another is used as given (to restart a
    server where a client expects it). Yields ``(url, process)``:
    ``http://127.0.0.1:<port>/mcp`` for ``http``,
    ``http://127.0.0.1:<port>/sse`` (the SSE endpoint) for ``sse``. On exit the
    process gets SIGTERM, then SIGKILL after 5 s, shielded and bounded.
    """
    if mode not in ("http", "sse"):
        raise ValueError(f"serve_http runs the http or sse mode, not {mode!r}")
    args = [sys.executable, SERVERS_PATH, mode, "--port", str(port)]
    args += ["--paged"] if paged else []
    process = await trio.lowlevel.open_process(args, stdout=subprocess.PIPE)
    assert process.stdout is not None
    try:
        with trio.fail_after(startup_timeout):
            bound = await read_port(process.stdout)
        if port and bound != port:
            raise RuntimeError(f"the server listens on port {bound}, not {port}")
        path = "/mcp" if mode == "http" else "/sse"
        yield f"http://127.0.0.1:{bound}{path}", process
    finally:
        with trio.CancelScope(shield=True):
            await stop_process(process)
            await process.stdout.aclose()


async def wait_until_dead(pid: int, timeout: float) -> bool:  # noqa: ASYNC109 (a poll bound)
    """Poll (on trio time) until ``pid`` is dead; ``False`` if it still lives after ``timeout``."""
    with trio.move_on_after(timeout):
        while process_alive(pid):  # noqa: ASYNC110 (polling /proc: the OS sends no event)
            await trio.sleep(_POLL_INTERVAL)
        return True
    return False


async def wait_for_file(path: str | os.PathLike[str], timeout: float) -> str | None:  # noqa: ASYNC109
    """Poll (on trio time) until the file at ``path`` has content; that text, or ``None``."""
    marker = trio.Path(path)
    with trio.move_on_after(timeout):
        while True:
            if await marker.exists():
                text = await marker.read_text()
                if text:
                    return text
            await trio.sleep(_POLL_INTERVAL)
    return None


def kill_quietly(pid: int) -> None:
    """SIGKILL ``pid`` if it still exists (test cleanup for processes a server spawned)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
