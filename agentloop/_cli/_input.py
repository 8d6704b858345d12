"""Reading the terminal's lines without blocking trio.

One task reads standard input in a worker thread (``os.read`` on the file
descriptor: no Python-level lock is held while it waits, so an abandoned read
never blocks the interpreter's exit) and queues whole lines. Everyone who needs
input (the idle prompt, the steering router, a permission question) takes the
next line from :meth:`LineReader.readline`.
"""

from __future__ import annotations

import codecs
import math
import os

import trio

__all__ = ["LineReader"]

_CHUNK = 4096


class LineReader:
    """Lines of a file descriptor (standard input by default), for trio tasks.

    The reading task starts in ``nursery`` at the first :meth:`readline`, so a
    run that never asks for input never touches standard input. Lines come
    without their line ending; at the end of the input :meth:`readline`
    returns None, then and ever after.
    """

    def __init__(self, nursery: trio.Nursery, fd: int = 0) -> None:
        self._nursery = nursery
        self._fd = fd
        self._started = False
        self._ended = False
        self._send, self._receive = trio.open_memory_channel[str | None](math.inf)

    async def readline(self) -> str | None:
        """The next line, or None at the end of the input."""
        if self._ended:
            await trio.lowlevel.checkpoint()
            return None
        if not self._started:
            self._started = True
            self._nursery.start_soon(self._read)
        line = await self._receive.receive()
        if line is None:
            self._ended = True
        return line

    async def _read(self) -> None:
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        pending = ""
        while True:
            try:
                data = await trio.to_thread.run_sync(
                    os.read, self._fd, _CHUNK, abandon_on_cancel=True
                )
            except OSError:
                data = b""
            if not data:
                pending += decoder.decode(b"", final=True)
                if pending:
                    self._send.send_nowait(pending)
                self._send.send_nowait(None)
                return
            pending += decoder.decode(data)
            *lines, pending = pending.split("\n")
            for line in lines:
                self._send.send_nowait(line.removesuffix("\r"))
