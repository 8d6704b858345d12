"""Sampling: the values (:class:`McpSampling`, :class:`SamplingRequest`,
:class:`ModelPreferences`), and a connection's tool calls in flight, which the
requests count against (:class:`CallInFlight`).

:class:`~._requests.ServerRequests` answers the requests with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._check import check_number
from .._tool import Permissions
from .._types import (
    AssistantMessage,
    ImageContent,
    Message,
    StopReason,
    TextContent,
    UserMessage,
)
from ._base import public

if TYPE_CHECKING:
    from .._tool import ToolContext
    from ..providers import Provider

__all__ = [
    "SAMPLING_PERMISSION",
    "CallInFlight",
    "McpSampling",
    "ModelPreferences",
    "SamplingRequest",
    "SamplingSubject",
    "message_text",
    "sampling_request",
]

#: The tool name sampling requests are checked under by a :class:`Permissions`.
SAMPLING_PERMISSION = "mcp_sampling"
_DEFAULT_SAMPLING_TOKENS = 1024
#: The most tokens one sampling reply may take unless :attr:`McpSampling.max_tokens` says.
SAMPLING_MAX_TOKENS = 4096


@public
@attrs.frozen(kw_only=True)
class ModelPreferences:
    """A server's wishes for the model that answers it; advisory (MCP ``modelPreferences``).

    ``hints`` are model-name substrings in order of preference (``"sonnet"``);
    the priorities are 0..1 or None.
    """

    hints: tuple[str, ...] = ()
    cost_priority: float | None = None
    speed_priority: float | None = None
    intelligence_priority: float | None = None


@public
@attrs.frozen(kw_only=True)
class SamplingRequest:
    """A server asks the client's model for a reply (``sampling/createMessage``).

    ``messages`` are the server's conversation as agentloop messages;
    ``max_tokens`` is what the server asked for, capped by
    :attr:`McpSampling.max_tokens`: what the model is asked for.
    """

    server: str
    messages: tuple[Message, ...]
    system_prompt: str | None = None
    max_tokens: int = _DEFAULT_SAMPLING_TOKENS
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    preferences: ModelPreferences = attrs.field(factory=ModelPreferences)


def _check_sampling_tokens(instance: Any, attribute: Any, value: int | None) -> None:
    check_number(value, "max_tokens", at_least=1, integer=True, optional=True)


@public
@attrs.frozen(kw_only=True)
class McpSampling:
    """Lets MCP servers ask a model of the application's choosing for replies.

    Give it to :func:`~agentloop.mcp.open_mcp` as ``sampling=``; without it the
    client does not declare sampling, and servers cannot ask.

    Args:
        provider: The model that answers, or a plain function of the
            :class:`SamplingRequest` choosing one (the server's
            :class:`ModelPreferences` are on the request).
        permissions: Asked before each request, as a call of the tool
            ``"mcp_sampling"`` whose subject is the server's name: rules like
            ``"mcp_sampling(weather)"``; ``ask`` rules reach the approver with
            the request's messages in ``arguments``. None: every request runs.
        max_tokens: The most tokens one reply may take, whatever the server
            asks: the model is asked for the smaller of the two (default
            4096; None: the server's figure).

    Tokens spent are counted in the usage of the run whose tool call the
    request came during (the call of this server started first, if several
    are in flight), and in :attr:`McpConnection.sampling_usage`. Each request
    is checked against that run's limits first, as the run's own model
    requests are, and counts in its ``max_requests``: once the run has
    reached a limit, the server's request is refused (an MCP error) and the
    tool call ends with an error result; the run then stops. A connection
    answers one sampling request at a time, so each is checked knowing what
    the one before cost.

    Raises:
        ValueError: ``max_tokens`` is not a positive integer.
    """

    provider: Provider | Callable[[SamplingRequest], Provider] = attrs.field(kw_only=False)
    permissions: Permissions | None = None
    max_tokens: int | None = attrs.field(
        default=SAMPLING_MAX_TOKENS, validator=_check_sampling_tokens
    )


class SamplingSubject:
    """Gives :class:`Permissions` the subject of a sampling request: ``("server", name)``."""

    def __init__(self, server: str) -> None:
        self._server = server

    def permission_subject(self, params: dict[str, Any]) -> tuple[str, str]:
        return ("server", self._server)


class CallInFlight:
    """A tool call of the connection in flight: the agent's context, and how to end it.

    The connection runs the call in :attr:`scope`; :meth:`end` cancels it, and
    the call fails with ``why`` (a :class:`~agentloop.ToolError`).
    """

    __slots__ = ("context", "ended", "limit", "scope")

    def __init__(self, context: ToolContext) -> None:
        self.context = context
        self.scope = trio.CancelScope()
        self.ended: str | None = None
        self.limit: str | None = None  # the run's limit that ended it

    def end(self, why: str) -> None:
        """End the call now: it fails with ``why``."""
        if self.ended is None:
            self.ended = why
        self.scope.cancel()


def sampling_request(server: str, params: Any, sampling: McpSampling) -> SamplingRequest | str:
    """The server's ``sampling/createMessage`` params as a :class:`SamplingRequest`, its
    ``max_tokens`` capped; or why the client's model cannot take it."""
    messages: list[Message] = []
    for message in params.messages:
        blocks = message.content if isinstance(message.content, list) else [message.content]
        content: list[Any] = []
        for block in blocks:
            if block.type == "text":
                content.append(TextContent(block.text))
            elif block.type == "image":
                content.append(ImageContent(block.data, block.mime_type))
            else:
                return f"The client cannot send {block.type} content to its model"
        if message.role == "user":
            messages.append(UserMessage(tuple(content)))
        else:
            texts = tuple(b for b in content if isinstance(b, TextContent))
            messages.append(AssistantMessage(texts, stop_reason=StopReason.STOP))
    preferences = params.model_preferences
    hints: tuple[str, ...] = ()
    if preferences is not None and preferences.hints:
        hints = tuple(h.name for h in preferences.hints if h.name)
    max_tokens = params.max_tokens
    if sampling.max_tokens is not None:
        max_tokens = min(max_tokens, sampling.max_tokens)
    return SamplingRequest(
        server=server,
        messages=tuple(messages),
        system_prompt=params.system_prompt,
        max_tokens=max_tokens,
        temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences or ()),
        preferences=ModelPreferences(
            hints=hints,
            cost_priority=getattr(preferences, "cost_priority", None),
            speed_priority=getattr(preferences, "speed_priority", None),
            intelligence_priority=getattr(preferences, "intelligence_priority", None),
        ),
    )


def message_text(message: Message) -> dict[str, str]:
    """A message as the permission approver sees it: its role and its text."""
    role = "user" if isinstance(message, UserMessage) else "assistant"
    parts = [b.text if isinstance(b, TextContent) else "[image]" for b in message.content]
    return {"role": role, "text": "\n".join(parts)}
