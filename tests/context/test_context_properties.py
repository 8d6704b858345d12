"""Properties of the working context under any sequence of prunes and compactions."""

from __future__ import annotations

import functools
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop._context import compact
from agentloop.providers import ScriptedProvider
from agentloop.testing import assert_well_formed

T0 = 1_700_000_000_000

# An item of a history: a user message, or an exchange given by the sizes of its
# tool results (none: a plain answer) and whether each failed.
exchanges = st.lists(
    st.tuples(st.integers(min_value=0, max_value=3000), st.booleans()), max_size=3
).map(lambda results: ("exchange", results))
items = st.one_of(st.just(("user", None)), exchanges)


def build(spec: list[tuple[str, Any]]) -> list[al.Message]:
    log: list[al.Message] = [al.UserMessage((al.TextContent("u0"),), timestamp=T0)]
    clock = T0
    for number, (kind, results) in enumerate(spec, 1):
        clock += 1
        if kind == "user":
            log.append(al.UserMessage((al.TextContent(f"u{number}"),), timestamp=clock))
            continue
        calls = tuple(al.ToolCall(f"c{number}.{i}", "look", {"n": i}) for i in range(len(results)))
        stop = al.StopReason.TOOL_USE if calls else al.StopReason.STOP
        text = al.TextContent(f"a{number} " * (number % 7))
        log.append(al.AssistantMessage((text, *calls), stop, timestamp=clock))
        for call, (size, failed) in zip(calls, results, strict=True):
            clock += 1
            lines = "\n".join("x" * (size % 97) for _ in range(size // 50 + 1))
            log.append(
                al.ToolResultMessage(
                    call.id, "look", (al.TextContent(lines),), is_error=failed, timestamp=clock
                )
            )
    return log


prunes = st.tuples(
    st.just("prun"),
    st.integers(min_value=1, max_value=5000),
    st.none() | st.text(min_size=1, max_size=20),
    st.booleans(),  # keep the last exchange, as the loop does
)
compactions = st.tuples(
    st.just("compact"),
    st.integers(min_value=200, max_value=6000),  # context window
    st.integers(min_value=0, max_value=3),  # keep_first
    st.integers(min_value=1, max_value=4),  # keep_recent
    st.booleans(),  # a summarizer that fails
)


def _failing(messages: Any, provider: Any) -> str:
    raise RuntimeError("no summary today")


@settings(max_examples=200, deadline=None)
@given(
    spec=st.lists(items, max_size=25),
    operations=st.lists(st.one_of(prunes, compactions), max_size=6),
)
def test_prunes_and_compactions_keep_the_working_context_whole(
    spec: list[tuple[str, Any]], operations: list[tuple[Any, ...]]
) -> None:
    """After any prunes and compactions: every tool call in the working context has its
    result and every result its call, every user message is still there in order, the
    log is untouched, compaction never grows the request, and the records rebuild it."""
    log = build(spec)
    context = al.AgentContext("system", log)
    records: list[al.PrunRecord | al.CompactionRecord] = []
    provider = ScriptedProvider([])

    for operation in operations:
        if operation[0] == "prun":
            _, tokens, memo, keep_last = operation
            last = next((m for m in reversed(log) if isinstance(m, al.AssistantMessage)), None)
            records.append(
                context.prun(al.PrunRequest(tokens, memo), keep=last if keep_last else None)
            )
        else:
            _, window, keep_first, keep_recent, fails = operation
            config = al.CompactionConfig(
                context_window=window,
                keep_first=keep_first,
                keep_recent=keep_recent,
                tool_output_max_lines=5,
                tool_output_max_chars=300,
                summarizer=_failing if fails else None,
            )
            outcome = trio.run(
                functools.partial(compact, context, config, provider=provider, overhead=50)
            )
            assert outcome.tokens_after <= outcome.tokens_before
            summarized = (
                outcome.record.note is not None and "[Context summary" in outcome.record.note
            )
            assert outcome.summary_error is None or fails
            assert not (fails and summarized) or outcome.summary_error is not None
            records.append(outcome.record)

        working = list(context.working_context())
        assert_well_formed(working)
        users = [m for m in log if isinstance(m, al.UserMessage)]
        assert [m for m in working if any(m is u for u in users)] == users
        stamps = [m.timestamp for m in working]
        assert stamps == sorted(stamps)
        assert context.messages == log
        assert context.working_tokens() == sum(al.estimate_tokens(m) for m in working)

    rebuilt = al.AgentContext("system", log)
    for record in records:
        rebuilt.apply_record(record)
    assert rebuilt.working_context() == context.working_context()
