"""ScriptedProvider: a deterministic, offline model that replays a script of turns."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeAlias

import attrs
import trio

from .._errors import AgentloopError
from .._events import StreamDelta, TextDelta, ThinkingDelta, ToolCallDelta
from .._types import (
    AssistantContent,
    AssistantMessage,
    Message,
    StopReason,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
)
from ._base import Emit, ModelRequest, parse_tool_arguments

__all__ = [
    "ScriptExhausted",
    "ScriptStep",
    "ScriptedCall",
    "ScriptedProvider",
    "ScriptedTurn",
    "call",
    "fail",
    "reply",
]


@attrs.frozen(kw_only=True)
class ScriptedCall:
    """A tool call in a script.

    ``arguments`` is a dict (sent as its JSON) or a string sent exactly as
    written, which lets a script send malformed JSON. ``id`` defaults to
    ``"call_<n>"``, numbered from 1 across the provider's life.
    """

    name: str
    arguments: dict[str, Any] | str = attrs.field(factory=dict)
    id: str | None = None


ScriptedBlock: TypeAlias = str | TextContent | ThinkingContent | ScriptedCall


def _blocks(value: Iterable[ScriptedBlock]) -> tuple[ScriptedBlock, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True)
class ScriptedTurn:
    """One scripted model reply.

    Attributes:
        content: Text (``str`` or :class:`TextContent`), thinking and
            :class:`ScriptedCall` blocks, streamed in this order.
        stop_reason: Defaults to ``TOOL_USE`` when there are calls, else ``STOP``.
        usage: Defaults to an estimate: UTF-8 bytes / 4 of the request and of the reply.
        delay: Seconds to wait before streaming (overrides the provider's ``delay``).
        error: Raised after ``content`` has streamed. A
            :class:`~agentloop.providers.ProviderError` ends the turn as an error
            message; any other exception leaves the run.
    """

    content: tuple[ScriptedBlock, ...] = attrs.field(default=(), converter=_blocks)
    stop_reason: StopReason | None = None
    usage: Usage | None = None
    delay: float | None = None
    error: BaseException | None = None


ScriptStep: TypeAlias = ScriptedTurn | Callable[[ModelRequest], ScriptedTurn]


def reply(
    *content: ScriptedBlock,
    stop_reason: StopReason | None = None,
    usage: Usage | None = None,
    delay: float | None = None,
) -> ScriptedTurn:
    """A scripted turn: ``reply("Looking.", call("ls", {"path": "."}))``."""
    return ScriptedTurn(content=content, stop_reason=stop_reason, usage=usage, delay=delay)


def call(
    name: str, arguments: dict[str, Any] | str | None = None, *, id: str | None = None
) -> ScriptedCall:
    """A scripted tool call; ``arguments`` may be a dict or raw (even broken) JSON text."""
    return ScriptedCall(name=name, arguments={} if arguments is None else arguments, id=id)


def fail(error: BaseException, *content: ScriptedBlock, delay: float | None = None) -> ScriptedTurn:
    """A scripted turn that streams ``content``, then raises ``error``."""
    return ScriptedTurn(content=content, error=error, delay=delay)


class ScriptExhausted(AgentloopError):
    """The model was called more times than the script has turns."""


_WORD = re.compile(r"\s*\S+\s*|\s+")


def _utf8_size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _estimate(text: str) -> int:
    return math.ceil(_utf8_size(text) / 4)


def _message_text(message: Message) -> str:
    parts: list[str] = []
    for block in message.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ThinkingContent):
            parts.append(block.thinking)
        elif isinstance(block, ToolCall):
            parts.append(block.name + json.dumps(block.arguments))
        else:
            parts.append("x" * (len(block.data) * 3 // 4 // 100))
    if isinstance(message, ToolResultMessage):
        parts.append(message.tool_name)
    return "".join(parts)


class ScriptedProvider:
    """A model that replays a script: deterministic, offline, and honest about the wire.

    Each call to :meth:`stream` takes the next step of ``script``. Text and
    thinking stream word by word (each word with the whitespace around it);
    tool-call arguments stream as chunks of ``chunk_size`` characters of their
    JSON, the way real APIs send partial JSON. A step may be a function of the
    request, for scripts that react to what the tools returned.

    Every request is kept in :attr:`requests`, so tests can check what the
    model was sent.

    Example::

        provider = ScriptedProvider([
            reply("Let me look.", call("list_files", {"path": "."})),
            reply("There are 3 files."),
        ])

    Args:
        script: The turns to replay, in order.
        delay: Seconds to wait (``trio.sleep``, so a ``MockClock`` drives it)
            before each turn streams, unless the turn sets its own.
        delta_delay: Seconds to wait before each delta after the first.
        chunk_size: Characters of JSON per tool-call argument chunk.
        model: The ``model`` name put on replies.

    Raises:
        ScriptExhausted: from :meth:`stream`, when the script has no turn left.

    Cancellation: ``stream`` stops at its next checkpoint (every delta is one).
    """

    provider_name = "scripted"

    def __init__(
        self,
        script: Iterable[ScriptStep] = (),
        *,
        delay: float = 0.0,
        delta_delay: float = 0.0,
        chunk_size: int = 8,
        model: str = "scripted",
    ) -> None:
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        self._script: list[ScriptStep] = list(script)
        self._position = 0
        self._next_call_id = 1
        self.delay = delay
        self.delta_delay = delta_delay
        self.chunk_size = chunk_size
        self.model = model
        self.requests: list[ModelRequest] = []
        self._sizes: dict[int, tuple[Message, int]] = {}  # by id(message), for usage estimates

    def add(self, *steps: ScriptStep) -> None:
        """Append steps to the script."""
        self._script.extend(steps)

    @property
    def remaining(self) -> int:
        """How many scripted turns have not been played yet."""
        return len(self._script) - self._position

    async def stream(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Play the next scripted turn; see the class docstring."""
        self.requests.append(request)
        if self._position >= len(self._script):
            raise ScriptExhausted(
                f"ScriptedProvider: request {len(self.requests)} has no scripted turn "
                f"({len(self._script)} scripted)"
            )
        step = self._script[self._position]
        self._position += 1
        turn = step if isinstance(step, ScriptedTurn) else step(request)

        delay = self.delay if turn.delay is None else turn.delay
        if delay > 0:
            await trio.sleep(delay)
        else:
            await trio.lowlevel.checkpoint()

        content: list[AssistantContent] = []
        send = emit if self.delta_delay <= 0 else self._spaced(emit, self.delta_delay)

        for index, block in enumerate(turn.content):
            if isinstance(block, str):
                block = TextContent(block)
            if isinstance(block, TextContent):
                for word in _WORD.findall(block.text):
                    await send(TextDelta(delta=word, index=index))
                content.append(block)
            elif isinstance(block, ThinkingContent):
                for word in _WORD.findall(block.thinking):
                    await send(ThinkingDelta(delta=word, index=index))
                content.append(block)
            else:
                call_id = block.id or f"call_{self._next_call_id}"
                self._next_call_id += 1
                raw = (
                    block.arguments
                    if isinstance(block.arguments, str)
                    else json.dumps(block.arguments)
                )
                for start in range(0, len(raw), self.chunk_size):
                    chunk = raw[start : start + self.chunk_size]
                    await send(
                        ToolCallDelta(
                            delta=chunk, index=index, tool_call_id=call_id, name=block.name
                        )
                    )
                arguments, raw_arguments = parse_tool_arguments(raw)
                content.append(ToolCall(call_id, block.name, arguments, raw_arguments))

        if turn.error is not None:
            raise turn.error

        has_calls = any(isinstance(block, ToolCall) for block in content)
        stop_reason = turn.stop_reason or (StopReason.TOOL_USE if has_calls else StopReason.STOP)
        usage = turn.usage if turn.usage is not None else self._estimate_usage(request, content)
        return AssistantMessage(
            tuple(content), stop_reason, model=self.model, provider=self.provider_name, usage=usage
        )

    @staticmethod
    def _spaced(emit: Emit, delay: float) -> Emit:
        """``emit``, waiting ``delay`` seconds before each delta after the first."""
        first = True

        async def send(delta: StreamDelta) -> None:
            nonlocal first
            if not first:
                await trio.sleep(delay)
            first = False
            await emit(delta)

        return send

    def _size(self, message: Message) -> int:
        """The UTF-8 size of ``message``'s text, measured once per message object."""
        known = self._sizes.get(id(message))
        if known is not None and known[0] is message:
            return known[1]
        size = _utf8_size(_message_text(message))
        self._sizes[id(message)] = (message, size)  # the object is kept: its id stays its own
        return size

    def _estimate_usage(self, request: ModelRequest, content: Sequence[AssistantContent]) -> Usage:
        tools = "".join(t.name + t.description + json.dumps(t.parameters) for t in request.tools)
        sent = _utf8_size(request.system_prompt + tools)
        sent += sum(self._size(message) for message in request.messages)
        received = _message_text(AssistantMessage(tuple(content), StopReason.STOP))
        input_tokens, output_tokens = math.ceil(sent / 4), _estimate(received)
        return Usage(
            input=input_tokens, output=output_tokens, total_tokens=input_tokens + output_tokens
        )
