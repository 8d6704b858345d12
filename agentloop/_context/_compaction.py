"""Compaction: shrinking the working context when it nears the model's context window.

When the estimated request (system prompt, tool definitions and working
context) passes ``threshold`` of the window, the loop compacts it, before the
turn's request, down to ``target`` of the window, in three steps, stopping as
soon as it is small enough:

1. **Truncate old tool outputs**: every tool result but those of the
   ``keep_recent`` most recent exchanges is cut to its first and last lines
   (:func:`truncate_text`; images give way to a note). Idempotent.
2. **Summarise**: the exchanges between the first ``keep_first`` and the
   ``keep_recent`` most recent are replaced by one user message holding a
   summary (the built-in, deterministic :func:`summarize_exchanges`, or a
   ``summarizer`` such as :class:`LLMSummarizer`).
3. **Drop**: the oldest of the recent exchanges are removed too, all but the
   last; a notice says how many messages went. If that is still not enough,
   the tool outputs of the remaining exchanges are truncated as well.

Only whole exchanges are removed, user messages never are, and the log keeps
everything: the working context is rebuilt from the streams.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias

import attrs

from .._check import number_field
from .._events import CompactionRecord, StreamDelta
from .._provider import ModelRequest, Provider
from .._text import scrub
from .._types import (
    AssistantMessage,
    Message,
    StopReason,
    ToolResultMessage,
    UserMessage,
)
from .._util import call_hook
from .._words import plural
from ._streams import AgentContext, EntryState
from ._truncate import truncate_result, truncate_text

__all__ = [
    "CompactionConfig",
    "CompactionOutcome",
    "LLMSummarizer",
    "Summarizer",
    "compact",
    "context_window_of",
    "summarize_exchanges",
    "summary_note",
]

#: Summarises the messages of some exchanges (assistant messages and tool results,
#: oldest first); given the agent's provider. A plain or async function.
Summarizer: TypeAlias = Callable[[Sequence[Message], Provider], Awaitable[str] | str]


def _share(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0 < value < 1:
        raise ValueError(
            f"CompactionConfig {attribute.name} must be between 0 and 1, got {value!r}"
        )


def _at_least(low: int) -> Any:
    return number_field(at_least=low, integer=True, owner="CompactionConfig")


def _optional_window(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None:
        _at_least(1)(instance, attribute, value)


@attrs.frozen(kw_only=True)
class CompactionConfig:
    """When and how the loop compacts the working context.

    Attributes:
        context_window: The model's context window in tokens; None: the
            provider's ``model.context_window``.
        threshold: Compact before a turn whose estimated request passes this
            share of the window.
        target: Compact down to this share of the window (below ``threshold``,
            so that compaction does not run again at once).
        keep_first: Exchanges at the start kept as they are (the first steps
            often set the task up).
        keep_recent: The most recent exchanges, kept as they are as long as
            the first two steps are enough.
        tool_output_max_lines, tool_output_max_chars: The size old tool
            outputs are truncated to, per text block.
        summary_max_tokens: The most a summary may take; a longer one is cut.
        summarizer: Writes the summary; None: :func:`summarize_exchanges`.
            When it fails, the built-in summary is used and
            ``CompactionEnded.summary_error`` says why.

    Raises:
        ValueError: a value out of range, or ``target >= threshold``.
    """

    context_window: int | None = attrs.field(default=None, validator=_optional_window)
    threshold: float = attrs.field(default=0.8, validator=_share)
    target: float = attrs.field(default=0.6, validator=_share)
    keep_first: int = attrs.field(default=1, validator=_at_least(0))
    keep_recent: int = attrs.field(default=4, validator=_at_least(1))
    tool_output_max_lines: int = attrs.field(default=50, validator=_at_least(3))
    tool_output_max_chars: int = attrs.field(default=5000, validator=_at_least(200))
    summary_max_tokens: int = attrs.field(default=2000, validator=_at_least(50))
    summarizer: Summarizer | None = None

    def __attrs_post_init__(self) -> None:
        if self.target >= self.threshold:
            raise ValueError(
                f"CompactionConfig target ({self.target}) must be below threshold "
                f"({self.threshold})"
            )


def context_window_of(config: CompactionConfig, provider: Provider) -> int:
    """The window compaction works against: the config's, else the provider model's.

    Raises:
        ValueError: neither says.
    """
    if config.context_window is not None:
        return config.context_window
    window = getattr(getattr(provider, "model", None), "context_window", None)
    if isinstance(window, int) and not isinstance(window, bool) and window > 0:
        return window
    raise ValueError(
        f"compaction needs the model's context window, and {type(provider).__name__} does "
        "not say it: set CompactionConfig(context_window=...)"
    )


# --------------------------------------------------------------------------- summaries

_SPACE = re.compile(r"\s+")


def _one_line(text: str, limit: int) -> str:
    text = _SPACE.sub(" ", text).strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def summarize_exchanges(
    messages: Sequence[Message], provider: Provider | None = None, *, max_chars: int = 8000
) -> str:
    """The built-in summary: one line per exchange, oldest first. Deterministic.

    Each line holds the start of the assistant's text and the tools it called,
    with how many calls failed. When the lines pass ``max_chars``, the oldest
    go first, counted in a first line.

    >>> from agentloop import AssistantMessage, StopReason, TextContent, ToolCall
    >>> reply = AssistantMessage(
    ...     (TextContent("Reading the tests."), ToolCall("c1", "read_file", {"path": "t.py"})),
    ...     StopReason.TOOL_USE,
    ... )
    >>> summarize_exchanges([reply])
    '- Reading the tests. [tools: read_file]'
    """
    lines: list[str] = []
    calls: Counter[str] = Counter()
    failed = 0
    text = ""
    started = False

    def flush() -> None:
        if not started:
            return
        line = f"- {text}" if text else "- (no text)"
        if calls:
            names = ", ".join(
                name if count == 1 else f"{name} x{count}" for name, count in calls.items()
            )
            line += f" [tools: {names}{f'; {failed} failed' if failed else ''}]"
        lines.append(line)

    for message in messages:
        if isinstance(message, AssistantMessage):
            flush()
            started = True
            text = _one_line(message.text, 200)
            calls = Counter(call.name for call in message.tool_calls)
            failed = 0
        elif isinstance(message, ToolResultMessage):
            failed += message.is_error
    flush()
    total = sum(len(line) + 1 for line in lines)
    skipped = 0
    while lines and total > max_chars:
        total -= len(lines[0]) + 1
        del lines[0]
        skipped += 1
    if skipped:
        lines.insert(0, f"- ({plural(skipped, 'earlier exchange')} not listed)")
    return "\n".join(lines)


def summary_note(message_count: int, summary: str) -> str:
    """The text a compaction summary stands as in the working context."""
    return f"[Context summary: {message_count} earlier messages were compacted]\n{summary}"


def _dropped_note(count: int, summary: str | None) -> str:
    notice = f"[Context compacted: {count} earlier messages were removed to fit the context window]"
    return notice if summary is None else f"{summary}\n{notice}"


_INSTRUCTIONS = (
    "You summarise part of an AI agent's working session so that the agent can go on "
    "without it. Write a short, factual summary: what was tried, what was found (file "
    "names, values, errors, decisions), and what is still open. No preamble."
)


def _transcript(messages: Sequence[Message], max_chars: int) -> str:
    parts: list[str] = []
    for message in messages:
        if isinstance(message, AssistantMessage):
            if message.text:
                parts.append(f"Assistant: {message.text}")
            for call in message.tool_calls:
                arguments = json.dumps(call.arguments, ensure_ascii=False)
                parts.append(f"Assistant called {call.name} {arguments}")
        elif isinstance(message, ToolResultMessage):
            flag = " (error)" if message.is_error else ""
            parts.append(f"Result of {message.tool_name}{flag}: {message.text}")
        else:
            parts.append(f"User: {message.text}")
    return truncate_text("\n\n".join(parts), 100_000, max_chars)


async def _ignore(delta: StreamDelta) -> None:
    pass


class LLMSummarizer:
    """A summarizer that asks a model: ``provider``, or else the agent's own.

    The exchanges go to the model as one transcript (cut to
    ``max_input_chars``), with ``instructions`` as the system prompt. A failed
    or empty answer raises, and compaction falls back to the built-in summary.

    Example::

        Agent(provider, compaction=CompactionConfig(summarizer=LLMSummarizer()))
    """

    def __init__(
        self,
        provider: Provider | None = None,
        *,
        instructions: str = _INSTRUCTIONS,
        max_tokens: int = 1024,
        max_input_chars: int = 200_000,
    ) -> None:
        self.provider = provider
        self.instructions = instructions
        self.max_tokens = max_tokens
        self.max_input_chars = max_input_chars

    def __repr__(self) -> str:
        return f"LLMSummarizer(provider={self.provider!r}, max_tokens={self.max_tokens})"

    async def __call__(self, messages: Sequence[Message], provider: Provider) -> str:
        """Summarise ``messages``.

        Raises:
            ProviderError: the model call failed.
            RuntimeError: the model answered with an error or with no text.
        """
        model = self.provider if self.provider is not None else provider
        request = ModelRequest(
            system_prompt=self.instructions,
            messages=(UserMessage.text(_transcript(messages, self.max_input_chars)),),
            max_tokens=self.max_tokens,
        )
        reply = await model.stream(request, _ignore)
        if reply.stop_reason is StopReason.ERROR:
            raise RuntimeError(reply.error_message or "the model failed")
        text = reply.text.strip()
        if not text:
            raise RuntimeError("the model returned no summary")
        return text


# --------------------------------------------------------------------------- compaction


@attrs.frozen(kw_only=True)
class CompactionOutcome:
    """What :func:`compact` did (internal: the loop turns it into events)."""

    record: CompactionRecord
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    summary_error: str | None = None


async def _summarize(
    config: CompactionConfig, messages: Sequence[Message], provider: Provider
) -> tuple[str, str | None]:
    max_chars = config.summary_max_tokens * 4
    if config.summarizer is None:
        return summarize_exchanges(messages, max_chars=max_chars), None
    try:
        summary: object = await call_hook(config.summarizer, messages, provider)
        if not isinstance(summary, str) or not summary.strip():
            raise TypeError(f"the summarizer returned {summary!r}, not a text")
    except Exception as error:  # not Cancelled: that is a BaseException
        reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        return summarize_exchanges(messages, max_chars=max_chars), reason
    # The summary enters the working context: it must encode again (see _text).
    return truncate_text(scrub(summary.strip()), 100_000, max_chars), None


async def compact(
    context: AgentContext,
    config: CompactionConfig,
    *,
    provider: Provider,
    overhead: int,
    measured: int | None = None,
) -> CompactionOutcome:
    """Compact ``context``'s working context toward ``config.target`` of the window.

    ``overhead`` is the estimated tokens of the rest of the request (system
    prompt, tool definitions). ``measured``, if known, is the request's size
    as the model counts it (see :meth:`AgentContext.measured_tokens`): the
    estimates are then scaled to it. Changes are made all at once, after the
    summary is written: cancelled while summarising, the context is unchanged.

    Raises:
        ValueError: the context window is unknown (see :func:`context_window_of`).
    """
    window = context_window_of(config, provider)
    estimate = context.token_estimator
    entries = context._entries
    messages_before = len(context.working_context())
    total = overhead + context.working_tokens()
    # The model's own count, when known, calibrates the estimates: target and the
    # reported sizes are in its units, the arithmetic below in the estimator's.
    scale = total / measured if measured else 1.0
    target = int(config.target * window * scale)
    tokens_before = measured if measured else total

    groups = context._live_exchanges()
    first_end = min(config.keep_first, len(groups))
    recent_start = max(first_end, len(groups) - config.keep_recent)
    old, recent = groups[:recent_start], groups[recent_start:]
    middle = groups[first_end:recent_start]

    shown: dict[int, ToolResultMessage] = {}

    def sent(position: int) -> Message:
        message = shown.get(position) or entries[position].sent
        assert message is not None
        return message

    def truncate(exchanges: list[list[int]]) -> None:
        nonlocal total
        for group in exchanges:
            for position in group:
                message = sent(position)
                if isinstance(message, ToolResultMessage):
                    shorter = truncate_result(
                        message, config.tool_output_max_lines, config.tool_output_max_chars
                    )
                    saved = estimate(message) - estimate(shorter)
                    if saved > 0:  # cutting a short text can lengthen it
                        total -= saved
                        shown[position] = shorter

    # 1. Truncate the tool outputs of all but the recent exchanges.
    truncate(old)
    removed: list[int] = []
    summary: str | None = None
    summary_error: str | None = None
    note: str | None = None
    # 2. Summarise the middle exchanges (if the summary is smaller than they are).
    if total > target and middle:
        span = [position for group in middle for position in group]
        gone = sum(estimate(sent(position)) for position in span)
        text, summary_error = await _summarize(config, [sent(p) for p in span], provider)
        candidate = summary_note(len(span), text)
        if estimate(UserMessage.text(candidate)) < gone:
            removed, summary, note = span, candidate, candidate
            total += estimate(UserMessage.text(note)) - gone
    # 3. Drop the oldest recent exchanges, all but the last, as few as will do (if that
    #    saves anything once the notice is counted); then truncate what is left.
    if total > target:
        base = total - (0 if note is None else estimate(UserMessage.text(note)))
        best: tuple[int, list[int], str] | None = None
        dropped: list[int] = []
        for group in recent[:-1]:
            base -= sum(estimate(sent(position)) for position in group)
            dropped = [*dropped, *group]
            candidate = _dropped_note(len(dropped), summary)
            best = (base + estimate(UserMessage.text(candidate)), dropped, candidate)
            if best[0] <= target:
                break
        if best is not None and best[0] < total:
            total, dropped, note = best
            removed = [*removed, *dropped]
        else:
            dropped = []
        if total > target:
            truncate([group for group in recent if group[0] not in dropped])

    for position, message in shown.items():
        if position not in removed:
            context._shorten(position, message)
    removed.sort()
    if removed:
        context._remove(removed, EntryState.COMPACTED, note)
    record = CompactionRecord(
        truncated_timestamps=tuple(
            entries[position].message.timestamp for position in sorted(shown)
        ),
        tool_output_max_lines=config.tool_output_max_lines,
        tool_output_max_chars=config.tool_output_max_chars,
        removed_timestamps=tuple(entries[position].message.timestamp for position in removed),
        note=note if removed else None,
    )
    return CompactionOutcome(
        record=record,
        messages_before=messages_before,
        messages_after=len(context.working_context()),
        tokens_before=tokens_before,
        tokens_after=round((overhead + context.working_tokens()) / scale),
        summary_error=summary_error,
    )
