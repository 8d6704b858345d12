"""Standard input and output for a protocol alone (``agentloop acp``, ``mcp-serve``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import trio

__all__ = ["protocol_stdio"]


@contextlib.asynccontextmanager
async def protocol_stdio() -> AsyncIterator[tuple[trio.lowlevel.FdStream, trio.lowlevel.FdStream]]:
    """This process's stdin and stdout as trio streams that only the protocol uses.

    While it is open, file descriptor 0 reads ``/dev/null`` and 1 writes to standard
    error, so nothing else (a stray ``print``, a library's output, a child process)
    reaches the client; both are put back on exit, and the streams closed (shielded).
    """
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    receive = trio.lowlevel.FdStream(wire_in)
    send = trio.lowlevel.FdStream(wire_out)
    try:
        yield receive, send
    finally:
        with trio.CancelScope(shield=True):
            await receive.aclose()
            await send.aclose()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)
