"""Pieces shared by the test servers and their launchers (stdlib and trio only).

The server scripts run as processes with ``tests/`` on ``sys.path`` and import
this module; so do the fixtures that start them.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import trio

__all__ = ["png_1x1", "process_alive", "read_port", "stop_process"]

TERMINATE_GRACE = 5.0  # seconds between SIGTERM and SIGKILL
REAP_BOUND = 5.0  # seconds to wait for the kernel to report a SIGKILLed process


def png_1x1() -> bytes:
    """A valid 1x1 RGBA PNG (one transparent pixel)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # 1x1, 8-bit RGBA
    pixels = zlib.compress(b"\x00" + b"\x00\x00\x00\x00")  # filter byte + one pixel
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


async def read_port(stdout: trio.abc.ReceiveStream) -> int:
    """The port of a server whose first stdout line is ``PORT <n>``."""
    buffer = b""
    while b"\n" not in buffer:
        chunk = await stdout.receive_some()
        if not chunk:
            raise RuntimeError(f"server exited before printing its port (stdout: {buffer!r})")
        buffer += chunk
    line = buffer.split(b"\n", 1)[0].decode()
    word, _, port = line.partition(" ")
    if word != "PORT" or not port.isdigit():
        raise RuntimeError(f"unexpected first line from the server: {line!r}")
    return int(port)


async def stop_process(process: trio.Process) -> None:
    """SIGTERM, then SIGKILL after a grace period; bounded, reaps the process."""
    if process.returncode is None:
        process.terminate()
        with trio.move_on_after(TERMINATE_GRACE):
            await process.wait()
    if process.returncode is None:
        process.kill()
        with trio.move_on_after(REAP_BOUND):
            await process.wait()


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie (state ``Z``) or a missing one is dead.

    Zombies count as dead: this container's PID 1 may reap them late.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The command name is in parentheses and may contain spaces; the state follows it.
    state = stat.rpartition(")")[2].split()[0]
    return state not in ("Z", "X", "x")
