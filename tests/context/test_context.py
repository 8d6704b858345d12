"""AgentContext: the log, the two streams, the working context, token estimates, prun, replay."""

from __future__ import annotations

import pytest
from helpers import texts

import agentloop as al
from agentloop import EntryState, PrunRequest

T0 = 1_700_000_000_000


def user(text: str, at: int) -> al.UserMessage:
    return al.UserMessage((al.TextContent(text),), timestamp=T0 + at)


def assistant(text: str, *call_ids: str, at: int, name: str = "look") -> al.AssistantMessage:
    calls = tuple(al.ToolCall(call_id, name, {"what": call_id}) for call_id in call_ids)
    return al.AssistantMessage(
        (al.TextContent(text), *calls),
        al.StopReason.TOOL_USE if calls else al.StopReason.STOP,
        timestamp=T0 + at,
    )


def result(call_id: str, text: str, at: int, name: str = "look") -> al.ToolResultMessage:
    return al.ToolResultMessage(call_id, name, (al.TextContent(text),), timestamp=T0 + at)


def history() -> list[al.Message]:
    """A prompt, three one-call exchanges, a steering message, a two-call exchange, an answer."""
    return [
        user("explore", 0),
        assistant("First.", "c1", at=1),
        result("c1", "one " * 40, 2),
        assistant("Second.", "c2", at=3),
        result("c2", "two " * 40, 4),
        user("also check b", 5),
        assistant("Third.", "c3", "c4", at=6),
        result("c3", "three " * 40, 7),
        result("c4", "four " * 40, 8),
        assistant("Done.", at=9),
    ]


def shown(context: al.AgentContext) -> list[tuple[str, str]]:
    """The working context, compactly: texts cut to 20 characters."""
    return [(kind, text[:20]) for kind, text in texts(context.working_context())]


# --------------------------------------------------------------------------- tokens


@pytest.mark.parametrize(
    ("message", "tokens"),
    [
        (al.UserMessage((al.TextContent("abcd" * 10),), timestamp=1), 10 + 4),
        (al.UserMessage((al.TextContent("abcde"),), timestamp=1), 2 + 4),  # rounded up
        (al.UserMessage((al.TextContent("é" * 6),), timestamp=1), 3 + 4),  # 12 UTF-8 bytes
        (al.UserMessage((al.ImageContent("A" * 4000, "image/png"),), timestamp=1), 85 + 4),
        (al.UserMessage((al.ImageContent("A" * 2_000_000, "image/png"),), timestamp=1), 2000 + 4),
        (al.UserMessage((al.ImageContent("A" * 20_000_000, "image/png"),), timestamp=1), 16000 + 4),
        (
            al.AssistantMessage(
                (al.ThinkingContent("hmm " * 4), al.ToolCall("c", "ls", {"path": "."})),
                al.StopReason.TOOL_USE,
                timestamp=1,
            ),
            4 + (1 + 3 + 8) + 4,  # thinking; name 'ls'; '{"path":"."}' (12 bytes)
        ),
        (
            al.ToolResultMessage("c", "read_file", (al.TextContent("x" * 8),), timestamp=1),
            2 + 3 + 8,
        ),
    ],
)
def test_default_token_estimates(message: al.Message, tokens: int) -> None:
    """UTF-8 bytes / 4 rounded up; images by size, clamped to 85..16000; framing per message."""
    assert al.estimate_tokens(message) == tokens


# --------------------------------------------------------------------------- streams


def test_a_history_seeds_both_streams_live() -> None:
    """User messages form the user context; the rest are live in-run entries; working = log."""
    log = history()
    context = al.AgentContext("sys", log)
    assert context.user_context == (log[0], log[5])
    assert [entry.message for entry in context.inrun_context] == [
        m for m in log if not isinstance(m, al.UserMessage)
    ]
    assert {entry.state for entry in context.inrun_context} == {EntryState.LIVE}
    assert context.working_context() == log


def test_appends_reach_the_working_context_and_old_views_stay() -> None:
    """append() extends the working context; a view taken earlier is a snapshot."""
    context = al.AgentContext(messages=history()[:3])
    before = context.working_context()
    context.append(assistant("more", at=20))
    assert len(before) == 3
    assert len(context.working_context()) == 4
    assert context.working_context()[-1].text == "more"


def test_direct_edits_of_messages_are_picked_up() -> None:
    """Appending to ``messages`` directly, or assigning it, keeps the streams in step."""
    context = al.AgentContext(messages=history()[:3])
    context.messages.append(user("typed in", 30))
    assert context.user_context[-1].text == "typed in"
    assert context.working_context()[-1].text == "typed in"
    context.messages = history()[:1]
    assert context.working_context() == history()[:1]
    context.reset()
    assert (context.messages, context.user_context, context.inrun_context) == ([], (), ())


def test_replace_changes_log_and_working_context() -> None:
    """replace() swaps one message in the log and the streams; other messages stay."""
    log = history()
    context = al.AgentContext(messages=log)
    new = assistant("Done, really.", at=9)
    context.replace(log[-1], new)
    assert context.messages[-1] is new
    assert context.working_context()[-1] is new
    with pytest.raises(ValueError, match=r"^replace\(\): the message is not in the log$"):
        context.replace(log[-1], new)


# --------------------------------------------------------------------------- prun


def test_prun_removes_whole_exchanges_from_the_end() -> None:
    """The newest exchanges go first, whole, until enough tokens are freed; users stay."""
    context = al.AgentContext(messages=history())
    keep = context.messages[-1]  # the exchange holding the prun call is kept
    record = context.prun(PrunRequest(50), keep=keep)
    # "Third." alone frees 32 + 69 + 59 = 160 tokens: enough.
    assert record == al.PrunRecord(
        pruned_timestamps=(T0 + 6, T0 + 7, T0 + 8), tokens_removed=160, memo=None
    )
    assert shown(context) == [
        ("user", "explore"),
        ("assistant:tool_use", "First.[look#c1]"),
        ("result:ok", "c1=one one one one o"),
        ("assistant:tool_use", "Second.[look#c2]"),
        ("result:ok", "c2=two two two two t"),
        ("user", "also check b"),
        ("assistant:stop", "Done."),
    ]
    assert [entry.state for entry in context.inrun_context] == [
        *[EntryState.LIVE] * 4,
        *[EntryState.PRUNED] * 3,
        EntryState.LIVE,
    ]
    assert context.messages == history()  # the log keeps everything


def test_a_memo_stands_once_after_the_pruned_span() -> None:
    """One "[Pruned context summary: …]" message, after the span's last message; a user
    message inside the span stays where it was."""
    context = al.AgentContext(messages=history())
    record = context.prun(PrunRequest(200, "b and c were dead ends"), keep=context.messages[-1])
    assert record.pruned_timestamps == tuple(T0 + n for n in (3, 4, 6, 7, 8))
    assert texts(context.working_context()) == [
        ("user", "explore"),
        ("assistant:tool_use", "First.[look#c1]"),
        ("result:ok", "c1=" + "one " * 40),
        ("user", "also check b"),
        ("user", "[Pruned context summary: b and c were dead ends]"),
        ("assistant:stop", "Done."),
    ]
    note = context.working_context()[4]
    assert note.timestamp == T0 + 8
    al.testing.assert_well_formed(context.working_context())


def test_prun_with_nothing_left_to_remove() -> None:
    """Only the kept exchange: nothing is removed and the record says so."""
    log = history()[:3]
    context = al.AgentContext(messages=log)
    record = context.prun(PrunRequest(1000, "x"), keep=log[1])
    assert record == al.PrunRecord(pruned_timestamps=(), tokens_removed=0, memo="x")
    assert context.working_context() == log


def test_prun_skips_what_is_already_pruned() -> None:
    """A second prun walks on past the first one's span."""
    context = al.AgentContext(messages=history())
    keep = context.messages[-1]
    context.prun(PrunRequest(1), keep=keep)
    second = context.prun(PrunRequest(1), keep=keep)
    assert second.pruned_timestamps == (T0 + 3, T0 + 4)
    assert [kind for kind, _ in shown(context)] == [
        "user",
        "assistant:tool_use",
        "result:ok",
        "user",
        "assistant:stop",
    ]


def test_a_stray_result_goes_with_the_exchange_before_it() -> None:
    """A result answering no known call is removed with the exchange before it."""
    log: list[al.Message] = [
        user("go", 0),
        assistant("A", "c1", at=1),
        result("c1", "ok", 2),
        result("ghost", "??", 3),
        assistant("B", at=4),
    ]
    context = al.AgentContext(messages=log)
    record = context.prun(PrunRequest(1), keep=log[-1])
    assert record.pruned_timestamps == (T0 + 1, T0 + 2, T0 + 3)


def test_a_custom_token_estimator_is_used() -> None:
    """prun counts with the context's estimator."""
    context = al.AgentContext(messages=history(), token_estimator=lambda message: 100)
    record = context.prun(PrunRequest(350), keep=context.messages[-1])
    assert (record.tokens_removed, len(record.pruned_timestamps)) == (500, 5)
    assert context.working_tokens() == 500  # explore, First, c1, also check b, Done


# --------------------------------------------------------------------------- replay


def test_records_rebuild_the_streams() -> None:
    """Applying a context's prun and compaction records to its log gives the same streams."""
    log = history()
    log[2] = result("c1", "\n".join(f"line {n}" for n in range(10)), 2)
    context = al.AgentContext(messages=log)
    first = context.prun(PrunRequest(10, "gone"), keep=context.messages[-1])
    compaction = al.CompactionRecord(
        truncated_timestamps=(T0 + 2,),
        tool_output_max_lines=3,
        tool_output_max_chars=200,
        removed_timestamps=(),
    )
    context.apply_record(compaction)
    rebuilt = al.AgentContext(messages=context.messages)
    rebuilt.apply_record(first)
    rebuilt.apply_record(compaction)
    assert rebuilt.working_context() == context.working_context()
    assert [(e.state, e.shown, e.note) for e in rebuilt.inrun_context] == [
        (e.state, e.shown, e.note) for e in context.inrun_context
    ]
    assert context.working_context()[2].text == (
        "line 0\n[... 8 lines, 56 characters truncated ...]\nline 9"
    )
    assert context.messages[2].text.count("\n") == 9  # the log keeps the whole output
    assert rebuilt.user_context == context.user_context


def test_unknown_timestamps_in_a_record_are_ignored() -> None:
    """A record naming messages the log lacks changes nothing for them."""
    context = al.AgentContext(messages=history())
    context.apply_record(al.PrunRecord(pruned_timestamps=(1, 2), tokens_removed=5))
    assert context.working_context() == history()


def test_measured_tokens_add_estimates_to_the_models_count() -> None:
    """The model's count for a request, plus estimates of what came after; None once the
    working context was rebuilt (the count no longer describes a prefix of it)."""
    log = history()
    context = al.AgentContext(messages=log[:5])
    sent = context.working_context()
    for message in log[5:]:
        context.append(message)
    later = sum(al.estimate_tokens(m) for m in log[5:])
    assert context.measured_tokens(sent, 1000) == 1000 + later
    context.prun(PrunRequest(1), keep=log[-1])
    assert context.measured_tokens(sent, 1000) is None
