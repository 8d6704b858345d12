"""Agent: a conversation with a model, its tools, its history and its input queues."""

from __future__ import annotations

import enum
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Unpack

import trio

from ._approval import Decision, PendingCall, Suspended
from ._channel import EventReceiver
from ._check import check_number
from ._context import (
    AgentContext,
    TokenEstimator,
    estimate_tokens,
)
from ._events import AgentEnd, AgentEvent
from ._loop import (
    AgentLoopConfig,
    LoopSettings,
    OutputError,
    TrioDriver,
    check_not_waiting,
    check_setup,
    configure,
    resume_of,
    user_messages,
)
from ._tool import AgentTool
from ._types import AssistantMessage, Message, UserMessage
from ._util import raise_single, require_trio
from .providers import Provider

__all__ = ["Agent", "QueueMode"]


class QueueMode(enum.Enum):
    """How many queued messages the loop takes each time it polls a queue."""

    ONE_AT_A_TIME = "one_at_a_time"
    ALL = "all"


class Agent:
    """A conversation with a model: history, tools, and queues for more input.

    Example::

        agent = Agent(provider, system_prompt="You are terse.", tools=[weather])
        async with agent.prompt("Weather in Oslo?") as events:
            async for event in events:
                match event:
                    case MessageUpdate(delta=TextDelta(delta=text)):
                        print(text, end="")
        await agent.run("And in Lima?")  # the model sees the first exchange too

    One run at a time: :meth:`prompt` and :meth:`run` raise ``RuntimeError``
    while a run is going on. Use :meth:`steer` or :meth:`follow_up` to add
    input to it, :meth:`abort` to stop it.

    The settings of a run (strategy, limits, hooks...) are those of
    :class:`AgentLoopConfig`, given as keyword arguments, or as a whole: pass
    an ``AgentLoopConfig`` instead of the provider, and share it between
    agents and sub-agents (keyword arguments still override it)::

        config = AgentLoopConfig(provider=model, limits=ExecutionLimits(max_turns=20))
        agent = Agent(config, tools=[researcher], thinking_level=ThinkingLevel.LOW)
        researcher = SubAgentTool("researcher", config, tools=[search])

    Args:
        provider: The model, or an :class:`AgentLoopConfig` (its queues are
            replaced by the agent's own).
        system_prompt: Sent with every request.
        tools: The tools the model may call; names must be unique.
        messages: A history to start from.
        prun: Add the ``prun`` and ``prun_with_memo`` tools (sharing one queue),
            so the model can trim its own recent context.
        token_estimator: How prun and compaction count tokens.
        steering_mode, follow_up_mode: How many queued messages each poll takes.
        event_buffer_size: How many events may wait for the consumer before
            the loop waits for it.
        agent_id: Names the agent in loop ids (``"<agent_id>.<run number>"``).
        settings: :class:`AgentLoopConfig` fields (``strategy``,
            ``tool_timeout``, ``limits``, ``max_tokens``, ``temperature``,
            ``thinking_level``, ``permissions``, ``compaction``, ``output_type``
            and the hooks); ``strategy=None`` and ``limits=None`` mean the
            defaults. With ``output_type`` the run ends with a typed answer:
            ``AgentEnd.output``, or :meth:`run_output`.

    Raises:
        ValueError, TypeError: a tool is invalid or two tools share a name,
            prun tools do not share one queue, a setting is unknown or
            invalid, compaction is set and the model's context window is
            unknown, or a tool has the final-result tool's name.
    """

    def __init__(
        self,
        provider: Provider | AgentLoopConfig,
        *,
        system_prompt: str = "",
        tools: Iterable[AgentTool] = (),
        messages: Iterable[Message] = (),
        prun: bool = False,
        token_estimator: TokenEstimator = estimate_tokens,
        steering_mode: QueueMode = QueueMode.ONE_AT_A_TIME,
        follow_up_mode: QueueMode = QueueMode.ONE_AT_A_TIME,
        event_buffer_size: int = 16,
        agent_id: str | None = None,
        **settings: Unpack[LoopSettings],
    ) -> None:
        check_number(event_buffer_size, "event_buffer_size", at_least=0, integer=True)
        tools = tuple(tools)
        if prun:
            from .tools import prun_tools

            tools += tuple(prun_tools())
        self._context = AgentContext(
            system_prompt, messages, tools, token_estimator=token_estimator
        )
        self.config = configure(
            "Agent()",
            provider,
            dict(settings),
            get_steering_messages=self._take_steering,
            get_follow_up_messages=self._take_follow_up,
        )
        check_setup(tools, self.config)  # fail now, not at the first prompt
        self.steering_mode = steering_mode
        self.follow_up_mode = follow_up_mode
        self.agent_id = agent_id or os.urandom(6).hex()  # (uuid costs 1.4 ms of import)
        self._event_buffer_size = event_buffer_size
        # Lists, not deques: short queues, and an empty deque costs 600 bytes more.
        self._steering: list[UserMessage] = []
        self._follow_up: list[UserMessage] = []
        self._running = False
        self._runs = 0
        self._abort_scope: trio.CancelScope | None = None

    def __repr__(self) -> str:
        names = ", ".join(tool.name for tool in self._context.tools)
        return (
            f"<Agent {self.agent_id} provider={type(self.config.provider).__name__} "
            f"tools=[{names}] messages={len(self._context.messages)}>"
        )

    # ----------------------------------------------------------------- state

    @property
    def messages(self) -> tuple[Message, ...]:
        """The history, oldest first. During a run it grows as the run goes."""
        return tuple(self._context.messages)

    @property
    def context(self) -> AgentContext:
        """The conversation state the loop runs on."""
        return self._context

    @property
    def system_prompt(self) -> str:
        """The system prompt; may be changed between runs."""
        return self._context.system_prompt

    @system_prompt.setter
    def system_prompt(self, value: str) -> None:
        self._check_idle("change the system prompt")
        self._context.system_prompt = value

    @property
    def tools(self) -> tuple[AgentTool, ...]:
        """The tools; may be replaced between runs."""
        return self._context.tools

    @tools.setter
    def tools(self, value: Iterable[AgentTool]) -> None:
        self._check_idle("change the tools")
        tools = tuple(value)
        check_setup(tools, self.config)
        self._context.tools = tools

    @property
    def pending(self) -> tuple[PendingCall, ...]:
        """The tool calls that await a decision (the last run ended with
        ``StopKind.AWAITING_APPROVAL``); :meth:`resume` with decisions goes on."""
        suspended = self._context.suspended
        return () if suspended is None else suspended.pending

    @property
    def is_running(self) -> bool:
        """Whether a run is going on."""
        return self._running

    @property
    def steering_queue(self) -> tuple[UserMessage, ...]:
        """Steering messages not yet taken by the loop."""
        return tuple(self._steering)

    @property
    def follow_up_queue(self) -> tuple[UserMessage, ...]:
        """Follow-up messages not yet taken by the loop."""
        return tuple(self._follow_up)

    def _check_idle(self, action: str) -> None:
        if self._running:
            raise RuntimeError(f"cannot {action} while the agent is running")

    # ----------------------------------------------------------------- input queues

    def steer(self, message: str | UserMessage) -> None:
        """Queue a message for the running model: sent at the next tool-call boundary.

        Tool calls of the current message that have not started are skipped
        (each gets a "Skipped due to queued user message." result). Without a
        run, the message waits for the next one. Never blocks.
        """
        self._steering.extend(user_messages([message], "a steering message"))

    def follow_up(self, message: str | UserMessage) -> None:
        """Queue a message for when the model is done: it starts another turn. Never blocks."""
        self._follow_up.extend(user_messages([message], "a follow-up message"))

    def clear_steering_queue(self) -> None:
        """Drop the steering messages not yet taken."""
        self._steering.clear()

    def clear_follow_up_queue(self) -> None:
        """Drop the follow-up messages not yet taken."""
        self._follow_up.clear()

    def clear_queues(self) -> None:
        """Drop every queued message."""
        self._steering.clear()
        self._follow_up.clear()

    @staticmethod
    def _take(queue: list[UserMessage], mode: QueueMode) -> list[UserMessage]:
        if not queue:
            return []
        if mode is QueueMode.ALL:
            taken = list(queue)
            queue.clear()
            return taken
        return [queue.pop(0)]

    def _take_steering(self) -> list[UserMessage]:
        return self._take(self._steering, self.steering_mode)

    def _take_follow_up(self) -> list[UserMessage]:
        return self._take(self._follow_up, self.follow_up_mode)

    def reset(self) -> None:
        """Forget the history and the queues."""
        self._check_idle("reset")
        self._context.reset()
        self.clear_queues()

    # ----------------------------------------------------------------- running

    def prompt(
        self, *messages: str | UserMessage
    ) -> AbstractAsyncContextManager[EventReceiver[AgentEvent]]:
        """Start a run with ``messages``; yield the channel its events arrive on.

        The channel is an :class:`~agentloop.EventReceiver`: a
        ``trio.abc.ReceiveChannel`` that hands over queued events without a
        scheduler pass per event.

        The run goes on in the background while the ``async with`` body reads
        events. The channel closes after ``AgentEnd``. Leaving the body before
        that cancels the run (the history is still left whole). An exception
        from the run (a hook's, or a provider's other than ``ProviderError``)
        leaves the ``async with`` as itself.

        Raises:
            ValueError: no messages.
            TypeError: a message is not ``str`` or :class:`UserMessage`.
            RuntimeError: on entering, if a run is already going on.
            TrioRequiredError: on entering, outside trio (under asyncio, say).
        """
        prompts = user_messages(messages, "prompt messages")
        if not prompts:
            raise ValueError("prompt() needs at least one message")
        check_not_waiting(self._context.suspended)
        return self._session(prompts)

    def resume(
        self, decisions: Iterable[Decision] | None = None
    ) -> AbstractAsyncContextManager[EventReceiver[AgentEvent]]:
        """Go on from the history without a new prompt; yield the channel of the run's events.

        After a run that stopped to await approval (:attr:`pending`), give a
        decision for each pending call, in any order::

            async with agent.resume([call.approve() if ok(call) else call.deny("No.")
                                     for call in agent.pending]) as events:
                ...

        The approved calls run (edited arguments checked against the tool's
        schema), the refused ones get ``"Permission denied: <reason>"``, every
        call of that reply gets its result in the order the model made them, and
        the run goes on, counting its limits from where it stopped (the wait is
        not counted).

        Without pending calls: for a history that ends with a user message or
        with tool results (a session recovered after a crash: see
        ``Session.recover``), the model answers from there. Otherwise as
        :meth:`prompt`.

        Raises:
            ApprovalError: calls are pending and ``decisions`` does not decide
                each exactly once, or names a call that is not pending, or
                decisions are given where none is pending (the message names the
                ids); nothing runs.
            ValueError: nothing is pending, and the history is empty or ends
                with an assistant message (there is nothing for the model to
                answer).
            RuntimeError: on entering, if a run is already going on.
            TrioRequiredError: on entering, outside trio.
        """
        resume = resume_of(self._context, decisions)
        if resume is not None:
            return self._session((), resume)
        messages = self._context.messages
        if not messages:
            raise ValueError("resume() needs a history; it is empty")
        if isinstance(messages[-1], AssistantMessage):
            raise ValueError(
                "resume() needs a history that ends with a user message or tool results; "
                "it ends with an assistant message"
            )
        return self._session(())

    @asynccontextmanager
    async def _session(
        self,
        prompts: Sequence[UserMessage],
        resume: tuple[Suspended, dict[str, Decision]] | None = None,
    ) -> AsyncIterator[EventReceiver[AgentEvent]]:
        require_trio("Agent.prompt()" if prompts else "Agent.resume()")
        if self._running:
            raise RuntimeError(
                "the agent is already running; use steer() or follow_up() to add input"
            )
        self._running = True
        self._runs += 1
        send, receive = trio.open_memory_channel[AgentEvent](self._event_buffer_size)
        abort_scope = self._abort_scope = trio.CancelScope()
        try:
            run = TrioDriver(
                self._context,
                self.config,
                send,
                loop_id=f"{self.agent_id}.{self._runs}",
                abort_scope=abort_scope,
                agent_name=self.agent_id,
            )
            if resume is not None:
                if self._context.suspended is not resume[0]:
                    raise RuntimeError(
                        "the calls awaiting approval changed since resume() was called"
                    )
                run.core.resume_with(*resume)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._drive, run, prompts, send)
                    with receive:
                        yield EventReceiver(receive)
                    if not run.ending:
                        nursery.cancel_scope.cancel(reason="the prompt() block was left early")
            except BaseExceptionGroup as group:
                raise_single(group)
        finally:
            self._running = False
            self._abort_scope = None
            send.close()

    @staticmethod
    async def _drive(
        run: TrioDriver, prompts: Sequence[UserMessage], send: trio.MemorySendChannel[AgentEvent]
    ) -> None:
        # Closed synchronously: an awaiting close in a cancelled scope would raise
        # Cancelled over the exception being propagated and lose it.
        with send:
            await run.run(prompts)

    async def run(self, *messages: str | UserMessage) -> tuple[Message, ...]:
        """Run to the end with ``messages``, discarding events; return the new messages.

        Raises and cancels as :meth:`prompt` does.
        """
        require_trio("Agent.run()")
        new_messages: tuple[Message, ...] = ()
        async with self.prompt(*messages) as events:
            async for event in events:
                if isinstance(event, AgentEnd):
                    new_messages = event.messages
        return new_messages

    async def run_output(self, *messages: str | UserMessage) -> Any:
        """Run to the end with ``messages`` and return the typed answer (``AgentEnd.output``).

        For an agent with an ``output_type``::

            agent = Agent(provider, output_type=City)
            city = await agent.run_output("The largest city in Peru?")

        Raises:
            OutputError: the run ended without a valid answer; its ``stop``
                says why (``StopKind.OUTPUT_FAILED`` when the answers did not
                match within the retries, or a limit, an error, an abort).
            ValueError: the agent has no ``output_type``.

        Otherwise raises and cancels as :meth:`prompt` does.
        """
        require_trio("Agent.run_output()")
        if self.config.output_type is None:
            raise ValueError("run_output() needs an agent with an output_type")
        end: AgentEnd | None = None
        async with self.prompt(*messages) as events:
            async for event in events:
                if isinstance(event, AgentEnd):
                    end = event
        assert end is not None
        if end.output is None and not end.stop_reason.completed:
            raise OutputError(end.stop_reason)
        return end.output

    def abort(self) -> None:
        """Stop the current run as soon as possible; a no-op without a run.

        The run ends softly: running tools are cancelled, every tool call gets
        a result, the turn's assistant message is marked ``ABORTED`` and
        ``AgentEnd`` is still sent. Callable from any task.
        """
        if self._abort_scope is not None:
            self._abort_scope.cancel(reason="Agent.abort() was called")
