"""Rendering: events and messages as lines on a rich ``Console``, as they arrive.

Model text is never read as markup: everything goes out as :class:`rich.text.Text`.
The console decides on colour: none when the output is not a terminal.

Nothing a model, a tool or a server sent reaches the terminal raw: the
:class:`Screen` shows every control character escaped (:func:`~agentloop._visible.visible`;
a question, :func:`~agentloop._visible.visible_line`), so an escape sequence in a
command cannot erase or rewrite what the user is asked about, and colours
come from the styles alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text

from .. import _events as ev
from .._tool import format_duration
from .._types import AssistantMessage, StopReason, Usage, UserMessage
from .._visible import visible, visible_line

__all__ = ["Renderer", "Screen", "make_console", "summarize_args"]

_STREAM_PREFIX = "  │ "


def make_console(file: TextIO) -> Console:
    """A console on ``file``: colour on a terminal, plain text otherwise; no markup, no wrapping."""
    return Console(file=file, markup=False, emoji=False, highlight=False, soft_wrap=True)


def summarize_args(args: dict[str, Any], limit: int = 60) -> str:
    """Arguments as ``key=<json>, ...``, cut to ``limit`` characters.

    >>> summarize_args({"command": "ls -la"})
    'command="ls -la"'
    """
    text = ", ".join(
        f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in args.items()
    )
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Screen:
    """Writes lines and streamed text, keeping track of the unfinished line.

    Streamed text (model text, a command's output) may stop mid-line; the next
    line of something else starts on a line of its own. ``owner`` names what the
    unfinished line belongs to.

    Every text is shown with its control characters escaped (see the module):
    lines and streamed text keep their newlines and tabs; a question is one line.
    """

    def __init__(self, console: Console, *, input_is_terminal: bool = False) -> None:
        self.console = console
        self.input_is_terminal = input_is_terminal
        self._open: object | None = None  # who owns the unfinished line; None: at a line start

    def write(self, text: str, style: str = "", *, owner: object = "text") -> None:
        """Stream ``text``, continuing the unfinished line if ``owner`` owns it."""
        if not text:
            return
        text = visible(text)
        if self._open is not None and self._open != owner:
            self.end_line()
        self.console.print(Text(text, style=style), end="", soft_wrap=True)
        self._open = None if text.endswith("\n") else owner

    def continues(self, owner: object) -> bool:
        """Whether the unfinished line belongs to ``owner``."""
        return self._open is not None and self._open == owner

    def end_line(self) -> None:
        """Finish the unfinished line, if there is one."""
        if self._open is not None:
            self.console.print()
            self._open = None

    def line(self, text: str, style: str = "") -> None:
        """Print a line of its own."""
        self.end_line()
        self.console.print(Text(visible(text), style=style), soft_wrap=True)

    def error(self, text: str) -> None:
        """Print a line in red."""
        self.line(text, "red")

    def ask(self, question: str) -> None:
        """Print a question (a prompt) and leave the cursor after it."""
        self.end_line()
        self.console.print(Text(visible_line(question), style="bold"), end="", soft_wrap=True)
        self._open = "question"

    def answered(self, answer: str | None) -> None:
        """Note that a line of input was read after :meth:`ask`.

        A terminal echoed it (and the Enter); otherwise it is shown here, so
        the transcript reads as a conversation. ``None`` is the end of the input.
        """
        if answer is not None and not self.input_is_terminal:
            self.console.print(Text(visible_line(answer)), soft_wrap=True)
            self._open = None
        elif answer is not None:
            self._open = None
        else:
            self.end_line()

    def typed(self) -> None:
        """A line was typed (and echoed by the terminal) while other output was going on."""
        if self.input_is_terminal:
            self._open = None


def _first_line(text: str) -> tuple[str, int]:
    lines = text.splitlines()
    return (lines[0] if lines else ""), max(len(lines) - 1, 0)


def status_line(messages: tuple[Any, ...], usage: Usage) -> str:
    """``[2 turns, 1200 tokens in, 80 tokens out, $0.0031]``: what a run took."""
    turns = sum(isinstance(m, AssistantMessage) for m in messages)
    parts = [
        f"{turns} turn{'' if turns == 1 else 's'}",
        f"{usage.input} tokens in",
        f"{usage.output} tokens out",
    ]
    if usage.cost > 0:
        parts.append(f"${usage.cost:.4f}")
    return f"[{', '.join(parts)}]"


class Renderer:
    """Shows a run's events on a :class:`Screen`, one call per event.

    Text and thinking stream as they arrive (thinking dimmed); tool calls get
    a line with their arguments, their progress and output as it comes, and a
    ✓ or ✗ line with the first line of their result; errors are red; the run
    ends with a status line. User messages after the run's first assistant
    message began (steering and follow-ups taken by the loop) are shown as
    ``↪ text``; the prompts before it are not (the user just typed them).
    """

    def __init__(self, screen: Screen, *, max_attempts: int | None = None) -> None:
        self.screen = screen
        self.max_attempts = max_attempts  # of a model call, for the retry line; None: unknown
        self._retrying = ""  # the error the last retry line named
        self._answered = False  # the run's first assistant message began
        #: Where the status line goes at the end of a run; None: a line on the screen.
        self.status: Callable[[str], None] | None = None

    def show(self, event: ev.AgentEvent) -> None:
        """Render one event."""
        screen = self.screen
        match event:
            case ev.AgentStart(parent_loop_id=None):
                self._answered = False
            case ev.MessageStart(message=AssistantMessage()):
                self._answered = True
            case ev.MessageUpdate(delta=ev.TextDelta(delta=text)):
                screen.write(text, owner="text")
            case ev.MessageUpdate(delta=ev.ThinkingDelta(delta=text)):
                screen.write(text, "dim italic", owner="thinking")
            case ev.MessageUpdate(
                delta=ev.StreamRestart(attempt=attempt, delay=delay, error=error)
            ):
                # The error once per model call; "same error" when a retry fails alike.
                said = "same error" if attempt > 2 and error == self._retrying else error
                self._retrying = error
                seconds = f"{delay:.1f}".rstrip("0").rstrip(".")
                of = f" of {self.max_attempts}" if self.max_attempts else ""
                screen.line(f"  ↻ {said}; retrying in {seconds}s (attempt {attempt}{of})", "yellow")
            case ev.MessageEnd(message=UserMessage() as message) if self._answered:
                screen.line(f"↪ {message.text}", "bold")
            case ev.MessageEnd(message=AssistantMessage(stop_reason=StopReason.ERROR) as message):
                screen.error(f"error: {message.error_message}")
            case ev.MessageEnd(message=AssistantMessage(stop_reason=StopReason.ABORTED)):
                screen.line("stopped", "yellow")
            case ev.ToolExecutionStart(tool_name=name, args=args):
                screen.line(f"→ {name}({summarize_args(args)})", "cyan")
            case ev.ProgressMessage(text=text):
                screen.line(f"  … {text}", "dim")
            case ev.ToolCallQueued(tool_name=name, reason=reason):
                screen.line(f"  ⏸ {name} is {reason}", "dim")
            case ev.ToolCallDequeued(tool_name=name, waited=waited):
                screen.line(f"  ▶ {name} starts (waited {format_duration(waited)})", "dim")
            case ev.ToolExecutionUpdate(tool_call_id=call_id, partial_result=partial):
                self._update(call_id, partial.text_content, partial.details)
            case ev.ToolExecutionEnd(tool_name=name, result=result, is_error=is_error):
                first, more = _first_line(result.text_content)
                tail = f" (+{more} lines)" if more > 0 else ""
                mark, style = ("✗", "red") if is_error else ("✓", "green")
                screen.line(f"{mark} {name}: {first}{tail}", style)
            case ev.CompactionStarted(estimated_tokens=tokens, context_window=window):
                screen.line(f"  ⋯ compacting the context ({tokens} of {window} tokens)", "dim")
            case ev.CompactionEnded(messages_before=before, messages_after=after):
                screen.line(f"  ⋯ compacted: {before} messages → {after}", "dim")
            case ev.PrunApplied(messages_removed=removed):
                screen.line(f"  ⋯ pruned {removed} messages from the context", "dim")
            case ev.AgentEnd(messages=messages, usage=usage):
                if self.status is not None:
                    self.status(status_line(messages, usage))
                else:
                    screen.line(status_line(messages, usage), "dim")
            case _:
                pass

    def _update(self, call_id: str, text: str, details: Any) -> None:
        stream = details.get("stream") if isinstance(details, dict) else None
        if not isinstance(stream, str):
            self.screen.line(f"  · {text}", "dim")
            return
        owner = ("stream", call_id, stream)
        style = "yellow" if stream == "stderr" else "dim"
        for piece in text.splitlines(keepends=True):
            if not self.screen.continues(owner):
                self.screen.write(_STREAM_PREFIX, style, owner=owner)
            self.screen.write(piece, style, owner=owner)
