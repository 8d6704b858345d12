"""The stdio transport: an MCP server as a subprocess, its whole process group ended on close.

The SDK's own stdio client ends the process group only when the server
outlives its grace period; a server that exits promptly at EOF leaves its
children running. This transport ends the group every time, and keeps the
tail of the server's stderr for error messages.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import subprocess
from collections.abc import AsyncIterator

import anyio
import mcp.types as mcp_types
import trio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from .._process import end_group, start
from .._secrets import Redactor
from .._tool import format_duration
from ._servers import StdioServer

__all__ = ["StdioProcess", "stdio_transport"]

log = logging.getLogger("agentloop.mcp")

EXIT_GRACE = 2.0  # seconds the server has to exit by itself once its stdin is closed
TERM_GRACE = 2.0  # seconds between SIGTERM and SIGKILL to the group
STDOUT_AFTER_EXIT = 1.0  # seconds to read what a dead server left in the pipe
MAX_LINE = 64 * 1024 * 1024  # a longer message is a broken server
_STDERR_LINES = 20
_STDERR_LINE_CHARS = 400


class StdioProcess:
    """What the connection knows of its server process: pid, exit status, last stderr lines."""

    def __init__(self, name: str, redactor: Redactor | None = None) -> None:
        self.name = name
        self.redactor = redactor if redactor is not None else Redactor(())
        self.pid: int | None = None
        self.returncode: int | None = None
        self.exited = trio.Event()
        self.stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)

    def status(self) -> str:
        """``"exited with status N"``, ``"was killed by signal N"``, or ``""`` if it runs."""
        code = self.returncode
        if code is None:
            return ""
        return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"

    def exit_note(self) -> str:
        """``"it exited with status N"`` and its last stderr lines, or ``""`` if it runs."""
        status = self.status()
        if not status:
            return ""
        note = f"the server process {status}"
        if self.stderr:
            note += "; the end of its stderr:\n" + "\n".join(self.stderr)
        return note

    async def wait_exit(self, bound: float) -> str:
        """:meth:`exit_note`, after waiting up to ``bound`` seconds for the process to end."""
        with trio.move_on_after(bound):
            await self.exited.wait()
        return self.exit_note()


@contextlib.asynccontextmanager
async def stdio_transport(
    server: StdioServer, info: StdioProcess
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Run ``server``; yield the (read, write) message streams the SDK client takes.

    On exit (shielded, bounded by about ``EXIT_GRACE + TERM_GRACE`` and ``_process.REAP_BOUND``):
    stdin is closed, the server gets ``EXIT_GRACE`` seconds to exit, then its
    whole process group is ended. ``info`` learns the pid, the exit status and
    the last stderr lines.

    Raises:
        OSError: the command cannot be started (not found, not executable).
    """
    process = await start(
        [server.command, *server.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**get_default_environment(), **(server.env or {})},
        cwd=server.cwd,
    )
    info.pid = process.pid
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    to_client, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_client = anyio.create_memory_object_stream[SessionMessage](0)
    stdout_done = trio.Event()

    async def read_stdout() -> None:
        buffer = b""
        try:
            async with to_client:
                while chunk := await stdout.receive_some():
                    buffer += chunk
                    if b"\n" not in buffer:
                        if len(buffer) > MAX_LINE:
                            log.error("MCP server %r: a line over %d bytes", info.name, MAX_LINE)
                            return
                        continue
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            await to_client.send(_parse(info, line))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the pipe or the client side is gone: the connection has ended
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            stdout_done.set()

    async def write_stdin() -> None:
        try:
            async with from_client:
                async for message in from_client:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send_all(data.encode("utf-8") + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            # The server stopped reading: end the connection rather than leave a call waiting.
            await to_client.aclose()

    async def read_stderr() -> None:
        buffer = b""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while chunk := await stderr.receive_some():
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    _keep_stderr(info, line)
                if len(buffer) > _STDERR_LINE_CHARS * 4:
                    _keep_stderr(info, buffer)
                    buffer = b""
        if buffer:
            _keep_stderr(info, buffer)

    async def watch_exit() -> None:
        await process.wait()
        info.returncode = process.returncode
        info.exited.set()
        # Read what the server left in the pipe, then end the connection even if
        # a child of the server still holds stdout open.
        with trio.move_on_after(STDOUT_AFTER_EXIT):
            await stdout_done.wait()
        await to_client.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_stdout)
        nursery.start_soon(write_stdin)
        nursery.start_soon(read_stderr)
        nursery.start_soon(watch_exit)
        try:
            yield read_stream, write_stream
        finally:
            with trio.CancelScope(shield=True):
                await write_stream.aclose()
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stdin.aclose()
                with trio.move_on_after(EXIT_GRACE) as lingering:
                    await process.wait()
                if lingering.cancelled_caught:
                    log.info(
                        "MCP server %r: process %d still runs %s after its stdin closed; "
                        "ending its process group",
                        info.name,
                        process.pid,
                        format_duration(EXIT_GRACE),
                    )
                await end_group(
                    process, grace=TERM_GRACE, what=f"MCP server {info.name!r}", logger=log
                )
                if process.returncode is not None:
                    info.returncode = process.returncode
                    info.exited.set()
                await read_stream.aclose()
                with trio.move_on_after(STDOUT_AFTER_EXIT):
                    await stdout_done.wait()
            nursery.cancel_scope.cancel()
    for pipe in (stdout, stderr):
        with trio.CancelScope(shield=True):
            await pipe.aclose()


def _parse(info: StdioProcess, line: bytes) -> SessionMessage | Exception:
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as error:
        # What the server wrote may be anything: its text is for DEBUG only.
        log.warning(
            "MCP server %r sent a line that is not a JSON-RPC message (%d bytes)",
            info.name,
            len(line),
        )
        if log.isEnabledFor(logging.DEBUG):
            text = info.redactor.text(line[:200].decode("utf-8", "replace"))
            log.debug("MCP server %r: the line starts %r", info.name, text)
        return error
    return SessionMessage(message)


def _keep_stderr(info: StdioProcess, raw: bytes) -> None:
    line = raw.decode("utf-8", "replace").rstrip()
    if not line:
        return
    if log.isEnabledFor(logging.DEBUG):
        log.debug("MCP server %r stderr: %s", info.name, info.redactor.text(line))
    if len(line) > _STDERR_LINE_CHARS:
        line = line[:_STDERR_LINE_CHARS] + "…"
    info.stderr.append(line)
