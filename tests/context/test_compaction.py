"""Compaction through the loop: the three steps, exact working contexts, events, hooks."""

from __future__ import annotations

import re
from typing import Any

import pytest
from helpers import run_recorded, texts

import agentloop as al
from agentloop.providers import AnthropicProvider, ScriptedProvider, reply
from agentloop.testing import assert_well_formed

T0 = 1_700_000_000_000


def output(lines: int, width: int = 10) -> str:
    return "\n".join(f"{n:0{width}d}" for n in range(lines))


def past(*sizes: int, width: int = 10) -> list[al.Message]:
    """A history: a prompt, then one exchange per size (a read of that many lines)."""
    log: list[al.Message] = [al.UserMessage((al.TextContent("start"),), timestamp=T0)]
    for number, lines in enumerate(sizes, 1):
        call = al.ToolCall(f"c{number}", "read", {"n": number})
        log.append(
            al.AssistantMessage(
                (al.TextContent(f"Reading {number}."), call),
                al.StopReason.TOOL_USE,
                timestamp=T0 + 2 * number - 1,
            )
        )
        log.append(
            al.ToolResultMessage(
                f"c{number}",
                "read",
                (al.TextContent(output(lines, width)),),
                timestamp=T0 + 2 * number,
            )
        )
    return log


def agent_with(
    history: list[al.Message], config: al.CompactionConfig, *turns: Any, **options: Any
) -> tuple[al.Agent, ScriptedProvider]:
    model = ScriptedProvider(list(turns) or [reply("ok")])
    return al.Agent(model, messages=history, compaction=config, **options), model


def sent(model: ScriptedProvider) -> list[tuple[str, str]]:
    return texts(model.requests[0].messages)


CONFIG = al.CompactionConfig(
    context_window=2000,
    keep_first=1,
    keep_recent=2,
    tool_output_max_lines=5,
    tool_output_max_chars=1000,
)


async def test_below_the_threshold_nothing_happens() -> None:
    """A request under threshold * window is sent as it is, without compaction events."""
    history = past(10, 10)
    agent, model = agent_with(history, CONFIG)
    recorder = await run_recorded(agent, "go")
    assert recorder.of_type(al.CompactionStarted) == []
    assert model.requests[0].messages == [*history, agent.messages[len(history)]]


async def test_step_one_truncates_old_tool_outputs() -> None:
    """Old outputs are cut to their first and last lines; the recent ones stay whole."""
    history = past(300, 300, 10, 10)
    agent, model = agent_with(history, CONFIG)
    recorder = await run_recorded(agent, "go")

    head, tail = "0000000000\n0000000001", "0000000298\n0000000299"
    cut = f"{head}\n[... 296 lines, 3256 characters truncated ...]\n{tail}"
    assert sent(model) == [
        ("user", "start"),
        ("assistant:tool_use", "Reading 1.[read#c1]"),
        ("result:ok", f"c1={cut}"),
        ("assistant:tool_use", "Reading 2.[read#c2]"),
        ("result:ok", f"c2={cut}"),
        ("assistant:tool_use", "Reading 3.[read#c3]"),
        ("result:ok", f"c3={output(10)}"),
        ("assistant:tool_use", "Reading 4.[read#c4]"),
        ("result:ok", f"c4={output(10)}"),
        ("user", "go"),
    ]
    (started,) = recorder.of_type(al.CompactionStarted)
    (ended,) = recorder.of_type(al.CompactionEnded)
    assert (started.message_count, started.context_window) == (10, 2000)
    assert started.estimated_tokens > 0.8 * 2000
    assert ended.record == al.CompactionRecord(
        truncated_timestamps=(T0 + 2, T0 + 4),
        tool_output_max_lines=5,
        tool_output_max_chars=1000,
    )
    assert (ended.messages_before, ended.messages_after) == (10, 10)
    assert ended.estimated_tokens_before == started.estimated_tokens
    assert ended.estimated_tokens_after <= 0.6 * 2000
    assert ended.summary_error is None
    names = [type(e).__name__ for e in recorder.events]
    assert names[:8] == [
        "AgentStart",
        "TurnStart",
        "MessageStart",
        "MessageEnd",
        "CompactionStarted",
        "CompactionEnded",
        "MessageStart",
        "MessageUpdate",
    ]
    assert list(agent.messages[: len(history)]) == history  # the log is untouched


async def test_step_two_summarises_the_middle_exchanges() -> None:
    """Many small exchanges: the middle ones become one summary message."""
    history = past(*[3] * 10, width=300)
    agent, model = agent_with(history, CONFIG)
    recorder = await run_recorded(agent, "go")
    summary = "\n".join(
        [
            "[Context summary: 14 earlier messages were compacted]",
            *[f"- Reading {n}. [tools: read]" for n in range(2, 9)],
        ]
    )
    assert [kind for kind, _ in sent(model)] == [
        "user",
        "assistant:tool_use",
        "result:ok",
        "user",
        "assistant:tool_use",
        "result:ok",
        "assistant:tool_use",
        "result:ok",
        "user",
    ]
    assert model.requests[0].messages[3].text == summary
    assert model.requests[0].messages[3].timestamp == T0 + 16  # after the span's last message
    (ended,) = recorder.of_type(al.CompactionEnded)
    assert ended.record.removed_timestamps == tuple(T0 + n for n in range(3, 17))
    assert ended.record.note == summary
    assert ended.record.truncated_timestamps == ()  # three lines: nothing to cut
    assert (ended.messages_before, ended.messages_after) == (22, 9)
    assert ended.estimated_tokens_after <= 0.6 * 2000
    assert_well_formed(model.requests[0].messages)


async def test_step_three_drops_recent_exchanges_but_the_last() -> None:
    """A huge recent output: after the summary, older recent exchanges go too."""
    config = al.CompactionConfig(
        context_window=2000,
        keep_first=1,
        keep_recent=3,
        tool_output_max_lines=2000,
        tool_output_max_chars=100_000,
    )
    history = past(5, 5, 5, 600, 5)
    agent, model = agent_with(history, config)
    recorder = await run_recorded(agent, "go")
    (ended,) = recorder.of_type(al.CompactionEnded)
    note = (
        "[Context summary: 2 earlier messages were compacted]\n- Reading 2. [tools: read]\n"
        "[Context compacted: 4 earlier messages were removed to fit the context window]"
    )
    assert ended.record.note == note
    assert ended.record.removed_timestamps == tuple(T0 + n for n in range(3, 9))
    assert texts(model.requests[0].messages) == [
        ("user", "start"),
        ("assistant:tool_use", "Reading 1.[read#c1]"),
        ("result:ok", f"c1={output(5)}"),
        ("user", note),
        ("assistant:tool_use", "Reading 5.[read#c5]"),
        ("result:ok", f"c5={output(5)}"),
        ("user", "go"),
    ]


async def test_hooks_see_the_numbers_and_can_skip() -> None:
    """before_compaction_start(tokens, count) False skips; after_compaction_end gets both."""
    history = past(300, 300, 10, 10)
    seen: list[tuple[str, int, int]] = []

    def before(tokens: int, count: int) -> bool:
        seen.append(("before", tokens, count))
        return len(seen) > 1

    async def after(before_tokens: int, after_tokens: int) -> None:
        seen.append(("after", before_tokens, after_tokens))

    agent, model = agent_with(
        history,
        CONFIG,
        reply("ok"),
        reply("ok"),
        before_compaction_start=before,
        after_compaction_end=after,
    )
    first = await run_recorded(agent, "go")
    assert first.of_type(al.CompactionStarted) == []
    assert model.requests[0].messages[2] == history[2]  # not truncated
    second = await run_recorded(agent, "again")
    (ended,) = second.of_type(al.CompactionEnded)
    assert seen == [
        ("before", seen[0][1], 10),
        ("before", seen[1][1], 12),
        ("after", ended.estimated_tokens_before, ended.estimated_tokens_after),
    ]
    assert seen[1][1] == ended.estimated_tokens_before


async def test_an_llm_summarizer_writes_the_summary() -> None:
    """LLMSummarizer sends a transcript to its model and uses the answer."""
    summarizer_model = ScriptedProvider([reply("They read files 2 to 8; all fine.")])
    config = al.CompactionConfig(
        context_window=2000,
        keep_recent=2,
        tool_output_max_lines=5,
        summarizer=al.LLMSummarizer(summarizer_model, max_tokens=300),
    )
    agent, model = agent_with(past(*[3] * 10, width=300), config)
    await run_recorded(agent, "go")
    assert model.requests[0].messages[3].text == (
        "[Context summary: 14 earlier messages were compacted]\nThey read files 2 to 8; all fine."
    )
    (request,) = summarizer_model.requests
    assert request.system_prompt.startswith("You summarise part of an AI agent's working session")
    assert request.max_tokens == 300
    (transcript,) = request.messages
    assert transcript.text.split("\n\n")[:3] == [
        "Assistant: Reading 2.",
        'Assistant called read {"n": 2}',
        f"Result of read: {output(3, 300)}",
    ]
    assert transcript.text.split("\n\n")[-1] == f"Result of read: {output(3, 300)}"
    assert transcript.text.count("Assistant called read") == 7


async def test_a_summary_with_a_lone_surrogate_is_scrubbed() -> None:
    """A summarizer's text enters the working context: it must encode again."""
    config = al.CompactionConfig(
        context_window=2000,
        keep_recent=2,
        tool_output_max_lines=5,
        summarizer=lambda messages, provider: "bad \ud800 summary",
    )
    agent, model = agent_with(past(*[3] * 10, width=300), config)
    await run_recorded(agent, "go")
    assert model.requests[0].messages[3].text == (
        "[Context summary: 14 earlier messages were compacted]\nbad \ufffd summary"
    )


async def test_a_failing_summarizer_falls_back_to_the_built_in_summary() -> None:
    """The summarizer's error is reported; the built-in summary is used."""

    def broken(messages: Any, provider: Any) -> str:
        raise ConnectionError("summary service down")

    config = al.CompactionConfig(
        context_window=2000, keep_recent=2, tool_output_max_lines=5, summarizer=broken
    )
    agent, model = agent_with(past(*[3] * 10, width=300), config)
    recorder = await run_recorded(agent, "go")
    (ended,) = recorder.of_type(al.CompactionEnded)
    assert ended.summary_error == "ConnectionError: summary service down"
    assert model.requests[0].messages[3].text.splitlines()[1] == "- Reading 2. [tools: read]"


async def test_aborted_while_summarising_changes_nothing(autojump_clock: Any) -> None:
    """Compaction applies its changes at once, after the summary: an abort during the
    summarizer's call leaves the working context as it was."""
    slow = ScriptedProvider([reply("late summary")], delay=30)
    config = al.CompactionConfig(
        context_window=2000,
        keep_recent=2,
        tool_output_max_lines=5,
        summarizer=al.LLMSummarizer(slow),
    )
    history = past(*[3] * 10, width=300)
    agent, model = agent_with(history, config)
    names: list[str] = []
    async with agent.prompt("go") as events:
        async for event in events:
            names.append(type(event).__name__)
            if isinstance(event, al.CompactionStarted):
                agent.abort()
    assert "CompactionEnded" not in names
    assert names[-2:] == ["TurnEnd", "AgentEnd"]
    assert model.requests == []
    working = agent.context.working_context()
    assert list(working[: len(history)]) == history


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"target": 0.9}, "CompactionConfig target (0.9) must be below threshold (0.8)"),
        ({"threshold": 1.5}, "CompactionConfig threshold must be between 0 and 1, got 1.5"),
        ({"keep_recent": 0}, "CompactionConfig keep_recent must be an integer >= 1, got 0"),
        (
            {"tool_output_max_lines": 2},
            "CompactionConfig tool_output_max_lines must be an integer >= 3, got 2",
        ),
        ({"context_window": 0}, "CompactionConfig context_window must be an integer >= 1, got 0"),
    ],
)
def test_out_of_range_settings_are_refused(options: dict[str, Any], message: str) -> None:
    """Each setting is checked when the config is built, with a message naming it."""
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        al.CompactionConfig(**options)


def test_an_unknown_window_is_refused() -> None:
    """A provider that does not say its context window needs it in the config."""
    with pytest.raises(
        ValueError,
        match=r"^compaction needs the model's context window, and ScriptedProvider does not say "
        r"it: set CompactionConfig\(context_window=\.\.\.\)$",
    ):
        al.Agent(ScriptedProvider([]), compaction=al.CompactionConfig())


def test_the_window_comes_from_the_provider_model() -> None:
    """Without context_window, the provider's model config gives it."""
    provider = AnthropicProvider(api_key="test-key")
    agent = al.Agent(provider, compaction=al.CompactionConfig())
    assert agent.config.compaction == al.CompactionConfig()
    assert al.CompactionConfig().context_window is None
    assert provider.model.context_window > 0


async def test_compaction_runs_before_a_later_turn_too() -> None:
    """A run whose tool outputs grow past the threshold compacts before the next request."""

    @al.tool
    async def read(n: int) -> str:
        """Read part n."""
        return output(200)

    from agentloop.providers import call

    model = ScriptedProvider(
        [
            reply(call("read", {"n": 1}, id="c1")),
            reply(call("read", {"n": 2}, id="c2")),
            reply(call("read", {"n": 3}, id="c3")),
            reply(call("read", {"n": 4}, id="c4")),
            reply("done"),
        ]
    )
    agent = al.Agent(model, tools=[read], compaction=CONFIG)
    recorder = await run_recorded(agent, "go")
    turns = [
        event.turn_index if isinstance(event, al.TurnStart) else type(event).__name__
        for event in recorder.events
        if isinstance(event, al.TurnStart | al.CompactionStarted)
    ]
    assert turns == [0, 1, 2, 3, "CompactionStarted", 4]
    assert_well_formed(model.requests[-1].messages)
    (ended,) = recorder.of_type(al.CompactionEnded)
    # keep_first=1 and keep_recent=2 leave no middle: the first output is cut, then the
    # older of the two recent exchanges goes; the last one stays whole.
    note = "[Context compacted: 2 earlier messages were removed to fit the context window]"
    stamps = [message.timestamp for message in agent.messages]
    assert ended.record == al.CompactionRecord(
        truncated_timestamps=(stamps[2],),
        tool_output_max_lines=5,
        tool_output_max_chars=1000,
        removed_timestamps=(stamps[3], stamps[4]),
        note=note,
    )
    assert (ended.messages_before, ended.messages_after) == (7, 6)
    assert [kind for kind, _ in texts(model.requests[3].messages)] == [
        "user",
        "assistant:tool_use",
        "result:ok",
        "user",
        "assistant:tool_use",
        "result:ok",
    ]
    assert model.requests[3].messages[5].text == output(200)
    assert model.requests[4].messages[:6] == model.requests[3].messages


async def test_the_models_own_count_triggers_and_calibrates_compaction() -> None:
    """After a request, the model's reported prompt size (plus estimates of what came
    after) is the gauge: here the estimate alone would never reach the threshold."""

    @al.tool
    async def read(n: int) -> str:
        """Read part n."""
        return output(30)

    from agentloop.providers import call

    big = al.Usage(input=1000, cache_read=500, cache_write=200, output=10)
    model = ScriptedProvider(
        [
            reply(call("read", {"n": 1}, id="c1"), usage=big),
            reply(call("read", {"n": 2}, id="c2")),
            reply("done"),
        ]
    )
    agent = al.Agent(model, tools=[read], compaction=CONFIG)
    recorder = await run_recorded(agent, "go")
    (started,) = recorder.of_type(al.CompactionStarted)
    after_first = sum(al.estimate_tokens(m) for m in agent.messages[1:3])  # its reply, result
    assert started.estimated_tokens == 1700 + after_first  # input + cache read + write
    assert sum(al.estimate_tokens(m) for m in agent.messages[:3]) < 0.8 * 2000
    turns = [
        e.turn_index if isinstance(e, al.TurnStart) else type(e).__name__
        for e in recorder.events
        if isinstance(e, al.TurnStart | al.CompactionStarted)
    ]
    assert turns == [0, 1, "CompactionStarted", 2]
    (ended,) = recorder.of_type(al.CompactionEnded)
    assert ended.estimated_tokens_before == started.estimated_tokens
    # Truncating the one output shrinks the model's count by the share it shrinks the
    # estimate: from 1807 to 1118, below the target of 1200.
    assert ended.record.truncated_timestamps == (agent.messages[2].timestamp,)
    assert (ended.estimated_tokens_before, ended.estimated_tokens_after) == (1807, 1118)
    assert_well_formed(model.requests[1].messages)
