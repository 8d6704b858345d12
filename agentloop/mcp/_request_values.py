"""The values of what an MCP server may ask of its client: elicitation, roots, logs.

They need no MCP SDK; :mod:`._requests` turns them into the SDK's callbacks, and
:class:`~._config.McpConfig` holds the application's handlers for them.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias
from urllib.parse import quote, unquote, urlsplit

import attrs

from ._base import public

__all__ = [
    "LOG_LEVELS",
    "Elicitation",
    "ElicitationAnswer",
    "ElicitationHandler",
    "LogHandler",
    "McpLogMessage",
    "McpRoot",
    "form_problems",
    "schema_defaults",
]

#: The levels of MCP log messages, least severe first.
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


# --------------------------------------------------------------------------- elicitation


@public
@attrs.frozen(kw_only=True)
class Elicitation:
    """A server asks the user for input (``elicitation/create``).

    ``mode="form"``: fill in ``schema`` (a flat JSON Schema object of strings,
    numbers, booleans and enums); ``defaults`` are the schema's ``default``
    values, which the client adds to an accepted answer for each field it
    leaves out (SEP-1034). ``mode="url"``: the user is sent to ``url`` (a sign-in
    or payment page, say); accepting means the user agreed to open it.

    ``problems`` is empty the first time; when the handler's previous answer did
    not fit the schema, it is asked again with what was wrong (``$.path: why``).
    """

    server: str
    message: str
    mode: Literal["form", "url"] = "form"
    schema: dict[str, Any] | None = None
    defaults: dict[str, Any] = attrs.field(factory=dict)
    url: str | None = None
    elicitation_id: str | None = None
    problems: tuple[str, ...] = ()


@public
@attrs.frozen
class ElicitationAnswer:
    """The user's answer: ``accept`` (with the form's ``content``), ``decline`` or ``cancel``.

    >>> ElicitationAnswer.accept({"name": "Ada"})
    ElicitationAnswer(action='accept', content={'name': 'Ada'})
    >>> ElicitationAnswer.decline()
    ElicitationAnswer(action='decline', content=None)
    """

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None

    @classmethod
    def accept(cls, content: Mapping[str, Any] | None = None) -> ElicitationAnswer:
        """The user submitted the form (``content``), or agreed to open the URL."""
        return cls("accept", dict(content) if content is not None else None)

    @classmethod
    def decline(cls) -> ElicitationAnswer:
        """The user said no."""
        return cls("decline")

    @classmethod
    def cancel(cls) -> ElicitationAnswer:
        """The user dismissed the request without choosing."""
        return cls("cancel")


#: Answers an elicitation; plain or async.
ElicitationHandler: TypeAlias = Callable[
    [Elicitation], "ElicitationAnswer | Awaitable[ElicitationAnswer]"
]


def schema_defaults(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``default`` of each property of a form schema, by name."""
    properties = (schema or {}).get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {
        name: spec["default"]
        for name, spec in properties.items()
        if isinstance(spec, Mapping) and "default" in spec
    }


def form_problems(schema: Mapping[str, Any] | None, content: Mapping[str, Any]) -> list[str]:
    """What is wrong with ``content`` for ``schema``: ``$.path: message`` lines, sorted."""
    if not schema:
        return []
    import jsonschema.validators

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        checker = cls(schema, format_checker=cls.FORMAT_CHECKER)
        errors = list(checker.iter_errors(dict(content)))
    except jsonschema.exceptions.SchemaError as error:  # pragma: no cover - the SDK checks
        return [f"the server's schema is invalid: {error.message}"]
    errors.sort(key=lambda e: (tuple(str(part) for part in e.absolute_path), e.message))
    return [f"{error.json_path}: {error.message}" for error in errors]


# --------------------------------------------------------------------------- roots and logs


@public
@attrs.frozen
class McpRoot:
    """A directory (or file) the server may work in, given as a ``file://`` URI.

    >>> McpRoot.of("/home/ada/project").uri
    'file:///home/ada/project'
    """

    uri: str
    name: str | None = None

    @classmethod
    def of(cls, root: McpRoot | str | os.PathLike[str]) -> McpRoot:
        """A root from a path (made absolute) or a ``file://`` URI."""
        if isinstance(root, McpRoot):
            return root
        text = os.fspath(root)
        if text.startswith("file://"):
            return cls(text, Path(unquote(urlsplit(text).path)).name or None)
        path = Path(text).expanduser().absolute()
        return cls("file://" + quote(str(path)), path.name or None)


@public
@attrs.frozen(kw_only=True)
class McpLogMessage:
    """A log message from a server (``notifications/message``).

    ``level`` is the server's (``"debug"`` … ``"emergency"``); ``data`` is what
    it sent (usually a string); ``text`` is ``data`` as one line of text.
    """

    server: str
    level: str
    data: Any
    logger: str | None = None

    @property
    def text(self) -> str:
        """``data`` as text: a string as is, anything else as JSON."""
        if isinstance(self.data, str):
            return self.data
        import json

        return json.dumps(self.data, ensure_ascii=False, default=str)


LogHandler: TypeAlias = Callable[[McpLogMessage], Any]
