"""Parameter serialization: OpenAPI's styles for path, query, header and cookie values.

https://spec.openapis.org/oas/v3.1.0#style-values. Values are percent-encoded
(RFC 3986: everything but ``A-Z a-z 0-9 - . _ ~``; with ``allowReserved`` the
reserved characters too are sent as they are); the separators a style adds are
not. Headers are not encoded, and may not hold line breaks.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from .._tool import ToolError

__all__ = ["cookie_pairs", "encode", "header_value", "path_value", "query_pairs", "scalar"]

_RESERVED = ":/?#[]@!$&'()*+,;="


def scalar(value: Any) -> str:
    """One value as text: ``true``/``false``, numbers as JSON, nested values as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, int | float):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode(value: Any, *, allow_reserved: bool = False) -> str:
    """``scalar(value)``, percent-encoded."""
    return quote(scalar(value), safe="-._~" + (_RESERVED if allow_reserved else ""))


def _items(value: Any) -> list[tuple[str, Any]] | None:
    return list(value.items()) if isinstance(value, dict) else None


def path_value(name: str, value: Any, style: str, explode: bool) -> str:
    """The text that replaces ``{name}`` in the path."""
    pairs = _items(value)
    if style == "matrix":
        if isinstance(value, list):
            if explode:
                return "".join(f";{name}={encode(v)}" for v in value) or f";{name}"
            return f";{name}=" + ",".join(encode(v) for v in value) if value else f";{name}"
        if pairs is not None:
            if explode:
                return "".join(f";{encode(k)}={encode(v)}" for k, v in pairs)
            return f";{name}=" + ",".join(f"{encode(k)},{encode(v)}" for k, v in pairs)
        return f";{name}" if value is None or value == "" else f";{name}={encode(value)}"
    if style == "label":
        separator = "." if explode else ","
        if isinstance(value, list):
            return "." + separator.join(encode(v) for v in value)
        if pairs is not None:
            if explode:
                return "." + ".".join(f"{encode(k)}={encode(v)}" for k, v in pairs)
            return "." + ",".join(f"{encode(k)},{encode(v)}" for k, v in pairs)
        return "." + encode(value)
    # simple
    if isinstance(value, list):
        return ",".join(encode(v) for v in value)
    if pairs is not None:
        if explode:
            return ",".join(f"{encode(k)}={encode(v)}" for k, v in pairs)
        return ",".join(f"{encode(k)},{encode(v)}" for k, v in pairs)
    return encode(value)


def query_pairs(
    name: str, value: Any, style: str, explode: bool, allow_reserved: bool = False
) -> list[str]:
    """The ``key=value`` pieces of the query string for one parameter."""

    def enc(item: Any) -> str:
        return encode(item, allow_reserved=allow_reserved)

    key = encode(name)
    pairs = _items(value)
    if style == "deepObject" and pairs is not None:
        return [f"{key}%5B{encode(k)}%5D={enc(v)}" for k, v in pairs]
    delimiter = {"spaceDelimited": "%20", "pipeDelimited": "%7C"}.get(style, ",")
    if isinstance(value, list):
        if explode:
            return [f"{key}={enc(v)}" for v in value]
        return [f"{key}=" + delimiter.join(enc(v) for v in value)]
    if pairs is not None:
        if explode:
            return [f"{encode(k)}={enc(v)}" for k, v in pairs]
        return [f"{key}=" + delimiter.join(f"{enc(k)}{delimiter}{enc(v)}" for k, v in pairs)]
    return [f"{key}={enc(value)}"]


def header_value(name: str, value: Any, explode: bool) -> str:
    """A header's value (style ``simple``).

    Raises:
        ToolError: the value holds a line break (it would start another header).
    """
    pairs = _items(value)
    if isinstance(value, list):
        text = ",".join(scalar(v) for v in value)
    elif pairs is not None:
        sep = "=" if explode else ","
        text = ",".join(f"{k}{sep}{scalar(v)}" for k, v in pairs)
    else:
        text = scalar(value)
    if "\r" in text or "\n" in text or "\0" in text:
        raise ToolError(f"the header parameter '{name}' may not contain line breaks")
    return text


def cookie_pairs(name: str, value: Any, explode: bool) -> list[str]:
    """The ``name=value`` pieces of the Cookie header for one parameter (style ``form``)."""
    pairs = _items(value)
    if isinstance(value, list):
        if explode:
            return [f"{name}={encode(v)}" for v in value]
        return [f"{name}=" + ",".join(encode(v) for v in value)]
    if pairs is not None:
        if explode:
            return [f"{encode(k)}={encode(v)}" for k, v in pairs]
        return [f"{name}=" + ",".join(f"{encode(k)},{encode(v)}" for k, v in pairs)]
    return [f"{name}={encode(value)}"]
