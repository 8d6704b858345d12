"""What a run asks the user: may a tool call run, and an MCP server's questions.

The loop asks for approval of a call that an ``ask`` rule matches (the
permission policy's approver); an MCP server may ask the user a question, a
form or to open a page (elicitation). :class:`Approvals` asks both on the
terminal, one at a time, and reads the answer from the next line of input.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal

import trio

from .. import _events as ev
from .._approval import DEFER, ApprovalError, Decision, Deferred, PendingCall, check_decisions
from .._channel import EventReceiver
from .._tool import Approver, PermissionRequest
from .._words import plural
from ._elicit import ask_form, form_fields
from ._input import Prompter
from ._setup import describe_call, describe_request

if TYPE_CHECKING:  # agentloop.mcp needs the MCP SDK, an extra
    from ..mcp import Elicitation, ElicitationAnswer

__all__ = ["Approvals", "decisions_for", "pending_lines"]

_CATCH_UP_LIMIT = 1000  # checkpoints to wait for the renderer before asking anyway
_YES = frozenset({"y", "yes"})


def decisions_for(
    pending: Sequence[PendingCall],
    decisions: Sequence[Decision],
    *,
    rest: Literal["approve", "deny"] | None = None,
) -> list[Decision]:
    """The command line's decisions on the ``pending`` calls: ``decisions`` (``--approve``,
    ``--deny``), then ``rest`` (``--approve-all``, ``--deny-all``) for each call they
    leave out.

    Raises:
        ApprovalError: no call is pending; a decision names a call that is not
            pending; two decide one call; a pending call has none (each names
            the ids, as :func:`~agentloop._approval.check_decisions`). Nothing ran.
    """
    if not pending:
        raise ApprovalError("no call awaits approval: there is nothing to decide; nothing ran")
    decided = list(decisions)
    named = {decision.tool_call_id for decision in decided}
    for call in pending:
        if call.tool_call_id in named or rest is None:
            continue
        decided.append(call.approve() if rest == "approve" else call.deny())
    check_decisions(pending, decided)
    return decided


def pending_lines(
    pending: Sequence[PendingCall], session_id: str | None, resume_command: str | None
) -> list[tuple[str, str]]:
    """What a run that stopped to await approval says: the calls, a line each, and
    how to decide them (``resume_command``: the command that continues the
    session; None: it is not recorded); each line with its style."""
    verb = "awaits" if len(pending) == 1 else "await"
    where = f" (session {session_id})" if session_id is not None else ""
    lines: list[tuple[str, str]] = [
        (f"agentloop: the run stopped: {plural(len(pending), 'call')} {verb} approval{where}:",
         "yellow"),
    ]  # fmt: skip
    width = max((len(call.tool_call_id) for call in pending), default=0)
    lines += [
        (f"  {call.tool_call_id.ljust(width)}  {describe_call(call)}", "") for call in pending
    ]
    if resume_command is None:
        lines.append(
            ("agentloop: the session is not recorded: these calls cannot be decided later", "red")
        )
    else:
        lines.append(
            (f"agentloop: decide with: {resume_command} --approve CALL_ID or --deny "
             "CALL_ID[=REASON] for each (or --approve-all, --deny-all)", "yellow"),
        )  # fmt: skip
    return lines


def _open_browser(url: str) -> bool:
    """Open ``url`` in the user's browser; whether one was started."""
    import webbrowser

    try:
        return webbrowser.open(url)
    except webbrowser.Error:
        return False


class Approvals:
    """The user's answers to what a run asks: tool calls to allow, MCP servers' questions.

    :meth:`approve` is the approver of the permission policy's ``ask`` rules
    (y or yes allows the call; anything else, or the end of the input, refuses
    it); :meth:`elicit` answers an MCP server's question. One question at a
    time, each asked once the events of :attr:`events` sent before it are on
    the screen, so that it comes after the tool call it is about.

    A question takes the next line of input. While the input router of a run
    reads the lines (:attr:`routing`), it hands that line over
    (:meth:`hand_over`); otherwise the question reads it from ``prompter``.

    With ``unattended`` (the output format, when the run's output is JSON for
    a script) nobody can answer: :attr:`approver` refuses asked calls and
    :attr:`elicitation` declines servers' questions, each said on the screen.
    With ``defer`` (``--defer-approvals``), :attr:`approver` is
    :data:`~agentloop.DEFER`: asked calls wait for a decision, and the run
    stops awaiting approval.

    :meth:`decide` asks about a call that awaits approval (a resumed session's),
    the same question as :meth:`approve`.

    Cancellation: a question cancelled while it waits is withdrawn (the line
    editor's prompt comes back); the next line goes to the router again.
    """

    def __init__(
        self, prompter: Prompter, *, unattended: str | None = None, defer: bool = False
    ) -> None:
        self.prompter = prompter
        self.screen = prompter.screen
        self.unattended = unattended
        self.defer = defer
        #: The input router reads the lines: a question waits for the one it hands over.
        self.routing = False
        #: The events of the run going on, as they are shown; None: no run.
        self.events: EventReceiver[ev.AgentEvent] | None = None
        self._waiting: trio.MemorySendChannel[str | None] | None = None  # a question's
        self._lock = trio.Lock()

    @property
    def approver(self) -> Approver | Deferred:
        """The approver of the permission policy: :meth:`approve`, :meth:`refuse`, or
        :data:`~agentloop.DEFER` (``defer``)."""
        return DEFER if self.defer else self.immediate

    @property
    def immediate(self) -> Approver:
        """An approver that answers now (for what cannot wait, such as an MCP server's
        request to sample the model): :meth:`approve`, or :meth:`refuse`."""
        return self.approve if self.unattended is None else self.refuse

    @property
    def elicitation(
        self,
    ) -> Callable[[Elicitation], ElicitationAnswer | Awaitable[ElicitationAnswer]]:
        """The MCP servers' question handler: :meth:`elicit`, or :meth:`decline`."""
        return self.elicit if self.unattended is None else self.decline

    def hand_over(self, line: str | None) -> bool:
        """The input router's line: to the question waiting for it, if one does (True)."""
        waiting, self._waiting = self._waiting, None
        if waiting is None:
            return False
        waiting.send_nowait(line)
        return True

    async def approve(self, request: PermissionRequest) -> bool:
        """Ask on the terminal whether the call of ``request`` may run; wait for the answer."""
        async with self._lock:
            await self._catch_up()
            answer = await self.question(f"Allow {describe_request(request)}? [y/N] ")
            allowed = answer is not None and answer.strip().lower() in _YES
            if not allowed:
                why = " (no more input)" if answer is None else ""
                self.screen.line(f"  not allowed{why}", "yellow")
            return allowed

    async def decide(self, call: PendingCall) -> Decision | None:
        """Ask on the terminal whether ``call``, which awaits approval, may run.

        The question is :meth:`approve`'s; y or yes approves it, anything else
        denies it. None: the input ended, and the call is left pending.
        """
        async with self._lock:
            answer = await self.question(f"Allow {describe_call(call)}? [y/N] ")
            if answer is None:
                self.screen.line("  left awaiting approval (no more input)", "yellow")
                return None
            if answer.strip().lower() in _YES:
                return call.approve()
            self.screen.line("  not allowed", "yellow")
            return call.deny()

    async def decide_all(self, pending: Sequence[PendingCall]) -> list[Decision] | None:
        """Ask about each of the ``pending`` calls (a resumed session's), in order
        (see :meth:`decide`); None: the input ended first, and they stay pending."""
        verb = "awaits" if len(pending) == 1 else "await"
        self.screen.line(
            f"agentloop: {plural(len(pending), 'call')} of this session {verb} approval.",
            "yellow",
        )
        decisions: list[Decision] = []
        for call in pending:
            decision = await self.decide(call)
            if decision is None:
                return None
            decisions.append(decision)
        return decisions

    def refuse(self, request: PermissionRequest) -> bool:
        """The approver when nobody can answer: the call is refused, and that is said."""
        self.screen.error(
            f"agentloop: {describe_request(request)} was refused: it needs approval, and with "
            f"--output-format {self.unattended} nobody is asked (allow it in the "
            "settings' [permissions])"
        )
        return False

    async def question(self, text: str) -> str | None:
        """Show ``text`` and wait for the next line (None: no more input).

        While the router reads the lines, it hands the line over; else it is
        read here. Hold the lock while asking.
        """
        self.prompter.ask(text)
        answer: str | None
        if self.routing:
            send, receive = trio.open_memory_channel[str | None](1)
            self._waiting = send
            try:
                answer = await receive.receive()
            finally:
                if self._waiting is send:  # no answer came: the question is withdrawn
                    self._waiting = None
                    self.prompter.withdraw()
        else:
            answer = await self.prompter.readline()
        self.prompter.answered(answer)
        return answer

    async def elicit(self, request: Elicitation) -> ElicitationAnswer:
        """An MCP server's question to the user, asked on the terminal."""
        from ..mcp import ElicitationAnswer

        async with self._lock:
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
                refused = await self._consent("Open this page? [y/N] ")
                if refused is not None:
                    return refused
                opened = await trio.to_thread.run_sync(_open_browser, request.url or "")
                if not opened:
                    screen.line("  (no browser here: open the address above yourself)", "dim")
                return ElicitationAnswer.accept()
            refused = await self._consent("Answer? [y/N] ")
            if refused is not None:
                return refused
            content = await ask_form(form_fields(request.schema), self.question, screen.line)
            if content is None:
                screen.line("  cancelled (no more input)", "yellow")
                return ElicitationAnswer.cancel()
            return ElicitationAnswer.accept(content)

    async def _consent(self, text: str) -> ElicitationAnswer | None:
        """Ask ``text``, a yes-or-no question; None: yes; else the server's answer."""
        from ..mcp import ElicitationAnswer

        answer = await self.question(text)
        if answer is None:
            return ElicitationAnswer.cancel()
        if answer.strip().lower() not in _YES:
            self.screen.line("  declined", "yellow")
            return ElicitationAnswer.decline()
        return None

    def decline(self, request: Elicitation) -> ElicitationAnswer:
        """A server's question when nobody can answer: it is declined, and that is said."""
        from ..mcp import ElicitationAnswer

        self.screen.error(
            f"agentloop: MCP server {request.server!r} asked the user ({request.message!r}); "
            f"with --output-format {self.unattended} nobody is asked, so it was declined"
        )
        return ElicitationAnswer.decline()

    async def _catch_up(self) -> None:
        """Wait until the events sent so far are on the screen (bounded).

        The loop asks for approval right after sending the events before it;
        they may still wait in the channel. The renderer has shown them all
        when the buffer is empty and it is back waiting on the channel.
        """
        for _ in range(_CATCH_UP_LIMIT):
            events = self.events
            if events is None:
                return
            stats = events.statistics()
            if stats.current_buffer_used == 0 and stats.tasks_waiting_receive > 0:
                return
            await trio.lowlevel.checkpoint()
