"""Tool names that model APIs accept: ``[a-zA-Z0-9_-]{1,64}``, unique within a set."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Container

__all__ = ["MAX_TOOL_NAME", "check_tool_name", "model_tool_name", "unique_name"]

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


def unique_name(name: str, taken: Container[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... (kept within 64 characters): the first not taken."""
    candidate, number = name, 2
    while candidate in taken:
        suffix = f"_{number}"
        candidate, number = name[: MAX_TOOL_NAME - len(suffix)] + suffix, number + 1
    return candidate
