"""Tool dispatch: the registry, the one gate every call passes, and the strategies.

The gate, for each tool call, in this order::

    look up the tool -> parse the arguments -> validate them against the schema
    -> permissions -> before_tool_execution -> ToolExecutionStart -> execute in the call's own
    CancelScope (deadline = the timeout) -> ToolExecutionEnd -> after_tool_execution

A call that fails before the hook (unknown tool, bad arguments, refused by the
permissions) still gets a ToolExecutionStart and a ToolExecutionEnd carrying
the error. A call the hook
vetoes gets neither. Whatever happens, every call gets exactly one result.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import weakref
from collections.abc import Callable, Iterable, Mapping
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import attrs
import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import trio

from .._events import (
    ProgressMessage,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
)
from .._scrub import scrub_result
from .._text import scrub
from .._tool import (
    AgentTool,
    Batched,
    InvalidArgs,
    Parallel,
    Sequential,
    ToolCancelled,
    ToolContext,
    ToolError,
    ToolNotFound,
    ToolResult,
    ToolTimeout,
)
from .._types import (
    AssistantMessage,
    StopReason,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from .._util import HookFailure, single_leaf
from ..providers import ToolDefinition
from ._config import call_hook

if TYPE_CHECKING:
    from ._run import Run

__all__ = [
    "ABORTED_TEXT",
    "AfterHookCall",
    "ENDED_TEXT",
    "NOT_RUN_TEXT",
    "SKIPPED_TEXT",
    "VETOED_TEXT",
    "CallState",
    "ToolRegistry",
    "Turn",
    "close_unrun_calls",
    "execute_tool_calls",
]

log = logging.getLogger("agentloop")

SKIPPED_TEXT = "Skipped due to queued user message."
VETOED_TEXT = "Tool execution skipped by before_tool_execution hook."
ABORTED_TEXT = "Cancelled: the run was aborted."
ENDED_TEXT = "Cancelled: the run ended before this tool call finished."
NOT_RUN_TEXT = "Not executed: the model's reply ended with an error."
_QUOTE_LIMIT = 2000


# --------------------------------------------------------------------------- registry


@attrs.frozen
class _Entry:
    tool: AgentTool
    validator: Any
    timeout: float | None


# Compiling a schema (check_schema above all) takes about a millisecond. Validators are
# cached by the schema's canonical JSON, so fresh tool instances with the same schema
# (a new Agent per request, say) reuse them; a weak per-tool entry skips even the dumps.
_by_tool: weakref.WeakKeyDictionary[Any, tuple[Any, Any]] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=1024)
def _validator_for(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def _compile(tool: AgentTool) -> Any:
    schema = tool.parameters_schema
    try:
        cached = _by_tool.get(tool)
    except TypeError:  # not weak-referenceable
        cached = None
    if cached is not None and cached[0] is schema:
        return cached[1]
    if not isinstance(schema, Mapping):
        raise TypeError(f"tool {tool.name!r}: parameters_schema must be a dict, got {schema!r}")
    try:
        schema_json = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"tool {tool.name!r}: parameters_schema is not JSON: {error}") from error
    try:
        validator = _validator_for(schema_json)
    except jsonschema.exceptions.SchemaError as error:
        raise ValueError(
            f"tool {tool.name!r} has an invalid parameters_schema: {error.message}"
        ) from error
    try:
        _by_tool[tool] = (schema, validator)
    except TypeError:
        pass
    return validator


class ToolRegistry:
    """The tools of one run, by name, with their schemas compiled once.

    Raises:
        ValueError: two tools share a name, or a schema is not valid JSON Schema.
        TypeError: an object is not a tool.
    """

    def __init__(self, tools: Iterable[AgentTool]) -> None:
        self._entries: dict[str, _Entry] = {}
        for tool in tools:
            for attribute in ("name", "label", "description", "parameters_schema", "execute"):
                if not hasattr(tool, attribute):
                    raise TypeError(f"{tool!r} is not a tool: it has no {attribute!r}")
            if tool.name in self._entries:
                raise ValueError(f"two tools are named {tool.name!r}; tool names must be unique")
            timeout = getattr(tool, "timeout", None)
            if timeout is not None and (isinstance(timeout, bool) or not timeout > 0):
                raise ValueError(
                    f"tool {tool.name!r}: timeout must be > 0 or None, got {timeout!r}"
                )
            self._entries[tool.name] = _Entry(tool, _compile(tool), timeout)
        self.definitions = tuple(
            ToolDefinition(e.tool.name, e.tool.description, e.tool.parameters_schema)
            for e in self._entries.values()
        )

    def get(self, name: str) -> _Entry | None:
        return self._entries.get(name)


# --------------------------------------------------------------------------- state


@attrs.define(eq=False)
class CallState:
    """What happened so far to one tool call of the current turn."""

    call: ToolCall
    started: bool = False  # ToolExecutionStart sent
    ended: bool = False  # ToolExecutionEnd sent (or not due: vetoed)
    result: ToolResult | None = None
    is_error: bool = False
    appended: bool = False  # result message in the history
    after_hook_due: bool = False  # before_tool_execution allowed it; after hook not yet run


@attrs.frozen
class AfterHookCall:
    """An after_tool_execution call owed to a call that an interruption ended."""

    state: CallState

    async def run(self, run: Run) -> None:
        hook = run.config.after_tool_execution
        if hook is not None:
            await call_hook(hook, self.state.call.name, self.state.call.id, self.state.is_error)


@attrs.define(eq=False)
class Turn:
    """The turn in progress: from TurnStart until TurnEnd is sent."""

    index: int
    partial: Any = None  # the streaming accumulator, while the model streams
    assistant: AssistantMessage | None = None
    assistant_appended: bool = False
    calls: list[CallState] = attrs.field(factory=list)
    results: list[ToolResultMessage] = attrs.field(factory=list)


def _quote(text: str) -> str:
    if len(text) <= _QUOTE_LIMIT:
        return text
    return f"{text[:_QUOTE_LIMIT]}... ({len(text) - _QUOTE_LIMIT} more characters)"


def _json_error(text: str) -> str:
    try:
        value = json.loads(text)
    except ValueError as error:
        return f"not valid JSON ({error})"
    kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )
    return f"not a JSON object (got {kind})"


def check_arguments(call: ToolCall, validator: Any, *, cut_off: bool = False) -> InvalidArgs | None:
    """The arguments' problems as one InvalidArgs, or None if they are valid.

    ``cut_off``: the reply stopped at its max_tokens limit, so unusable arguments
    were most likely cut short, and the model is told so.
    """
    if call.raw_arguments is not None and cut_off:
        return InvalidArgs(
            "the reply reached its max_tokens limit before this tool call's arguments were "
            f"complete, so it was not run. Received: {_quote(call.raw_arguments)}"
        )
    if call.raw_arguments is not None:
        return InvalidArgs(
            f"the arguments are {_json_error(call.raw_arguments)}. "
            f"Received: {_quote(call.raw_arguments)}"
        )
    errors = list(validator.iter_errors(call.arguments))
    if not errors:
        return None
    errors.sort(key=lambda error: (tuple(str(part) for part in error.absolute_path), error.message))
    return InvalidArgs("; ".join(f"{error.json_path}: {error.message}" for error in errors))


def describe_exception(error: BaseException) -> str:
    """The text an error result shows for an exception a tool raised."""
    if isinstance(error, ToolError):
        return str(error)
    if isinstance(error, BaseExceptionGroup):
        leaf = single_leaf(error)
        if leaf is not None:
            return describe_exception(leaf)
    message = str(error)
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


# --------------------------------------------------------------------------- the gate


async def _end(run: Run, state: CallState, result: ToolResult, is_error: bool) -> None:
    result = scrub_result(result)  # tools may return text that cannot be encoded
    state.result, state.is_error = result, is_error
    await run.emit(
        ToolExecutionEnd(
            loop_id=run.loop_id,
            tool_call_id=state.call.id,
            tool_name=state.call.name,
            result=result,
            is_error=is_error,
            child_loop_id=result.child_loop_id,
        )
    )
    state.ended = True


async def _start(run: Run, state: CallState) -> None:
    call = state.call
    await run.emit(
        ToolExecutionStart(
            loop_id=run.loop_id, tool_call_id=call.id, tool_name=call.name, args=call.arguments
        )
    )
    state.started = True


async def _preflight(run: Run, state: CallState) -> _Entry | None:
    """Steps up to ToolExecutionStart. Returns the entry to execute, or None."""
    call = state.call
    entry = run.registry.get(call.name)
    assistant = run.turn.assistant if run.turn is not None else None
    cut_off = assistant is not None and assistant.stop_reason is StopReason.LENGTH
    problem: ToolError | None = (
        ToolNotFound(call.name)
        if entry is None
        else check_arguments(call, entry.validator, cut_off=cut_off)
    )
    if problem is not None or entry is None:
        await _start(run, state)
        await _end(run, state, ToolResult.text(str(problem)), True)
        return None
    permissions = run.config.permissions
    if permissions is not None:
        denial = await permissions.check(entry.tool, call.name, call.id, deepcopy(call.arguments))
        if denial is not None:
            await _start(run, state)
            await _end(run, state, ToolResult.text(f"Permission denied: {denial}"), True)
            return None
    hook = run.config.before_tool_execution
    # Hooks and tools get copies: the arguments also live in the history and in events.
    if (
        hook is not None
        and await call_hook(hook, call.name, call.id, deepcopy(call.arguments)) is False
    ):
        state.result, state.is_error, state.ended = ToolResult.text(VETOED_TEXT), True, True
        return None
    state.after_hook_due = run.config.after_tool_execution is not None
    await _start(run, state)
    return entry


async def _execute(run: Run, state: CallState, entry: _Entry) -> None:
    call = state.call
    config = run.config
    timeout = entry.timeout if entry.timeout is not None else config.tool_timeout
    deadline = math.inf if timeout is None else trio.current_time() + timeout
    scope = trio.CancelScope(deadline=deadline)

    async def on_update(partial: ToolResult) -> None:
        if not isinstance(partial, ToolResult):
            raise TypeError(f"on_update takes a ToolResult, got {type(partial).__name__}")
        partial = scrub_result(partial)
        text = partial.text_content
        before = config.before_tool_execution_update
        if before is not None:
            try:
                allowed = await call_hook(before, call.name, call.id, text)
            except Exception as error:
                raise HookFailure(error) from error
            if allowed is False:
                await trio.lowlevel.checkpoint()
                return
        await run.emit(
            ToolExecutionUpdate(
                loop_id=run.loop_id,
                tool_call_id=call.id,
                tool_name=call.name,
                partial_result=partial,
            )
        )
        after = config.after_tool_execution_update
        if after is not None:
            try:
                await call_hook(after, call.name, call.id, text)
            except Exception as error:
                raise HookFailure(error) from error

    async def on_progress(text: str) -> None:
        await run.emit(
            ProgressMessage(
                loop_id=run.loop_id,
                tool_call_id=call.id,
                tool_name=call.name,
                text=scrub(str(text)),
            )
        )

    ctx = ToolContext(call.id, call.name, scope, on_update, on_progress, run.loop_id)
    result: ToolResult | None = None
    error: BaseException | None = None
    try:
        with scope:
            result = await entry.tool.execute(deepcopy(call.arguments), ctx)
    except* Exception as group:
        error = single_leaf(group) or group
    if scope.cancel_called and (scope.cancelled_caught or error is not None):
        if timeout is not None and trio.current_time() >= deadline:
            error = ToolTimeout(timeout)
        elif scope.cancelled_caught:
            error = ToolCancelled()
    if error is None and not isinstance(result, ToolResult):
        error = ToolError(
            f"Tool {call.name!r} returned {type(result).__name__}, expected a ToolResult"
        )
    if error is not None:
        if isinstance(error, ToolError):
            failure = ToolResult(
                (TextContent(str(error)),),
                details=error.details,
                child_loop_id=error.child_loop_id,
            )
        else:
            log.debug("tool %r raised", call.name, exc_info=error)
            failure = ToolResult.text(describe_exception(error))
        await _end(run, state, failure, True)
    else:
        assert isinstance(result, ToolResult)
        await _end(run, state, result, False)
    if state.after_hook_due:
        state.after_hook_due = False
        await AfterHookCall(state).run(run)


async def _skip(run: Run, state: CallState, text: str = SKIPPED_TEXT) -> None:
    await _start(run, state)
    await _end(run, state, ToolResult.text(text), True)


async def close_unrun_calls(run: Run, turn: Turn, text: str) -> None:
    """Answer calls that will never run (their message failed): start, end, result."""
    for state in turn.calls:
        await _skip(run, state, text)
    await _append_results(run, turn.calls)


def result_message(run: Run, state: CallState) -> ToolResultMessage:
    """Append the call's result to the history (sync) and return the message."""
    assert state.result is not None
    message = ToolResultMessage(
        state.call.id,
        state.call.name,
        state.result.content,
        is_error=state.is_error,
        timestamp=run.context.next_timestamp(),
        child_loop_id=state.result.child_loop_id,
    )
    run.add_message(message)
    assert run.turn is not None
    run.turn.results.append(message)
    state.appended = True
    return message


async def _append_results(run: Run, states: Iterable[CallState]) -> None:
    for state in states:
        await run.announce(result_message(run, state))


async def _run_unit(run: Run, unit: list[CallState]) -> None:
    """Preflight a unit's calls in order, run them together, record results in order."""
    runnable: list[tuple[CallState, _Entry]] = []
    for state in unit:
        entry = await _preflight(run, state)
        if entry is not None:
            runnable.append((state, entry))
    if len(runnable) == 1:
        await _execute(run, *runnable[0])
    elif runnable:
        async with trio.open_nursery() as nursery:
            for state, entry in runnable:
                nursery.start_soon(_execute, run, state, entry)
    await _append_results(run, unit)


def _units(
    states: list[CallState], strategy: Sequential | Parallel | Batched
) -> list[list[CallState]]:
    if isinstance(strategy, Sequential):
        return [[state] for state in states]
    if isinstance(strategy, Batched):
        return [states[i : i + strategy.size] for i in range(0, len(states), strategy.size)]
    return [states]


async def execute_tool_calls(
    run: Run, turn: Turn, poll_steering: Callable[[], Any]
) -> list[UserMessage]:
    """Run the turn's tool calls by the strategy. Returns steering messages polled meanwhile."""
    units = _units(turn.calls, run.config.strategy)
    for position, unit in enumerate(units):
        await _run_unit(run, unit)
        steering: list[UserMessage] = await poll_steering()
        if steering:
            skipped = [state for rest in units[position + 1 :] for state in rest]
            for state in skipped:
                await _skip(run, state)
            await _append_results(run, skipped)
            return steering
    return []
