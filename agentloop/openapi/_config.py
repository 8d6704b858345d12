"""How to call an API (OpenApiConfig) and which operations to make tools of (OperationFilter)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

import attrs

from .._check import number_field
from .._secrets import redact_url
from ..providers import Secret

__all__ = ["Credential", "OpenApiConfig", "OperationFilter"]

#: A credential for one security scheme: a token or key (``str`` or ``Secret``), or
#: ``(user, password)`` for HTTP basic auth.
Credential: TypeAlias = "str | Secret | tuple[str, str]"


def _url_repr(url: str | None) -> str:
    return repr(url if url is None else redact_url(url))


def _secrets(value: Mapping[str, Any] | None) -> dict[str, Secret | tuple[Secret, Secret]]:
    out: dict[str, Secret | tuple[Secret, Secret]] = {}
    for name, credential in (value or {}).items():
        if isinstance(credential, tuple):
            if len(credential) != 2:
                raise ValueError(f"credential {name!r}: a tuple is (user, password)")
            user, password = credential
            out[str(name)] = (_secret(user), _secret(password))
        else:
            out[str(name)] = _secret(credential)
    return out


def _secret(value: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise TypeError(f"a credential is a str, a Secret or (user, password), got {value!r}")
    return Secret(value)


def _headers(value: Mapping[str, str] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (value or {}).items()}


_positive = number_field(above=0, optional=True)


@attrs.frozen
class OpenApiConfig:
    """How the tools call the API.

    Attributes:
        base_url: Used instead of the spec's ``servers`` (required if those are
            missing, or relative and the spec was not loaded from a URL).
        server_variables: Values for ``{variables}`` in the server URL
            (default: each variable's ``default``).
        credentials: By security scheme name (``components.securitySchemes``):
            a token or API key, or ``(user, password)`` for HTTP basic. Never
            shown in a ``repr``, an event, a result or an error.
        headers: Sent with every request (after the auth headers).
        prefix: Tool names become ``PREFIX__operationId``.
        timeout: Seconds a request may take, response included; None: no limit.
        max_response_bytes: How much of a response body is read and shown; the
            rest is cut off with a marker.
        client: An ``httpx2.AsyncClient`` to send requests with (its connection
            pool is then shared); by default each call uses a client of its own.
    """

    base_url: str | None = attrs.field(default=None, repr=_url_repr)
    server_variables: dict[str, str] = attrs.field(factory=dict, converter=_headers)
    credentials: dict[str, Secret | tuple[Secret, Secret]] = attrs.field(
        factory=dict, converter=_secrets, repr=False
    )
    headers: dict[str, str] = attrs.field(factory=dict, converter=_headers, repr=False)
    prefix: str | None = None
    timeout: float | None = attrs.field(default=30.0, validator=_positive)
    max_response_bytes: int = attrs.field(default=64 * 1024, validator=_positive)
    client: Any = attrs.field(default=None, repr=False)


def _strings(value: Iterable[str] | str | None) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return frozenset({value})
    return frozenset(value)


def _methods(value: Iterable[str] | str | None) -> frozenset[str] | None:
    strings = _strings(value)
    return None if strings is None else frozenset(m.lower() for m in strings)


@attrs.frozen
class OperationFilter:
    """Which operations become tools; every criterion given must match.

    Each criterion is a set (a single string is a set of one); an operation
    matches it if its value is in the set (any of its tags, for ``tags``; a
    prefix of its path, for ``path_prefixes``). None: no condition.

    >>> pets = OperationFilter(tags="pet", methods=["get"])
    >>> pets.matches("findPetsByStatus", "get", "/pet/findByStatus", tags=["pet"])
    True
    >>> pets.matches("addPet", "post", "/pet", tags=["pet"])
    False
    """

    operation_ids: frozenset[str] | None = attrs.field(default=None, converter=_strings)
    tags: frozenset[str] | None = attrs.field(default=None, converter=_strings)
    path_prefixes: frozenset[str] | None = attrs.field(default=None, converter=_strings)
    methods: frozenset[str] | None = attrs.field(default=None, converter=_methods)

    def matches(
        self, operation_id: str | None, method: str, path: str, tags: Iterable[str]
    ) -> bool:
        """Whether the operation passes every criterion."""
        if self.operation_ids is not None and operation_id not in self.operation_ids:
            return False
        if self.methods is not None and method.lower() not in self.methods:
            return False
        if self.path_prefixes is not None and not any(
            path.startswith(prefix) for prefix in self.path_prefixes
        ):
            return False
        return self.tags is None or any(tag in self.tags for tag in tags)
