"""Plumbing shared by the public boundaries: exception groups, the trio check."""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NoReturn

from ._errors import AgentloopError

__all__ = [
    "HookFailure",
    "call_hook",
    "TrioRequiredError",
    "leaves",
    "raise_single",
    "require_trio",
    "single_leaf",
]


class TrioRequiredError(AgentloopError, RuntimeError):
    """An agentloop coroutine was awaited outside trio (under asyncio, say).

    agentloop's loop is built of trio nurseries, cancel scopes and channels, so
    it runs only under ``trio.run`` (or trio-asyncio). From an asyncio program,
    run the agent in a worker thread with its own trio loop::

        answer = await asyncio.to_thread(trio.run, ask, "What is 2 + 3?")
    """


def require_trio(what: str) -> None:
    """Raise :class:`TrioRequiredError` unless the caller runs under trio.

    ``what`` names the entry point in the message (``"Agent.run()"``). Costs one
    attribute lookup when trio is running.
    """
    import trio

    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        pass
    else:
        return
    import sniffio

    try:
        library: str | None = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    where = f"under {library}" if library else "outside any trio run"
    raise TrioRequiredError(
        f"{what} was awaited {where}, but agentloop runs under trio. "
        "From an asyncio program, run the agent in a thread with its own trio loop: "
        "`await asyncio.to_thread(trio.run, main)`, where main is an async function "
        "that uses the agent; or use trio-asyncio. See 'Calling agentloop from "
        "asyncio' in the docs (docs/guides/asyncio.md)."
    )


class HookFailure(BaseException):
    """Carries an exception raised by a hook through a tool's code.

    An update hook runs inside ``await ctx.update(...)``, that is, inside the
    tool. Wrapped in this ``BaseException``, the hook's error passes through the
    tool's ``except Exception`` and the loop's tool gate, so it ends the run as
    itself instead of becoming a tool error result.
    """

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def leaves(error: BaseException) -> Iterator[BaseException]:
    """Yield the non-group exceptions inside ``error`` (itself, if it is not a group)."""
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


def single_leaf(error: BaseException, *, unwrap_hooks: bool = True) -> BaseException | None:
    """The one exception a group stands for, or ``None`` if it holds several.

    ``Cancelled`` leaves are ignored when another exception is present (trio's
    cancellation is level-triggered: it is raised again at the next checkpoint).
    A ``KeyboardInterrupt`` or ``SystemExit`` anywhere wins. A
    :class:`HookFailure` gives the hook's error, unless ``unwrap_hooks`` is false
    (for code between a hook and the loop's tool gate, which must see it wrapped).
    """
    import trio

    found = list(leaves(error))
    for leaf in found:
        if isinstance(leaf, KeyboardInterrupt | SystemExit):
            return leaf
    others = [leaf for leaf in found if not isinstance(leaf, trio.Cancelled)]
    if len(others) == 1:
        leaf = others[0]
    elif not others and found:
        leaf = found[0]
    else:
        return None
    return leaf.error if unwrap_hooks and isinstance(leaf, HookFailure) else leaf


def raise_single(error: BaseException, *, unwrap_hooks: bool = True) -> NoReturn:
    """Raise what ``error`` stands for: its single leaf if it has one, else itself.

    The leaf keeps its own traceback, cause and context. ``unwrap_hooks`` is as
    for :func:`single_leaf`.
    """
    unwrap = isinstance(error, BaseExceptionGroup) or (
        unwrap_hooks and isinstance(error, HookFailure)
    )
    leaf = single_leaf(error, unwrap_hooks=unwrap_hooks) if unwrap else error
    if leaf is None:
        raise error
    cause, context, suppress = leaf.__cause__, leaf.__context__, leaf.__suppress_context__
    try:
        raise leaf
    finally:
        leaf.__cause__, leaf.__context__ = cause, context
        leaf.__suppress_context__ = suppress
        del leaf


async def call_hook(hook: Callable[..., Any], *args: Any) -> Any:
    """Call ``hook(*args)``, a plain or an async function, and return its result.

    Every callback a user gives agentloop (hooks, queues, approvers,
    summarizers, ``on_event``, ``on_tools_changed``) may be either; this is the
    one place that tells them apart.
    """
    result = hook(*args)
    if inspect.isawaitable(result):
        result = await result
    return result


def claim_public_home(
    namespace: dict[str, Any], names: Iterable[str], home: str, *, from_: tuple[str, ...]
) -> None:
    """Give the classes and functions among ``names`` whose ``__module__`` starts with
    one of ``from_`` (private modules) the public module ``home`` as their
    ``__module__``, as trio and httpx do: tracebacks, ``repr`` and pickles then name
    ``agentloop.Agent``, where users import it from. Names not yet in ``namespace``
    (loaded lazily) are left to the lazy loader, which calls this again."""
    for name in names:
        value = namespace.get(name)
        if not isinstance(value, type | types.FunctionType):
            continue
        module = getattr(value, "__module__", None)
        if isinstance(module, str) and module.startswith(from_):
            _resolve_annotations(value)
            value.__module__ = home


def _resolve_annotations(value: type | types.FunctionType) -> None:
    """Evaluate ``value``'s string annotations in its own module, before it moves:
    ``typing.get_type_hints`` (cattrs, Temporal's converter) reads them in the
    module ``__module__`` names, where a private alias (``UserContent``) is not."""
    import typing

    owners = (
        [klass for klass in value.__mro__ if "__annotations__" in vars(klass)]
        if (isinstance(value, type))
        else [value]
    )
    for owner in owners:
        if owner.__module__ != value.__module__:
            continue  # a base from elsewhere keeps its own
        try:
            hints = typing.get_type_hints(
                owner, include_extras=True, localns=vars(owner) if isinstance(owner, type) else None
            )
        except Exception:  # a name only TYPE_CHECKING imports: left as written
            continue
        own = (
            vars(owner).get("__annotations__") if isinstance(owner, type) else owner.__annotations__
        )
        if own is None:
            continue
        for name in own:
            if name in hints:
                own[name] = hints[name]
