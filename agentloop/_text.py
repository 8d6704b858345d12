"""Text that can always be encoded again: lone surrogates replaced at the boundary.

A Python ``str`` may hold a lone surrogate (U+D800..U+DFFF): ``json.loads``
makes one from the escape ``"\\ud800"``, ``os.fsdecode`` from an undecodable
file name. Such a string cannot be encoded as UTF-8, so once one enters the
history every later request fails before it is sent. Whatever enters the
history passes through :func:`scrub` (or :func:`scrub_json`) first: each lone
surrogate becomes U+FFFD, the replacement character. A string that is
already valid comes back as the same object, at the cost of one ``isascii``
or one ``encode`` in C.

JSON from outside (a model's tool arguments and answers, an API's stream, a
server's reply, a file) is read with :func:`loads`, which also refuses text
nested deeper than :data:`MAX_JSON_DEPTH` before decoding it: Python's decoder,
and what walks a decoded value afterwards (a schema check, ``repr``, a copy),
recurse once or more per level, and past Python's recursion limit that is a
``RecursionError`` instead of an answer.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from ._errors import AgentloopError

__all__ = [
    "MAX_JSON_DEPTH",
    "REPLACEMENT",
    "JSONTooDeep",
    "check_depth",
    "checked_text",
    "loads",
    "needs_scrub",
    "scrub",
    "scrub_json",
]

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")

#: The deepest nesting of arrays and objects :func:`loads` reads. Python's recursion
#: limit (1,000 frames by default) is shared by the decoder, by what walks the value
#: next (a recursive JSON Schema costs its validator about 4 frames per level, a
#: copy 2) and by the caller's own stack; 128 leaves room for all of them. It is
#: serde_json's default too (pydantic's is 200). Real tool arguments and answers
#: nest a handful of levels.
MAX_JSON_DEPTH: Final = 128

_NOT_BRACKET = bytes(byte for byte in range(256) if byte not in b"[]{}")
_AS_PARENS = bytes.maketrans(b"[]{}", b"()()")
_OPEN = ord("(")


class JSONTooDeep(AgentloopError, ValueError):
    """JSON text nested deeper than :data:`MAX_JSON_DEPTH`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"nested deeper than {limit} levels")
        self.limit = limit


def check_depth(text: str, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise :class:`JSONTooDeep` if ``text`` opens more than ``limit`` arrays or
    objects inside one another (brackets in strings do not count).

    Linear in the length of ``text``, and mostly in C: a text with at most
    ``limit`` brackets passes at once; otherwise its strings are cut out and
    its brackets summed in runs short enough that none can cross the limit
    unseen (``limit - depth`` brackets at a time). Text that is not JSON is
    measured all the same; what is wrong with it, the decoder says.

    >>> check_depth('[["[[["]]', limit=2)
    >>> check_depth("[[[1]]]", limit=2)
    Traceback (most recent call last):
    ...
    agentloop._text.JSONTooDeep: nested deeper than 2 levels
    """
    if text.count("[") + text.count("{") <= limit:
        return
    if "\\" in text:  # escaped backslashes, then escaped quotes: what is left are string ends
        text = text.replace("\\\\", "").replace('\\"', "")
    outside = "".join(text.split('"')[::2])  # an unclosed string's text is left out too
    brackets = outside.encode("ascii", "ignore").translate(_AS_PARENS, _NOT_BRACKET)
    depth = 0
    position = 0
    size = len(brackets)
    while position < size:
        room = limit - depth
        if room <= 0:
            if brackets[position] == _OPEN:
                raise JSONTooDeep(limit)
            depth -= 1
            position += 1
            continue
        end = min(position + room, size)
        depth += 2 * brackets.count(b"(", position, end) - (end - position)
        position = end


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


def scrub_json(value: Any, _depth: int = 0) -> Any:
    """A JSON-like value (dicts, lists, tuples, strings, scalars) with every string
    scrubbed, keys included; ``value`` itself when nothing needed it.

    Other objects are returned as they are. A value of any depth is walked (past
    64 levels by a loop, not recursion: a tool's ``details`` may nest deeper than
    Python's recursion limit). A container that holds itself is copied 65 levels
    down, then left as it is.

    >>> scrub_json({"k\\udc80": ["v\\ud800", 1]})
    {'k\\ufffd': ['v\\ufffd', 1]}
    """
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        if _depth >= _RECURSE:
            return _scrub_deep(value)
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            new_key = scrub(key) if isinstance(key, str) else key
            new_item = scrub_json(item, _depth + 1)
            changed = changed or new_key is not key or new_item is not item
            out[new_key] = new_item
        return out if changed else value
    if isinstance(value, list | tuple):
        if _depth >= _RECURSE:
            return _scrub_deep(value)
        items = [scrub_json(item, _depth + 1) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    return value


# Levels scrubbed by recursion (fast for the usual shallow value); deeper ones by a loop.
_RECURSE = 64


class _Walk:
    """One container of :func:`_scrub_deep`'s walk: its entries, and what they became."""

    __slots__ = ("changed", "entries", "key", "out", "value")

    def __init__(self, value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> None:
        self.value = value
        self.entries = iter(value.items()) if isinstance(value, dict) else enumerate(value)
        self.out: list[tuple[Any, Any]] = []
        self.changed = False
        self.key: Any = None  # the key of the entry whose container is being walked

    def next_container(self) -> Any:
        """Scrub entries up to one holding a container (returned), or to the end (None)."""
        is_dict = isinstance(self.value, dict)
        for key, item in self.entries:
            new_key = scrub(key) if is_dict and isinstance(key, str) else key
            self.changed = self.changed or new_key is not key
            if isinstance(item, dict | list | tuple):
                self.key = new_key
                return item
            new_item = scrub(item) if isinstance(item, str) else item
            self.changed = self.changed or new_item is not item
            self.out.append((new_key, new_item))
        return None

    def take(self, old: Any, new: Any) -> None:
        """The container of the current entry, walked."""
        self.changed = self.changed or new is not old
        self.out.append((self.key, new))

    def result(self) -> Any:
        value = self.value
        if not self.changed:
            return value
        if isinstance(value, dict):
            return dict(self.out)
        items = [item for _, item in self.out]
        return items if isinstance(value, list) else tuple(items)


def _scrub_deep(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> Any:
    """:func:`scrub_json` with an explicit stack instead of recursion."""
    stack = [_Walk(value)]
    on_path = {id(value)}
    while True:
        walk = stack[-1]
        child = walk.next_container()
        if child is not None:
            if id(child) in on_path:  # a cycle: leave it as it is
                walk.take(child, child)
            else:
                on_path.add(id(child))
                stack.append(_Walk(child))
            continue
        stack.pop()
        on_path.discard(id(walk.value))
        result = walk.result()
        if not stack:
            return result
        stack[-1].take(walk.value, result)


def checked_text(text: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> str:
    """``text`` as a ``str`` (bytes decoded as ``json.loads`` decodes them), after
    :func:`check_depth`: what to give ``json.loads`` when :func:`loads` will not do.

    Raises:
        JSONTooDeep: ``text`` nests deeper than ``max_depth`` (a ``ValueError``).
        UnicodeDecodeError: bytes that are not UTF-8, -16 or -32 (a ``ValueError``).
    """
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    check_depth(text, max_depth)
    return text


def loads(text: str | bytes, *, max_depth: int | None = MAX_JSON_DEPTH) -> Any:
    """``json.loads(text)``, refusing text nested deeper than :data:`MAX_JSON_DEPTH`,
    with lone surrogates from ``\\uD8xx`` escapes scrubbed.

    Only a text holding such an escape is walked again, so the common case costs
    two substring searches. (Text decoded from UTF-8 bytes holds no raw
    surrogate: only escapes make them.) ``max_depth=None`` skips the depth
    check, for a caller that made sure of it.

    >>> loads('{"a": "x\\\\ud800"}')
    {'a': 'x\ufffd'}

    Raises:
        JSONTooDeep: ``text`` nests deeper than ``max_depth`` (a ``ValueError``).
        ValueError: ``text`` is not JSON (or, as bytes, not UTF-8, -16 or -32).
    """
    if isinstance(text, bytes):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    if max_depth is not None:
        check_depth(text, max_depth)
    value = json.loads(text)
    if "\\ud" in text or "\\uD" in text:
        return scrub_json(value)
    return value
