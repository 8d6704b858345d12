"""Text that can always be encoded again: lone surrogates replaced at the boundary.

A Python ``str`` may hold a lone surrogate (U+D800..U+DFFF): ``json.loads``
makes one from the escape ``"\\ud800"``, ``os.fsdecode`` from an undecodable
file name. Such a string cannot be encoded as UTF-8, so once one enters the
history every later request fails before it is sent. Whatever enters the
history passes through :func:`scrub` (or :func:`scrub_json`) first: each lone
surrogate becomes U+FFFD, the replacement character. A string that is
already valid comes back as the same object, at the cost of one ``isascii``
or one ``encode`` in C.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["REPLACEMENT", "loads", "needs_scrub", "scrub", "scrub_json"]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def needs_scrub(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (cannot be encoded as UTF-8)."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def scrub(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD; ``text`` itself if none.

    >>> scrub("ok")
    'ok'
    >>> scrub("a\\ud800b")
    'a\\ufffdb'
    """
    if not needs_scrub(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def scrub_json(value: Any) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings, scalars) with every string
    scrubbed, keys included; ``value`` itself when nothing needed it.

    Other objects are returned as they are.

    >>> scrub_json({"k\\udc80": ["v\\ud800", 1]})
    {'k\\ufffd': ['v\\ufffd', 1]}
    """
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = scrub(key) if isinstance(key, str) else key
            new_item = scrub_json(item)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, list | tuple):
        items = [scrub_json(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


def loads(text: str) -> Any:
    """``json.loads(text)``, with lone surrogates from ``\\uD8xx`` escapes scrubbed.

    Only a text holding such an escape is walked again, so the common case costs
    two substring searches. (Text decoded from UTF-8 bytes holds no raw
    surrogate: only escapes make them.)

    >>> loads('{"a": "x\\\\ud800"}')
    {'a': 'x\ufffd'}

    Raises:
        ValueError: ``text`` is not JSON.
    """
    value = json.loads(text)
    if "\\ud" in text or "\\uD" in text:
        return scrub_json(value)
    return value
