"""The terminal agent: the interactive loop, one-shot runs, input routing, Ctrl-C, sessions.

Everything runs in one trio run, in these tasks:

- the interrupt watcher: ``trio.open_signal_receiver(SIGINT)``, so Ctrl-C is an
  event, never a ``KeyboardInterrupt`` thrown into some task. During a run it
  aborts the run (softly: every tool call still gets a result, and bash's
  process group is killed by the tool); a second Ctrl-C in the same run, or one
  at the prompt, quits with status 130 by cancelling the app's scope.
- the line reader: standard input, line by line. On a terminal (standard input
  and output both), that is the line editor (:class:`~._input.PromptReader`): a
  prompt at the bottom of the screen, in a thread of its own, with the output
  streaming above it and the status line below it; there Ctrl-C is a key, which
  it hands to :meth:`App.interrupt`. Otherwise :class:`~._input.LineReader`.
- the main task: the prompt, the commands, and each run (``agent.prompt()``:
  every event is recorded to the session and rendered).
- during a run, the input router: a typed line is steering (``agent.steer``),
  ``/later TEXT`` a follow-up, ``/quit`` quits; while a permission question
  waits, the next line goes to it instead.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import trio

from .. import _events as ev
from .._agent import Agent
from .._channel import EventReceiver
from .._instructions import project_instructions
from .._loop import ExecutionLimits
from .._permissions import PermissionRequest, Permissions
from .._secrets import redact_urls
from .._types import AssistantMessage, StopReason, ToolOutcome, UserMessage
from .._visible import visible, visible_line
from .._words import plural
from ..providers import RetryConfig
from ..session import (
    SessionLockedError,
    SessionRecorder,
    list_sessions,
    load_session,
    new_session_path,
)
from ..tools import hide_process_credentials
from ._args import Options
from ._commands import (
    ANY_DIRECTORY,
    choose_session,
    error_hint,
    help_lines,
    permission_lines,
    session_lines,
    tool_lines,
)
from ._elicit import ask_form, form_fields
from ._input import LineReader, PromptReader, history_path
from ._models import ModelChoice
from ._output import AnswerOutput, JsonOutput, exit_status
from ._render import Renderer, Screen
from ._setup import (
    SetupError,
    builtin_tools,
    describe_request,
    instructions_note,
    make_permissions,
    mcp_tools,
    openapi_tools,
    system_prompt,
)

__all__ = ["App"]

PROMPT = "\u203a "  # a single right-pointing angle quotation mark, then a space
BANNER = "Type a prompt; /help lists the commands. Ctrl-C stops a run; Ctrl-D quits."
_CATCH_UP_LIMIT = 1000  # checkpoints to wait for the renderer before asking anyway
_YES = frozenset({"y", "yes"})
#: How runs end that need no "the run ended" line after the rendered run.
_SHOWN_ENDS = frozenset({ev.StopKind.COMPLETED, ev.StopKind.ERROR, ev.StopKind.ABORTED})

if TYPE_CHECKING:  # agentloop.mcp needs the MCP SDK, an extra
    from ..mcp import Elicitation, ElicitationAnswer


def _open_browser(url: str) -> bool:
    """Open ``url`` in the user's browser; whether one was started."""
    import webbrowser

    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


class App:
    """One invocation of the terminal agent. :meth:`run` returns the exit status.

    Args:
        options: The command line.
        choice: The model.
        screen: Where everything is shown.
        stdin_fd: Where lines of input come from.
        stderr: Where setup errors go.
        line_editor: Read an interactive session's lines with the line editor
            (:class:`~._input.PromptReader`); None: when standard input and
            the screen are both terminals.
        output: Where a one-prompt run's JSON goes (``--output-format json``
            or ``stream-json``); None: the run is shown on ``screen``.
        answer: Where a one-prompt run's final answer goes (``--output-format
            text`` when ``screen`` is not standard output); the run is shown
            on ``screen`` too.
    """

    def __init__(
        self,
        options: Options,
        choice: ModelChoice,
        screen: Screen,
        *,
        stdin_fd: int = 0,
        stderr: TextIO | None = None,
        line_editor: bool | None = None,
        output: JsonOutput | None = None,
        answer: AnswerOutput | None = None,
    ) -> None:
        self.output = output
        self.answer = answer
        self.options = options
        self.choice = choice
        self.screen = screen
        retry = getattr(choice.provider, "retry", None)
        attempts = retry.max_retries + 1 if isinstance(retry, RetryConfig) else None
        self.renderer = Renderer(screen, max_attempts=attempts)
        self.stdin_fd = stdin_fd
        self.stderr = stderr if stderr is not None else sys.stderr
        self.exit_code = 0
        self.permissions: Permissions | None = None
        self.session_path: Path | None = None  # None: a new file at the first run
        self._session_elsewhere = False  # the session was started in another directory
        self._agent: Agent | None = None
        self._reader: LineReader | PromptReader | None = None
        self._editor: PromptReader | None = None  # the reader, when it is the line editor
        self._line_editor = line_editor
        self._status = ""  # the last run's status line, for the line editor's toolbar
        self._recorder: SessionRecorder | None = None
        self._recording_failed = False
        self._scope = trio.CancelScope()
        self._running = False  # a run is going on
        self._stopping = False  # Ctrl-C asked this run to stop
        self._routing = False  # the input router owns the input (during a run)
        self._approval: trio.MemorySendChannel[str | None] | None = None
        self._approval_lock = trio.Lock()
        self._events: EventReceiver[ev.AgentEvent] | None = None
        self._failure: str | None = None  # why the last run ended without its AgentEnd

    @property
    def interactive(self) -> bool:
        """Whether this is an interactive session (no prompt on the command line)."""
        return self.options.prompt is None

    @property
    def agent(self) -> Agent:
        """The agent (once set up)."""
        if self._agent is None:
            raise RuntimeError("the agent is not set up yet")
        return self._agent

    @property
    def reader(self) -> LineReader | PromptReader:
        """The lines of standard input (once running)."""
        if self._reader is None:
            raise RuntimeError("the app is not running")
        return self._reader

    # ----------------------------------------------------------------- lifecycle

    async def run(self) -> int:
        """Set up, run the prompt or the interactive loop, clean up; return the exit status."""
        # The key and other credentials stay in os.environ, out of /proc/<pid>/environ.
        key = self.options.api_key_env
        hide_process_credentials(also=[key] if key else ())
        if self.options.sessions:
            sessions = await trio.to_thread.run_sync(list_sessions)
            any_directory = self.options.any_directory
            for line in session_lines(
                sessions, None, here=self.options.directory, any_directory=any_directory
            ):
                self.screen.line(line)
            return 0
        async with trio.open_nursery() as nursery:
            await nursery.start(self._watch_interrupts)
            if self._wants_editor():
                self._reader = self._editor = PromptReader(
                    self.screen.console,
                    prompt=PROMPT,
                    on_interrupt=self.interrupt,
                    toolbar=self._toolbar,
                    history=history_path(),
                )
                self.renderer.status = self._show_status
            else:
                self._reader = LineReader(nursery, self.stdin_fd)
            try:
                with self._scope:
                    async with contextlib.AsyncExitStack() as stack:
                        try:
                            await self._setup(stack)
                        except SetupError as error:
                            self.screen.end_line()
                            said = visible(redact_urls(str(error)))
                            print(f"agentloop: {said}", file=self.stderr, flush=True)
                            self.exit_code = 2
                        else:
                            prompt = self.options.prompt
                            self.exit_code = (
                                await self._repl()
                                if prompt is None
                                else await self._one_prompt(prompt)
                            )
            finally:
                if self._editor is not None:
                    with trio.CancelScope(shield=True):
                        await self._editor.aclose()
                self._close_recorder()
                await self._close_provider()
                nursery.cancel_scope.cancel()
        return self.exit_code

    def quit(self, code: int) -> None:
        """Leave now with exit status ``code``: a run going on is cancelled."""
        self.exit_code = code
        self._scope.cancel()

    def interrupt(self) -> None:
        """Ctrl-C: stop the run; a second one in the same run, or one at the prompt, quits."""
        if self._running and not self._stopping:
            self._stopping = True
            self.agent.abort()
            self.screen.line("stopping the run (Ctrl-C again quits)", "yellow")
        else:
            self.screen.end_line()
            self.quit(130)

    def _wants_editor(self) -> bool:
        """Whether to read the lines with the line editor (see ``line_editor``)."""
        if self._line_editor is not None:
            return self._line_editor and self.interactive
        if not (self.interactive and self.screen.input_is_terminal and self.stdin_fd == 0):
            return False
        if os.environ.get("TERM") == "dumb":
            return False
        try:
            return os.isatty(0) and self.screen.console.file.isatty()
        except (AttributeError, OSError, ValueError):
            return False

    def _toolbar(self) -> str:
        """The line below the prompt: the last run's status (or that one runs), the model."""
        if self._running:
            what = "running: Enter steers it, Ctrl-C stops it"
        else:
            what = self._status or "Esc Enter: a new line; Ctrl-D quits"
        return visible_line(f"{what}  {self.choice.label}")

    def _show_status(self, status: str) -> None:
        """The renderer's status line at the end of a run: in the line editor's toolbar."""
        self._status = status
        if self._editor is not None:
            self._editor.refresh()

    def _ask(self, question: str) -> None:
        """Show ``question`` (the prompt, or a permission question) before a line is read."""
        if self._editor is not None and not self._editor.ended:
            self.screen.end_line()  # the unfinished line goes above it, first
            self._editor.ask(None if question == PROMPT else visible_line(question))
        else:
            self.screen.ask(question)

    def _answered(self, line: str | None) -> None:
        """A line was read after :meth:`_ask` (None: the end of the input)."""
        if self._editor is not None and self.screen.continues("question"):
            self.screen.answered(line)  # the editor ended: the question was printed
        elif self._editor is not None:
            self._editor.ask(None)  # it shows the line after the question, as typed
        else:
            self.screen.answered(line)

    async def _watch_interrupts(
        self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        with trio.open_signal_receiver(signal.SIGINT) as interrupts:
            task_status.started()
            async for _ in interrupts:
                self.interrupt()

    async def _close_provider(self) -> None:
        aclose = getattr(self.choice.provider, "aclose", None)
        if aclose is not None:
            with trio.move_on_after(5, shield=True):
                await aclose()

    # ----------------------------------------------------------------- setup

    async def _setup(self, stack: contextlib.AsyncExitStack) -> None:
        options, choice, screen = self.options, self.choice, self.screen
        root = options.directory
        screen.line(choice.note)
        instructions = await trio.to_thread.run_sync(project_instructions, root)
        if instructions is not None:
            screen.line(instructions_note(instructions))
        tools, note = builtin_tools(root, options.sandbox)
        if note is not None:
            confined = all(getattr(tool, "sandboxed", True) for tool in tools)
            screen.line(note, "dim" if confined else "yellow")
        tools += await openapi_tools(options.openapi, options.openapi_base_url)
        # With JSON output nobody can answer a question: asked calls are refused.
        approver = self._approve if self.output is None else self._refuse
        if options.mcp_config is not None:
            # Servers get the root, may ask the user (on the terminal), and may ask
            # the agent's model, each time with the user's consent.
            tools += await mcp_tools(
                options.mcp_config,
                stack,
                screen,
                elicitation=self._elicit if self.output is None else self._decline,
                sampling=(choice.provider, Permissions(default="ask", approver=approver)),
                roots=[root],
            )
        self.permissions = make_permissions(approver, settings=options.permissions)
        limits = None  # the defaults
        if options.max_turns is not None:
            limits = ExecutionLimits(max_turns=options.max_turns)
        try:
            self._agent = Agent(
                choice.provider,
                system_prompt=system_prompt(root, instructions),
                tools=tools,
                permissions=self.permissions,
                journal=self._record,  # each event as it happens: a crash loses nothing
                limits=limits,
            )
        except (TypeError, ValueError) as error:
            raise SetupError(f"cannot use these tools together: {error}") from error
        if options.resume is not None:
            await self._resume(
                options.resume, any_directory=options.any_directory, listing="agentloop --sessions"
            )
        if self.interactive:
            screen.line(BANNER, "dim")
        screen.line("")

    async def _resume(self, session_id: str, *, any_directory: bool, listing: str) -> None:
        """Load a session (``""``: the latest) into the idle agent; record to its file from now on.

        Only the sessions started in this directory, unless ``any_directory``;
        ``listing`` is the command that lists them, for the messages.

        Raises:
            SetupError: there is no such session, or it cannot be read.
        """
        here = self.options.directory
        try:
            sessions = await trio.to_thread.run_sync(list_sessions)
            info = choose_session(
                sessions, session_id, here=here, any_directory=any_directory, listing=listing
            )
            session = await trio.to_thread.run_sync(load_session, info.path)
        except LookupError as error:
            raise SetupError(str(error)) from error
        except (OSError, ValueError) as error:
            raise SetupError(f"cannot resume the session: {error}") from error
        self._close_recorder()
        self.session_path = info.path
        self._session_elsewhere = info.cwd != here
        self._recording_failed = False
        if session.interrupted:
            # Calls the stopped process left open: answered now, and recorded.
            self._open_recorder()
            recovered = await session.recover(self.agent)
        else:
            session.restore(self.agent)
            recovered = ()
        restored = f"{plural(len(session.messages), 'message')} restored"
        if info.cwd == here:
            said = f"agentloop: resumed session {session.session_id}: {restored}."
        else:
            of = f"of {info.cwd}" if info.cwd is not None else "of an unknown directory"
            said = (
                f"agentloop: resumed session {session.session_id} {of}: {restored}; "
                f"the agent works in {here}."
            )
        self.screen.line(said)
        for warning in session.warnings:
            self.screen.line(f"agentloop: {warning}", "yellow")
        for result in recovered:
            what = "not run again (it may not be safe to repeat)"
            if result.outcome is not ToolOutcome.NOT_RUN_AGAIN:
                what = "run again"
            self.screen.line(
                f"agentloop: {result.tool_name} was cut short by the stop; {what}.", "yellow"
            )

    # ----------------------------------------------------------------- sessions

    def _open_recorder(self) -> None:
        if self._recorder is not None or self._recording_failed:
            return
        try:
            path = self.session_path or new_session_path()
            self._recorder = SessionRecorder(
                path, meta={"cwd": str(self.options.directory), "model": self.choice.label}
            )
        except SessionLockedError as error:
            self._recording_failed = True
            self.screen.error(f"agentloop: this session is not recorded: {error}")
            return
        except OSError as error:
            self._recording_failed = True
            self.screen.error(
                f"agentloop: this session is not recorded: {error} (set AGENTLOOP_HOME to a "
                "directory you can write to)"
            )
            return
        self.session_path = path

    def _record(self, event: ev.AgentEvent) -> None:
        if self._recorder is None:
            return
        try:
            self._recorder.record(event)
        except OSError as error:
            self._recording_failed = True
            self._close_recorder()
            self.screen.error(f"agentloop: recording stopped: {error}")

    def _close_recorder(self) -> None:
        recorder, self._recorder = self._recorder, None
        if recorder is not None:
            try:
                recorder.close()
            except OSError as error:
                self.screen.error(f"agentloop: the session file could not be closed: {error}")

    # ----------------------------------------------------------------- running

    async def _repl(self) -> int:
        try:
            while True:
                queued = [*self.agent.steering_queue, *self.agent.follow_up_queue]
                if queued:  # typed as the last run ended: they start the next one
                    self.agent.clear_queues()
                    for message in queued:
                        self.screen.line(f"\u21aa {message.text}", "bold")
                    await self._run(*queued)
                    continue
                self._ask(PROMPT)
                line = await self.reader.readline()
                self._answered(line)
                if line is None:
                    return 0
                text = line.strip()
                if not text:
                    continue
                if text.startswith("//"):
                    text = text[1:]
                elif text.startswith("/"):
                    if await self._command(text, running=False):
                        return 0
                    continue
                await self._run(text)
        finally:
            if self.session_path is not None and not self._recording_failed:
                self.screen.line(
                    f"agentloop: session saved in {self.session_path} "
                    f"(continue it with: {self._resume_command(self.session_path.stem)})",
                    "dim",
                )

    def _resume_command(self, session_id: str) -> str:
        """The command line that continues the session ``session_id`` from the shell."""
        words = ["agentloop"]
        try:
            elsewhere = self.options.directory != Path.cwd().resolve()
        except OSError:  # the current directory is gone
            elsewhere = True
        if elsewhere:
            words += ["-C", str(self.options.directory)]
        words += ["--resume", session_id]
        if self._session_elsewhere:
            words.append(ANY_DIRECTORY)
        return shlex.join(words)

    async def _one_prompt(self, prompt: str) -> int:
        """Run the command line's prompt; write the run's JSON object, or its answer, at the end."""
        status = await self._run(prompt)
        if self.answer is not None:
            end = self.answer.end
            # A stop at a limit is said here; an error or an abort the renderer showed.
            if end is not None and end.stop_reason.kind not in _SHOWN_ENDS:
                stop = end.stop_reason
                self.screen.error(f"agentloop: the run ended ({stop.kind.value}): {stop.message}")
            self.answer.finish()
        if self.output is not None:
            end = self.output.end
            if end is not None and not end.stop_reason.completed:  # said on stderr too
                stop = end.stop_reason
                self.screen.error(f"agentloop: the run ended ({stop.kind.value}): {stop.message}")
            session = self.session_path.stem if self.session_path is not None else None
            if self._recording_failed:
                session = None
            self.output.finish(
                status=status, session_id=session, model=self.choice.label, failure=self._failure
            )
        return status

    async def _run(self, *messages: str | UserMessage) -> int:
        """Run the agent on ``messages``; the status by how the run ended (see ``_output``)."""
        self._open_recorder()
        self._running, self._stopping = True, False
        if self._editor is not None:
            self._editor.busy = True
            self._editor.refresh()
        last: AssistantMessage | None = None
        end: ev.AgentEnd | None = None
        run_id: str | None = None
        failed = False
        self._failure = None
        try:
            async with trio.open_nursery() as nursery:
                if self.interactive and self.screen.input_is_terminal:
                    # Typeahead on a terminal steers the run; piped input is a
                    # script of prompts, each read when the one before is done.
                    self._routing = True
                    nursery.start_soon(self._route_input)
                try:
                    async with self.agent.prompt(*messages) as events:
                        self._events = events
                        async for event in events:
                            if self.output is None:
                                self.renderer.show(event)
                            else:
                                self.output.event(event)
                            if self.answer is not None:
                                self.answer.event(event)
                            if isinstance(event, ev.AgentStart) and run_id is None:
                                run_id = event.loop_id  # the run's own loop: not a sub-agent's
                            elif isinstance(event, ev.AgentEnd) and event.loop_id == run_id:
                                end = event
                            if isinstance(event, ev.MessageEnd) and isinstance(
                                event.message, AssistantMessage
                            ):
                                last = event.message
                                self._hint(last)
                except Exception as error:  # a hook's or a tool's bug: report it, go on
                    self.screen.error(f"error: {type(error).__name__}: {error}")
                    self._failure = f"{type(error).__name__}: {error}"
                    failed = True
                finally:
                    self._events = None
                nursery.cancel_scope.cancel()
        finally:
            self._running = self._routing = False
            if self._editor is not None:
                self._editor.busy = False
                self._editor.refresh()
        stopped, self._stopping = self._stopping, False
        if stopped:
            return 130
        if failed or (last is not None and last.stop_reason is StopReason.ERROR):
            return 1
        return 0 if end is None else exit_status(end.stop_reason)

    def _hint(self, message: AssistantMessage) -> None:
        """After a model error, what to do about it (when there is something to say)."""
        if message.stop_reason is not StopReason.ERROR or not message.error_message:
            return
        options = self.options
        hint = error_hint(
            message.error_message,
            provider=self.choice.label.partition(":")[0],
            base_url=options.base_url,
            api_key_env=options.api_key_env,
            base_url_env=self.choice.base_url_env,
        )
        if hint is not None:
            self.screen.line(f"  {hint}", "yellow")

    async def _route_input(self) -> None:
        """During a run: each line answers a waiting question, or goes to the agent."""
        try:
            while True:
                line = await self.reader.readline()
                approval, self._approval = self._approval, None
                if approval is not None:
                    approval.send_nowait(line)
                elif line is not None:
                    if self._editor is None:  # the terminal echoed it into the output
                        self.screen.typed()
                    await self._during_run(line)
                if line is None:
                    return
        finally:
            self._routing = False

    async def _during_run(self, line: str) -> None:
        text = line.strip()
        if not text:
            return
        if text.startswith("/") and not text.startswith("//"):
            name, _, rest = text.partition(" ")
            if name == "/later":
                if not rest.strip():
                    self.screen.line("usage: /later TEXT", "yellow")
                    return
                self.agent.follow_up(rest.strip())
                self.screen.line(f"  (follow-up queued: {rest.strip()})", "dim")
            elif name in ("/quit", "/exit"):
                self.quit(0)
            else:
                await self._command(text, running=True)
            return
        if text.startswith("//"):
            text = text[1:]
        self.agent.steer(text)
        self.screen.line(f"  (steering queued: {text})", "dim")

    # ----------------------------------------------------------------- permissions

    async def _approve(self, request: PermissionRequest) -> bool:
        """The approver of ``ask`` rules: ask on the terminal, wait for the next line."""
        async with self._approval_lock:
            await self._catch_up()
            answer = await self._question(f"Allow {describe_request(request)}? [y/N] ")
            allowed = answer is not None and answer.strip().lower() in _YES
            if not allowed:
                why = " (no more input)" if answer is None else ""
                self.screen.line(f"  not allowed{why}", "yellow")
            return allowed

    async def _question(self, text: str) -> str | None:
        """Show ``text`` and wait for the next line (None: no more input).

        During a run, the input router hands the line over; else it is read here.
        Hold ``_approval_lock`` while asking.
        """
        self._ask(text)
        answer: str | None
        if self._routing:
            send, receive = trio.open_memory_channel[str | None](1)
            self._approval = send
            try:
                answer = await receive.receive()
            finally:
                if self._approval is send:  # no answer came: the question is withdrawn
                    self._approval = None
                    if self._editor is not None:
                        self._editor.ask(None)
        else:
            answer = await self.reader.readline()
        self._answered(answer)
        return answer

    async def _elicit(self, request: Elicitation) -> ElicitationAnswer:
        """An MCP server's question to the user, asked on the terminal."""
        from ..mcp import ElicitationAnswer

        async with self._approval_lock:
            await self._catch_up()
            screen = self.screen
            if request.problems:
                screen.line("  that answer does not fit the form:", "yellow")
                for problem in request.problems:
                    screen.line(f"    {problem}", "yellow")
            else:
                screen.line(f"MCP server {request.server!r} asks: {request.message}", "bold")
            if request.mode == "url":
                screen.line(f"  {request.url}")
                answer = await self._question("Open this page? [y/N] ")
                if answer is None:
                    return ElicitationAnswer.cancel()
                if answer.strip().lower() not in _YES:
                    screen.line("  declined", "yellow")
                    return ElicitationAnswer.decline()
                opened = await trio.to_thread.run_sync(_open_browser, request.url or "")
                if not opened:
                    screen.line("  (no browser here: open the address above yourself)", "dim")
                return ElicitationAnswer.accept()
            answer = await self._question("Answer? [y/N] ")
            if answer is None:
                return ElicitationAnswer.cancel()
            if answer.strip().lower() not in _YES:
                screen.line("  declined", "yellow")
                return ElicitationAnswer.decline()
            content = await ask_form(form_fields(request.schema), self._question, screen.line)
            if content is None:
                screen.line("  cancelled (no more input)", "yellow")
                return ElicitationAnswer.cancel()
            return ElicitationAnswer.accept(content)

    def _decline(self, request: Elicitation) -> ElicitationAnswer:
        """With JSON output nobody can answer a server's question: it is declined."""
        from ..mcp import ElicitationAnswer

        self.screen.error(
            f"agentloop: MCP server {request.server!r} asked the user ({request.message!r}); "
            f"with --output-format {self.options.format} nobody is asked, so it was declined"
        )
        return ElicitationAnswer.decline()

    def _refuse(self, request: PermissionRequest) -> bool:
        """The approver with JSON output: nobody can answer, so an asked call is refused."""
        self.screen.error(
            f"agentloop: {describe_request(request)} was refused: it needs approval, and with "
            f"--output-format {self.options.format} nobody is asked (allow it in the "
            "settings' [permissions])"
        )
        return False

    async def _catch_up(self) -> None:
        """Wait until the events sent so far are on the screen (bounded).

        The loop asks for approval right after sending the events before it;
        they may still wait in the channel. The renderer has shown them all
        when the buffer is empty and it is back waiting on the channel.
        """
        for _ in range(_CATCH_UP_LIMIT):
            events = self._events
            if events is None:
                return
            stats = events.statistics()
            if stats.current_buffer_used == 0 and stats.tasks_waiting_receive > 0:
                return
            await trio.lowlevel.checkpoint()

    # ----------------------------------------------------------------- commands

    async def _command(self, text: str, *, running: bool) -> bool:
        """Run a slash command; True: quit."""
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        screen = self.screen
        if name in ("/quit", "/exit"):
            return True
        if name == "/help":
            lines = help_lines()
        elif name == "/tools":
            lines = tool_lines(self.agent.tools)
        elif name == "/permissions":
            assert self.permissions is not None
            lines = permission_lines(self.permissions)
        elif name == "/save":
            lines = [self._where_saved()]
        elif name == "/sessions":
            if rest not in ("", ANY_DIRECTORY):
                lines = [f"usage: /sessions [{ANY_DIRECTORY}]"]
            else:
                sessions = await trio.to_thread.run_sync(list_sessions)
                lines = session_lines(
                    sessions,
                    self.session_path,
                    here=self.options.directory,
                    any_directory=rest == ANY_DIRECTORY,
                )
        elif name == "/resume":
            words = rest.split()
            any_directory = ANY_DIRECTORY in words
            ids = [word for word in words if word != ANY_DIRECTORY]
            if running:
                lines = ["/resume waits until the run ends."]
            elif len(ids) != 1:
                lines = [f"usage: /resume ID [{ANY_DIRECTORY}] (/sessions lists them)"]
            else:
                try:
                    await self._resume(ids[0], any_directory=any_directory, listing="/sessions")
                except SetupError as error:
                    screen.error(f"agentloop: {error}")
                return False
        elif name == "/later":
            lines = ["Nothing is running; type the text as a prompt."]
        else:
            lines = [f"unknown command {name} (/help lists them; // sends a line starting with /)"]
        for line in lines:
            screen.line(line)
        return False

    def _where_saved(self) -> str:
        if self._recording_failed:
            return "This session is not being recorded (see the error above)."
        if self._recorder is None or self.session_path is None:
            return "Nothing is recorded yet; the session is saved from the first prompt on."
        return (
            f"This session is saved as it goes, in {self.session_path} "
            f"(id {self._recorder.session_id})."
        )
