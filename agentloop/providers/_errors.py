"""Provider errors: what failed, whether retrying can help, and how long to wait.

::

    ProviderError                 the model's API failed or refused; not retried
    ├── RateLimitError            429 (not insufficient_quota)     retried
    ├── OverloadedError           529, "overloaded"                retried
    ├── ServerError               408, 500-504                     retried
    ├── NetworkError              connection failed, timed out,    retried
    │                             stream cut off before its end
    ├── AuthenticationError       401, 403
    └── BadRequestError           400, 404, 422...
        └── ContextOverflowError  the request is longer than the model's context window
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from .._errors import AgentloopError
from .._text import loads

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "ContextOverflowError",
    "NetworkError",
    "OverloadedError",
    "ProviderError",
    "RateLimitError",
    "ServerError",
    "classify_http_error",
    "error_detail",
    "redact",
]

_BODY_LIMIT = 500

# Phrases APIs use when a request does not fit the context window (lowercase).
_OVERFLOW_PHRASES = (
    "prompt is too long",
    "input is too long",
    "exceeds the context window",
    "exceeds the maximum context",
    "maximum context length",
    "context length exceeded",
    "context_length_exceeded",
    "reduce the length of the messages",
    "maximum prompt length",
    "exceeds the available context size",
    "greater than the context length",
    "context window exceeds limit",
    "exceeded model token limit",
    "too many tokens",
    "token limit exceeded",
)


class ProviderError(AgentloopError):
    """The model's API failed or refused the request.

    The loop ends the turn with an assistant message whose ``stop_reason`` is
    ``ERROR`` and whose ``error_message`` is ``str(error)``.

    Attributes:
        status: The HTTP status, if the failure came with one.
        retry_after: Seconds the API asked to wait before retrying, if it said.
        retryable: Whether trying again can help (see the subclasses).
    """

    retryable: bool = False  # per class; an instance may override it (x-should-retry)

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after

    def __str__(self) -> str:
        return self.message


class RateLimitError(ProviderError):
    """Too many requests (HTTP 429). Retried, after ``retry_after`` when given."""

    retryable = True


class OverloadedError(ProviderError):
    """The API is overloaded (HTTP 529, or an ``overloaded`` error mid-stream). Retried."""

    retryable = True


class ServerError(ProviderError):
    """The API failed on its side (HTTP 408, 500-504). Retried."""

    retryable = True


class NetworkError(ProviderError):
    """The connection failed or timed out, or the stream ended before its end. Retried."""

    retryable = True


class AuthenticationError(ProviderError):
    """The API key is missing, wrong, or not allowed this (HTTP 401, 403). Not retried."""


class BadRequestError(ProviderError):
    """The API refused the request as malformed (HTTP 400, 404, 422...). Not retried."""


class ContextOverflowError(BadRequestError):
    """The request does not fit the model's context window. Not retried."""


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of each non-empty secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def error_detail(body: str) -> tuple[str | None, str]:
    """(error type, message) from an API's JSON error body, else (None, the body's start)."""
    try:
        data = loads(body)
    except ValueError:
        data = None
    if isinstance(data, Mapping):
        error = data.get("error", data)
        if isinstance(error, Mapping):
            message = error.get("message")
            kind = error.get("type") or error.get("code")
            if isinstance(message, str):
                return (str(kind) if kind is not None else None), message
        elif isinstance(error, str):
            return None, error
    text = re.sub(r"\s+", " ", body).strip()
    if len(text) > _BODY_LIMIT:
        text = text[:_BODY_LIMIT] + "..."
    return None, text or "(empty body)"


def classify_http_error(
    api: str,
    status: int,
    body: str,
    *,
    retry_after: float | None = None,
    should_retry: bool | None = None,
    secrets: Iterable[str] = (),
) -> ProviderError:
    """The :class:`ProviderError` for an HTTP error response of ``api`` ("Anthropic"...).

    The message names the API, the status, the error type the API gave and its
    message (or the start of the body), with ``secrets`` redacted::

        Anthropic API error 429 (rate_limit_error): Rate limit exceeded

    ``should_retry`` is the API's own advice (Anthropic's ``x-should-retry``
    header); when given it sets the error's ``retryable``, whatever its class.
    """
    kind, detail = error_detail(body)
    message = redact(
        f"{api} API error {status}" + (f" ({kind})" if kind else "") + f": {detail}", secrets
    )
    lowered = body.lower()
    cls: type[ProviderError]
    if status in (400, 413) and any(phrase in lowered for phrase in _OVERFLOW_PHRASES):
        cls = ContextOverflowError
    elif status == 429 and kind == "insufficient_quota":
        cls = ProviderError  # out of credit: waiting does not help
    elif status == 429:
        cls = RateLimitError
    elif status == 529 or "overloaded" in (kind or "").lower():
        cls = OverloadedError
    elif status == 408 or 500 <= status <= 504:
        cls = ServerError
    elif status in (401, 403):
        cls = AuthenticationError
    elif 400 <= status < 500:
        cls = BadRequestError
    else:
        cls = ProviderError  # 505 and up, or anything unexpected: not retried
    error = cls(message, status=status, retry_after=retry_after)
    if should_retry is not None:
        error.retryable = should_retry  # the API's own advice wins; the class stays
    return error
