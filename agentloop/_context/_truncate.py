"""Shortening a tool output to its first and last lines, idempotently."""

from __future__ import annotations

import attrs

from .._types import ImageContent, TextContent, ToolResultContent, ToolResultMessage
from .._words import plural

__all__ = ["IMAGE_NOTE", "truncate_result", "truncate_text"]

IMAGE_NOTE = "[image removed to save context]"


def _take(lines: list[str], count: int, budget: int, *, from_end: bool) -> list[str]:
    """Up to ``count`` whole lines from one end within ``budget`` characters (newlines
    included); the last one taken may be cut to fit."""
    taken: list[str] = []
    for line in reversed(lines) if from_end else lines:
        if len(taken) == count or budget <= 0:
            break
        if len(line) + 1 > budget:
            taken.append(line[len(line) - (budget - 1) :] if from_end else line[: budget - 1])
            break
        taken.append(line)
        budget -= len(line) + 1
    return taken[::-1] if from_end else taken


def truncate_text(text: str, max_lines: int, max_chars: int) -> str:
    """``text`` cut to its first and last lines, with one marker line between them.

    The result has at most ``max_lines`` lines (``max_lines >= 3``) and
    ``max_chars`` characters (``max_chars >= 200``): about half of each from
    the start and half from the end. A text within both limits, a result of
    this function included, comes back unchanged, so truncating twice is
    truncating once.

    >>> truncate_text("\\n".join(str(n) for n in range(10)), 5, 1000)
    '0\\n1\\n[... 6 lines, 12 characters truncated ...]\\n8\\n9'
    """
    if text.count("\n") < max_lines and len(text) <= max_chars:
        return text
    lines = text.split("\n")
    digits = len(str(len(text)))
    reserve = len("[...  lines,  characters truncated ...]") + 2 * digits + 2
    budget = max_chars - reserve
    keep = max_lines - 1
    head = _take(lines, keep // 2, budget // 2, from_end=False)
    tail = _take(lines, keep - keep // 2, budget - budget // 2, from_end=True)
    shown = sum(len(line) + 1 for line in head) + sum(len(line) + 1 for line in tail)
    cut_lines = len(lines) - len(head) - len(tail)
    cut_chars = len(text) + 1 - shown
    marker = f"[... {plural(cut_lines, 'line')}, {plural(cut_chars, 'character')} truncated ...]"
    return "\n".join([*head, marker, *tail])


def truncate_result(
    message: ToolResultMessage, max_lines: int, max_chars: int
) -> ToolResultMessage:
    """``message`` with each text block truncated and each image replaced by a note.

    Returns ``message`` itself when nothing needed shortening.
    """
    content: list[ToolResultContent] = []
    changed = False
    for block in message.content:
        if isinstance(block, ImageContent):
            content.append(TextContent(IMAGE_NOTE))
            changed = True
        else:
            text = truncate_text(block.text, max_lines, max_chars)
            changed = changed or text != block.text
            content.append(TextContent(text) if text != block.text else block)
    if not changed:
        return message
    return attrs.evolve(message, content=tuple(content))
