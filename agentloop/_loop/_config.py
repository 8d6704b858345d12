"""AgentLoopConfig, ExecutionLimits and the hook signatures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypedDict, TypeVar

import attrs

from .._check import number_field
from .._context import CompactionConfig
from .._events import AgentEvent
from .._schedule import Schedule
from .._tool import ExecutionStrategy, Parallel
from .._types import Message, Usage, UserMessage
from ..providers import Provider, ThinkingLevel
from ._output import Output, as_output

if TYPE_CHECKING:  # an annotation only: permissions load when an application uses them
    from .._permissions import Permissions

__all__ = [
    "LoopSettings",
    "configure",
    "AfterCompactionHook",
    "AfterLoopHook",
    "AfterToolHook",
    "AfterTurnHook",
    "AfterUpdateHook",
    "AgentLoopConfig",
    "BeforeCompactionHook",
    "BeforeLoopHook",
    "BeforeToolHook",
    "BeforeTurnHook",
    "BeforeUpdateHook",
    "ExecutionLimits",
    "MessageSource",
    "OnErrorHook",
]

T = TypeVar("T")

#: A hook may be a plain function or an async one; "-> bool" hooks veto with ``False``.
BeforeLoopHook: TypeAlias = Callable[[Sequence[Message]], Awaitable[bool | None] | bool | None]
AfterLoopHook: TypeAlias = Callable[[Sequence[Message], Usage], Awaitable[None] | None]
BeforeTurnHook: TypeAlias = Callable[[Sequence[Message], int], Awaitable[bool | None] | bool | None]
AfterTurnHook: TypeAlias = Callable[[Sequence[Message], Usage], Awaitable[None] | None]
OnErrorHook: TypeAlias = Callable[[str], Awaitable[None] | None]
BeforeToolHook: TypeAlias = Callable[
    [str, str, dict[str, Any]], Awaitable[bool | None] | bool | None
]
AfterToolHook: TypeAlias = Callable[[str, str, bool], Awaitable[None] | None]
BeforeUpdateHook: TypeAlias = Callable[[str, str, str], Awaitable[bool | None] | bool | None]
AfterUpdateHook: TypeAlias = Callable[[str, str, str], Awaitable[None] | None]
BeforeCompactionHook: TypeAlias = Callable[[int, int], Awaitable[bool | None] | bool | None]
AfterCompactionHook: TypeAlias = Callable[[int, int], Awaitable[None] | None]
#: Steering and follow-up sources: called when the loop polls; return the messages to inject.
MessageSource: TypeAlias = Callable[[], Sequence[UserMessage] | Awaitable[Sequence[UserMessage]]]
#: Given every event of the run as it happens, before the consumer sees it.
Journal: TypeAlias = Callable[[AgentEvent], None]


_optional_positive = number_field(above=0, optional=True)


@attrs.frozen(kw_only=True)
class ExecutionLimits:
    """When a run stops on its own. ``None`` means no limit.

    Checked before each turn, that is before each model request: a run with
    ``max_turns=3`` makes at most three model calls. When a limit is reached
    the loop adds a user message such as ``"[Agent stopped: Max turns reached
    (3/3)]"`` and ends the run with that ``AgentEnd.stop_reason``. Tokens count
    input plus output of each turn that did not fail; ``max_requests`` counts
    the run's model requests (not the summaries compaction asks for);
    ``max_cost`` needs the model's prices (``ModelConfig.cost``).

    The model requests tools make for the run (an MCP server's sampling, see
    :meth:`ToolContext.count_request`) count too, and are checked the same
    way, during the call: once a limit is reached, such a request is refused
    and the call ends; the run then stops as above.
    """

    max_turns: int | None = attrs.field(default=50, validator=_optional_positive)
    max_total_tokens: int | None = attrs.field(default=1_000_000, validator=_optional_positive)
    max_duration: float | None = attrs.field(default=600.0, validator=_optional_positive)
    max_cost: float | None = attrs.field(default=None, validator=_optional_positive)
    max_requests: int | None = attrs.field(default=None, validator=_optional_positive)


def _strategy(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    from .._tool import Batched, Sequential

    if not isinstance(value, Sequential | Parallel | Batched):
        raise TypeError(f"strategy must be Sequential(), Parallel() or Batched(n), got {value!r}")


@attrs.frozen(kw_only=True)
class AgentLoopConfig:
    """How a run behaves: the model, tool execution, limits, queues and hooks.

    Hooks may be plain or async functions. A hook that returns ``False`` vetoes
    (``before_*`` hooks only); any other return value, ``None`` included, lets
    the run go on. An exception raised by a hook ends the run and comes out of
    it as itself.

    Attributes:
        provider: The model.
        strategy: How one message's tool calls run: :class:`~agentloop.Parallel`
            (default), :class:`~agentloop.Sequential` or :class:`~agentloop.Batched`.
        tool_timeout: Seconds a tool call may run, unless the tool sets its own
            ``timeout``. ``None``: no limit.
        limits: When the run stops by itself.
        max_tokens, temperature: Passed to the model.
        thinking_level: How much the model should reason (each provider maps it).
        permissions: Which tool calls may run; checked for every call after its
            arguments are validated and before ``before_tool_execution``.
            ``None``: every call may run.
        get_steering_messages: Polled before the first turn, between tool calls
            (per the strategy) and after each turn. Messages it returns are
            sent with the next model call; tool calls not yet run are skipped.
        get_follow_up_messages: Polled when the model is done; messages it
            returns start another turn.
        before_loop(messages): Before anything; ``False`` ends the run at once
            (only ``AgentEnd`` is sent).
        after_loop(new_messages, usage): After ``AgentEnd``.
        before_turn(messages, turn_index): ``False`` ends the run before the turn.
        after_turn(messages, usage): After ``TurnEnd``, with the turn's usage.
        on_error(error_message): When a model call fails.
        before_tool_execution(name, call_id, args): Before a call whose
            arguments are valid; ``False`` skips it (no start/end events; the
            model gets an error result saying it was skipped).
        after_tool_execution(name, call_id, is_error): After the call's
            ``ToolExecutionEnd``; fires exactly when ``before_tool_execution``
            allowed the call.
        before_tool_execution_update(name, call_id, text): Before each
            ``ToolExecutionUpdate``; ``False`` suppresses that event only.
        after_tool_execution_update(name, call_id, text): After each update sent.
        compaction: When and how to compact the working context before a
            turn; ``None``: never.
        before_compaction_start(estimated_tokens, message_count): Before a
            compaction; ``False`` skips it (this turn).
        after_compaction_end(tokens_before, tokens_after): After
            ``CompactionEnded``.
        journal(event): A plain function given every event of the run
            synchronously, as the loop sends it (before the consumer may take
            it): a tool's ``ToolExecutionStart`` before the tool runs, its
            ``ToolExecutionEnd`` as soon as it ends. ``SessionRecorder.record``
            is one: the session file then survives a crash of the process.
            An exception it raises ends the run.
        output_type: The typed final answer the run must end with: a type
            (an attrs class, a dataclass, a ``TypedDict``...), a JSON Schema
            dict, or an :class:`~agentloop.Output` for the mode and retries.
            Stored as an ``Output``; ``None``: the answer is the model's text.
        schedule: Limits on tool calls running at once in the whole agent tree
            (and per tool), and the run's and each turn's deadlines
            (:class:`~agentloop.Schedule`). Exclusive tools and resource keys
            are honoured with or without it. A sub-agent shares its root's
            budget; its own deadlines apply inside its parent's.
    """

    provider: Provider
    strategy: ExecutionStrategy = attrs.field(factory=Parallel, validator=_strategy)
    tool_timeout: float | None = attrs.field(default=None, validator=_optional_positive)
    limits: ExecutionLimits = attrs.field(factory=ExecutionLimits)
    max_tokens: int | None = None
    temperature: float | None = None
    thinking_level: ThinkingLevel = ThinkingLevel.OFF
    permissions: Permissions | None = None
    get_steering_messages: MessageSource | None = None
    get_follow_up_messages: MessageSource | None = None
    before_loop: BeforeLoopHook | None = None
    after_loop: AfterLoopHook | None = None
    before_turn: BeforeTurnHook | None = None
    after_turn: AfterTurnHook | None = None
    on_error: OnErrorHook | None = None
    before_tool_execution: BeforeToolHook | None = None
    after_tool_execution: AfterToolHook | None = None
    before_tool_execution_update: BeforeUpdateHook | None = None
    after_tool_execution_update: AfterUpdateHook | None = None
    compaction: CompactionConfig | None = None
    before_compaction_start: BeforeCompactionHook | None = None
    after_compaction_end: AfterCompactionHook | None = None
    journal: Journal | None = None
    output_type: Output[Any] | None = attrs.field(default=None, converter=as_output)
    schedule: Schedule | None = None


class LoopSettings(TypedDict, total=False):
    """The settings of a run, as keyword arguments: :class:`AgentLoopConfig`'s fields
    but the provider and the queues. ``Agent`` and ``SubAgentTool`` take them."""

    strategy: ExecutionStrategy | None
    tool_timeout: float | None
    limits: ExecutionLimits | None
    max_tokens: int | None
    temperature: float | None
    thinking_level: ThinkingLevel
    permissions: Permissions | None
    compaction: CompactionConfig | None
    before_loop: BeforeLoopHook | None
    after_loop: AfterLoopHook | None
    before_turn: BeforeTurnHook | None
    after_turn: AfterTurnHook | None
    on_error: OnErrorHook | None
    before_tool_execution: BeforeToolHook | None
    after_tool_execution: AfterToolHook | None
    before_tool_execution_update: BeforeUpdateHook | None
    after_tool_execution_update: AfterUpdateHook | None
    before_compaction_start: BeforeCompactionHook | None
    after_compaction_end: AfterCompactionHook | None
    journal: Journal | None
    output_type: Any
    schedule: Schedule | None


_SETTINGS = frozenset(LoopSettings.__annotations__)
_DEFAULTS: dict[str, Callable[[], Any]] = {"strategy": Parallel, "limits": ExecutionLimits}


def configure(
    what: str, base: Provider | AgentLoopConfig, settings: dict[str, Any], **fixed: Any
) -> AgentLoopConfig:
    """``base`` (a config, or a provider for a default one) with ``settings`` applied.

    ``None`` for ``strategy`` or ``limits`` means their default. ``fixed`` are
    set as given (the queues of an ``Agent``).

    Raises:
        TypeError: a setting ``what`` does not take (``"Agent()"`` names the caller).
        ValueError, TypeError: a setting's value is invalid (as AgentLoopConfig says).
    """
    unknown = sorted(set(settings) - _SETTINGS)
    if unknown:
        raise TypeError(f"{what} got an unexpected keyword argument {unknown[0]!r}")
    changes = {
        name: _DEFAULTS[name]() if value is None and name in _DEFAULTS else value
        for name, value in settings.items()
    }
    config = base if isinstance(base, AgentLoopConfig) else AgentLoopConfig(provider=base)
    return attrs.evolve(config, **changes, **fixed)
