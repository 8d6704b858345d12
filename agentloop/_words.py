"""Counts in words: ``1 line``, ``2 lines``, ``1 entry``, ``3 entries``."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word``, in the plural unless ``count`` is 1.

    The plural is ``word`` + ``s``, or ``many`` when given (an irregular one).

    >>> plural(1, "line"), plural(2, "line"), plural(0, "entry", "entries")
    ('1 line', '2 lines', '0 entries')
    """
    return f"{count} {word if count == 1 else many or word + 's'}"
