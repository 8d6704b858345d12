"""Token estimates: how much of a model's context window a message takes, roughly.

The default counts UTF-8 bytes / 4 for text (a fair average for English and
code), a size-based figure for images, and a tool call's name and JSON
arguments. Plug in a real tokenizer with ``AgentContext(token_estimator=...)``
or ``Agent(token_estimator=...)``: any function from a message to an int.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from typing import TypeAlias

from .._types import (
    Content,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolResultMessage,
)

__all__ = ["TokenEstimator", "estimate_text_tokens", "estimate_tokens"]

#: A function estimating how many tokens a message takes in a request.
TokenEstimator: TypeAlias = Callable[[Message], int]


def estimate_text_tokens(text: str) -> int:
    """``ceil(utf8_bytes / 4)``: the default estimate for a piece of text.

    >>> estimate_text_tokens("hello world!")
    3
    """
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    return math.ceil(size / 4)


def _image_tokens(data: str) -> int:
    # Providers bill images by pixels; the encoded size is what we know.
    return min(max((len(data) * 3 // 4) // 750, 85), 16_000)


def _content_tokens(block: Content) -> int:
    if isinstance(block, TextContent):
        return estimate_text_tokens(block.text)
    if isinstance(block, ImageContent):
        return _image_tokens(block.data)
    if isinstance(block, ThinkingContent):
        return estimate_text_tokens(block.thinking)
    arguments = json.dumps(block.arguments, ensure_ascii=False, separators=(",", ":"))
    return estimate_text_tokens(block.name) + estimate_text_tokens(arguments) + 8


def _sum(blocks: Iterable[Content]) -> int:
    return sum(_content_tokens(block) for block in blocks)


def estimate_tokens(message: Message) -> int:
    """The default estimate of the tokens ``message`` takes in a request.

    Text: UTF-8 bytes / 4, rounded up. Images: by encoded size, 85 to 16,000.
    Tool calls: name and JSON arguments, plus 8. Each message adds 4 for its
    framing; a tool result adds its tool's name and 8.

    >>> from agentloop import UserMessage
    >>> estimate_tokens(UserMessage.text("What is in this directory?"))
    11
    """
    if isinstance(message, ToolResultMessage):
        return _sum(message.content) + estimate_text_tokens(message.tool_name) + 8
    return _sum(message.content) + 4
