"""Reading the terminal's lines without blocking trio, and asking on the terminal.

Two readers, one way to use them: ``await reader.readline()`` is the next line,
or None at the end of the input. Lines typed ahead (during a run) are queued, so
everyone who needs input (the idle prompt, the steering router, a permission
question) takes the next line.

- :class:`LineReader` reads a file descriptor (a pipe, a file) in a worker
  thread (``os.read``: no Python-level lock is held while it waits, so an
  abandoned read never blocks the interpreter's exit).
- :class:`~._editor.PromptReader` is the line editor of an interactive terminal
  (prompt_toolkit): a prompt kept at the bottom of the screen, with history,
  multi-line input and bracketed paste, while the output streams above it.

:class:`Prompter` shows the prompt or a question the way the reader wants it,
and reads the line that answers it.
"""

from __future__ import annotations

import codecs
import math
import os

import trio

from .._visible import visible_line
from ._editor import PromptReader
from ._render import Screen

__all__ = ["LineReader", "Prompter"]

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


class Prompter:
    """Shows the prompt or a question on the terminal, and reads the line that answers it.

    With the line editor (``reader`` is a :class:`~._editor.PromptReader`), a
    question takes the place of the editor's prompt until it is answered, and
    the answer stays on the screen after it; otherwise the question is printed
    on ``screen``, with the cursor left after it. ``prompt`` is the usual
    prompt: asking it gives the editor its own prompt back.
    """

    def __init__(self, screen: Screen, reader: LineReader | PromptReader, *, prompt: str) -> None:
        self.screen = screen
        self.reader = reader
        self.prompt = prompt
        #: The reader, when it is the line editor.
        self.editor = reader if isinstance(reader, PromptReader) else None

    async def readline(self) -> str | None:
        """The next line of input, or None at the end of it."""
        return await self.reader.readline()

    def ask(self, question: str) -> None:
        """Show ``question`` (the prompt, or a permission question) before a line is read."""
        if self.editor is not None and not self.editor.ended:
            self.screen.end_line()  # the unfinished line goes above it, first
            self.editor.ask(None if question == self.prompt else visible_line(question))
        else:
            self.screen.ask(question)

    def answered(self, line: str | None) -> None:
        """A line was read after :meth:`ask` (None: the end of the input)."""
        if self.editor is not None and self.screen.continues("question"):
            self.screen.answered(line)  # the editor ended: the question was printed
        elif self.editor is not None:
            self.editor.ask(None)  # it shows the line after the question, as typed
        else:
            self.screen.answered(line)

    def withdraw(self) -> None:
        """The question asked is not answered after all: the editor's prompt comes back."""
        if self.editor is not None:
            self.editor.ask(None)
