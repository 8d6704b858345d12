"""The turn engine, and the two low-level entry points: agent_loop and agent_loop_continue."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence

import attrs
import trio

from .._context import AgentContext, MessageView, PrunQueue, compact, context_window_of
from .._events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    CompactionEnded,
    CompactionStarted,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PrunApplied,
    StreamDelta,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
)
from .._scrub import scrub_delta, scrub_message
from .._tool import ToolResult
from .._types import (
    AssistantContent,
    AssistantMessage,
    Message,
    StopReason,
    ToolCall,
    Usage,
    UserMessage,
)
from .._util import HookFailure, raise_single, require_trio
from ..providers import ModelRequest, ProviderError
from ._config import AgentLoopConfig, MessageSource, call_hook
from ._dispatch import (
    ABORTED_TEXT,
    ENDED_TEXT,
    NOT_RUN_TEXT,
    AfterHookCall,
    CallState,
    ToolRegistry,
    Turn,
    close_unrun_calls,
    describe_exception,
    execute_tool_calls,
    result_message,
)
from ._stream import PartialMessage

__all__ = ["Run", "agent_loop", "agent_loop_continue"]

_FAILED_STOPS = (StopReason.ERROR, StopReason.ABORTED)
PAUSED = StopReason.PAUSED


def _user_messages(values: Iterable[object], what: str) -> list[UserMessage]:
    messages: list[UserMessage] = []
    for value in values:
        if isinstance(value, str):
            messages.append(scrub_message(UserMessage.text(value)))
        elif isinstance(value, UserMessage):
            messages.append(scrub_message(value))
        else:
            raise TypeError(f"{what} must be str or UserMessage, got {type(value).__name__}")
    return messages


def _with_unique_call_ids(message: AssistantMessage, loop_id: str, turn: int) -> AssistantMessage:
    """``message``, with an id for each tool call that has none or repeats one.

    Results are matched to calls by id; some servers send empty or repeated ids.
    """
    calls = message.tool_calls
    ids = [call.id for call in calls]
    if all(ids) and len(set(ids)) == len(ids):
        return message
    seen: set[str] = set()
    content: list[AssistantContent] = []
    for position, block in enumerate(message.content):
        if isinstance(block, ToolCall):
            if not block.id or block.id in seen:
                block = attrs.evolve(block, id=f"{loop_id}-{turn}-{position}")
            seen.add(block.id)
        content.append(block)
    return attrs.evolve(message, content=tuple(content))


def prun_queue_of(tools: Iterable[object]) -> PrunQueue | None:
    """The queue the run's prun tools share, if it has any; ValueError if they share none."""
    queues: dict[int, PrunQueue] = {}
    for tool in tools:
        queue = getattr(tool, "prun_queue", None)
        if isinstance(queue, PrunQueue):
            queues[id(queue)] = queue
    if len(queues) > 1:
        raise ValueError(
            "the prun tools must share one PrunQueue (build them with "
            "agentloop.tools.prun_tools()), so that their requests keep their order"
        )
    return next(iter(queues.values()), None)


class Run:
    """One run of the loop over a context. Internal: use agent_loop or Agent."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        send_channel: trio.MemorySendChannel[AgentEvent],
        *,
        loop_id: str | None = None,
        parent_loop_id: str | None = None,
        abort_scope: trio.CancelScope | None = None,
    ) -> None:
        self.context = context
        self.config = config
        self.registry = ToolRegistry(context.tools)
        self.prun_queue = prun_queue_of(context.tools)
        self.context_window = (
            0
            if config.compaction is None
            else context_window_of(config.compaction, config.provider)
        )
        self.loop_id = loop_id or uuid.uuid4().hex
        self.parent_loop_id = parent_loop_id
        self.abort_scope = abort_scope if abort_scope is not None else trio.CancelScope()
        self._send = send_channel
        self._receiver_gone = False
        self.new_messages: list[Message] = []
        self.usage = Usage()
        self.turn: Turn | None = None
        self.pending: list[UserMessage] = []  # polled, not yet in the history
        # Events describing history already changed (and after hooks owed with them).
        self._owed: list[AgentEvent | AfterHookCall] = []
        self._unannounced: list[UserMessage] = []
        self._turn_index = 0
        self._turns_done = 0
        self._tokens_used = 0
        self._started_at = 0.0
        self.ending = False  # AgentEnd is being (or was) sent
        # The last request sent and its size as the model counted it (compaction's gauge).
        self._measured: tuple[MessageView, int] | None = None

    # ----------------------------------------------------------------- plumbing

    async def emit(self, event: AgentEvent) -> None:
        """Send an event; wait while the consumer is behind. A closed receiver is ignored."""
        if self._receiver_gone:
            await trio.lowlevel.checkpoint()
            return
        try:
            await self._send.send(event)
        except trio.BrokenResourceError:
            self._receiver_gone = True

    def add_message(self, message: Message) -> None:
        self.context.append(message)
        self.new_messages.append(message)

    async def _settle_owed(self, *events: AgentEvent | AfterHookCall) -> None:
        """Send events for a history change already made, so an abort can re-send them."""
        self._owed.extend(events)
        while self._owed:
            item = self._owed[0]
            if isinstance(item, AfterHookCall):
                del self._owed[0]  # at most once, even if cancelled while it runs
                await item.run(self)
            else:
                await self.emit(item)  # dropped only once delivered
                del self._owed[0]

    async def announce(self, message: Message) -> None:
        await self._settle_owed(
            MessageStart(loop_id=self.loop_id, message=message),
            MessageEnd(loop_id=self.loop_id, message=message),
        )

    async def _poll(self, source: MessageSource | None) -> list[UserMessage]:
        if source is None:
            await trio.lowlevel.checkpoint()
            return []
        messages = _user_messages(await call_hook(source), "queued messages")
        self.pending.extend(messages)
        return messages

    async def poll_steering(self) -> list[UserMessage]:
        return await self._poll(self.config.get_steering_messages)

    # ----------------------------------------------------------------- the run

    async def run(self, prompts: Sequence[UserMessage]) -> tuple[Message, ...]:
        try:
            return await self._run(prompts)
        except BaseException as error:
            if isinstance(error, trio.Cancelled):
                self._settle(StopReason.ABORTED, "Cancelled", ENDED_TEXT)
            else:
                self._settle(StopReason.ERROR, describe_exception(error), ENDED_TEXT)
            raise

    async def _run(self, prompts: Sequence[UserMessage]) -> tuple[Message, ...]:
        config = self.config
        before_loop = config.before_loop
        if before_loop is not None and await call_hook(before_loop, self.context.view()) is False:
            await self._send_end()
            return ()
        self._started_at = trio.current_time()
        await self.emit(AgentStart(loop_id=self.loop_id, parent_loop_id=self.parent_loop_id))
        for prompt in prompts:
            prompt = self.context.stamp(prompt)
            self.add_message(prompt)
            self._unannounced.append(prompt)
        with self.abort_scope:
            await self._turns()
        if self.abort_scope.cancelled_caught:
            await self._settle_owed(*self._settle(StopReason.ABORTED, "Aborted", ABORTED_TEXT))
        await self._send_end()
        if config.after_loop is not None:
            await call_hook(config.after_loop, tuple(self.new_messages), self.usage)
        return tuple(self.new_messages)

    async def _send_end(self) -> None:
        # Set first: a consumer may see AgentEnd and leave before send() returns here,
        # and the run is over by then; only after_loop is left, and it must not be cancelled.
        self.ending = True
        await self.emit(
            AgentEnd(loop_id=self.loop_id, messages=tuple(self.new_messages), usage=self.usage)
        )

    async def _turns(self) -> None:
        config = self.config
        await self.poll_steering()
        while True:
            while True:
                reason = self._limit_reason()
                if reason is not None:
                    stop = self.context.stamp(UserMessage.text(f"[Agent stopped: {reason}]"))
                    self.add_message(stop)
                    await self.announce(stop)
                    return
                if config.before_turn is not None:
                    allowed = await call_hook(
                        config.before_turn, self.context.view(), self._turn_index
                    )
                    if allowed is False:
                        return
                await self.emit(TurnStart(loop_id=self.loop_id, turn_index=self._turn_index))
                turn = self.turn = Turn(self._turn_index)
                self._turn_index += 1
                await self._inject()
                await self._maybe_compact()
                assistant = await self._stream(turn)
                if assistant.stop_reason in _FAILED_STOPS:
                    self._turns_done += 1
                    self.usage += assistant.usage
                    await close_unrun_calls(self, turn, NOT_RUN_TEXT)
                    if assistant.stop_reason is StopReason.ERROR and config.on_error is not None:
                        await call_hook(config.on_error, assistant.error_message or "Unknown error")
                    await self._end_turn(turn)
                    return
                # The model call is paid for whatever happens to its tools (an abort, say).
                self.usage += assistant.usage
                self._tokens_used += assistant.usage.input + assistant.usage.output
                calls = assistant.tool_calls
                if calls:
                    await execute_tool_calls(self, turn, self.poll_steering)
                    await self._settle_owed(*self._apply_pruns(turn))
                self._turns_done += 1
                await self._end_turn(turn)
                if self.pending:
                    continue
                await self.poll_steering()
                # PAUSED: the API paused a long turn; asking again lets it go on.
                if not calls and not self.pending and assistant.stop_reason is not PAUSED:
                    break
            await self._poll(config.get_follow_up_messages)
            if not self.pending:
                return

    def _limit_reason(self) -> str | None:
        limits = self.config.limits
        if limits.max_turns is not None and self._turns_done >= limits.max_turns:
            return f"Max turns reached ({self._turns_done}/{limits.max_turns})"
        if limits.max_total_tokens is not None and self._tokens_used >= limits.max_total_tokens:
            return f"Max tokens reached ({self._tokens_used}/{limits.max_total_tokens})"
        if limits.max_duration is not None:
            elapsed = trio.current_time() - self._started_at
            if elapsed >= limits.max_duration:
                return f"Max duration reached ({elapsed:.0f}s/{limits.max_duration:.0f}s)"
        if limits.max_cost is not None and self.usage.cost >= limits.max_cost:
            return f"Max cost reached (${self.usage.cost:.4f}/${limits.max_cost:.4f})"
        return None

    async def _inject(self) -> None:
        """Announce the prompts (first turn) and add the queued user messages."""
        while self._unannounced:
            message = self._unannounced.pop(0)
            await self.announce(message)
        while self.pending:
            message = self.context.stamp(self.pending.pop(0))
            self.add_message(message)
            await self.announce(message)

    async def _stream(self, turn: Turn) -> AssistantMessage:
        config = self.config
        partial = PartialMessage()
        request = ModelRequest(
            system_prompt=self.context.system_prompt,
            messages=self.context.working_context(),
            tools=self.registry.definitions,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            thinking=config.thinking_level,
        )
        await self.emit(MessageStart(loop_id=self.loop_id, message=partial.message()))
        turn.partial = partial
        loop_id = self.loop_id

        async def on_delta(delta: StreamDelta) -> None:
            delta = scrub_delta(delta)
            partial.apply(delta)
            update = MessageUpdate(loop_id=loop_id, message=partial.snapshot(), delta=delta)
            await self.emit(update)

        final: object
        try:
            final = await config.provider.stream(request, on_delta)
        except ProviderError as error:
            final = partial.interrupted(StopReason.ERROR, str(error))
        if not isinstance(final, AssistantMessage):
            raise TypeError(
                f"{type(config.provider).__name__}.stream returned {type(final).__name__}, "
                "expected an AssistantMessage"
            )
        usage = final.usage
        prompt_tokens = usage.input + usage.cache_read + usage.cache_write
        if final.stop_reason not in _FAILED_STOPS and prompt_tokens > 0:
            assert isinstance(request.messages, MessageView)
            self._measured = (request.messages, prompt_tokens)
        final = scrub_message(final)  # whatever a provider returns must encode again
        assistant = self.context.stamp(_with_unique_call_ids(final, self.loop_id, turn.index))
        self.add_message(assistant)
        # Register the calls in the same step: from here on they are in the history,
        # and an interruption must answer each of them.
        turn.calls = [CallState(call) for call in assistant.tool_calls]
        turn.assistant, turn.assistant_appended = assistant, True
        await self._settle_owed(MessageEnd(loop_id=loop_id, message=assistant))
        return assistant

    # ----------------------------------------------------------------- context

    def _apply_pruns(self, turn: Turn) -> list[AgentEvent | AfterHookCall]:
        """Apply the waiting prun requests, in order; return their events. Synchronous."""
        if self.prun_queue is None:
            return []
        events: list[AgentEvent | AfterHookCall] = []
        order = {state.call.id: position for position, state in enumerate(turn.calls)}
        requests = self.prun_queue.take_all()  # calls may finish in any order: use the model's
        requests.sort(key=lambda request: order.get(request.tool_call_id or "", len(order)))
        for request in requests:
            record = self.context.prun(request, keep=turn.assistant)
            events.append(
                PrunApplied(
                    loop_id=self.loop_id,
                    record=record,
                    messages_removed=len(record.pruned_timestamps),
                )
            )
        return events

    def _overhead(self) -> int:
        """Estimated tokens of the request besides its messages: system prompt and tools."""
        definitions = [
            {"name": d.name, "description": d.description, "parameters": d.parameters}
            for d in self.registry.definitions
        ]
        text = self.context.system_prompt + json.dumps(definitions, ensure_ascii=False)
        return self.context.token_estimator(UserMessage.text(text))

    async def _maybe_compact(self) -> None:
        compaction = self.config.compaction
        if compaction is None:
            return
        overhead = self._overhead()
        measured = None
        if self._measured is not None:
            measured = self.context.measured_tokens(*self._measured)
        estimated = measured or overhead + self.context.working_tokens()
        if estimated <= compaction.threshold * self.context_window:
            return
        count = len(self.context.working_context())
        hook = self.config.before_compaction_start
        if hook is not None and await call_hook(hook, estimated, count) is False:
            return
        await self.emit(
            CompactionStarted(
                loop_id=self.loop_id,
                estimated_tokens=estimated,
                message_count=count,
                context_window=self.context_window,
            )
        )
        outcome = await compact(
            self.context,
            compaction,
            provider=self.config.provider,
            overhead=overhead,
            measured=measured,
        )
        await self._settle_owed(
            CompactionEnded(
                loop_id=self.loop_id,
                record=outcome.record,
                messages_before=outcome.messages_before,
                messages_after=outcome.messages_after,
                estimated_tokens_before=outcome.tokens_before,
                estimated_tokens_after=outcome.tokens_after,
                summary_error=outcome.summary_error,
            )
        )
        if self.config.after_compaction_end is not None:
            await call_hook(
                self.config.after_compaction_end, outcome.tokens_before, outcome.tokens_after
            )

    async def _end_turn(self, turn: Turn) -> None:
        assert turn.assistant is not None
        await self.emit(self._turn_end(turn))
        self.turn = None
        if self.config.after_turn is not None:
            await call_hook(self.config.after_turn, self.context.view(), turn.assistant.usage)

    def _turn_end(self, turn: Turn) -> TurnEnd:
        assert turn.assistant is not None
        return TurnEnd(
            loop_id=self.loop_id,
            turn_index=turn.index,
            message=turn.assistant,
            tool_results=tuple(turn.results),
            usage=turn.assistant.usage,
        )

    # ----------------------------------------------------------------- interruption

    def _settle(
        self, stop_reason: StopReason, error_message: str, call_text: str
    ) -> list[AgentEvent | AfterHookCall]:
        """Make the history whole after an interruption; return the events that say so.

        Synchronous, so it completes even when the run is being cancelled. Every
        message the run took (prompts, queued messages) ends up in the history;
        the turn in progress gets its assistant message (marked ``stop_reason``)
        and every one of its tool calls gets exactly one result. Idempotent.
        """
        loop_id = self.loop_id
        events = list(self._owed)
        self._owed.clear()
        for prompt in self._unannounced:
            events += [
                MessageStart(loop_id=loop_id, message=prompt),
                MessageEnd(loop_id=loop_id, message=prompt),
            ]
        self._unannounced.clear()
        turn, self.turn = self.turn, None
        if turn is not None:
            old = turn.assistant
            turn_events = self._settle_turn(turn, stop_reason, error_message, call_text)
            new = turn.assistant
            if old is not None and new is not None and new is not old:
                # A MessageEnd still owed for the replaced message now describes its final form.
                events = [
                    MessageEnd(loop_id=loop_id, message=new)
                    if isinstance(event, MessageEnd) and event.message is old
                    else event
                    for event in events
                ]
            events += turn_events
        for message in self.pending:
            message = self.context.stamp(message)
            self.add_message(message)
            events += [
                MessageStart(loop_id=loop_id, message=message),
                MessageEnd(loop_id=loop_id, message=message),
            ]
        self.pending.clear()
        return events

    def _settle_turn(
        self, turn: Turn, stop_reason: StopReason, error_message: str, call_text: str
    ) -> list[AgentEvent | AfterHookCall]:
        loop_id = self.loop_id
        events: list[AgentEvent | AfterHookCall] = []
        if not turn.assistant_appended:
            if turn.partial is None:
                turn.partial = PartialMessage()
                events.append(MessageStart(loop_id=loop_id, message=turn.partial.message()))
            message = self.context.stamp(turn.partial.interrupted(stop_reason, error_message))
            self.add_message(message)
            turn.assistant, turn.assistant_appended = message, True
            events.append(MessageEnd(loop_id=loop_id, message=message))
        elif stop_reason is StopReason.ABORTED and turn.assistant is not None:
            old = turn.assistant
            if old.stop_reason not in _FAILED_STOPS:
                new = AssistantMessage(
                    old.content,
                    StopReason.ABORTED,
                    model=old.model,
                    provider=old.provider,
                    usage=old.usage,
                    timestamp=old.timestamp,
                    error_message=error_message,
                )
                self._replace(old, new)
                turn.assistant = new
        for state in turn.calls:
            if state.result is None:
                state.result, state.is_error = ToolResult.text(call_text), True
            if not state.ended:
                if not state.started:
                    events.append(
                        ToolExecutionStart(
                            loop_id=loop_id,
                            tool_call_id=state.call.id,
                            tool_name=state.call.name,
                            args=state.call.arguments,
                        )
                    )
                events.append(
                    ToolExecutionEnd(
                        loop_id=loop_id,
                        tool_call_id=state.call.id,
                        tool_name=state.call.name,
                        result=state.result,
                        is_error=state.is_error,
                        child_loop_id=state.result.child_loop_id,
                    )
                )
                state.started = state.ended = True
            if state.after_hook_due:  # run after its end event, if the run goes on
                state.after_hook_due = False
                events.append(AfterHookCall(state))
        self.turn = turn  # result_message records into the current turn
        for state in turn.calls:
            if not state.appended:
                message = result_message(self, state)
                events += [
                    MessageStart(loop_id=loop_id, message=message),
                    MessageEnd(loop_id=loop_id, message=message),
                ]
        events += self._apply_pruns(turn)
        self.turn = None
        events.append(self._turn_end(turn))
        return events

    def _replace(self, old: Message, new: Message) -> None:
        self.context.replace(old, new)
        for position in range(len(self.new_messages) - 1, -1, -1):
            if self.new_messages[position] is old:
                self.new_messages[position] = new
                break


async def _drive(run: Run, prompts: Sequence[UserMessage]) -> tuple[Message, ...]:
    try:
        return await run.run(prompts)
    except (BaseExceptionGroup, HookFailure) as error:
        raise_single(error)


async def agent_loop(
    prompts: Sequence[UserMessage | str],
    context: AgentContext,
    config: AgentLoopConfig,
    send_channel: trio.MemorySendChannel[AgentEvent],
    *,
    loop_id: str | None = None,
    parent_loop_id: str | None = None,
    abort_scope: trio.CancelScope | None = None,
) -> tuple[Message, ...]:
    """Run the loop on ``context`` with new ``prompts``; send every event to ``send_channel``.

    The prompts and every message of the run are appended to
    ``context.messages`` as they happen. ``send_channel`` is closed when the
    function returns or raises. If the receiver is closed early, the run goes
    on without sending.

    Args:
        prompts: The user messages that start the run (``str`` is accepted).
        context: The conversation; its history is sent to the model.
        config: The model, tools strategy, limits, queues and hooks.
        send_channel: Where events go. Its buffer bounds how far the loop runs
            ahead of the consumer.
        loop_id: Names this run in its events (default: a random hex id).
        parent_loop_id: The loop that started this one, for sub-agents.
        abort_scope: Cancel it to abort the run softly: the loop stops at once,
            gives every tool call a result, marks the turn ``ABORTED`` and still
            sends ``AgentEnd``.

    Returns:
        The messages this run added to the history.

    Raises:
        ValueError: ``prompts`` is empty, two tools share a name, or a tool's
            schema is invalid.
        Exception: whatever a hook or the provider raised (other than a
            :class:`~agentloop.providers.ProviderError`), as itself.
        TrioRequiredError: called outside trio (under asyncio, say).

    Cancellation: cancelling the caller's scope stops the run at once. The
    history is still left whole (the turn is marked ``ABORTED``; every tool
    call has a result), but no more events are sent.
    """
    with send_channel:  # closed synchronously: see Agent._drive
        require_trio("agent_loop()")
        messages = _user_messages(prompts, "prompts")
        if not messages:
            raise ValueError("agent_loop needs at least one prompt")
        run = Run(
            context,
            config,
            send_channel,
            loop_id=loop_id,
            parent_loop_id=parent_loop_id,
            abort_scope=abort_scope,
        )
        return await _drive(run, messages)


async def agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    send_channel: trio.MemorySendChannel[AgentEvent],
    *,
    loop_id: str | None = None,
    parent_loop_id: str | None = None,
    abort_scope: trio.CancelScope | None = None,
) -> tuple[Message, ...]:
    """Run the loop on ``context`` as it is, without a new prompt.

    For a history that ends with a user message or with tool results: the
    model is asked to continue from there. Arguments, events, cancellation and
    errors are as for :func:`agent_loop`.

    Raises:
        ValueError: the history is empty, or ends with an assistant message
            (there is nothing for the model to answer).
    """
    with send_channel:
        require_trio("agent_loop_continue()")
        if not context.messages:
            raise ValueError("agent_loop_continue needs a history; it is empty")
        if isinstance(context.messages[-1], AssistantMessage):
            raise ValueError(
                "agent_loop_continue needs a history that ends with a user message or tool "
                "results; it ends with an assistant message"
            )
        run = Run(
            context,
            config,
            send_channel,
            loop_id=loop_id,
            parent_loop_id=parent_loop_id,
            abort_scope=abort_scope,
        )
        return await _drive(run, ())
