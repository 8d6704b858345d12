"""The terminal agent: the interactive loop, one-shot runs, input routing, Ctrl-C.

Everything runs in one trio run, in these tasks:

- the interrupt watcher: ``trio.open_signal_receiver(SIGINT)``, so Ctrl-C is an
  event, never a ``KeyboardInterrupt`` thrown into some task. During a run it
  aborts the run (softly: every tool call still gets a result, and bash's
  process group is killed by the tool); a second Ctrl-C in the same run, or one
  at the prompt, quits with status 130 by cancelling the app's scope.
- the line reader: standard input, line by line. On a terminal (standard input
  and output both), that is the line editor (:class:`~._editor.PromptReader`): a
  prompt at the bottom of the screen, in a thread of its own, with the output
  streaming above it and the status line below it; there Ctrl-C is a key, which
  it hands to :meth:`App.interrupt`. Otherwise :class:`~._input.LineReader`.
- the main task: the prompt, the commands, and each run (``agent.prompt()``,
  or ``agent.resume(decisions)`` for calls that awaited approval: every event
  is recorded to the session and rendered). A resumed session's calls that
  await approval are asked about before the prompt.
- during a run, the input router: a typed line is steering (``agent.steer``),
  ``/later TEXT`` a follow-up, ``/quit`` quits; while a permission question
  waits, the next line goes to it instead.

:class:`App` wires the parts together: what a run asks the user (tool calls to
allow, MCP servers' questions) is :class:`~._approvals.Approvals`, the
session's file :class:`~._sessions.SessionLog`, the prompt and the lines read
:class:`~._input.Prompter`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from typing import TextIO

import trio

from .. import _events as ev
from .._agent import Agent
from .._approval import ApprovalError, Decision
from .._instructions import project_instructions
from .._loop import ExecutionLimits
from .._secrets import redact_urls
from .._tool import Permissions
from .._types import AssistantMessage, StopReason, UserMessage
from .._visible import visible, visible_line
from ..providers import RetryConfig
from ..tools import hide_process_credentials
from ._approvals import Approvals, decisions_for, pending_lines
from ._args import Options
from ._commands import ANY_DIRECTORY, error_hint, help_lines, permission_lines, tool_lines
from ._editor import PromptReader, history_path
from ._input import LineReader, Prompter
from ._models import ModelChoice
from ._output import AnswerOutput, JsonOutput, exit_status
from ._render import Renderer, Screen
from ._sessions import SessionLog
from ._setup import (
    SetupError,
    builtin_tools,
    instructions_note,
    make_permissions,
    mcp_tools,
    openapi_tools,
    system_prompt,
)

__all__ = ["App"]

PROMPT = "\u203a "  # a single right-pointing angle quotation mark, then a space
BANNER = "Type a prompt; /help lists the commands. Ctrl-C stops a run; Ctrl-D quits."
#: How runs end that need no "the run ended" line after the rendered run (a stop
#: for approval gets lines of its own: :meth:`App._say_pending`).
_SHOWN_ENDS = frozenset(
    {
        ev.StopKind.COMPLETED,
        ev.StopKind.ERROR,
        ev.StopKind.ABORTED,
        ev.StopKind.AWAITING_APPROVAL,
    }
)


class App:
    """One invocation of the terminal agent. :meth:`run` returns the exit status.

    Args:
        options: The command line.
        choice: The model.
        screen: Where everything is shown.
        stdin_fd: Where lines of input come from.
        stderr: Where setup errors go.
        line_editor: Read an interactive session's lines with the line editor
            (:class:`~._editor.PromptReader`); None: when standard input and
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
        self.sessions = SessionLog(screen, directory=options.directory, model=choice.label)
        self._agent: Agent | None = None
        self._prompter: Prompter | None = None
        self._approvals: Approvals | None = None
        self._editor: PromptReader | None = None  # the reader, when it is the line editor
        self._line_editor = line_editor
        self._status = ""  # the last run's status line, for the line editor's toolbar
        self._scope = trio.CancelScope()
        self._running = False  # a run is going on
        self._stopping = False  # Ctrl-C asked this run to stop
        self._failure: str | None = None  # why the last run ended without its AgentEnd
        self._end: ev.AgentEnd | None = None  # the last run's own AgentEnd

    @property
    def interactive(self) -> bool:
        """Whether this is an interactive session (no prompt on the command line)."""
        return not self.options.one_shot

    @property
    def agent(self) -> Agent:
        """The agent (once set up)."""
        if self._agent is None:
            raise RuntimeError("the agent is not set up yet")
        return self._agent

    @property
    def prompter(self) -> Prompter:
        """The prompt and the lines of standard input (once running)."""
        if self._prompter is None:
            raise RuntimeError("the app is not running")
        return self._prompter

    @property
    def approvals(self) -> Approvals:
        """What a run asks the user (once running)."""
        if self._approvals is None:
            raise RuntimeError("the app is not running")
        return self._approvals

    # ----------------------------------------------------------------- lifecycle

    async def run(self) -> int:
        """Set up, run the prompt or the interactive loop, clean up; return the exit status."""
        # The key and other credentials stay in os.environ, out of /proc/<pid>/environ.
        key = self.options.api_key_env
        hide_process_credentials(also=[key] if key else ())
        if self.options.sessions:
            for line in await self.sessions.listing(any_directory=self.options.any_directory):
                self.screen.line(line)
            return 0
        async with trio.open_nursery() as nursery:
            await nursery.start(self._watch_interrupts)
            reader: LineReader | PromptReader
            if self._wants_editor():
                reader = self._editor = PromptReader(
                    self.screen.console,
                    prompt=PROMPT,
                    on_interrupt=self.interrupt,
                    toolbar=self._toolbar,
                    history=history_path(),
                )
                self.renderer.status = self._show_status
            else:
                reader = LineReader(nursery, self.stdin_fd)
            self._prompter = Prompter(self.screen, reader, prompt=PROMPT)
            # With JSON output nobody can answer a question: asked calls are refused
            # (or, with --defer-approvals, wait for decisions given later).
            unattended = None if self.output is None else self.options.format
            self._approvals = Approvals(
                self._prompter, unattended=unattended, defer=self.options.defer_approvals
            )
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
                            self.exit_code = (
                                await self._one_shot()
                                if self.options.one_shot
                                else await self._repl()
                            )
            finally:
                if self._editor is not None:
                    with trio.CancelScope(shield=True):
                        await self._editor.aclose()
                self.sessions.close()
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
        approvals = self.approvals
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
        if options.mcp_config is not None:
            # Servers get the root, may ask the user (on the terminal), and may ask
            # the agent's model, each time with the user's consent.
            tools += await mcp_tools(
                options.mcp_config,
                stack,
                screen,
                elicitation=approvals.elicitation,
                sampling=(
                    choice.provider,
                    Permissions(default="ask", approver=approvals.immediate),
                ),
                roots=[root],
            )
        self.permissions = make_permissions(approvals.approver, settings=options.permissions)
        limits = None  # the defaults
        if options.max_turns is not None:
            limits = ExecutionLimits(max_turns=options.max_turns)
        try:
            self._agent = Agent(
                choice.provider,
                system_prompt=system_prompt(root, instructions),
                tools=tools,
                permissions=self.permissions,
                journal=self.sessions.record,  # each event as it happens: a crash loses nothing
                limits=limits,
            )
        except (TypeError, ValueError) as error:
            raise SetupError(f"cannot use these tools together: {error}") from error
        if options.resume is not None:
            await self.sessions.resume(
                self.agent,
                options.resume,
                any_directory=options.any_directory,
                listing="agentloop --sessions",
            )
        if self.interactive:
            screen.line(BANNER, "dim")
        screen.line("")

    # ----------------------------------------------------------------- running

    async def _repl(self) -> int:
        prompter = self.prompter
        try:
            while True:
                if self.agent.pending:  # a resumed session's calls: decided first
                    decisions = await self.approvals.decide_all(self.agent.pending)
                    if decisions is None:
                        return 0
                    await self._run(decisions=decisions)
                    continue
                queued = [*self.agent.steering_queue, *self.agent.follow_up_queue]
                if queued:  # typed as the last run ended: they start the next one
                    self.agent.clear_queues()
                    for message in queued:
                        self.screen.line(f"\u21aa {message.text}", "bold")
                    await self._run(*queued)
                    continue
                prompter.ask(PROMPT)
                line = await prompter.readline()
                prompter.answered(line)
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
            note = self.sessions.saved_note()
            if note is not None:
                self.screen.line(note, "dim")

    def _usage_error(self, text: str) -> int:
        """Say ``text`` (a usage error) on standard error; the exit status, 2."""
        self.screen.end_line()
        print(f"agentloop: {visible(text)}", file=self.stderr, flush=True)
        return 2

    async def _one_shot(self) -> int:
        """Run the command line's prompt, or go on with its decisions; write the run's
        JSON object, or its answer, at the end."""
        prompt = self.options.prompt
        if prompt is not None:
            pending = self.agent.pending
            if pending:
                ids = ", ".join(call.tool_call_id for call in pending)
                return self._usage_error(
                    f"calls of session {self.sessions.session_id} await approval ({ids}): "
                    f"decide them first ({self.sessions.resume_command()} --approve "
                    "CALL_ID, --deny CALL_ID[=REASON]...); nothing ran"
                )
            status = await self._run(prompt)
        else:
            options, session = self.options, self.sessions.session_id
            try:
                decisions = decisions_for(
                    self.agent.pending, options.decisions, rest=options.decide_rest
                )
            except ApprovalError as error:
                return self._usage_error(f"session {session}: {error}")
            status = await self._run(decisions=decisions)
        if self._end is not None and self._end.pending:
            self._say_pending(self._end)
        if self.answer is not None:
            # A stop at a limit is said here; an error or an abort the renderer showed.
            self._say_end(self.answer.end, shown=_SHOWN_ENDS)
            self.answer.finish()
        if self.output is not None:
            # Any other end is said on stderr too.
            self._say_end(
                self.output.end,
                shown=frozenset({ev.StopKind.COMPLETED, ev.StopKind.AWAITING_APPROVAL}),
            )
            self.output.finish(
                status=status,
                session_id=self.sessions.session_id,
                model=self.choice.label,
                failure=self._failure,
            )
        return status

    def _say_pending(self, end: ev.AgentEnd) -> None:
        """The run stopped to await approval: which calls, and how to decide them."""
        recorded = self.sessions.session_id is not None
        command = self.sessions.resume_command() if recorded else None
        for line, style in pending_lines(end.pending, self.sessions.session_id, command):
            self.screen.line(line, style)

    def _say_end(self, end: ev.AgentEnd | None, *, shown: frozenset[ev.StopKind]) -> None:
        """Say how the run ended, unless it ended in one of the ``shown`` ways."""
        if end is not None and end.stop_reason.kind not in shown:
            stop = end.stop_reason
            self.screen.error(f"agentloop: the run ended ({stop.kind.value}): {stop.message}")

    async def _run(
        self, *messages: str | UserMessage, decisions: list[Decision] | None = None
    ) -> int:
        """Run the agent on ``messages``, or go on with ``decisions`` on the calls that
        await approval; the status by how the run ended (see ``_output``)."""
        approvals = self.approvals
        self.sessions.open()
        self._running, self._stopping = True, False
        if self._editor is not None:
            self._editor.busy = True
            self._editor.refresh()
        last: AssistantMessage | None = None
        end: ev.AgentEnd | None = None
        run_id: str | None = None
        failed = False
        self._failure, self._end = None, None
        try:
            async with trio.open_nursery() as nursery:
                if self.interactive and self.screen.input_is_terminal:
                    # Typeahead on a terminal steers the run; piped input is a
                    # script of prompts, each read when the one before is done.
                    approvals.routing = True
                    nursery.start_soon(self._route_input)
                try:
                    run = (
                        self.agent.prompt(*messages)
                        if decisions is None
                        else self.agent.resume(decisions)
                    )
                    async with run as events:
                        approvals.events = events
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
                                end = self._end = event
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
                    approvals.events = None
                nursery.cancel_scope.cancel()
        finally:
            self._running = approvals.routing = False
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
                line = await self.prompter.readline()
                if not self.approvals.hand_over(line) and line is not None:
                    if self._editor is None:  # the terminal echoed it into the output
                        self.screen.typed()
                    await self._during_run(line)
                if line is None:
                    return
        finally:
            self.approvals.routing = False

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
            lines = [self.sessions.where_saved()]
        elif name == "/sessions":
            if rest not in ("", ANY_DIRECTORY):
                lines = [f"usage: /sessions [{ANY_DIRECTORY}]"]
            else:
                lines = await self.sessions.listing(any_directory=rest == ANY_DIRECTORY)
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
                    await self.sessions.resume(
                        self.agent, ids[0], any_directory=any_directory, listing="/sessions"
                    )
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
