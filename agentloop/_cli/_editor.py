"""The line editor of an interactive terminal: :class:`PromptReader`.

A prompt (prompt_toolkit) kept at the bottom of the screen, with history,
multi-line input and bracketed paste, while the output streams above it. It
reads lines as :class:`~._input.LineReader` does: ``await reader.readline()``
is the next line, or None at the end of the input.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import trio

from ..session import session_directory

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.history import History
    from rich.console import Console

__all__ = ["PromptReader", "history_path"]

_CLOSE_TIMEOUT = 5.0  # seconds to wait for the prompt's thread to end


def history_path() -> Path:
    """The line editor's history file: ``history`` in agentloop's data directory.

    That is the directory of the sessions' directory (see
    :func:`agentloop.session.session_directory`): ``$AGENTLOOP_HOME``, else
    ``$XDG_DATA_HOME/agentloop``, else ``~/.local/share/agentloop``.
    """
    return session_directory().parent / "history"


def _stop_here() -> None:
    """Ctrl-Z: stop the process (and its process group), as a shell's job.

    The signal to this thread as well: a stop signal to the process may be
    taken by another thread, and this one would run on for a moment, past the
    point where the terminal is set back to the prompt's mode once the job is
    continued (``fg``), and leave it in the shell's mode.
    """
    os.kill(0, signal.SIGTSTP)
    signal.pthread_kill(threading.get_ident(), signal.SIGTSTP)


def _tty_mode(mode: list[Any] | None = None) -> list[Any] | None:
    """Standard input's terminal mode; with ``mode``: set it. None: not a terminal."""
    try:
        import termios
    except ImportError:  # Windows
        return None
    try:
        if mode is not None:
            termios.tcsetattr(0, termios.TCSANOW, mode)
            return mode
        return termios.tcgetattr(0)
    except (OSError, termios.error):
        return None


_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")  # a control sequence (CSI)


def _after_rows(text: str, width: int, rows: int) -> int:
    """Where the ``rows`` first rows of ``text`` end on a terminal ``width`` columns
    wide (escape sequences take no room, wide characters two columns); 0: they
    do not fill that many rows."""
    from prompt_toolkit.utils import get_cwidth

    row = column = 0
    index = 0
    while index < len(text):
        escape = _ESCAPE.match(text, index)
        if escape is not None:
            index = escape.end()
            continue
        char = text[index]
        if char == "\r":
            column = 0
        else:
            cells = get_cwidth(char)
            if column + cells > width:
                row, column = row + 1, 0
                if row == rows:
                    return index
            column += cells
        index += 1
    return 0


def _style_at(text: str, index: int) -> str:
    """The colour and attribute sequence in force at ``index`` ("" if none)."""
    found = [m.group() for m in _ESCAPE.finditer(text, 0, index) if m.group().endswith("m")]
    last = found[-1] if found else ""
    return "" if last in ("", "\x1b[0m", "\x1b[m") else last


class _Above:
    """The console's file while the prompt runs: what is written goes above the prompt.

    Whole lines wait in :meth:`take` for the prompt's thread, which prints them
    above the prompt; the unfinished last line is :attr:`partial`, shown just
    above the prompt until its line ends (so nothing is ever printed after the
    prompt, or into the line being typed). Once :meth:`go_direct` is called,
    writes go straight to the terminal again.
    """

    def __init__(self, stdout: TextIO, wake: Callable[[], None]) -> None:
        self._stdout = stdout
        self._wake = wake
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self._direct = False
        self.partial = ""

    # The parts of a text file that rich's Console uses.

    @property
    def encoding(self) -> str:
        return getattr(self._stdout, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._stdout.fileno()

    def write(self, text: str) -> int:
        with self._lock:
            if self._direct:
                self._stdout.write(text)
                return len(text)
            head, newline, self.partial = (self.partial + text).rpartition("\n")
            if newline:
                self._lines.append(head + newline)
        self._wake()
        return len(text)

    def flush(self) -> None:
        if self._direct:
            self._stdout.flush()

    # For the prompt's thread.

    def take(self, width: int, rows: int) -> str:
        """The whole lines written since the last call.

        An unfinished line taller than ``rows`` rows of a terminal ``width``
        columns wide gives up its first rows too (ended where the terminal
        would wrap them, so they look the same), and goes on below them.
        """
        with self._lock:
            partial = self.partial
            if 2 * len(partial) > width * rows:  # a character takes one or two columns
                cut = _after_rows(partial, width, rows)
                if cut:
                    style = _style_at(partial, cut)
                    self._lines.append(partial[:cut] + ("\x1b[0m" if style else "") + "\n")
                    self.partial = style + partial[cut:]
            text = "".join(self._lines)
            self._lines.clear()
        return text

    def go_direct(self) -> None:
        """Write what waits (the unfinished line too) to the terminal, and all from now on."""
        with self._lock:
            if self._direct:
                return
            self._direct = True
            text = "".join(self._lines) + self.partial
            self._lines.clear()
            self.partial = ""
            try:
                self._stdout.write(text)
                self._stdout.flush()
            except (OSError, ValueError):
                pass


class PromptReader:
    """Lines typed at a prompt kept at the bottom of the terminal (prompt_toolkit), for trio.

    prompt_toolkit runs on asyncio, so it gets a thread of its own with its own
    event loop, started at the first :meth:`readline` and running until
    :meth:`aclose`: it prompts for one line after another, during a run too
    (such a line is typeahead, as with :class:`~._input.LineReader`). While it
    runs, the console's output goes through it: whole lines are printed above
    the prompt, the unfinished line is shown between them and the prompt until
    it ends, and the prompt (with what is typed in it) is drawn again below.
    Nothing written ever lands in the middle of the line being typed.

    Keys: Enter sends the text; Esc Enter (Alt-Enter) starts a new line in it;
    a bracketed paste of several lines is one message; Up and Down walk the
    history (kept in ``history``, a file, when it can be written; else in
    memory). Ctrl-C calls ``on_interrupt`` (in trio), except with text typed
    and nothing :attr:`busy`: then it clears the text. Ctrl-D on an empty line
    is the end of the input; Ctrl-Z suspends the process. ``toolbar`` (called
    in the prompt's thread, so it must only read) gives the line shown below
    the prompt.
    """

    def __init__(
        self,
        console: Console,
        *,
        prompt: str,
        on_interrupt: Callable[[], None],
        toolbar: Callable[[], str] | None = None,
        history: Path | None = None,
    ) -> None:
        self._console = console
        self._stdout = cast(TextIO, console.file)
        self._prompt = prompt
        self._question: str | None = None
        self._draft: str | None = None  # what was typed when a question came: back after it
        self._on_interrupt = on_interrupt
        self._toolbar = toolbar
        self._history_path = history
        self._token = trio.lowlevel.current_trio_token()
        self._send, self._receive = trio.open_memory_channel[str | None](math.inf)
        self._above = _Above(self._stdout, self._wake)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None
        self._session: PromptSession[str] | None = None
        self._wake_pending = False
        self._live_text = ""
        self._live_parsed: StyleAndTextTuples = []
        self._closing = False
        self._ended = False
        self._broken: BaseException | None = None
        self._tty_mode: list[Any] | None = None
        #: A run is going on: Ctrl-C is for it, never for the typed text.
        self.busy = False

    @property
    def ended(self) -> bool:
        """Whether :meth:`readline` returned None (Ctrl-D, or the prompt is gone)."""
        return self._ended

    async def readline(self) -> str | None:
        """The next line typed, or None at the end of the input."""
        if self._thread is None and self._closing:
            self._ended = True
        if self._ended:
            await trio.lowlevel.checkpoint()
            return None
        if self._thread is None:
            self._start()
        line = await self._receive.receive()
        if line is None:
            self._ended = True
        return line

    def ask(self, question: str | None) -> None:
        """Show ``question`` as the prompt (None: the usual prompt again)."""
        self._question = question
        self.refresh()

    def refresh(self) -> None:
        """Draw the prompt and its toolbar again (what they show has changed)."""
        self._wake()

    async def aclose(self) -> None:
        """Take the prompt off the screen, print what waits, give the terminal back."""
        thread = self._thread
        self._closing = True
        if thread is not None:
            loop = self._loop
            if loop is not None:
                with contextlib.suppress(RuntimeError):  # its loop is closed: it is done
                    loop.call_soon_threadsafe(self._stop)
            with trio.move_on_after(_CLOSE_TIMEOUT):
                await trio.to_thread.run_sync(thread.join, abandon_on_cancel=True)
            if thread.is_alive():  # stuck: at least leave the terminal usable
                self._restore_tty()
        self._above.go_direct()
        self._console.file = self._stdout

    # ------------------------------------------------------------- the trio side

    def _start(self) -> None:
        self._tty_mode = _tty_mode()
        self._console.file = cast(TextIO, self._above)
        self._thread = threading.Thread(target=self._thread_main, name="agentloop-prompt")
        self._thread.daemon = True
        self._thread.start()

    def _restore_tty(self) -> None:
        if self._tty_mode is not None:
            _tty_mode(self._tty_mode)

    def _deliver(self, line: str | None) -> None:
        """From the prompt's thread: hand a line to trio."""

        def send() -> None:
            try:
                self._send.send_nowait(line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        try:
            self._token.run_sync_soon(send)
        except trio.RunFinishedError:
            pass

    def _wake(self) -> None:
        """From any thread: the prompt's thread has something to print or draw."""
        if self._wake_pending:
            return
        loop = self._loop
        if loop is None:
            return  # not running yet: it looks when it starts
        self._wake_pending = True
        try:
            loop.call_soon_threadsafe(self._woken)
        except RuntimeError:  # the loop is closed: nothing to draw any more
            pass

    # ------------------------------------------------------------- the prompt's thread

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as error:  # the editor broke: say so, end the input
            if self._broken is None:
                self._broken = error
        finally:
            self._above.go_direct()
            if self._broken is not None:
                with contextlib.suppress(OSError, ValueError):
                    print(f"agentloop: the line editor failed: {self._broken!r}", file=self._stdout)
            self._deliver(None)

    async def _main(self) -> None:
        event = self._event = asyncio.Event()
        session = self._session = self._make_session()
        self._loop = asyncio.get_running_loop()
        printer = asyncio.create_task(self._print_above(session, event))
        try:
            draft = ""
            while not self._closing:
                try:
                    text = await session.prompt_async(
                        default=draft, pre_run=self._prompt_started, handle_sigint=False
                    )
                except EOFError:
                    if not self._closing:
                        self._deliver(None)
                    return
                draft = ""
                if self._question is not None:  # answered: the usual prompt, and the draft
                    self._question = None
                    draft, self._draft = self._draft or "", None
                self._deliver(text)
        finally:
            printer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await printer

    def _prompt_started(self) -> None:
        if self._closing:
            self._stop()
        self._woken()

    def _stop(self) -> None:
        """In the prompt's thread: take the prompt off the screen, end the loop."""
        assert self._session is not None
        app = self._session.app
        if app.is_running and not app.is_done:
            app.erase_when_done = True
            app.exit(exception=EOFError())

    def _woken(self) -> None:
        if self._event is not None:
            self._event.set()

    async def _print_above(self, session: PromptSession[str], event: asyncio.Event) -> None:
        """Print the whole lines written, above the prompt; draw the prompt again."""
        try:
            await self._print_loop(session, event)
        except Exception as error:  # the terminal is gone, say: no more prompts
            self._broken = error
            self._closing = True
            self._above.go_direct()
            self._stop()

    async def _print_loop(self, session: PromptSession[str], event: asyncio.Event) -> None:
        app, output = session.app, session.output
        while True:
            await event.wait()
            event.clear()
            self._wake_pending = False
            if not app.is_running:
                continue  # between two prompts: the next one wakes us when it starts
            if getattr(app, "_running_in_terminal", False):  # suspended (Ctrl-Z), say
                await asyncio.sleep(0.05)
                self._woken()
                continue
            buffer = session.default_buffer
            if self._question is not None and self._draft is None:
                # A question: what was being typed waits until it is answered.
                self._draft = buffer.text
                buffer.reset()
            elif self._question is None and self._draft is not None:  # it was withdrawn
                buffer.text, self._draft = self._draft, None
                buffer.cursor_position = len(buffer.text)
            size = output.get_size()
            text = self._above.take(size.columns, max(2, size.rows // 4))
            if text:
                app.renderer.erase()  # the cursor is at the start of the prompt's lines
                output.write_raw(text)
                output.flush()
            app.invalidate()

    def _partial(self) -> str:
        """The unfinished line, as the terminal would show it."""
        text = self._above.partial
        return text[text.rfind("\r") + 1 :]

    def _live(self) -> StyleAndTextTuples:
        """The unfinished line, parsed (once for each new text)."""
        from prompt_toolkit.formatted_text import ANSI, to_formatted_text

        text = self._partial()
        if text != self._live_text:
            self._live_text, self._live_parsed = text, to_formatted_text(ANSI(text))
        return self._live_parsed

    def _message(self) -> StyleAndTextTuples:
        return [("bold", self._question if self._question is not None else self._prompt)]

    def _toolbar_text(self) -> StyleAndTextTuples:
        text = self._toolbar() if self._toolbar is not None else ""
        return [("class:bottom-toolbar.text", f" {text} ")]

    def _make_history(self) -> History:
        from prompt_toolkit.history import FileHistory, InMemoryHistory

        reader = self

        class Memory(InMemoryHistory):
            def append_string(self, string: str) -> None:
                if reader._question is None:  # answers to questions are not history
                    super().append_string(string)

        class File(FileHistory):
            def append_string(self, string: str) -> None:
                if reader._question is None:
                    super().append_string(string)

            def store_string(self, string: str) -> None:
                try:
                    super().store_string(string)
                except OSError:
                    pass  # kept in memory for this session all the same

        path = self._history_path
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            except OSError:
                pass
            else:
                return File(str(path))
        return Memory()

    def _make_session(self) -> PromptSession[str]:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.application import run_in_terminal
        from prompt_toolkit.filters import Condition, has_focus, is_done
        from prompt_toolkit.input import create_input
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
        from prompt_toolkit.layout import ConditionalContainer, HSplit, Window
        from prompt_toolkit.layout.controls import FormattedTextControl
        from prompt_toolkit.output import create_output
        from prompt_toolkit.output.vt100 import Vt100_Output

        output = create_output(stdout=self._stdout)
        if isinstance(output, Vt100_Output):
            # No cursor position reports: the prompt takes the lines it needs,
            # not the rest of the screen, and the toolbar sits right below it.
            output.enable_cpr = False
        keys = KeyBindings()
        editing = has_focus("DEFAULT_BUFFER")

        @keys.add("escape", "enter", filter=editing)
        def _new_line(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @keys.add("c-c", filter=editing)
        def _interrupt(event: KeyPressEvent) -> None:
            buffer = event.current_buffer
            if buffer.text and not self.busy:
                buffer.reset()
                return
            with contextlib.suppress(trio.RunFinishedError):
                self._token.run_sync_soon(self._on_interrupt)

        if hasattr(signal, "SIGTSTP"):

            @keys.add("c-z", filter=editing)
            def _suspend(event: KeyPressEvent) -> None:
                run_in_terminal(_stop_here)

        session: PromptSession[str] = PromptSession(
            self._message,
            history=self._make_history(),
            key_bindings=keys,
            input=create_input(sys.stdin),
            output=output,
            prompt_continuation=lambda width, line, wrapped: " " * width,
            mouse_support=False,
            complete_while_typing=False,
        )
        live = ConditionalContainer(
            Window(
                FormattedTextControl(self._live),
                wrap_lines=True,
                dont_extend_height=True,
            ),
            filter=Condition(lambda: bool(self._partial())) & ~is_done,
        )
        bar = ConditionalContainer(
            Window(
                FormattedTextControl(self._toolbar_text),
                style="class:bottom-toolbar",
                height=1,
            ),
            filter=Condition(lambda: self._toolbar is not None) & ~is_done,
        )
        layout = session.app.layout
        layout.container = HSplit([live, layout.container, bar])
        return session
