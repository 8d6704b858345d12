"""The provider contract, for the providers: its values (defined in :mod:`agentloop._provider`,
which loads no trio, so the loop core can use them) and the parsing of streamed arguments."""

from __future__ import annotations

from typing import Any

from .._provider import Emit as Emit
from .._provider import ModelRequest as ModelRequest
from .._provider import OutputFormat as OutputFormat
from .._provider import Provider as Provider
from .._provider import ToolDefinition as ToolDefinition
from .._text import loads
from ._errors import ProviderError as ProviderError

__all__ = [
    "Emit",
    "ModelRequest",
    "OutputFormat",
    "Provider",
    "ProviderError",
    "ToolDefinition",
    "parse_tool_arguments",
]


def parse_tool_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Parse a tool call's streamed arguments into ``(arguments, raw_arguments)``.

    Empty text means no arguments: ``({}, None)``. Text that is a JSON object
    gives ``(object, None)``. Anything else (malformed, cut off, not an object)
    gives ``({}, text)``, so the loop can tell the model exactly what it sent.

    >>> parse_tool_arguments('{"path": "a.txt"}')
    ({'path': 'a.txt'}, None)
    >>> parse_tool_arguments('{"path": "a.t')
    ({}, '{"path": "a.t')
    """
    if not text.strip():
        return {}, None
    try:
        value = loads(text)
    except ValueError:
        return {}, text
    if isinstance(value, dict):
        return value, None
    return {}, text
