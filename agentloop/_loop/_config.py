"""AgentLoopConfig, its Hooks, ExecutionLimits and the hook signatures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeAlias, TypedDict, TypeVar, overload

import attrs

from .._check import number_field
from .._context import CompactionConfig
from .._events import AgentEvent
from .._provider import Provider, ThinkingLevel
from .._tool import ExecutionStrategy, Parallel, Schedule
from .._types import Message, Usage, UserMessage
from ._output import Output, as_output

if TYPE_CHECKING:  # an annotation only: permissions load when an application uses them
    from .._tool import Permissions

__all__ = [
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
    "Hooks",
    "LoopSettings",
    "MessageSource",
    "OnErrorHook",
    "configure",
]

H = TypeVar("H")

# A hook may be a plain function or an async one; a "before" hook vetoes with ``False``
# (any other value, None included, lets the run go on).
BeforeLoopHook: TypeAlias = Callable[[Sequence[Message]], Awaitable[bool | None] | bool | None]
"""``before_loop(messages)``: before anything, with the history; ``False`` ends the run."""
AfterLoopHook: TypeAlias = Callable[[Sequence[Message], Usage], Awaitable[None] | None]
"""``after_loop(new_messages, usage)``: after ``AgentEnd``, with the run's messages and usage."""
BeforeTurnHook: TypeAlias = Callable[[Sequence[Message], int], Awaitable[bool | None] | bool | None]
"""``before_turn(messages, turn_index)``: before each turn; ``False`` ends the run."""
AfterTurnHook: TypeAlias = Callable[[Sequence[Message], Usage], Awaitable[None] | None]
"""``after_turn(messages, usage)``: after each ``TurnEnd``, with the turn's usage."""
OnErrorHook: TypeAlias = Callable[[str], Awaitable[None] | None]
"""``on_error(error_message)``: when a model call failed."""
BeforeToolHook: TypeAlias = Callable[
    [str, str, dict[str, Any]], Awaitable[bool | None] | bool | None
]
"""``before_tool_execution(name, call_id, args)``: before a call runs; ``False`` skips it."""
AfterToolHook: TypeAlias = Callable[[str, str, bool], Awaitable[None] | None]
"""``after_tool_execution(name, call_id, is_error)``: after the call's ``ToolExecutionEnd``."""
BeforeUpdateHook: TypeAlias = Callable[[str, str, str], Awaitable[bool | None] | bool | None]
"""``before_tool_execution_update(name, call_id, text)``: ``False`` drops that update."""
AfterUpdateHook: TypeAlias = Callable[[str, str, str], Awaitable[None] | None]
"""``after_tool_execution_update(name, call_id, text)``: after each update sent."""
BeforeCompactionHook: TypeAlias = Callable[[int, int], Awaitable[bool | None] | bool | None]
"""``before_compaction_start(estimated_tokens, message_count)``: ``False`` skips it."""
AfterCompactionHook: TypeAlias = Callable[[int, int], Awaitable[None] | None]
"""``after_compaction_end(tokens_before, tokens_after)``: after ``CompactionEnded``."""
MessageSource: TypeAlias = Callable[[], Sequence[UserMessage] | Awaitable[Sequence[UserMessage]]]
"""Steering and follow-up sources: called when the loop polls; return the messages to add."""
Journal: TypeAlias = Callable[[AgentEvent], None]
"""Given every event of the run as it happens, before the consumer sees it."""


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
class Hooks:
    """The functions the loop calls at fixed points of a run: one value, held by
    :attr:`AgentLoopConfig.hooks`.

    Each is ``None`` (the default) or a plain or async function; the type
    aliases (:data:`~agentloop.BeforeTurnHook`...) give their signatures. A
    ``before_*`` hook that returns ``False`` vetoes; any other return value,
    ``None`` included, lets the run go on. An exception raised by a hook ends
    the run and comes out of it as itself. See :class:`AgentLoopConfig` for
    when each is called.

    >>> Hooks(before_turn=lambda messages, turn_index: None) == Hooks()
    False
    """

    before_loop: BeforeLoopHook | None = None
    after_loop: AfterLoopHook | None = None
    before_turn: BeforeTurnHook | None = None
    after_turn: AfterTurnHook | None = None
    on_error: OnErrorHook | None = None
    before_tool_execution: BeforeToolHook | None = None
    after_tool_execution: AfterToolHook | None = None
    before_tool_execution_update: BeforeUpdateHook | None = None
    after_tool_execution_update: AfterUpdateHook | None = None
    before_compaction_start: BeforeCompactionHook | None = None
    after_compaction_end: AfterCompactionHook | None = None


HOOK_NAMES: tuple[str, ...] = tuple(field.name for field in attrs.fields(Hooks))


class _InHooks(Generic[H]):
    """A hook read through its config: ``config.before_turn`` is ``config.hooks.before_turn``."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type) -> _InHooks[H]: ...
    @overload
    def __get__(self, instance: AgentLoopConfig, owner: type) -> H | None: ...
    def __get__(self, instance: AgentLoopConfig | None, owner: type) -> Any:
        if instance is None:
            return self
        return getattr(instance.hooks, self.name)


class _Unset:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<in hooks>"


#: The default of a hook keyword: not given (the hook of ``hooks`` stands). Typed Any so
#: that the signature shows each hook's own type.
_UNSET: Any = _Unset()


def _default_strategy(value: ExecutionStrategy | None) -> ExecutionStrategy:
    return Parallel() if value is None else value


def _default_limits(value: ExecutionLimits | None) -> ExecutionLimits:
    return ExecutionLimits() if value is None else value


@attrs.frozen(kw_only=True, init=False)
class AgentLoopConfig:
    """How a run behaves: the model, tool execution, limits, queues and hooks.

    The hooks are one value, :attr:`hooks` (a :class:`Hooks`); each may also
    be given and read by its own name: ``AgentLoopConfig(provider=model,
    before_turn=f)``, ``attrs.evolve(config, before_turn=f)`` and
    ``config.before_turn`` set and read ``config.hooks.before_turn``. A hook
    given by name wins over the same hook in ``hooks``.

    Attributes:
        provider: The model.
        strategy: How one message's tool calls run: :class:`~agentloop.Parallel`
            (default; also for ``None``), :class:`~agentloop.Sequential` or
            :class:`~agentloop.Batched`.
        tool_timeout: Seconds a tool call may run, unless the tool sets its own
            ``timeout``. ``None``: no limit.
        limits: When the run stops by itself (``None``: the default limits).
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
        hooks: The hooks (plain or async functions; a ``before_*`` hook that
            returns ``False`` vetoes; an exception a hook raises ends the run
            and comes out of it as itself):

            - ``before_loop(messages)``: before anything; ``False`` ends the
              run at once (only ``AgentEnd`` is sent).
            - ``after_loop(new_messages, usage)``: after ``AgentEnd``.
            - ``before_turn(messages, turn_index)``: ``False`` ends the run
              before the turn.
            - ``after_turn(messages, usage)``: after ``TurnEnd``, with the
              turn's usage.
            - ``on_error(error_message)``: when a model call fails.
            - ``before_tool_execution(name, call_id, args)``: before a call
              whose arguments are valid; ``False`` skips it (no start/end
              events; the model gets an error result saying it was skipped).
            - ``after_tool_execution(name, call_id, is_error)``: after the
              call's ``ToolExecutionEnd``; fires exactly when
              ``before_tool_execution`` allowed the call.
            - ``before_tool_execution_update(name, call_id, text)``: before
              each ``ToolExecutionUpdate``; ``False`` suppresses that event only.
            - ``after_tool_execution_update(name, call_id, text)``: after each
              update sent.
            - ``before_compaction_start(estimated_tokens, message_count)``:
              before a compaction; ``False`` skips it (this turn).
            - ``after_compaction_end(tokens_before, tokens_after)``: after
              ``CompactionEnded``.
        compaction: When and how to compact the working context before a
            turn; ``None``: never.
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

    Raises:
        TypeError, ValueError: a setting is invalid (``strategy`` not a
            strategy, a negative ``tool_timeout``...).
    """

    provider: Provider
    strategy: ExecutionStrategy = attrs.field(converter=_default_strategy, validator=_strategy)
    tool_timeout: float | None = attrs.field(validator=_optional_positive)
    limits: ExecutionLimits = attrs.field(converter=_default_limits)
    max_tokens: int | None
    temperature: float | None
    thinking_level: ThinkingLevel
    permissions: Permissions | None
    get_steering_messages: MessageSource | None
    get_follow_up_messages: MessageSource | None
    hooks: Hooks
    compaction: CompactionConfig | None
    journal: Journal | None
    output_type: Output[Any] | None = attrs.field(converter=as_output)
    schedule: Schedule | None

    before_loop: ClassVar[_InHooks[BeforeLoopHook]] = _InHooks()
    after_loop: ClassVar[_InHooks[AfterLoopHook]] = _InHooks()
    before_turn: ClassVar[_InHooks[BeforeTurnHook]] = _InHooks()
    after_turn: ClassVar[_InHooks[AfterTurnHook]] = _InHooks()
    on_error: ClassVar[_InHooks[OnErrorHook]] = _InHooks()
    before_tool_execution: ClassVar[_InHooks[BeforeToolHook]] = _InHooks()
    after_tool_execution: ClassVar[_InHooks[AfterToolHook]] = _InHooks()
    before_tool_execution_update: ClassVar[_InHooks[BeforeUpdateHook]] = _InHooks()
    after_tool_execution_update: ClassVar[_InHooks[AfterUpdateHook]] = _InHooks()
    before_compaction_start: ClassVar[_InHooks[BeforeCompactionHook]] = _InHooks()
    after_compaction_end: ClassVar[_InHooks[AfterCompactionHook]] = _InHooks()

    def __init__(
        self,
        *,
        provider: Provider,
        strategy: ExecutionStrategy | None = None,
        tool_timeout: float | None = None,
        limits: ExecutionLimits | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        thinking_level: ThinkingLevel = ThinkingLevel.OFF,
        permissions: Permissions | None = None,
        get_steering_messages: MessageSource | None = None,
        get_follow_up_messages: MessageSource | None = None,
        hooks: Hooks | None = None,
        compaction: CompactionConfig | None = None,
        journal: Journal | None = None,
        output_type: Any = None,
        schedule: Schedule | None = None,
        before_loop: BeforeLoopHook | None = _UNSET,
        after_loop: AfterLoopHook | None = _UNSET,
        before_turn: BeforeTurnHook | None = _UNSET,
        after_turn: AfterTurnHook | None = _UNSET,
        on_error: OnErrorHook | None = _UNSET,
        before_tool_execution: BeforeToolHook | None = _UNSET,
        after_tool_execution: AfterToolHook | None = _UNSET,
        before_tool_execution_update: BeforeUpdateHook | None = _UNSET,
        after_tool_execution_update: AfterUpdateHook | None = _UNSET,
        before_compaction_start: BeforeCompactionHook | None = _UNSET,
        after_compaction_end: AfterCompactionHook | None = _UNSET,
    ) -> None:
        given = locals()
        named = {name: given[name] for name in HOOK_NAMES if given[name] is not _UNSET}
        if hooks is None:
            hooks = Hooks(**named)
        elif not isinstance(hooks, Hooks):
            raise TypeError(f"hooks must be a Hooks, got {type(hooks).__name__}")
        elif named:
            hooks = attrs.evolve(hooks, **named)
        self.__attrs_init__(
            provider=provider,
            strategy=strategy,
            tool_timeout=tool_timeout,
            limits=limits,
            max_tokens=max_tokens,
            temperature=temperature,
            thinking_level=thinking_level,
            permissions=permissions,
            get_steering_messages=get_steering_messages,
            get_follow_up_messages=get_follow_up_messages,
            hooks=hooks,
            compaction=compaction,
            journal=journal,
            output_type=output_type,
            schedule=schedule,
        )


class LoopSettings(TypedDict, total=False):
    """The settings of a run, as keyword arguments: :class:`AgentLoopConfig`'s
    but the provider and the queues (a test keeps them equal, names and types).
    ``Agent`` and ``SubAgentTool`` take them."""

    strategy: ExecutionStrategy | None
    tool_timeout: float | None
    limits: ExecutionLimits | None
    max_tokens: int | None
    temperature: float | None
    thinking_level: ThinkingLevel
    permissions: Permissions | None
    hooks: Hooks | None
    compaction: CompactionConfig | None
    journal: Journal | None
    output_type: Any
    schedule: Schedule | None
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


_SETTINGS = frozenset(LoopSettings.__annotations__)


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
    config = base if isinstance(base, AgentLoopConfig) else AgentLoopConfig(provider=base)
    return attrs.evolve(config, **settings, **fixed)
