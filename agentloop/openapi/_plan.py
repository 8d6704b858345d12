"""How one operation is called: its parameters, its body, its security schemes."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["Body", "Operation", "Param", "Security"]


@attrs.frozen
class Param:
    """One parameter: where it goes and how it is written."""

    name: str  # the API's name
    key: str  # the property name in the tool's arguments
    location: str  # path, query, header, cookie
    style: str
    explode: bool
    allow_reserved: bool
    json_content: bool  # declared with `content: application/json`: sent as JSON text


@attrs.frozen
class Body:
    """The request body: its media type, and which arguments make it."""

    media_type: str
    mode: str  # json, form, multipart, text
    key: str | None  # the argument holding the whole body, or None if its fields are arguments
    fields: tuple[str, ...] = ()
    binary_fields: frozenset[str] = frozenset()


@attrs.frozen
class Security:
    """One security scheme as the request applies it."""

    name: str
    kind: str  # bearer, basic, header, query, cookie, scheme
    param: str  # header / query / cookie name, or the HTTP auth scheme


@attrs.frozen
class Operation:
    """One operation, ready to become a tool: what the model sees and how it is called."""

    name: str
    label: str
    description: str
    parameters_schema: dict[str, Any]
    method: str
    path: str
    operation_id: str | None
    tags: tuple[str, ...]
    deprecated: bool
    base_url: str
    params: tuple[Param, ...]
    body: Body | None
    security: tuple[tuple[Security, ...], ...]
