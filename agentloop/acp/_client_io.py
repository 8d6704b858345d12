"""The client's file system and terminals, as the tools' seams.

:class:`ClientFiles` is a :class:`~agentloop.tools.FileAccess` over
``fs/read_text_file`` and ``fs/write_text_file`` (the editor's buffers, unsaved
changes included); :class:`ClientTerminal` a
:class:`~agentloop.tools.CommandRunner` over ``terminal/create``,
``wait_for_exit``, ``output``, ``kill`` and ``release`` (the command runs in
the editor's terminal, where the user sees it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from .._tool import ToolError
from ..tools import CommandRun
from ._rpc import PeerGone, RpcError

__all__ = ["ClientFiles", "ClientTerminal"]

Request = Callable[[str, Any], Awaitable[Any]]


class ClientFiles:
    """Text files read and written through the client (``fs/*``) for ``session_id``."""

    def __init__(self, request: Request, session_id: str) -> None:
        self._request = request
        self._session_id = session_id

    async def read_text(self, path: Path) -> str:
        """The editor's text of ``path`` (its buffer, if open).

        Raises:
            ToolError: the client could not read it.
        """
        try:
            result = await self._request(
                "fs/read_text_file", {"sessionId": self._session_id, "path": str(path)}
            )
        except (RpcError, PeerGone) as error:
            raise ToolError(f"cannot read {path}: {error}") from None
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ToolError(f"cannot read {path}: the editor sent no text")
        return content

    async def write_text(self, path: Path, text: str) -> None:
        """Have the editor write ``text`` to ``path``.

        Raises:
            ToolError: the client could not write it.
        """
        try:
            await self._request(
                "fs/write_text_file",
                {"sessionId": self._session_id, "path": str(path), "content": text},
            )
        except (RpcError, PeerGone) as error:
            raise ToolError(f"cannot write {path}: {error}") from None


class ClientTerminal:
    """``bash``'s commands run in the client's terminals (``terminal/*``) for ``session_id``."""

    def __init__(self, request: Request, session_id: str, shell: str = "bash") -> None:
        self._request = request
        self._session_id = session_id
        self._shell = shell

    async def run(self, command: str, *, cwd: str, timeout: float, max_output: int) -> CommandRun:  # noqa: ASYNC109 - the limit the command is killed at
        """Run ``command`` in a new terminal of the client; it is released when done,
        and killed first on timeout or cancellation.

        Raises:
            ToolError: the client could not run it.
        """
        ids = {"sessionId": self._session_id}
        # Shielded (and bounded): a cancellation now would lose the terminal's id, and
        # with it the means to kill the command.
        try:
            with trio.move_on_after(30, shield=True):
                created = None
                created = await self._request(
                    "terminal/create",
                    {
                        **ids,
                        "command": self._shell,
                        "args": ["-c", command],
                        "cwd": cwd,
                        "outputByteLimit": max_output,
                    },
                )
        except (RpcError, PeerGone) as error:
            raise ToolError(f"Failed to run command: {error}") from None
        if not isinstance(created, dict) or not isinstance(created.get("terminalId"), str):
            raise ToolError("Failed to run command: the editor made no terminal")
        terminal = {**ids, "terminalId": created["terminalId"]}
        timed_out = False
        try:
            await trio.lowlevel.checkpoint_if_cancelled()  # cancelled meanwhile: kill it
            with trio.move_on_after(timeout) as scope:
                await self._request("terminal/wait_for_exit", terminal)
            if scope.cancelled_caught:
                timed_out = True
                await self._request("terminal/kill", terminal)
            output = await self._request("terminal/output", terminal)
        except (RpcError, PeerGone) as error:
            raise ToolError(f"the editor's terminal failed: {error}") from None
        except BaseException:  # cancelled: kill it, and let the cancellation go on
            with trio.move_on_after(5, shield=True):
                try:
                    await self._request("terminal/kill", terminal)
                except (RpcError, PeerGone):
                    pass
            raise
        finally:
            with trio.move_on_after(5, shield=True):
                try:
                    await self._request("terminal/release", terminal)
                except (RpcError, PeerGone):
                    pass
        status = output.get("exitStatus") or {}
        return CommandRun(
            output=str(output.get("output", "")),
            exit_code=status.get("exitCode"),
            signal=status.get("signal"),
            truncated=bool(output.get("truncated")),
            timed_out=timed_out,
        )
