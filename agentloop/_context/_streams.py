"""AgentContext: the log, the two context streams, and the working context built from them.

Three views of one conversation:

- the **log** (``messages``): every message, in the order it happened. Nothing
  rewrites it; it is what a session records.
- the **user context**: every user message (prompts, steering, follow-ups,
  limit notices). Never pruned, never compacted.
- the **in-run context**: assistant messages and tool results, each an
  :class:`InrunEntry` that is live, pruned (by the ``prun`` tools) or
  compacted. An entry may also be live in a shortened form (a tool output cut
  by compaction).

The **working context**, what the model is sent, is the two streams merged in
log order: user messages, live entries, and, where a span of entries was
removed, the one user message that stands for it (a prun memo, a compaction
summary), placed after the span's last message. Removal always takes whole
exchanges (an assistant message with every result answering it), so no tool
call in the working context is ever without its result, nor a result without
its call.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, TypeVar

import attrs

from .._approval import Suspended
from .._events import CompactionRecord, PrunRecord
from .._scrub import scrub_message
from .._tool import AgentTool
from .._types import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    now_ms,
)
from ._prun import PrunRequest
from ._tokens import TokenEstimator, estimate_tokens
from ._truncate import truncate_result
from ._view import MessageView

__all__ = ["AgentContext", "EntryState", "InrunEntry", "prun_note"]

M = TypeVar("M", bound=Message)


def prun_note(memo: str) -> str:
    """The text a prun memo stands as in the working context."""
    return f"[Pruned context summary: {memo}]"


class EntryState(enum.Enum):
    """What became of an in-run message."""

    LIVE = "live"
    """Sent to the model (perhaps shortened: see :attr:`InrunEntry.shown`)."""
    PRUNED = "pruned"
    """Removed by a prun request."""
    COMPACTED = "compacted"
    """Removed by compaction."""


@attrs.frozen
class InrunEntry:
    """An assistant message or tool result of the in-run context, and its state.

    Attributes:
        message: The message as it happened (the log's).
        state: Live, pruned or compacted.
        shown: For a live entry that compaction shortened, the form sent; else None.
        note: For a removed entry, the text standing for its span (a memo or a
            summary), or None when nothing does.
        span: Entries removed together share a span number (0 for live ones).
    """

    message: Message
    state: EntryState = EntryState.LIVE
    shown: Message | None = None
    note: str | None = None
    span: int = 0

    @property
    def sent(self) -> Message | None:
        """The message as the model is sent it, or None if it is removed."""
        if self.state is not EntryState.LIVE:
            return None
        return self.message if self.shown is None else self.shown


def _message_list(value: Iterable[Message]) -> list[Message]:
    # A history given from outside (a saved session, say) must encode again too.
    return [scrub_message(message) for message in value]


def _tool_tuple(value: Iterable[AgentTool]) -> tuple[AgentTool, ...]:
    return tuple(value)


def _reseed_on_set(
    instance: AgentContext, attribute: Any, value: Iterable[Message]
) -> list[Message]:
    messages = _message_list(value)
    instance._reseed(messages)
    return messages


_LIVE = EntryState.LIVE


@attrs.define(eq=False)
class AgentContext:
    """The state one conversation carries from turn to turn.

    ``messages`` is the log, oldest first; the loop appends to it as the run
    goes (use :meth:`append`; assigning a new list starts the streams over
    from it). Timestamps in it are strictly increasing: :meth:`stamp` moves a
    message's timestamp forward when it would not be. The model is sent the
    :meth:`working_context`, which prun requests and compaction shorten; the
    log keeps everything. See the module documentation for the two streams.

    Args:
        system_prompt: Sent with every request; never pruned or compacted.
        messages: A history to start from; all of it is live.
        tools: The tools the model may call.
        token_estimator: How prun and compaction count tokens
            (default :func:`estimate_tokens`).
    """

    system_prompt: str = ""
    messages: list[Message] = attrs.field(
        factory=list,
        converter=_message_list,
        on_setattr=_reseed_on_set,
    )
    tools: tuple[AgentTool, ...] = attrs.field(factory=tuple, converter=_tool_tuple)
    token_estimator: TokenEstimator = attrs.field(default=estimate_tokens, kw_only=True)
    #: Where the last run stopped to wait for decisions on tool calls, if it did
    #: (``AgentEnd.suspended``); ``Agent.resume(decisions)`` goes on from it.
    suspended: Suspended | None = attrs.field(default=None, kw_only=True)
    _last_timestamp: int = attrs.field(init=False, default=0)
    _entries: list[InrunEntry] = attrs.field(init=False, factory=list)
    _working: list[Message] | None = attrs.field(init=False, default=None)
    _span_count: int = attrs.field(init=False, default=0)
    _counted: tuple[list[Message] | None, int, int] = attrs.field(
        init=False, default=(None, 0, 0)
    )  # (working list counted, how many of its messages, their tokens)

    def __attrs_post_init__(self) -> None:
        self._reseed(self.messages)

    def _reseed(self, messages: list[Message]) -> None:
        self._entries = [InrunEntry(message) for message in messages]
        self._working = None
        self._last_timestamp = max((message.timestamp for message in messages), default=0)

    def _sync(self) -> None:
        """Catch up with messages appended to (or replaced in) ``messages`` directly."""
        entries, messages = self._entries, self.messages
        known = len(entries)
        if known == len(messages) and (known == 0 or entries[-1].message is messages[-1]):
            return
        if known < len(messages) and (known == 0 or entries[-1].message is messages[known - 1]):
            for message in messages[known:]:
                self._entries.append(InrunEntry(message))
                self._last_timestamp = max(self._last_timestamp, message.timestamp)
            self._working = None
            return
        self._reseed(messages)

    # ----------------------------------------------------------------- the log

    def next_timestamp(self) -> int:
        """Return now in Unix ms, or one more than the last timestamp if that is later."""
        stamp = max(now_ms(), self._last_timestamp + 1)
        self._last_timestamp = stamp
        return stamp

    def stamp(self, message: M) -> M:
        """Return ``message`` with a timestamp later than any in the history so far."""
        if message.timestamp > self._last_timestamp:
            self._last_timestamp = message.timestamp
            return message
        return attrs.evolve(message, timestamp=self.next_timestamp())

    def append(self, message: Message) -> None:
        """Append a message already passed through :meth:`stamp`; it is live."""
        self._sync()
        self.messages.append(message)
        self._entries.append(InrunEntry(message))
        if self._working is not None:
            self._working.append(message)

    def replace(self, old: Message, new: Message) -> None:
        """Put ``new`` in place of ``old`` (the last occurrence) in the log and the streams."""
        self._sync()
        for position in range(len(self.messages) - 1, -1, -1):
            if self.messages[position] is old:
                self.messages[position] = new
                self._entries[position] = attrs.evolve(self._entries[position], message=new)
                self._working = None
                return
        raise ValueError("replace(): the message is not in the log")

    def reset(self) -> None:
        """Forget every message, and the calls that awaited approval."""
        self.messages = []
        self.suspended = None

    def view(self) -> MessageView:
        """A constant-time snapshot of the log as it is now."""
        return MessageView(self.messages)

    def open_tool_calls(self) -> list[ToolCall]:
        """Tool calls of the last assistant message that have no result yet, in order."""
        answered: set[str] = set()
        for message in reversed(self.messages):
            if isinstance(message, ToolResultMessage):
                answered.add(message.tool_call_id)
            elif isinstance(message, AssistantMessage):
                return [call for call in message.tool_calls if call.id not in answered]
            else:
                break
        return []

    # ----------------------------------------------------------------- the streams

    @property
    def user_context(self) -> tuple[UserMessage, ...]:
        """Every user message of the log, in order."""
        self._sync()
        return tuple(e.message for e in self._entries if isinstance(e.message, UserMessage))

    @property
    def inrun_context(self) -> tuple[InrunEntry, ...]:
        """Every assistant message and tool result of the log, with its state, in order."""
        self._sync()
        return tuple(e for e in self._entries if not isinstance(e.message, UserMessage))

    def working_context(self) -> MessageView:
        """The messages the model is sent next: a constant-time snapshot.

        Equal to the log until something is pruned or compacted.
        """
        return MessageView(self._working_list())

    def working_tokens(self) -> int:
        """The estimated tokens of the working context's messages."""
        working = self._working_list()
        counted, count, total = self._counted
        if counted is not working:
            count, total = 0, 0
        for message in working[count:]:
            total += self.token_estimator(message)
        self._counted = (working, len(working), total)
        return total

    def measured_tokens(self, sent: MessageView, prompt_tokens: int) -> int | None:
        """The working context's size in the model's own count, if it can be known.

        ``sent`` is a working context a model was sent and ``prompt_tokens`` the
        size it reported for that request (input, cache reads and writes). If
        nothing was pruned or compacted since, the result is ``prompt_tokens``
        plus the estimates of the messages added after it; otherwise None.
        """
        working = self._working_list()
        if sent._items is not working or len(sent) > len(working):
            return None
        return prompt_tokens + sum(self.token_estimator(m) for m in working[len(sent) :])

    def _working_list(self) -> list[Message]:
        self._sync()
        if self._working is None:
            self._working = self._build()
        return self._working

    def _build(self) -> list[Message]:
        entries = self._entries
        last_of_span = {
            entry.span: position
            for position, entry in enumerate(entries)
            if entry.state is not _LIVE and entry.note is not None
        }
        working: list[Message] = []
        for position, entry in enumerate(entries):
            if entry.state is _LIVE:
                working.append(entry.message if entry.shown is None else entry.shown)
            elif entry.note is not None and last_of_span[entry.span] == position:
                note = UserMessage((TextContent(entry.note),), timestamp=entry.message.timestamp)
                working.append(note)
        return working

    # ----------------------------------------------------------------- exchanges

    def _exchanges(self) -> list[list[int]]:
        """The in-run entries grouped into exchanges (positions in the log), oldest first.

        An exchange is an assistant message and every tool result answering one
        of its calls; a result that answers no known call joins the exchange
        before it.
        """
        groups: list[list[int]] = []
        owner: dict[str, list[int]] = {}
        for position, entry in enumerate(self._entries):
            message = entry.message
            if isinstance(message, AssistantMessage):
                group = [position]
                groups.append(group)
                for call in message.tool_calls:
                    owner[call.id] = group
            elif isinstance(message, ToolResultMessage):
                group = owner.get(message.tool_call_id) or (groups[-1] if groups else [])
                if not group:
                    groups.append(group)
                group.append(position)
        for group in groups:
            group.sort()
        return groups

    def _live_exchanges(self) -> list[list[int]]:
        """The exchanges all of whose entries are live, oldest first."""
        entries = self._entries
        return [g for g in self._exchanges() if all(entries[i].state is _LIVE for i in g)]

    def _tokens_of(self, positions: Iterable[int]) -> int:
        total = 0
        for position in positions:
            sent = self._entries[position].sent
            if sent is not None:
                total += self.token_estimator(sent)
        return total

    def _remove(self, positions: Iterable[int], state: EntryState, note: str | None) -> None:
        """Take ``positions`` out of the working context as one span standing as ``note``."""
        self._span_count += 1
        span = self._span_count
        for position in positions:
            entry = self._entries[position]
            self._entries[position] = InrunEntry(entry.message, state, None, note, span)
        self._working = None

    def _shorten(self, position: int, shown: Message) -> None:
        entry = self._entries[position]
        self._entries[position] = attrs.evolve(entry, shown=shown)
        self._working = None

    # ----------------------------------------------------------------- prun

    def prun(self, request: PrunRequest, *, keep: Message | None = None) -> PrunRecord:
        """Remove whole exchanges from the end of the in-run context; return what went.

        Walks the live exchanges from the newest, skipping the one whose
        assistant message is ``keep`` (the loop passes the message holding the
        prun call), and removes exchanges until at least ``request.tokens``
        tokens are freed or none are left. With a memo, one user message
        ``"[Pruned context summary: <memo>]"`` stands where they were.
        """
        self._sync()
        removed: list[int] = []
        freed = 0
        for group in reversed(self._live_exchanges()):
            if freed >= request.tokens:
                break
            if keep is not None and self._entries[group[0]].message is keep:
                continue
            freed += self._tokens_of(group)
            removed.extend(group)
        removed.sort()
        if removed:
            note = None if request.memo is None else prun_note(request.memo)
            self._remove(removed, EntryState.PRUNED, note)
        return PrunRecord(
            pruned_timestamps=tuple(self._entries[p].message.timestamp for p in removed),
            tokens_removed=freed,
            memo=request.memo,
        )

    # ----------------------------------------------------------------- replay

    def apply_record(self, record: PrunRecord | CompactionRecord) -> None:
        """Apply a recorded prun or compaction again, to rebuild the streams of a log.

        Messages are found by timestamp; timestamps the log does not have are
        ignored.
        """
        self._sync()
        positions = {e.message.timestamp: p for p, e in enumerate(self._entries)}
        if isinstance(record, PrunRecord):
            found = sorted(positions[t] for t in record.pruned_timestamps if t in positions)
            if found:
                note = None if record.memo is None else prun_note(record.memo)
                self._remove(found, EntryState.PRUNED, note)
            return
        for stamp in record.truncated_timestamps:
            position = positions.get(stamp)
            if position is None:
                continue
            message = self._entries[position].sent
            if isinstance(message, ToolResultMessage):
                shorter = truncate_result(
                    message, record.tool_output_max_lines, record.tool_output_max_chars
                )
                if shorter is not message:
                    self._shorten(position, shorter)
        found = sorted(positions[t] for t in record.removed_timestamps if t in positions)
        if found:
            self._remove(found, EntryState.COMPACTED, record.note)
