"""The terminal agent's questions on their own: :class:`Approvals` and :class:`Prompter`.

Real lines: the input is a real pipe read by :class:`LineReader`; the screen a
console on a string, as the terminal agent's output looks when it is not a
terminal (each answer is echoed after its question).
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator, Callable

import pytest
import trio
import trio.testing

import agentloop as al
from agentloop._cli._approvals import Approvals
from agentloop._cli._input import LineReader, Prompter
from agentloop._cli._render import Screen, make_console

PROMPT = "\u203a "


class Terminal:
    """A screen on a string, and standard input as a pipe holding ``typed``."""

    def __init__(self, nursery: trio.Nursery, typed: str) -> None:
        self.out = io.StringIO()
        self.screen = Screen(make_console(self.out))
        read, write = os.pipe()
        os.write(write, typed.encode())
        os.close(write)
        self.fd = read
        self.prompter = Prompter(self.screen, LineReader(nursery, read), prompt=PROMPT)

    @property
    def shown(self) -> str:
        return self.out.getvalue()


@pytest.fixture
async def terminal() -> AsyncIterator[Callable[[str], Terminal]]:
    made: list[Terminal] = []
    async with trio.open_nursery() as nursery:

        def make(typed: str) -> Terminal:
            made.append(Terminal(nursery, typed))
            return made[-1]

        try:
            yield make
            with trio.fail_after(10):  # to the end of the input: no read is left going
                for term in made:
                    while await term.prompter.readline() is not None:
                        pass
        finally:
            nursery.cancel_scope.cancel()
    for term in made:
        os.close(term.fd)


def request(command: str = "ls") -> al.PermissionRequest:
    return al.PermissionRequest(
        tool_name="bash",
        tool_call_id="c1",
        arguments={"command": command},
        subject=("command", command),
        rule=None,
    )


# --------------------------------------------------------------------------- Prompter


async def test_the_prompter_asks_and_shows_the_answer_read(
    terminal: Callable[[str], Terminal],
) -> None:
    """Without the line editor: the question, then the line read (echoed: not a terminal)."""
    term = terminal("first\n")
    prompter = term.prompter
    assert prompter.editor is None
    prompter.ask("Name? ")
    line = await prompter.readline()
    prompter.answered(line)
    prompter.ask(PROMPT)
    end = await prompter.readline()
    prompter.answered(end)
    prompter.withdraw()  # no editor: nothing to give back
    assert (line, end) == ("first", None)
    assert term.shown == "Name? first\n\u203a \n"


# --------------------------------------------------------------------------- approvals


@pytest.mark.parametrize(
    ("typed", "allowed", "shown"),
    [
        ("y\n", True, "Allow bash(ls)? [y/N] y\n"),
        (" YES \n", True, "Allow bash(ls)? [y/N]  YES \n"),
        ("n\n", False, "Allow bash(ls)? [y/N] n\n  not allowed\n"),
        ("sure\n", False, "Allow bash(ls)? [y/N] sure\n  not allowed\n"),
        ("", False, "Allow bash(ls)? [y/N] \n  not allowed (no more input)\n"),
    ],
)
async def test_a_call_is_allowed_by_y_or_yes_only(
    terminal: Callable[[str], Terminal], typed: str, allowed: bool, shown: str
) -> None:
    term = terminal(typed)
    approvals = Approvals(term.prompter)
    assert approvals.approver == approvals.approve
    assert await approvals.approve(request()) is allowed
    assert term.shown == shown


async def test_unattended_asked_calls_are_refused_and_that_is_said(
    terminal: Callable[[str], Terminal],
) -> None:
    """With JSON output nobody can answer: no question, no line read; a red line says why."""
    term = terminal("y\n")
    approvals = Approvals(term.prompter, unattended="json")
    assert approvals.approver == approvals.refuse
    assert approvals.elicitation == approvals.decline
    assert approvals.approver(request("rm -r build")) is False
    assert term.shown == (
        "agentloop: bash(rm -r build) was refused: it needs approval, and with --output-format "
        "json nobody is asked (allow it in the settings' [permissions])\n"
    )
    assert await term.prompter.readline() == "y"  # the input was left alone


async def test_while_the_router_reads_the_lines_it_hands_the_next_one_to_the_question(
    terminal: Callable[[str], Terminal],
) -> None:
    term = terminal("")
    approvals = Approvals(term.prompter)
    approvals.routing = True
    assert approvals.hand_over("steer this") is False  # no question waits: the router's line
    answers: list[bool] = []
    async with trio.open_nursery() as nursery:

        async def ask() -> None:
            answers.append(await approvals.approve(request()))

        nursery.start_soon(ask)
        await trio.testing.wait_all_tasks_blocked()
        assert term.shown == "Allow bash(ls)? [y/N] "
        assert approvals.hand_over("yes") is True
    assert answers == [True]
    assert approvals.hand_over("next") is False
    assert term.shown == "Allow bash(ls)? [y/N] yes\n"


async def test_a_question_cancelled_while_it_waits_is_withdrawn(
    terminal: Callable[[str], Terminal],
) -> None:
    """The line typed after it goes to the router again, not to a question nobody waits for."""
    term = terminal("")
    approvals = Approvals(term.prompter)
    approvals.routing = True
    with trio.move_on_after(5) as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(approvals.approve, request())
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert approvals.hand_over("steer this") is False


async def test_questions_are_asked_one_at_a_time(terminal: Callable[[str], Terminal]) -> None:
    """Two calls asked at once (parallel tool calls): the second question waits for the
    first answer, and each answer goes to its own question."""
    term = terminal("")
    approvals = Approvals(term.prompter)
    approvals.routing = True
    answers: dict[str, bool] = {}

    async def ask(command: str) -> None:
        answers[command] = await approvals.approve(request(command))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "first")
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(ask, "second")
        await trio.testing.wait_all_tasks_blocked()
        assert term.shown == "Allow bash(first)? [y/N] "
        assert approvals.hand_over("n") is True
        await trio.testing.wait_all_tasks_blocked()
        assert approvals.hand_over("y") is True
    assert answers == {"first": False, "second": True}
    assert term.shown == (
        "Allow bash(first)? [y/N] n\n  not allowed\nAllow bash(second)? [y/N] y\n"
    )


async def test_a_question_comes_after_the_events_sent_before_it_are_shown(
    terminal: Callable[[str], Terminal],
) -> None:
    """The loop asks right after sending the tool call's events: the question waits
    until the renderer has shown them, so it is asked below the call it is about."""
    term = terminal("y\n")
    approvals = Approvals(term.prompter)
    send, receive = trio.open_memory_channel[str](1)
    approvals.events = receive  # type: ignore[assignment]  # its statistics() are read alike

    async def render() -> None:  # a renderer that takes its time over each event
        async for line in receive:
            for _ in range(10):
                await trio.lowlevel.checkpoint()
            term.screen.line(line)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(render)
        await trio.testing.wait_all_tasks_blocked()
        send.send_nowait("→ bash(ls)")  # to the renderer
        send.send_nowait("  … about to run")  # in the buffer
        assert await approvals.approve(request()) is True
        send.close()
    assert term.shown == "→ bash(ls)\n  … about to run\nAllow bash(ls)? [y/N] y\n"


# --------------------------------------------------------------------------- elicitation


async def test_a_server_question_with_a_form_is_asked_field_by_field(
    terminal: Callable[[str], Terminal],
) -> None:
    from agentloop.mcp import Elicitation, ElicitationAnswer

    term = terminal("y\nAda\n")
    approvals = Approvals(term.prompter)
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    answer = await approvals.elicit(Elicitation(server="crm", message="Who?", schema=schema))
    assert answer == ElicitationAnswer.accept({"name": "Ada"})
    assert term.shown == "MCP server 'crm' asks: Who?\nAnswer? [y/N] y\n  name: Ada\n"


@pytest.mark.parametrize(
    ("typed", "action", "after"),
    [
        ("n\n", "decline", "Answer? [y/N] n\n  declined\n"),
        ("", "cancel", "Answer? [y/N] \n"),
        ("y\n", "cancel", "Answer? [y/N] y\n  name: \n  cancelled (no more input)\n"),
    ],
)
async def test_a_server_question_declined_or_left_without_an_answer(
    terminal: Callable[[str], Terminal], typed: str, action: str, after: str
) -> None:
    from agentloop.mcp import Elicitation

    term = terminal(typed)
    approvals = Approvals(term.prompter)
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    answer = await approvals.elicit(Elicitation(server="crm", message="Who?", schema=schema))
    assert (answer.action, answer.content) == (action, None)
    assert term.shown == "MCP server 'crm' asks: Who?\n" + after


@pytest.mark.parametrize(
    ("typed", "action", "after"),
    [
        ("no\n", "decline", "Open this page? [y/N] no\n  declined\n"),
        ("", "cancel", "Open this page? [y/N] \n"),
    ],
)
async def test_a_server_asking_to_open_a_page_is_declined_or_cancelled(
    terminal: Callable[[str], Terminal], typed: str, action: str, after: str
) -> None:
    from agentloop.mcp import Elicitation

    term = terminal(typed)
    approvals = Approvals(term.prompter)
    question = Elicitation(server="pay", message="Sign in", mode="url", url="https://x.test/a")
    answer = await approvals.elicit(question)
    assert (answer.action, answer.content) == (action, None)
    assert term.shown == "MCP server 'pay' asks: Sign in\n  https://x.test/a\n" + after


async def test_a_form_answer_that_did_not_fit_is_asked_again_with_the_problems(
    terminal: Callable[[str], Terminal],
) -> None:
    from agentloop.mcp import Elicitation

    term = terminal("n\n")
    approvals = Approvals(term.prompter)
    question = Elicitation(server="crm", message="Who?", problems=("$.name: too short",))
    assert (await approvals.elicit(question)).action == "decline"
    assert term.shown == (
        "  that answer does not fit the form:\n    $.name: too short\nAnswer? [y/N] n\n  declined\n"
    )


async def test_unattended_a_server_question_is_declined_and_that_is_said(
    terminal: Callable[[str], Terminal],
) -> None:
    from agentloop.mcp import Elicitation, ElicitationAnswer

    term = terminal("")
    approvals = Approvals(term.prompter, unattended="stream-json")
    answer = approvals.decline(Elicitation(server="crm", message="Who?"))
    assert answer == ElicitationAnswer.decline()
    assert term.shown == (
        "agentloop: MCP server 'crm' asked the user ('Who?'); with --output-format "
        "stream-json nobody is asked, so it was declined\n"
    )
