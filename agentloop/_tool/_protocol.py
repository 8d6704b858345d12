"""The tool system: the AgentTool protocol, its context, results, errors and strategies."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeAlias, runtime_checkable

import attrs

from .._errors import AgentloopError
from .._types import ToolOutcome, ToolResult, Usage
from .._util import single_leaf
from ._schedule import Claim, claim_of

if TYPE_CHECKING:  # trio loads with the driver: the loop core imports the values here
    import trio

__all__ = [
    "describe_exception",
    "AgentTool",
    "Batched",
    "ExecutionStrategy",
    "InvalidArgs",
    "Parallel",
    "ProgressCallback",
    "Sequential",
    "ToolCancelled",
    "ToolContext",
    "ToolError",
    "ToolNotFound",
    "ToolResult",
    "ToolTimeout",
    "ToolTraits",
    "UpdateCallback",
    "format_duration",
    "tool_traits",
]


UpdateCallback: TypeAlias = Callable[[ToolResult], Awaitable[None]]
ProgressCallback: TypeAlias = Callable[[str], Awaitable[None]]
UsageCallback: TypeAlias = Callable[[Usage, str], None]
RequestCallback: TypeAlias = Callable[[], "str | None"]


@attrs.frozen
class ToolContext:
    """What the loop hands a tool besides its arguments.

    Attributes:
        tool_call_id: The id of this call; it correlates the call's events.
        tool_name: The name the model called.
        cancel_scope: The call's own :class:`trio.CancelScope`. Its deadline is
            the tool's timeout. A tool may call ``cancel_scope.cancel()`` to give
            up; the call then ends with a ``"Cancelled"`` error result.
        on_update: ``None``, or an async callable taking a partial
            :class:`ToolResult`; each call becomes a ``ToolExecutionUpdate``
            event. It returns once the event is queued, so a slow consumer
            slows the tool down instead of losing updates.
        on_progress: ``None``, or an async callable taking a line of text; each
            call becomes a ``ProgressMessage`` event.
        loop_id: The id of the loop running the call (``None`` outside a loop);
            a tool that starts a child loop gives it as the child's parent.
        on_usage: ``None``, or a plain callable taking a :class:`Usage` and
            the model's name: tokens the tool paid for (an MCP server's
            sampling request, say), added to the run's usage and counted
            against its limits. Use :meth:`count_usage`.
        on_request: ``None``, or a plain callable taking nothing: a model
            request the tool is about to make for the run, checked against the
            run's limits; it returns the limit reached, or ``None``. Use
            :meth:`count_request`.
    """

    tool_call_id: str
    tool_name: str
    cancel_scope: trio.CancelScope
    on_update: UpdateCallback | None = None
    on_progress: ProgressCallback | None = None
    loop_id: str | None = None
    on_usage: UsageCallback | None = None
    on_request: RequestCallback | None = None

    async def update(self, partial: ToolResult) -> None:
        """Report a partial result, if anyone listens. A checkpoint either way."""
        if self.on_update is None:
            import trio

            await trio.lowlevel.checkpoint()
        else:
            await self.on_update(partial)

    async def progress(self, text: str) -> None:
        """Report a line of progress text, if anyone listens. A checkpoint either way."""
        if self.on_progress is None:
            import trio

            await trio.lowlevel.checkpoint()
        else:
            await self.on_progress(text)

    def count_usage(self, usage: Usage, model: str) -> None:
        """Add model usage the tool paid for to the run's usage (nothing outside a loop).

        The run's ``AgentEnd.usage`` and ``usage_by_model[model]`` include it, and
        the run's token and cost limits count it before the next model request
        (the run's own, or one a tool makes: see :meth:`count_request`).
        """
        if self.on_usage is not None:
            self.on_usage(usage, model)

    def count_request(self) -> str | None:
        """Ask before a model request the tool makes for the run (an MCP server's sampling).

        The run's limits (:class:`~agentloop.ExecutionLimits`) are checked
        as before the run's own model requests. Returns ``None`` when the
        request may be made; it then counts in ``max_requests``. Returns the
        limit the run has reached, as a sentence (``"Max tokens reached
        (2100/2000)"``), when it may not: the tool should not make it, and
        should end. Outside a loop: ``None``.
        """
        if self.on_request is None:
            return None
        return self.on_request()


@runtime_checkable
class AgentTool(Protocol):
    """A capability the model can call.

    Any object with these attributes is a tool; there is no base class.

    A tool may also have these attributes (read once per run, by
    :func:`tool_traits`; a tool without one gets the default):

    - ``timeout``: seconds, or ``None`` (default), overriding the loop's
      ``tool_timeout`` for its calls;
    - ``permission_subject(params) -> (kind, subject)``: what a permission rule
      matches its calls against (see :class:`~agentloop.Permissions`);
    - ``prun_queue``: the :class:`~agentloop.PrunQueue` a prun tool writes to;
    - ``replay_safe``: ``True`` if running a call again has no effect beyond the
      first run (read-only or idempotent); a session recovered after a crash
      runs such a call again, and answers any other with an error. Default
      ``False``;
    - ``resources(params) -> Claim``: what a call needs while it runs (keys it
      reads or writes, or to run alone), so that conflicting calls anywhere in
      the agent tree run one after another (see :class:`~agentloop.Claim`);
    - ``exclusive``: ``True`` for a tool whose calls run alone (the same as a
      ``resources`` that returns ``Claim(exclusive=True)``). With a
      ``resources`` too, both hold: each call runs alone, and its claim's
      ``budget`` stands.

    ``execute`` receives the arguments, already checked against
    ``parameters_schema``, and returns a :class:`ToolResult`. To fail, raise
    :class:`ToolError` (or a subclass): the model sees its message and can
    recover. Any other ``Exception`` is reported to the model as its type and
    message; it never stops the run. When the call is cancelled (timeout,
    abort), ``execute`` sees :class:`trio.Cancelled` at its next checkpoint.

    Example::

        class Weather:
            name = "get_weather"
            label = "Weather"
            description = "Current weather for a city."
            parameters_schema = {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            }

            async def execute(self, params, ctx):
                return ToolResult.text(f"Sunny in {params['city']}")
    """

    @property
    def name(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def parameters_schema(self) -> Mapping[str, Any]: ...

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult: ...


@attrs.frozen
class ToolTraits:
    """A tool's optional attributes, or their defaults (see :class:`AgentTool`)."""

    timeout: float | None = None
    permission_subject: Callable[[Mapping[str, Any]], tuple[str, str]] | None = None
    prun_queue: Any = None
    replay_safe: bool = False
    resources: Callable[[dict[str, Any]], Claim] | None = None


_NO_TRAITS = ToolTraits()


def tool_traits(tool: object) -> ToolTraits:
    """The optional attributes of ``tool`` (the one place that reads them).

    >>> tool_traits(object()).timeout is None
    True
    """
    timeout = getattr(tool, "timeout", None)
    subject = getattr(tool, "permission_subject", None)
    queue = getattr(tool, "prun_queue", None)
    replay_safe = getattr(tool, "replay_safe", False) is True
    resources = getattr(tool, "resources", None)
    if getattr(tool, "exclusive", False) is True:  # it runs alone, whatever else it claims
        resources = _exclusive if resources is None else _runs_alone(resources)
    if (
        timeout is None
        and subject is None
        and queue is None
        and not replay_safe
        and resources is None
    ):
        return _NO_TRAITS
    return ToolTraits(timeout, subject, queue, replay_safe, resources)


_EXCLUSIVE = Claim(exclusive=True)


def _exclusive(arguments: dict[str, Any]) -> Claim:
    return _EXCLUSIVE


def _runs_alone(
    resources: Callable[[dict[str, Any]], Claim],
) -> Callable[[dict[str, Any]], Claim]:
    """``resources`` of a tool that is also ``exclusive``: its claims, made exclusive."""

    def claim(arguments: dict[str, Any]) -> Claim:
        claimed = claim_of(resources, arguments)  # TypeError if it is not a Claim
        return claimed if claimed.exclusive else attrs.evolve(claimed, exclusive=True)

    return claim


# --------------------------------------------------------------------------- errors


def format_duration(seconds: float) -> str:
    """Format a duration the way error messages show it: ``50ms``, ``1.5s``, ``120s``,
    and from an hour on ``2h``, ``1.5h``, ``7d``.

    >>> [format_duration(s) for s in (0.05, 1.5, 120, 5400, 604800)]
    ['50ms', '1.5s', '120s', '1.5h', '7d']
    """

    def plain(value: float) -> str:
        return f"{value:.3f}".rstrip("0").rstrip(".")

    if seconds < 1:
        return f"{plain(seconds * 1000)}ms"
    if seconds >= 86400:
        return f"{plain(seconds / 86400)}d"
    if seconds >= 3600:
        return f"{plain(seconds / 3600)}h"
    return f"{plain(seconds)}s"


class ToolError(AgentloopError):
    """A tool failed; the model is shown the message and may recover.

    ``details`` and ``child_loop_id`` go on the error result as they would on a
    :class:`ToolResult`: ``details`` (JSON-compatible) for the application, never
    sent to the model; ``child_loop_id`` for a tool whose child loop failed.

    ``outcome`` is the :class:`~agentloop.ToolOutcome` of a call that raises
    it: ``ERROR``, and for the subclasses below their own.

    >>> str(ToolError("disk full"))
    'disk full'
    """

    outcome: ClassVar[ToolOutcome] = ToolOutcome.ERROR

    def __init__(
        self, message: str, *, details: Any = None, child_loop_id: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.child_loop_id = child_loop_id

    def __str__(self) -> str:
        return self.message


class InvalidArgs(ToolError):
    """The arguments are unusable. Shown as ``"Invalid arguments: <message>"``."""

    outcome = ToolOutcome.INVALID_ARGUMENTS

    def __str__(self) -> str:
        return f"Invalid arguments: {self.message}"


class ToolNotFound(ToolError):
    """The model called a tool that does not exist. Shown as ``"Tool not found: <name>"``."""

    outcome = ToolOutcome.NOT_FOUND

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"Tool not found: {self.name}"


class ToolCancelled(ToolError):
    """The call was cancelled before it finished. Shown as ``"Cancelled"``."""

    outcome = ToolOutcome.CANCELLED

    def __init__(self, message: str = "") -> None:
        super().__init__(message)

    def __str__(self) -> str:
        return f"Cancelled: {self.message}" if self.message else "Cancelled"


class ToolTimeout(ToolError):
    """The call ran past its timeout and was cancelled.

    Shown as ``"Tool exceeded timeout of <duration>"``, for example ``"...of 50ms"``.
    """

    outcome = ToolOutcome.TIMED_OUT

    def __init__(self, timeout: float) -> None:
        super().__init__(format_duration(timeout))
        self.timeout = timeout

    def __str__(self) -> str:
        return f"Tool exceeded timeout of {self.message}"


# --------------------------------------------------------------------------- strategies


@attrs.frozen
class Sequential:
    """Run a message's tool calls one at a time; check steering after each."""


@attrs.frozen
class Parallel:
    """Run all of a message's tool calls at once; check steering after all. The default."""


def _positive(instance: object, attribute: attrs.Attribute[int], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Batched size must be an integer >= 1, got {value!r}")


@attrs.frozen
class Batched:
    """Run tool calls in batches of ``size`` at once; check steering after each batch.

    >>> Batched(0)
    Traceback (most recent call last):
    ...
    ValueError: Batched size must be an integer >= 1, got 0
    """

    size: int = attrs.field(validator=_positive)


ExecutionStrategy: TypeAlias = Sequential | Parallel | Batched


def describe_exception(error: BaseException) -> str:
    """The text an error result shows for an exception: a ToolError's message, else
    ``"<Type>: <message>"`` (a group standing for one exception, as that one)."""
    if isinstance(error, ToolError):
        return str(error)
    if isinstance(error, BaseExceptionGroup):
        leaf = single_leaf(error)
        if leaf is not None:
            return describe_exception(leaf)
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
