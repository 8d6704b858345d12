"""Tool names that model APIs accept: ``[a-zA-Z0-9_-]{1,64}``, unique within a set."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = ["MAX_TOOL_NAME", "UniqueNames", "check_tool_name", "model_tool_name"]

MAX_TOOL_NAME = 64
_INVALID = re.compile(r"[^a-zA-Z0-9_-]")


def check_tool_name(name: object, what: str = "Output name") -> None:
    """Raise ``ValueError`` unless ``name`` is a tool name model APIs accept."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_TOOL_NAME or _INVALID.search(name):
        raise ValueError(
            f"{what} must be 1-64 characters from a-z, A-Z, 0-9, '_' and '-', got {name!r}"
        )


def model_tool_name(prefix: str | None, raw: str) -> str:
    """``PREFIX__raw`` (or ``raw``), made valid for model APIs.

    Other characters become ``_``; a name past 64 characters is cut and given
    a short hash of the whole, so two long names stay apart.
    """
    name = f"{prefix}__{raw}" if prefix else raw
    cleaned = _INVALID.sub("_", name) or "_"
    if len(cleaned) > MAX_TOOL_NAME:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        cleaned = f"{cleaned[: MAX_TOOL_NAME - 9]}_{digest}"
    return cleaned


class UniqueNames:
    """Names given out once each: ``name`` itself, else the first of ``name_2``,
    ``name_3``... not given yet (kept within 64 characters).

    Each name's next number is remembered, so giving out ``n`` copies of one
    name takes time linear in ``n``, not quadratic.

    >>> names = UniqueNames(["a_2"])
    >>> [names.add("a"), names.add("a"), names.add("a")]
    ['a', 'a_3', 'a_4']
    """

    __slots__ = ("_next", "_taken")

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._taken = set(taken)
        self._next: dict[str, int] = {}

    def __contains__(self, name: object) -> bool:
        return name in self._taken

    def add(self, name: str) -> str:
        """Give out ``name``, or the first free ``name_<n>``; return what was given."""
        taken = self._taken
        candidate = name
        if candidate in taken:
            number = self._next.get(name, 2)
            while True:
                suffix = f"_{number}"
                candidate = name[: MAX_TOOL_NAME - len(suffix)] + suffix
                number += 1
                if candidate not in taken:
                    break
            self._next[name] = number
        taken.add(candidate)
        return candidate
