"""The sub-agent tool: delegate a task to a child agent loop.

A :class:`SubAgentTool` call runs a whole :func:`~agentloop.agent_loop` (the
*child*) inside the call's own task, so the child is part of the parent's
task tree: it cannot outlive the call, and cancelling the call stops it. The
child starts from nothing but its system prompt, its tools and the task text.

Cancellation. When the call is cancelled (the parent aborts, the call times
out, the parent's caller leaves), the child is stopped *softly and
completely*, never just dropped::

    call task
    ├── watcher             unshielded: the only part the cancellation reaches
    └── guard               CancelScope(shield=True)
        ├── child loop      agent_loop(..., abort_scope=abort)
        └── forwarder       child events -> on_event, then -> the parent

1. The watcher, waiting for the child to finish, receives the ``Cancelled``
   instead. It cancels the child's ``abort_scope``, stops relaying events to
   the parent (and interrupts a relay in progress: the parent's consumer may
   be gone) and sets the guard's deadline to ``abort_grace`` seconds from now.
2. Inside the shielded guard the child aborts as usual: its running tools are
   cancelled, every tool call gets a result, its turn is marked ``ABORTED`` and
   it sends its ``AgentEnd``. The forwarder keeps draining the child's events
   to ``on_event`` until the child's channel closes.
3. If that takes longer than ``abort_grace``, the guard's deadline cancels the
   child hard: it stops at once (its history is still left whole, but it sends
   no more events). Code the child shields from cancellation (a tool's
   shielded cleanup, such as the bash tool's process-group kill) still runs to
   its own end: nothing in trio can cut a shield short.
4. The watcher's ``Cancelled`` is then re-raised from :meth:`SubAgentTool.execute`:
   the cancellation is delayed, never swallowed. The parent's loop writes the
   call's result, ``"Tool exceeded timeout of 5s"`` or
   ``"Cancelled: the run was aborted."``.

Nesting. A sub-agent cannot start another sub-agent. A ``SubAgentTool``
among a sub-agent's ``tools`` is refused when it is built; a tool that starts
one at run time anyway (the child's task tree carries a context variable)
gets a :class:`~agentloop.ToolError`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from typing import Any, TypeAlias, Unpack

import attrs
import trio

from .._check import check_number
from .._context import AgentContext
from .._events import (
    AgentEnd,
    AgentEvent,
    AgentStop,
    MessageUpdate,
    ProgressMessage,
    StopKind,
    TextDelta,
    ToolExecutionStart,
)
from .._loop import (
    AgentLoopConfig,
    ExecutionLimits,
    LoopSettings,
    agent_loop,
    check_setup,
    configure,
)
from .._tool import (
    AgentTool,
    Claim,
    InvalidArgs,
    ToolContext,
    ToolError,
    ToolResult,
    describe_exception,
    tool_traits,
)
from .._types import (
    AssistantMessage,
    TextContent,
    Usage,
)
from .._util import HookFailure, call_hook, raise_single
from ..providers import Provider
from ..serialization import to_dict
from ._prun import prun_tools

__all__ = ["NO_OUTPUT_TEXT", "OnEvent", "SubAgentTool"]

#: Receives every event of the child loop; a plain or an async function.
OnEvent: TypeAlias = Callable[[AgentEvent], Awaitable[None] | None]

#: The result text when the child finished without writing any text.
NO_OUTPUT_TEXT = "(sub-agent produced no text output)"
_ORCHESTRATES = Claim(budget=False)

_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")

# How many sub-agent runs enclose the current task. trio copies the context of the
# task that spawns a task, so the child loop's tasks, its tool calls included, see it.
_depth: ContextVar[int] = ContextVar("agentloop_sub_agent_depth", default=0)


def _tool_tuple(value: Iterable[AgentTool]) -> tuple[AgentTool, ...]:
    return tuple(value)


def _check_name(name: object) -> None:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(
            "SubAgentTool name must be 1-64 characters from a-z, A-Z, 0-9, '_' and '-', "
            f"got {name!r}"
        )


def _schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "minLength": 1,
                "description": (
                    "The task for the sub-agent. The sub-agent sees nothing of this "
                    "conversation, so say everything it needs: the goal, the facts, "
                    "names and paths involved, and what to report back."
                ),
            }
        },
        "required": ["task"],
        "additionalProperties": False,
    }


@attrs.frozen(eq=False, init=False)
class SubAgentTool:
    """A tool that delegates a task to a child agent loop and returns its answer.

    The model calls it with ``{"task": "..."}``. The child loop gets the
    system prompt, the tools and the task as its only message, runs until its
    model stops, and the call returns the text of the child's last assistant
    message that has text, or ``"(sub-agent produced no text output)"``.
    ``details`` is ``{"sub_agent", "child_loop_id", "turns", "usage"}``
    (``turns``: the child's model replies; ``usage``: their summed
    :class:`~agentloop.Usage` as JSON) and ``child_loop_id`` links the result to
    the child's events.

    While the child runs, its streamed text and the tools it calls are
    reported as ``ToolExecutionUpdate`` events (``"[sub-agent calling tool:
    NAME]"``) and its tools' progress as ``ProgressMessage`` events; each
    update's ``details`` is ``{"sub_agent", "child_loop_id", "event"}``, where
    ``event`` is the child's event itself. ``on_event`` receives every event of the child, in
    order, before it is forwarded.

    The child's loop id is ``"<parent loop id>.<name>.<tool call id>"`` and its
    ``AgentStart`` names the parent's loop as ``parent_loop_id``. Each call has
    a fresh context, so calls may run in parallel.

    Example::

        researcher = SubAgentTool(
            "researcher",
            provider,
            system_prompt="You research questions in the code base. Be brief.",
            tools=[ReadFileTool(root), SearchTool(root)],
            max_turns=20,
        )
        agent = Agent(provider, tools=[researcher, BashTool(root)])

    Args:
        name: The tool name, 1-64 characters from ``a-z A-Z 0-9 _ -``.
        provider: The child's model (it may be the parent's), or an
            :class:`~agentloop.AgentLoopConfig` (the parent's, say: its
            queues are not the child's and are dropped).
        description: What the parent's model is told about the tool (default:
            ``"Delegate a task to the '<name>' sub-agent"``).
        system_prompt: The child's system prompt.
        tools: The child's tools; none by default.
        prun: Give each call's child its own ``prun`` and ``prun_with_memo``
            tools (prun tools in ``tools`` are refused: concurrent calls would
            share their queue).
        max_turns: The child's turn limit, unless ``limits`` is given (or a
            config is: its limits are the child's).
        label: The human-readable name (default: ``"Sub-agent <name>"``).
        timeout: Seconds a call may run (the loop enforces it), or ``None``.
        abort_grace: Seconds a cancelled call waits for the child to abort
            softly before cancelling it hard.
        on_event: A plain or async function given every event of the child.
        settings: The child's settings, as :class:`~agentloop.AgentLoopConfig`
            fields (``thinking_level``, ``strategy``, ``limits`` (default:
            ``max_turns``, 1,000,000 tokens and 300 seconds), ``tool_timeout``,
            ``permissions``, ``compaction``, the hooks...).

    Raises:
        ValueError: from the constructor: a bad name, ``max_turns``,
            ``timeout`` or ``abort_grace``; a ``SubAgentTool`` or a prun tool
            among ``tools``; the child's tools are invalid (two share a name, a
            bad schema); or ``compaction`` without a known context window.
        TypeError: from the constructor: an object in ``tools`` is not a
            tool, or ``strategy`` is not a strategy.
        InvalidArgs: from :meth:`execute`: the task is missing or blank.
        ToolError: from :meth:`execute`: the child failed (its model call
            failed, it reached a limit, its loop raised, it was aborted
            while the call was not cancelled), or a sub-agent tried
            to start another sub-agent. The message starts with
            ``"Sub-agent '<name>' failed: "``; apart from the nesting refusal it
            carries the ``details`` and ``child_loop_id`` a result would.

    An exception raised by ``on_event`` ends the parent's run as itself, as a
    hook's would. Cancellation is described in the module docstring: the child
    aborts softly (its tools cancelled, its ``AgentEnd`` sent to ``on_event``)
    within ``abort_grace`` seconds, then the cancellation goes on.
    """

    name: str
    provider: Provider = attrs.field(repr=False)
    description: str = attrs.field(repr=False)
    label: str
    system_prompt: str = attrs.field(repr=False)
    tools: tuple[AgentTool, ...] = attrs.field(repr=False)
    config: AgentLoopConfig = attrs.field(repr=False)
    timeout: float | None
    abort_grace: float
    on_event: OnEvent | None = attrs.field(repr=False)
    prun: bool
    parameters_schema: dict[str, Any] = attrs.field(init=False, repr=False, factory=_schema)

    def __init__(
        self,
        name: str,
        provider: Provider | AgentLoopConfig,
        *,
        description: str | None = None,
        system_prompt: str = "",
        tools: Iterable[AgentTool] = (),
        max_turns: int = 10,
        prun: bool = False,
        label: str | None = None,
        timeout: float | None = None,
        abort_grace: float = 10.0,
        on_event: OnEvent | None = None,
        **settings: Unpack[LoopSettings],
    ) -> None:
        _check_name(name)
        owner = f"SubAgentTool '{name}':"
        check_number(max_turns, f"{owner} max_turns", at_least=1, integer=True)
        check_number(timeout, f"{owner} timeout", above=0, optional=True)
        check_number(abort_grace, f"{owner} abort_grace", at_least=0)
        child_tools = _tool_tuple(tools)
        for tool in child_tools:
            if isinstance(tool, SubAgentTool):
                raise ValueError(
                    f"SubAgentTool '{name}': a sub-agent cannot have sub-agents (got '{tool.name}')"
                )
            if tool_traits(tool).prun_queue is not None:
                raise ValueError(
                    f"SubAgentTool '{name}': calls running at once would share the queue of "
                    f"'{tool.name}'; use SubAgentTool(..., prun=True), which gives each call "
                    "its own prun tools"
                )
        given = dict(settings)
        if given.get("limits") is None and not isinstance(provider, AgentLoopConfig):
            given["limits"] = ExecutionLimits(
                max_turns=max_turns, max_total_tokens=1_000_000, max_duration=300.0
            )
        # The child has no queues: a config shared with an Agent brings that agent's.
        config = configure(
            f"SubAgentTool {name!r}",
            provider,
            given,
            get_steering_messages=None,
            get_follow_up_messages=None,
        )
        check_setup((*child_tools, *prun_tools()) if prun else child_tools, config)
        self.__attrs_init__(
            name=name,
            provider=config.provider,
            description=(
                f"Delegate a task to the '{name}' sub-agent" if description is None else description
            ),
            label=f"Sub-agent {name}" if label is None else label,
            system_prompt=system_prompt,
            tools=child_tools,
            config=config,
            timeout=timeout,
            abort_grace=abort_grace,
            on_event=on_event,
            prun=prun,
        )

    def resources(self, params: dict[str, Any]) -> Claim:
        """A call holds no place in the scheduling budget: the child's calls do.

        So a tree deeper than the budget is wide cannot deadlock on it.
        """
        return _ORCHESTRATES

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Run the child loop on ``params["task"]``; see the class docstring.

        Raises:
            InvalidArgs: the task is missing, not a string, or blank.
            ToolError: the child failed, or this call runs inside a sub-agent.
            trio.Cancelled: the call was cancelled; re-raised once the child
                has stopped (see the module docstring).
        """
        task = params.get("task")
        if not isinstance(task, str) or not task.strip():
            raise InvalidArgs("Missing required 'task' parameter")
        if _depth.get() > 0:
            raise ToolError(
                f"Sub-agent '{self.name}' failed: a sub-agent cannot start another sub-agent"
            )
        if ctx.loop_id is None:
            child_id = f"{self.name}.{ctx.tool_call_id}"
        else:
            child_id = f"{ctx.loop_id}.{self.name}.{ctx.tool_call_id}"
        run = _ChildRun(self, ctx, child_id)
        await run.run(task)
        return run.outcome()


class _ChildRun:
    """One call's child loop: runs it, relays its events, stops it when cancelled."""

    def __init__(self, tool: SubAgentTool, ctx: ToolContext, child_id: str) -> None:
        self.tool = tool
        self.ctx = ctx
        self.child_id = child_id
        tools = (*tool.tools, *prun_tools()) if tool.prun else tool.tools
        self.context = AgentContext(tool.system_prompt, [], tools)
        self.abort_scope = trio.CancelScope()
        self.guard = trio.CancelScope(shield=True)
        self.finished = trio.Event()
        self.cancelled: trio.Cancelled | None = None  # the call's, held until the child stops
        self.error: Exception | None = None  # raised by the child loop
        self.relaying = True  # forward events to the parent (until cancelled)
        self.stop: AgentStop | None = None  # the child's AgentEnd says why it ended
        self.output: Any = None  # and gives its structured output
        self.relay_scope: trio.CancelScope | None = None

    async def run(self, task: str) -> None:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._watch)
                try:
                    with self.guard:
                        await self._child_and_forwarder(task)
                finally:
                    self.finished.set()
        except BaseExceptionGroup as group:
            # A HookFailure stays wrapped: it must pass the parent's tool gate.
            raise_single(group, unwrap_hooks=False)
        cancelled, self.cancelled = self.cancelled, None
        if cancelled is not None:
            try:
                raise cancelled  # the call's own Cancelled: the cancellation goes on
            finally:
                del cancelled  # no cycle through this frame

    async def _child_and_forwarder(self, task: str) -> None:
        send, receive = trio.open_memory_channel[AgentEvent](0)
        async with trio.open_nursery() as nursery:
            token = _depth.set(_depth.get() + 1)
            try:  # the child loop's task (and its tasks) copy the context now
                nursery.start_soon(self._child, task, send)
            finally:
                _depth.reset(token)
            await self._forward(receive)

    async def _child(self, task: str, send: trio.MemorySendChannel[AgentEvent]) -> None:
        try:
            await agent_loop(
                [task],
                self.context,
                self.tool.config,
                send,
                loop_id=self.child_id,
                parent_loop_id=self.ctx.loop_id,
                abort_scope=self.abort_scope,
                agent_name=self.tool.name,
            )
        except Exception as error:
            self.error = error

    async def _watch(self) -> None:
        """Wait for the child; if the call is cancelled meanwhile, abort it softly."""
        try:
            await self.finished.wait()
        except trio.Cancelled as cancelled:
            if self.finished.is_set():
                raise
            # Held, and re-raised by run() once the child has stopped.
            self.cancelled = cancelled
            self.relaying = False
            if self.relay_scope is not None:
                self.relay_scope.cancel()
            self.abort_scope.cancel()
            self.guard.deadline = trio.current_time() + self.tool.abort_grace

    async def _forward(self, receive: trio.MemoryReceiveChannel[AgentEvent]) -> None:
        """Drain the child's events: each to on_event, then (some) to the parent."""
        details = {"sub_agent": self.tool.name, "child_loop_id": self.child_id}
        on_event = self.tool.on_event
        ctx = self.ctx
        with receive:
            async for event in receive:
                if isinstance(event, AgentEnd) and event.loop_id == self.child_id:
                    self.stop = event.stop_reason
                    self.output = event.output
                if on_event is not None:
                    try:
                        await call_hook(on_event, event)
                    except Exception as error:
                        raise HookFailure(error) from error
                if not self.relaying:
                    continue
                match event:
                    case MessageUpdate(delta=TextDelta(delta=text)):
                        partial = ToolResult(
                            (TextContent(text),), details={**details, "event": event}
                        )
                        await self._relay(ctx.update, partial)
                    case ToolExecutionStart(tool_name=tool_name):
                        partial = ToolResult.text(
                            f"[sub-agent calling tool: {tool_name}]",
                            details={**details, "event": event},
                        )
                        await self._relay(ctx.update, partial)
                    case ProgressMessage(text=text):
                        await self._relay(ctx.progress, text)

    async def _relay(self, callback: Callable[[Any], Awaitable[None]], value: object) -> None:
        # The forwarder runs shielded; this scope lets the watcher interrupt a relay
        # that waits on the parent's consumer, which may never read again once cancelled.
        with trio.CancelScope() as scope:
            self.relay_scope = scope
            try:
                await callback(value)
            finally:
                self.relay_scope = None

    # ------------------------------------------------------------------ the outcome

    def outcome(self) -> ToolResult:
        """The call's result, or the ToolError that says how the child failed."""
        name = self.tool.name
        messages = self.context.messages
        assistants = [m for m in messages if isinstance(m, AssistantMessage)]
        usage = sum((m.usage for m in assistants), Usage())
        details = {
            "sub_agent": name,
            "child_loop_id": self.child_id,
            "turns": len(assistants),
            "usage": to_dict(usage),
        }
        text = _last_text(assistants)

        def failure(reason: str) -> ToolError:
            return ToolError(
                f"Sub-agent '{name}' failed: {reason}",
                details=details,
                child_loop_id=self.child_id,
            )

        if self.error is not None:
            raise failure(describe_exception(self.error)) from self.error
        stop = self.stop
        if stop is None:  # pragma: no cover - the child always ends with AgentEnd
            raise failure("the run ended without saying why")
        kind = stop.kind
        if kind is StopKind.ERROR:
            raise failure(stop.error or "the model call failed")
        if kind is StopKind.ABORTED or self.abort_scope.cancel_called:
            raise failure("the run was aborted")
        if kind is not StopKind.COMPLETED:  # a limit, or a hook ended it
            reason = stop.message
            raise failure(f"{reason}\n\nIts last output:\n{text}" if text else reason)
        output = self.tool.config.output_type
        if output is not None:
            # The typed answer, as JSON for the parent's model, and as itself in details.
            data = output.dump(self.output)
            return ToolResult(
                (TextContent(json.dumps(data, ensure_ascii=False)),),
                details={**details, "output": self.output},
                child_loop_id=self.child_id,
            )
        return ToolResult(
            (TextContent(text or NO_OUTPUT_TEXT),),
            details=details,
            child_loop_id=self.child_id,
        )


def _last_text(assistants: Sequence[AssistantMessage]) -> str:
    """The text of the last message that has any, its text blocks joined by newlines."""
    for message in reversed(assistants):
        blocks = [block.text for block in message.content if isinstance(block, TextContent)]
        if any(blocks):
            return "\n".join(blocks)
    return ""
