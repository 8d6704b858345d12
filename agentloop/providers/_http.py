"""The HTTP half every streaming provider shares: POST, SSE, errors, retries.

A provider subclass says how to build the request (``url``, ``headers``,
``body``) and how to read the stream (``parser``, a :class:`StreamParser`);
this module does the rest:

- one POST per attempt through an ``httpx2.AsyncClient``, every wait bounded by
  a timeout (connect 10 s, between chunks 300 s, by default);
- a stream that sends nothing but keep-alive pings (Anthropic's ``ping``
  events, SSE comments, OpenAI chunks without content) is cut after
  ``idle_timeout`` seconds without content (300 s), and each attempt after
  ``request_timeout`` seconds in all (600 s): both are retryable
  network errors;
- an HTTP error status becomes the matching :class:`ProviderError`, with the
  API's own message and the secrets redacted;
- the body is decoded as Server-Sent Events and each event goes to the parser,
  whose deltas are emitted as they come;
- a retryable failure (see :class:`RetryConfig`) is retried after a
  cancellable wait. Before waiting, a :class:`~agentloop.StreamRestart` delta
  is emitted: whatever the failed attempt streamed is void, and the consumer
  sees the partial message start over. Only the attempt that succeeds returns
  a message, so only it enters the history, and only its response id (a
  parser's ``response_id``, if it has one) reaches tracing.
"""

from __future__ import annotations

import logging
import math
import os
import random
import socket
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Protocol, Self, TypedDict

import attrs
import httpx2
import trio

from .. import _trace_context
from .._check import check_number
from .._events import StreamDelta, StreamRestart
from .._secrets import Redactor, redact_url, url_secrets
from .._tool import format_duration
from .._types import AssistantMessage
from .._util import require_trio
from .._words import plural
from ._base import Emit, ModelRequest
from ._errors import NetworkError, ProviderError, classify_http_error, error_detail, redact
from ._model import ModelConfig, Secret
from ._retry import RetryConfig, parse_retry_after
from .sse import ServerSentEvent, SSEDecoder

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_REQUEST_TIMEOUT",
    "DEFAULT_TIMEOUT",
    "HTTPOptions",
    "HTTPProvider",
    "StreamParser",
    "bearer_headers",
    "join_url",
    "resolve_model",
]

#: Connect within 10 s; a stream may be silent up to 300 s between chunks.
DEFAULT_TIMEOUT = httpx2.Timeout(connect=10.0, read=300.0, write=60.0, pool=30.0)
#: Seconds a stream may go without content (keep-alive pings do not count).
DEFAULT_IDLE_TIMEOUT = 300.0
#: Seconds one attempt may take in all, from sending the request to the last byte.
DEFAULT_REQUEST_TIMEOUT = 600.0
_ERROR_BODY_LIMIT = 64 * 1024
_DRAIN_SECONDS = 5.0
_MIN_SECRET_LENGTH = 8  # header values this long or longer are redacted from errors

log = logging.getLogger("agentloop.providers")


class HTTPOptions(TypedDict, total=False):
    """The keyword arguments every HTTP provider takes besides its model and key:
    as for :class:`HTTPProvider`."""

    retry: RetryConfig | None
    client: httpx2.AsyncClient | None
    timeout: httpx2.Timeout | None
    rng: random.Random | None
    idle_timeout: float | None
    request_timeout: float | None


class StreamParser(Protocol):
    """Reads one response stream, event by event, into one assistant message."""

    @property
    def done(self) -> bool:
        """Whether the stream's end marker arrived (``message_stop``, ``[DONE]``...)."""
        ...

    def feed(self, event: ServerSentEvent) -> Sequence[StreamDelta]:
        """Take one event; return the deltas it carries. Raises ProviderError for errors."""
        ...

    def finish(self) -> AssistantMessage:
        """The message. Raises NetworkError if the stream ended before its end."""
        ...


def join_url(base_url: str, path: str) -> str:
    """``path`` after ``base_url``, before its query or fragment if it has one.

    >>> join_url("http://127.0.0.1:8000/v1/?key=k", "/chat/completions")
    'http://127.0.0.1:8000/v1/chat/completions?key=k'
    """
    cut = min((i for i in (base_url.find("?"), base_url.find("#")) if i >= 0), default=None)
    base, rest = (base_url, "") if cut is None else (base_url[:cut], base_url[cut:])
    return f"{base.rstrip('/')}{path}{rest}"


def bearer_headers(api_key: str | None, extra: Mapping[str, str]) -> dict[str, str]:
    """JSON in, an event stream out, the key as a bearer token, then ``extra`` (the model's)."""
    headers = {"content-type": "application/json", "accept": "text/event-stream"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    headers.update(extra)
    return headers


def _retry_after(headers: httpx2.Headers) -> float | None:
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        seconds = parse_retry_after(milliseconds)
        if seconds is not None:
            return seconds / 1000
    return parse_retry_after(headers.get("retry-after"))


def _should_retry(headers: httpx2.Headers) -> bool | None:
    value = headers.get("x-should-retry", "").strip().lower()
    return {"true": True, "false": False}.get(value)


def _connect_failure(error: BaseException) -> str:
    """Why a connection failed, in a few words: ``connection refused``, ``unknown host``.

    The system's error is found under the HTTP library's (its cause, or one of
    the attempts of an exception group); else the library's own message.
    """
    pending: list[BaseException] = [error]
    seen: set[int] = set()
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            if current.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)):
                return "unknown host"
            return (current.strerror or str(current)).lower()
        if isinstance(current, OSError) and current.errno:
            return os.strerror(current.errno).lower()
        if isinstance(current, BaseExceptionGroup):
            pending += current.exceptions
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)
    return str(error) or type(error).__name__


async def _read_limited(response: httpx2.Response, limit: int) -> str:
    body = bytearray()
    async with aclosing(response.aiter_bytes()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) >= limit:
                break
    return body[:limit].decode("utf-8", errors="replace")


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """Read what follows the end marker (the body's end, normally at once), bounded.

    Leaving the body unread would leave the HTTP library's own iterator
    unfinished; a server that holds the connection open gets 5 seconds.
    """
    with trio.move_on_after(_DRAIN_SECONDS):
        async for _ in chunks:
            pass


def resolve_model(
    model: ModelConfig | str,
    api_key: str | Secret | None,
    preset: Callable[..., ModelConfig],
    api: str,
    provider: str,
) -> ModelConfig:
    """The config a provider class was given: an id (through ``preset``) or a config.

    ``api_key``, when given, replaces the config's key.

    Raises:
        ValueError: the config is for another API than ``api``, the one the
            ``provider`` class speaks.
    """
    if isinstance(model, str):
        config = preset(model, api_key=api_key)
    else:
        config = model if api_key is None else attrs.evolve(model, api_key=api_key)
    if config.api != api:
        raise ValueError(
            f"{provider} speaks the {api!r} API; {config.provider} model "
            f"{config.id!r} is configured for the {config.api!r} API"
        )
    return config


class HTTPProvider:
    """Base class of the providers that stream over HTTP; see the module docstring.

    Args:
        model: The model and how to reach it.
        retry: When to retry (default: :class:`RetryConfig` defaults).
        client: An ``httpx2.AsyncClient`` to use; by default the provider makes
            its own on first use and closes it in :meth:`aclose`.
        timeout: Per-request timeouts. Default: :data:`DEFAULT_TIMEOUT`, or the
            passed client's own timeouts.
        rng: The random source of retry jitter (tests pass a seeded one).
        idle_timeout: Seconds a stream may go without content: no text,
            thinking or tool-call piece, only keep-alive pings (which reset
            httpx's read timeout). Time spent waiting for the consumer of the
            deltas does not count. ``None``: no limit.
        request_timeout: Seconds one attempt may take in all, from sending the
            request to the end of the stream, waiting for the consumer
            included. ``None``: no limit. With retries, a call may take up to
            ``(max_retries + 1) * request_timeout`` plus the waits between.

    Both timeouts raise :class:`NetworkError`, which is retried.

    Raises:
        ValueError: the model needs an API key and none was given or found in
            its environment variable; a timeout is not positive.
    """

    #: How error messages name the API; a subclass may set it per instance.
    api_name: str = "HTTP"

    def __init__(
        self,
        model: ModelConfig,
        *,
        retry: RetryConfig | None = None,
        client: httpx2.AsyncClient | None = None,
        timeout: httpx2.Timeout | None = None,
        rng: random.Random | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        request_timeout: float | None = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        check_number(idle_timeout, "idle_timeout", above=0, optional=True)
        check_number(request_timeout, "request_timeout", above=0, optional=True)
        self.idle_timeout = idle_timeout
        self.request_timeout = request_timeout
        if model.requires_api_key and model.resolve_api_key() is None:
            where = f" or set {model.api_key_env}" if model.api_key_env else ""
            raise ValueError(
                f"no API key for {model.provider} model {model.id!r}: pass api_key=...{where}"
            )
        self.model = model
        self.retry = RetryConfig() if retry is None else retry
        self._client = client
        self._owns_client = client is None
        # A client you pass keeps its own timeouts unless you give some here.
        self._timeout: httpx2.Timeout | None = (
            DEFAULT_TIMEOUT if timeout is None and client is None else timeout
        )
        self._rng = random.Random() if rng is None else rng

    def __repr__(self) -> str:
        base_url = redact_url(self.model.base_url)
        return f"{type(self).__name__}(model={self.model.id!r}, base_url={base_url!r})"

    # ----------------------------------------------------------------- subclass API

    def url(self) -> str:
        """Where to POST."""
        raise NotImplementedError

    def headers(self, api_key: str | None) -> dict[str, str]:
        """The request's headers, the key included."""
        raise NotImplementedError

    def body(self, request: ModelRequest) -> dict[str, Any]:
        """The request's JSON body."""
        raise NotImplementedError

    def parser(self) -> StreamParser:
        """A fresh parser for one response stream."""
        raise NotImplementedError

    def secrets(self) -> list[str]:
        """What must never appear in an error: the API key, header values of 8+ chars,
        and the credentials in the base URL (see :func:`agentloop._secrets.url_secrets`)."""
        api_key = self.model.resolve_api_key()
        secrets = [api_key] if api_key else []
        secrets += [v for v in self.model.headers.values() if len(v) >= _MIN_SECRET_LENGTH]
        secrets += url_secrets(self.model.base_url)
        return secrets

    # ----------------------------------------------------------------- lifecycle

    async def aclose(self) -> None:
        """Close the HTTP client if the provider made it (one you passed is yours to close).

        The provider can be used again: it makes a new client when it needs one.
        """
        if self._owns_client and self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _host(self) -> str:
        """The server, as connection errors name it: ``host`` or ``host:port``, no path."""
        parts = urllib.parse.urlsplit(self.url())
        host = parts.hostname or self.url()
        if ":" in host:  # an IPv6 address
            host = f"[{host}]"
        try:
            port = parts.port
        except ValueError:
            port = None
        return host if port is None else f"{host}:{port}"

    def _http(self) -> httpx2.AsyncClient:
        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=self._timeout or DEFAULT_TIMEOUT)
            self._owns_client = True
        return self._client

    # ----------------------------------------------------------------- streaming

    async def stream(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Send ``request``, emit its deltas as they arrive, return the message.

        Raises:
            ProviderError: the API failed and retrying did not help (or cannot).

        Cancellation: the request is dropped at once, and so is a retry's wait.
        """
        require_trio(f"{type(self).__name__}.stream()")
        body = self.body(request)  # the same for every attempt
        retries = 0
        while True:
            try:
                return await self._attempt(body, emit)
            except ProviderError as error:
                if not error.retryable or retries >= self.retry.max_retries:
                    if retries:
                        tried = plural(retries, "retry", "retries")
                        error.message = f"{error.message} (gave up after {tried})"
                    raise
                retries += 1
                delay = self.retry.delay(retries, retry_after=error.retry_after, rng=self._rng)
                if log.isEnabledFor(logging.WARNING):
                    log.warning(
                        "%s model %r: %s, retrying in %s (retry %d of %d): %s",
                        self.model.provider,
                        self.model.id,
                        type(error).__name__,
                        format_duration(delay),
                        retries,
                        self.retry.max_retries,
                        redact(str(error), self.secrets()),
                    )
                await emit(StreamRestart(attempt=retries + 1, delay=delay, error=str(error)))
                await trio.sleep(delay)

    async def _attempt(self, body: dict[str, Any], emit: Emit) -> AssistantMessage:
        total = math.inf if self.request_timeout is None else self.request_timeout
        with trio.move_on_after(total) as deadline:
            return await self._request(body, emit)
        assert deadline.cancelled_caught
        raise NetworkError(
            f"{self.api_name} API did not finish the response within "
            f"{format_duration(total)} (request_timeout)"
        )

    async def _request(self, body: dict[str, Any], emit: Emit) -> AssistantMessage:
        api_key = self.model.resolve_api_key()
        secrets = self.secrets()
        # While the request lasts, every log record is redacted with it too (the
        # HTTP client's, say): see agentloop/_log.py.
        live = Redactor(secrets)
        parser = self.parser()
        idle = math.inf if self.idle_timeout is None else self.idle_timeout
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s model %r: POST %s", self.model.provider, self.model.id, live.text(self.url())
            )
        try:
            async with self._http().stream(
                "POST",
                self.url(),
                headers=self.headers(api_key),
                json=body,
                timeout=httpx2.USE_CLIENT_DEFAULT if self._timeout is None else self._timeout,
            ) as response:
                if response.status_code >= 400:
                    raise classify_http_error(
                        self.api_name,
                        response.status_code,
                        await _read_limited(response, _ERROR_BODY_LIMIT),
                        retry_after=_retry_after(response.headers),
                        should_retry=_should_retry(response.headers),
                        secrets=secrets,
                    )
                content_type = response.headers.get("content-type", "")
                if not content_type.startswith("text/event-stream"):
                    kind, detail = error_detail(await _read_limited(response, _ERROR_BODY_LIMIT))
                    what = f"{kind}: {detail}" if kind else detail
                    raise ProviderError(
                        redact(
                            f"{self.api_name} API returned {content_type or 'no content type'}"
                            f" instead of an event stream: {what}",
                            secrets,
                        ),
                        status=response.status_code,
                    )
                decoder = SSEDecoder()
                # The idle clock runs while the server is awaited, not while a delta waits
                # for its consumer: only content (a delta) restarts it. One scope per
                # chunk read, not two deadline changes per event.
                deadline = trio.current_time() + idle
                # aclosing: leaving the loop early (done, an error, a cancel) must
                # finalize the generator here, not whenever it is collected.
                async with aclosing(response.aiter_bytes()) as chunks:
                    while True:
                        with trio.CancelScope(deadline=deadline) as waiting:
                            chunk = await anext(chunks, None)
                        if waiting.cancelled_caught:
                            raise NetworkError(
                                f"{self.api_name} API sent no content for "
                                f"{format_duration(idle)} (idle_timeout; only keep-alive "
                                "pings, or nothing)"
                            )
                        if chunk is None:
                            for event in decoder.close():
                                for delta in parser.feed(event):
                                    await emit(delta)
                            break
                        content = False
                        for event in decoder.feed(chunk):
                            deltas = parser.feed(event)
                            if deltas:
                                content = True
                                for delta in deltas:
                                    await emit(delta)
                        if content:
                            deadline = trio.current_time() + idle
                        if parser.done:
                            await _drain(chunks)
                            break
        except httpx2.ConnectTimeout as error:
            raise NetworkError(f"cannot connect to {self._host()}: timed out") from error
        except httpx2.TimeoutException as error:
            raise NetworkError(f"{self.api_name} API timed out ({type(error).__name__})") from error
        except httpx2.ConnectError as error:
            reason = redact(_connect_failure(error), secrets)
            raise NetworkError(f"cannot connect to {self._host()}: {reason}") from error
        except httpx2.TransportError as error:
            detail = redact(str(error) or type(error).__name__, secrets)
            raise NetworkError(f"{self.api_name} API connection failed: {detail}") from error
        message = parser.finish()
        _trace_context.response_read(getattr(parser, "response_id", None))
        return message
