"""Hypothesis strategies for every public value: content, messages, events, deltas...

Import from the tests directory (pytest puts it on ``sys.path``)::

    from strategies import STRATEGIES, events, messages

``STRATEGIES`` maps each serializable public type to a strategy for its values;
``STRATEGIES[AgentEvent]`` draws any event. Strings may be any Unicode text
except lone surrogates; floats are finite (NaN is not equal to itself).
"""

from __future__ import annotations

import base64
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

import agentloop as al
from agentloop._loop import RunCounts

_MAX_ITEMS = 4

texts = st.text(max_size=40)
optional_texts = st.none() | texts
ids = st.text(max_size=12)
counts = st.integers(min_value=0, max_value=2**53)
timestamps = st.integers(min_value=0, max_value=2**53)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)


def json_values(max_leaves: int = 12) -> SearchStrategy[Any]:
    """Any JSON value: None, bools, ints, finite floats, text, lists, objects (str keys)."""
    scalars = st.none() | st.booleans() | st.integers() | finite_floats | texts
    return st.recursive(
        scalars,
        lambda children: (
            st.lists(children, max_size=_MAX_ITEMS)
            | st.dictionaries(texts, children, max_size=_MAX_ITEMS)
        ),
        max_leaves=max_leaves,
    )


def json_objects() -> SearchStrategy[dict[str, Any]]:
    """A JSON object, as tool-call arguments are."""
    return st.dictionaries(texts, json_values(), max_size=_MAX_ITEMS)


# --------------------------------------------------------------------------- content

text_contents = st.builds(al.TextContent, text=texts)
image_contents = st.builds(
    al.ImageContent,
    data=st.binary(max_size=48).map(lambda raw: base64.b64encode(raw).decode("ascii")),
    mime_type=st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
)
thinking_contents = st.builds(
    al.ThinkingContent, thinking=texts, signature=optional_texts, redacted=st.booleans()
)
tool_calls = st.builds(
    al.ToolCall, id=ids, name=ids, arguments=json_objects(), raw_arguments=optional_texts
)


def content_blocks() -> SearchStrategy[al.Content]:
    """Any content block: text, image, thinking or a tool call."""
    return text_contents | image_contents | thinking_contents | tool_calls


_user_content = st.lists(text_contents | image_contents, max_size=_MAX_ITEMS).map(tuple)
_assistant_content = st.lists(
    text_contents | thinking_contents | tool_calls, max_size=_MAX_ITEMS
).map(tuple)


# --------------------------------------------------------------------------- values


def usages() -> SearchStrategy[al.Usage]:
    """Token counts and a finite cost."""
    return st.builds(
        al.Usage,
        input=counts,
        output=counts,
        cache_read=counts,
        cache_write=counts,
        total_tokens=counts,
        reasoning=counts,
        cost=finite_floats,
    )


stop_reasons = st.sampled_from(al.StopReason)
tool_outcomes = st.sampled_from(al.ToolOutcome)


def tool_results() -> SearchStrategy[al.ToolResult]:
    """A tool's result: text and image content, JSON ``details``, maybe a child loop."""
    return st.builds(
        al.ToolResult, content=_user_content, details=json_values(), child_loop_id=optional_texts
    )


prun_records = st.builds(
    al.PrunRecord,
    pruned_timestamps=st.lists(timestamps, max_size=_MAX_ITEMS).map(tuple),
    tokens_removed=counts,
    memo=optional_texts,
)

compaction_records = st.builds(
    al.CompactionRecord,
    truncated_timestamps=st.lists(timestamps, max_size=_MAX_ITEMS).map(tuple),
    tool_output_max_lines=st.integers(min_value=3, max_value=10_000),
    tool_output_max_chars=st.integers(min_value=200, max_value=10**6),
    removed_timestamps=st.lists(timestamps, max_size=_MAX_ITEMS).map(tuple),
    note=optional_texts,
)
prun_requests = st.builds(
    al.PrunRequest,
    tokens=st.integers(min_value=1, max_value=10**9),
    memo=optional_texts,
    tool_call_id=optional_texts,
)

_optional_positive_ints = st.none() | st.integers(min_value=1)
_optional_positive_floats = st.none() | st.floats(
    min_value=0, exclude_min=True, allow_infinity=False
)
execution_limits = st.builds(
    al.ExecutionLimits,
    max_turns=_optional_positive_ints,
    max_total_tokens=_optional_positive_ints,
    max_duration=_optional_positive_floats,
    max_cost=_optional_positive_floats,
)


# --------------------------------------------------------------------------- messages


def user_messages() -> SearchStrategy[al.UserMessage]:
    """A user message with text and image blocks."""
    return st.builds(al.UserMessage, content=_user_content, timestamp=timestamps)


def assistant_messages() -> SearchStrategy[al.AssistantMessage]:
    """An assistant message with text, thinking and tool-call blocks."""
    return st.builds(
        al.AssistantMessage,
        content=_assistant_content,
        stop_reason=stop_reasons,
        model=texts,
        provider=texts,
        usage=usages(),
        timestamp=timestamps,
        error_message=optional_texts,
    )


def tool_result_messages() -> SearchStrategy[al.ToolResultMessage]:
    """The answer to one tool call (``is_error`` as its outcome says)."""
    return tool_outcomes.flatmap(
        lambda outcome: st.builds(
            al.ToolResultMessage,
            tool_call_id=ids,
            tool_name=ids,
            content=_user_content,
            is_error=st.just(outcome.is_error),
            timestamp=timestamps,
            child_loop_id=optional_texts,
            outcome=st.just(outcome),
        )
    )


def messages() -> SearchStrategy[al.Message]:
    """Any message: user, assistant or tool result."""
    return user_messages() | assistant_messages() | tool_result_messages()


# --------------------------------------------------------------------------- deltas

text_deltas = st.builds(al.TextDelta, delta=texts, index=counts)
thinking_deltas = st.builds(al.ThinkingDelta, delta=texts, index=counts)
tool_call_deltas = st.builds(
    al.ToolCallDelta, delta=texts, index=counts, tool_call_id=ids, name=ids
)


stream_restarts = st.builds(
    al.StreamRestart,
    attempt=st.integers(min_value=2, max_value=10),
    delay=st.floats(min_value=0, max_value=60, allow_nan=False),
    error=texts,
    index=counts,
)


def stream_deltas() -> SearchStrategy[al.StreamDelta]:
    """Any stream delta: text, thinking, a tool call's arguments, or a restart."""
    return text_deltas | thinking_deltas | tool_call_deltas | stream_restarts


# --------------------------------------------------------------------------- events


def inrun_entries() -> SearchStrategy[al.InrunEntry]:
    """An in-run entry: a message, its state, maybe a shortened form and a note."""
    return st.builds(
        al.InrunEntry,
        message=messages(),
        state=st.sampled_from(al.EntryState),
        shown=st.none() | messages(),
        note=optional_texts,
        span=counts,
    )


_loop = {"loop_id": ids}

# --------------------------------------------------------------------------- approvals

_subjects = st.none() | st.tuples(st.sampled_from(["command", "path"]), texts)
approves = st.builds(al.Approve, tool_call_id=ids, arguments=st.none() | json_objects())
denies = st.builds(al.Deny, tool_call_id=ids, reason=optional_texts)
pending_calls = st.builds(
    al.PendingCall,
    tool_call_id=ids,
    tool_name=ids,
    arguments=json_objects(),
    reason=texts,
    rule=optional_texts,
    subject=_subjects,
)
suspendeds = st.builds(
    al.Suspended,
    pending=st.lists(pending_calls, min_size=1, max_size=3).map(tuple),
    results=st.lists(tool_result_messages(), max_size=3).map(tuple),
    turn_index=counts,
    turns_done=counts,
    requests=counts,
    tokens_used=counts,
    cost=finite_floats,
    elapsed=finite_floats,
    turn_elapsed=finite_floats,
    queued=st.lists(user_messages(), max_size=2).map(tuple),
)

agent_stops = st.builds(
    al.AgentStop,
    st.sampled_from(al.StopKind),
    st.text(max_size=30),
    error=st.none() | st.text(max_size=30),
)

agent_events: dict[type[al.AgentEvent], SearchStrategy[Any]] = {
    al.AgentStart: st.builds(
        al.AgentStart, **_loop, parent_loop_id=optional_texts, timestamp=timestamps
    ),
    al.AgentEnd: st.builds(
        al.AgentEnd,
        **_loop,
        messages=st.lists(messages(), max_size=3).map(tuple),
        usage=usages(),
        timestamp=timestamps,
        stop_reason=agent_stops,
        output=st.none() | json_objects(),
        suspended=st.none() | suspendeds,
    ),
    al.TurnStart: st.builds(al.TurnStart, **_loop, turn_index=counts, timestamp=timestamps),
    al.TurnEnd: st.builds(
        al.TurnEnd,
        **_loop,
        turn_index=counts,
        message=assistant_messages(),
        tool_results=st.lists(tool_result_messages(), max_size=3).map(tuple),
        usage=usages(),
        timestamp=timestamps,
    ),
    al.MessageStart: st.builds(al.MessageStart, **_loop, message=messages()),
    al.MessageUpdate: st.builds(
        al.MessageUpdate, **_loop, message=assistant_messages(), delta=stream_deltas()
    ),
    al.MessageEnd: st.builds(al.MessageEnd, **_loop, message=messages()),
    al.OutputUpdate: st.builds(al.OutputUpdate, **_loop, partial=st.none() | json_objects()),
    al.ToolExecutionStart: st.builds(
        al.ToolExecutionStart, **_loop, tool_call_id=ids, tool_name=ids, args=json_objects()
    ),
    al.ToolApprovalRequested: st.builds(
        al.ToolApprovalRequested,
        **_loop,
        tool_call_id=ids,
        tool_name=ids,
        args=json_objects(),
        reason=texts,
        rule=optional_texts,
        deferred=st.booleans(),
        subject=st.none() | st.tuples(ids, texts),
    ),
    al.ToolApprovalDecided: st.builds(
        al.ToolApprovalDecided,
        **_loop,
        tool_call_id=ids,
        tool_name=ids,
        approved=st.booleans(),
        arguments=json_objects(),
        reason=optional_texts,
        by=st.sampled_from(["approver", "decision"]),
    ),
    al.ToolExecutionUpdate: st.builds(
        al.ToolExecutionUpdate,
        **_loop,
        tool_call_id=ids,
        tool_name=ids,
        partial_result=tool_results(),
    ),
    al.ToolExecutionEnd: tool_outcomes.flatmap(
        lambda outcome: st.builds(
            al.ToolExecutionEnd,
            **_loop,
            tool_call_id=ids,
            tool_name=ids,
            result=tool_results(),
            is_error=st.just(outcome.is_error),
            child_loop_id=optional_texts,
            outcome=st.just(outcome),
        )
    ),
    al.ToolCallQueued: st.builds(
        al.ToolCallQueued, **_loop, tool_call_id=ids, tool_name=ids, reason=texts
    ),
    al.ToolCallDequeued: st.builds(
        al.ToolCallDequeued,
        **_loop,
        tool_call_id=ids,
        tool_name=ids,
        waited=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    ),
    al.ProgressMessage: st.builds(
        al.ProgressMessage, **_loop, tool_call_id=ids, tool_name=ids, text=texts
    ),
    al.CompactionStarted: st.builds(
        al.CompactionStarted,
        **_loop,
        estimated_tokens=counts,
        message_count=counts,
        context_window=counts,
        timestamp=timestamps,
    ),
    al.CompactionEnded: st.builds(
        al.CompactionEnded,
        **_loop,
        record=compaction_records,
        messages_before=counts,
        messages_after=counts,
        estimated_tokens_before=counts,
        estimated_tokens_after=counts,
        summary_error=optional_texts,
        timestamp=timestamps,
    ),
    al.PrunApplied: st.builds(
        al.PrunApplied,
        **_loop,
        record=prun_records,
        messages_removed=counts,
        timestamp=timestamps,
    ),
}
"""One strategy per concrete event class."""


def events() -> SearchStrategy[al.AgentEvent]:
    """Any event (the bare ``AgentEvent`` base included)."""
    return st.one_of(st.builds(al.AgentEvent, **_loop), *agent_events.values())


# --------------------------------------------------------------------------- permissions

permission_rules = st.builds(
    al.PermissionRule,
    action=st.sampled_from(["allow", "ask", "deny"]),
    tool=ids,
    argument=optional_texts,
)
permission_requests = st.builds(
    al.PermissionRequest,
    tool_name=ids,
    tool_call_id=ids,
    arguments=st.dictionaries(st.text(max_size=8), json_values(), max_size=3),
    subject=_subjects,
    rule=st.none() | permission_rules,
    sandboxed=st.booleans(),
    reason=texts,
)


# --------------------------------------------------------------------------- the loop's own


def run_counts() -> SearchStrategy[RunCounts]:
    """What a run has counted (a private value: a Temporal run carries it as JSON)."""
    return st.builds(
        RunCounts,
        turn_index=counts,
        turns_done=counts,
        usage=usages(),
        tokens_used=counts,
        started_at=finite_floats,
        requests=counts,
        usage_by_model=st.dictionaries(ids, usages(), max_size=3),
    )


# --------------------------------------------------------------------------- the mapping

STRATEGIES: dict[type, SearchStrategy[Any]] = {
    al.TextContent: text_contents,
    al.ImageContent: image_contents,
    al.ThinkingContent: thinking_contents,
    al.ToolCall: tool_calls,
    al.UserMessage: user_messages(),
    al.AssistantMessage: assistant_messages(),
    al.ToolResultMessage: tool_result_messages(),
    al.Usage: usages(),
    al.StopReason: stop_reasons,
    al.StopKind: st.sampled_from(al.StopKind),
    al.ToolOutcome: tool_outcomes,
    al.AgentStop: agent_stops,
    al.ToolResult: tool_results(),
    al.PrunRecord: prun_records,
    al.PrunRequest: prun_requests,
    al.CompactionRecord: compaction_records,
    al.InrunEntry: inrun_entries(),
    al.TextDelta: text_deltas,
    al.ThinkingDelta: thinking_deltas,
    al.ToolCallDelta: tool_call_deltas,
    al.StreamRestart: stream_restarts,
    al.ExecutionLimits: execution_limits,
    al.Claim: st.builds(
        al.Claim,
        exclusive=st.booleans(),
        reads=st.frozensets(texts, max_size=3),
        writes=st.frozensets(texts, max_size=3),
        budget=st.booleans(),
    ),
    al.Schedule: st.builds(
        al.Schedule,
        max_concurrent=st.none() | st.integers(min_value=1, max_value=1000),
        per_tool=st.dictionaries(ids, st.integers(min_value=1, max_value=100), max_size=3),
        run_timeout=st.none() | st.floats(min_value=0.001, max_value=1e6),
        turn_timeout=st.none() | st.floats(min_value=0.001, max_value=1e6),
    ),
    al.Sequential: st.builds(al.Sequential),
    al.Parallel: st.builds(al.Parallel),
    al.Batched: st.builds(al.Batched, size=st.integers(min_value=1, max_value=64)),
    al.PermissionRule: permission_rules,
    al.PermissionRequest: permission_requests,
    al.Approve: approves,
    al.Deny: denies,
    al.PendingCall: pending_calls,
    al.Suspended: suspendeds,
    al.AgentEvent: events(),
    **agent_events,
}
"""Every serializable public type, mapped to a strategy for its values."""
