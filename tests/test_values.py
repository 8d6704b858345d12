"""Values, errors, contexts and the public surface."""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import pytest

import agentloop as al
from agentloop import testing
from agentloop._context import AgentContext, MessageView

EXPECTED_ALL = [
    "AfterCompactionHook",
    "AfterLoopHook",
    "AfterToolHook",
    "AfterTurnHook",
    "AfterUpdateHook",
    "Agent",
    "AgentContext",
    "AgentEnd",
    "AgentEvent",
    "AgentLoopConfig",
    "AgentStart",
    "AgentStop",
    "AgentTool",
    "AgentloopError",
    "ApprovalError",
    "Approve",
    "Approver",
    "AssistantMessage",
    "Batched",
    "BeforeCompactionHook",
    "BeforeLoopHook",
    "BeforeToolHook",
    "BeforeTurnHook",
    "BeforeUpdateHook",
    "Claim",
    "CompactionConfig",
    "CompactionEnded",
    "CompactionRecord",
    "CompactionStarted",
    "Content",
    "DEFER",
    "Decision",
    "Deferred",
    "Deny",
    "EntryState",
    "EventReceiver",
    "ExecutionLimits",
    "ExecutionStrategy",
    "FunctionTool",
    "Hooks",
    "ImageContent",
    "InrunEntry",
    "InvalidArgs",
    "LLMSummarizer",
    "Message",
    "MessageEnd",
    "MessageSource",
    "MessageStart",
    "MessageUpdate",
    "MessageView",
    "OnErrorHook",
    "Output",
    "OutputError",
    "OutputUpdate",
    "Parallel",
    "PendingCall",
    "PermissionRequest",
    "PermissionRule",
    "Permissions",
    "ProgressCallback",
    "ProgressMessage",
    "ProjectInstructions",
    "PrunApplied",
    "PrunQueue",
    "PrunRecord",
    "PrunRequest",
    "QueueMode",
    "Schedule",
    "Sequential",
    "StopKind",
    "StopReason",
    "StreamDelta",
    "StreamRestart",
    "Summarizer",
    "Suspended",
    "TextContent",
    "TextDelta",
    "ThinkingContent",
    "ThinkingDelta",
    "ThinkingLevel",
    "TokenEstimator",
    "ToolApprovalDecided",
    "ToolApprovalRequested",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallDequeued",
    "ToolCallQueued",
    "ToolCancelled",
    "ToolContext",
    "ToolError",
    "ToolExecutionEnd",
    "ToolExecutionStart",
    "ToolExecutionUpdate",
    "ToolNotFound",
    "ToolOutcome",
    "ToolResult",
    "ToolResultMessage",
    "ToolTimeout",
    "TrioRequiredError",
    "TurnEnd",
    "TurnStart",
    "UpdateCallback",
    "Usage",
    "UserMessage",
    "__version__",
    "agent_loop",
    "agent_loop_continue",
    "estimate_text_tokens",
    "estimate_tokens",
    "project_instructions",
    "summarize_exchanges",
    "tool",
]


def test_public_names_are_pinned() -> None:
    """agentloop.__all__ is exactly the contract, sorted, and every name exists."""
    assert al.__all__ == EXPECTED_ALL
    assert sorted(al.__all__) == al.__all__
    for name in al.__all__:
        assert hasattr(al, name), name


@pytest.mark.parametrize("module", [al, al.providers, testing], ids=lambda m: m.__name__)
def test_public_classes_and_functions_are_documented(module: Any) -> None:
    """Every public class and function has a docstring."""
    for name in module.__all__:
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{module.__name__}.{name} has no docstring"


def test_values_are_frozen() -> None:
    """Messages and events cannot be changed after construction."""
    message = al.UserMessage.text("hi")
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        message.timestamp = 1  # type: ignore[misc]


def test_sequences_become_tuples() -> None:
    """Lists given as content are stored as tuples."""
    message = al.UserMessage([al.TextContent("a")], timestamp=1)
    assert message.content == (al.TextContent("a"),)
    assert al.ToolResult([al.TextContent("b")]).content == (al.TextContent("b"),)


def test_usage_adds_up() -> None:
    """Usage values add field by field."""
    a = al.Usage(
        input=1, output=2, cache_read=3, cache_write=4, total_tokens=5, reasoning=6, cost=0.5
    )
    assert a + a == al.Usage(
        input=2, output=4, cache_read=6, cache_write=8, total_tokens=10, reasoning=12, cost=1.0
    )


def test_assistant_message_helpers() -> None:
    """tool_calls and text read the content blocks."""
    message = al.AssistantMessage(
        (
            al.TextContent("a"),
            al.ToolCall("1", "t", {}),
            al.ThinkingContent("x"),
            al.TextContent("b"),
        ),
        al.StopReason.TOOL_USE,
    )
    assert message.tool_calls == (al.ToolCall("1", "t", {}),)
    assert message.text == "ab"


def test_image_repr_hides_the_data() -> None:
    """An image's repr gives its size, not its bytes."""
    assert repr(al.ImageContent("QUJD" * 100, "image/png")) == (
        "ImageContent(mime_type='image/png', data=<400 base64 chars>)"
    )


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (al.ToolError("x"), "x"),
        (al.InvalidArgs("bad"), "Invalid arguments: bad"),
        (al.ToolNotFound("t"), "Tool not found: t"),
        (al.ToolCancelled(), "Cancelled"),
        (al.ToolCancelled("user stopped"), "Cancelled: user stopped"),
        (al.ToolTimeout(0.05), "Tool exceeded timeout of 50ms"),
        (al.ToolTimeout(1.5), "Tool exceeded timeout of 1.5s"),
        (al.ToolTimeout(120), "Tool exceeded timeout of 120s"),
        (al.ToolTimeout(0.0125), "Tool exceeded timeout of 12.5ms"),
    ],
)
def test_error_texts(error: al.ToolError, text: str) -> None:
    """Each error shows the text the model will see."""
    assert str(error) == text
    assert isinstance(error, al.ToolError)


def test_context_timestamps_strictly_increase_within_one_millisecond(monkeypatch: Any) -> None:
    """Messages stamped in the same millisecond still get increasing timestamps."""
    monkeypatch.setattr("agentloop._context._streams.now_ms", lambda: 1000)
    context = AgentContext()
    stamped = [context.stamp(al.UserMessage(("x",), timestamp=1000)) for _ in range(3)]  # type: ignore[arg-type]
    assert [m.timestamp for m in stamped] == [1000, 1001, 1002]
    assert context.next_timestamp() == 1003


def test_context_continues_after_existing_history() -> None:
    """A context built from a history stamps after its last message."""
    context = AgentContext(messages=[al.UserMessage.text("a")])
    last = context.messages[-1].timestamp
    assert context.stamp(al.UserMessage((), timestamp=5)).timestamp > last


def test_message_view_is_a_stable_snapshot() -> None:
    """A view keeps its length as the history grows, and compares as a sequence."""
    first, second = al.UserMessage.text("a"), al.UserMessage.text("b")
    history: list[al.Message] = [first]
    view = MessageView(history)
    history.append(second)
    assert len(view) == 1
    assert list(view) == [first]
    assert view == (first,)
    assert view[-1] is first
    assert view[0:5] == (first,)
    with pytest.raises(IndexError):
        view[1]


def test_open_tool_calls() -> None:
    """open_tool_calls lists the last assistant message's unanswered calls."""
    calls = (al.ToolCall("1", "a", {}), al.ToolCall("2", "b", {}))
    context = AgentContext(
        messages=[
            al.UserMessage.text("q"),
            al.AssistantMessage(calls, al.StopReason.TOOL_USE),
            al.ToolResultMessage("1", "a", (al.TextContent("ok"),)),
        ]
    )
    assert context.open_tool_calls() == [calls[1]]


def test_assert_well_formed_reports_orphans() -> None:
    """The testing helper names an unanswered call."""
    history = [
        al.UserMessage.text("q"),
        al.AssistantMessage((al.ToolCall("c1", "a", {}),), al.StopReason.TOOL_USE),
        al.UserMessage.text("next"),
    ]
    with pytest.raises(
        AssertionError, match=r"^message 2: user message while tool calls \['c1'\] have no result$"
    ):
        testing.assert_well_formed(history)


def test_user_message_text_builds_on_the_class_and_reads_on_an_instance() -> None:
    """UserMessage.text(s) builds a message; message.text reads it, like the other messages."""
    message = al.UserMessage(
        (al.TextContent("a"), al.ImageContent("QQ==", "image/png"), al.TextContent("b"))
    )
    assert message.text == "a\nb"
    built = al.UserMessage.text("hello")
    assert (built.content, built.text) == ((al.TextContent("hello"),), "hello")
