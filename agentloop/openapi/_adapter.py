"""OpenApiToolAdapter: one operation of an OpenAPI description, as an agentloop tool."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import httpx2
import trio

from .._secrets import Redactor, header_secrets, redact_url, redact_urls, url_secrets
from .._text import loads
from .._tool import NO_CLAIM, Claim, ToolContext, ToolError, ToolResult, format_duration
from .._types import ImageContent, TextContent, ToolResultContent
from .._util import require_trio
from ._build import Builder
from ._config import OpenApiConfig, OperationFilter
from ._params import cookie_pairs, encode, header_value, path_value, query_pairs, scalar
from ._plan import Body, Operation, Param, Security
from ._spec import OpenApiError, Resolver, check_version, parse_document, shown, url_base

__all__ = ["OpenApiToolAdapter"]

log = logging.getLogger("agentloop.openapi")

_ERROR_BODY_CHARS = 2000
_DRAIN_LIMIT = 16 * 1024 * 1024  # past this, a long body is left unread
#: The most bytes of an OpenAPI document :meth:`OpenApiToolAdapter.from_url` reads.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_READ_METHODS = frozenset({"get", "head"})


@attrs.frozen(eq=False)
class OpenApiToolAdapter:
    """One operation of an API, callable by the model.

    Made by :meth:`from_spec` and its siblings, one per operation. The model's
    arguments are the operation's parameters by name, and the request body
    under ``body`` (JSON and text bodies) or as its fields (form and multipart
    bodies).

    A 2xx answer's body is the result (JSON pretty-printed, a body past
    ``max_response_bytes`` cut off with a marker, images as images), with
    ``details`` ``{"status", "method", "url", "content_type", "truncated"}``.
    Any other status is an error result naming the method, URL and status,
    with the start of the body. Credentials never appear in results, errors or
    the ``repr``: an API key sent in the query shows as ``***``, and every
    credential sent (token, password, key, the ``Authorization`` value, in
    their plain, percent-encoded, JSON-escaped and base64 forms) is ``***`` in
    whatever the response brings back.

    For the scheduler (:meth:`resources`), a ``GET`` or ``HEAD`` call reads the
    key ``"openapi:<base_url>"`` (its credentials, if any, redacted: the key is
    shown when a call waits for it); other methods claim nothing.
    """

    name: str
    label: str = attrs.field(repr=False)
    description: str = attrs.field(repr=False)
    parameters_schema: dict[str, Any] = attrs.field(repr=False)
    method: str
    path: str
    operation_id: str | None = attrs.field(repr=False)
    tags: tuple[str, ...] = attrs.field(repr=False)
    deprecated: bool = attrs.field(repr=False)
    base_url: str = attrs.field(repr=False)
    config: OpenApiConfig = attrs.field(repr=False)
    _params: tuple[Param, ...] = attrs.field(repr=False, alias="params")
    _body: Body | None = attrs.field(repr=False, alias="body")
    _security: tuple[tuple[Security, ...], ...] = attrs.field(repr=False, alias="security")

    @property
    def timeout(self) -> None:
        """None: the request's own timeout (``config.timeout``) applies, with a clearer error."""
        return None

    def resources(self, params: dict[str, Any]) -> Claim:
        """``Claim(reads={"openapi:<base_url>"})`` for ``GET`` and ``HEAD``, else ``Claim()``.

        Only a call whose claim writes that key (a tool of your own) waits for
        a read; the API's other operations claim nothing, so they run beside
        each other and beside reads.
        """
        if self.method.lower() in _READ_METHODS:
            return Claim(reads={f"openapi:{redact_url(self.base_url)}"})
        return NO_CLAIM

    # ----------------------------------------------------------------- factories

    @classmethod
    def from_spec(
        cls,
        spec: Mapping[str, Any],
        config: OpenApiConfig | None = None,
        filter: OperationFilter | None = None,
        *,
        source: str | None = None,
    ) -> list[OpenApiToolAdapter]:
        """One tool per operation of a parsed OpenAPI 3.0 or 3.1 document, in its order.

        ``source`` is the document's path or URL: relative ``$ref`` files and a
        relative server URL are resolved against it.

        Raises:
            OpenApiError: not OpenAPI 3.0/3.1, a ``$ref`` leads nowhere, or
                there is no absolute server URL and no ``config.base_url``.
        """
        config = config or OpenApiConfig()
        base = source or ""
        name = source or "the OpenAPI document"
        if not isinstance(spec, Mapping):
            raise OpenApiError(f"{name}: an OpenAPI document is an object, not {shown(spec)}")
        document = dict(spec)
        check_version(document, name)
        resolver = Resolver(document, base)
        operations = Builder(document, resolver, config, filter or OperationFilter(), name).build()
        return [cls.from_operation(operation, config) for operation in operations]

    @classmethod
    def from_operation(cls, operation: Operation, config: OpenApiConfig) -> OpenApiToolAdapter:
        """The tool for one operation the builder read."""
        return cls(config=config, **attrs.asdict(operation, recurse=False))

    @classmethod
    def from_str(
        cls,
        text: str | bytes,
        config: OpenApiConfig | None = None,
        filter: OperationFilter | None = None,
    ) -> list[OpenApiToolAdapter]:
        """One tool per operation of an OpenAPI document given as JSON or YAML text.

        Raises:
            OpenApiError: the text is not JSON or YAML, or as :meth:`from_spec`.
        """
        return cls.from_spec(parse_document(text, "the OpenAPI document"), config, filter)

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        config: OpenApiConfig | None = None,
        filter: OperationFilter | None = None,
    ) -> list[OpenApiToolAdapter]:
        """One tool per operation of an OpenAPI file (JSON or YAML); ``$ref`` to other files work.

        Raises:
            OSError: the file cannot be read.
            OpenApiError: as :meth:`from_str`.
        """
        source = os.path.abspath(os.fspath(path))
        document = parse_document(Path(source).read_bytes(), source)
        return cls.from_spec(document, config, filter, source=source)

    @classmethod
    async def from_url(
        cls,
        url: str,
        config: OpenApiConfig | None = None,
        filter: OperationFilter | None = None,
    ) -> list[OpenApiToolAdapter]:
        """One tool per operation of the OpenAPI document at ``url``.

        A relative server URL in it is resolved against ``url``. The request
        uses ``config.client`` if given, and ``config.timeout``. At most
        :data:`MAX_DOCUMENT_BYTES` (64 MiB) of the answer are read.

        Raises:
            OpenApiError: the document cannot be fetched (with the status), is
                longer than 64 MiB (the rest is not read), or as :meth:`from_str`.

        Cancellation: the request is abandoned.
        """
        require_trio("OpenApiToolAdapter.from_url()")
        config = config or OpenApiConfig()
        async with _client(config) as client:
            try:
                async with client.stream("GET", url, timeout=config.timeout) as response:
                    body = await _read_document(response, url)
            except httpx2.HTTPError as error:
                shown_error = redact_urls(_describe(error))
                raise OpenApiError(f"cannot fetch {redact_url(url)}: {shown_error}") from error
        if response.status_code >= 400:
            raise OpenApiError(f"cannot fetch {redact_url(url)}: HTTP {response.status_code}")
        source = url_base(str(response.url))
        try:
            document = parse_document(body, source)
            return cls.from_spec(document, config, filter, source=source)
        except OpenApiError as error:  # its messages name the URL: not its credentials
            error.args = tuple(redact_urls(a) if isinstance(a, str) else a for a in error.args)
            raise

    # ----------------------------------------------------------------- calls

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Send the request; see the class docstring.

        Raises:
            ToolError: a required path parameter is missing, the request failed
                or timed out, or the status is not 2xx/3xx.

        Cancellation: the request is abandoned (its connection closed).
        """
        request = self._request(params)
        # Whatever the response brings back (an echo of the request, say) must not
        # carry the credentials sent with it.
        redactor = Redactor(request.secrets)
        try:
            result = await self._send(request)
        except ToolError as error:
            raise ToolError(
                redactor.text(str(error)), details=redactor.json(error.details)
            ) from None  # the original names the credential
        if not redactor:
            return result
        return ToolResult(
            tuple(
                TextContent(redactor.text(b.text)) if isinstance(b, TextContent) else b
                for b in result.content
            ),
            details=redactor.json(result.details),
        )

    async def _send(self, request: _Request) -> ToolResult:
        method = self.method.upper()
        shown = request.shown_url
        timeout = self.config.timeout
        received = _Received(self.config.max_response_bytes)
        response: httpx2.Response | None = None
        debug = log.isEnabledFor(logging.DEBUG)
        logged = ""
        if debug:  # the URL as results show it: every credential sent is ***
            logged = Redactor(request.secrets).text(shown)
            log.debug("%s: %s %s", self.name, method, logged)
        async with _client(self.config) as client:
            with trio.move_on_after(timeout if timeout is not None else math.inf) as deadline:
                try:
                    async with client.stream(
                        method, request.url, headers=request.headers, timeout=None, **request.body
                    ) as response:
                        if debug:
                            log.debug(
                                "%s: %s %s -> %d", self.name, method, logged, response.status_code
                            )
                        await received.read(response)
                except httpx2.HTTPError as error:
                    raise ToolError(f"{method} {shown} failed: {_describe(error)}") from error
        if deadline.cancelled_caught:
            assert timeout is not None
            if response is None or not received.data:
                raise ToolError(f"{method} {shown}: no response within {format_duration(timeout)}")
            received.cut_off = f"the response did not end within {format_duration(timeout)}"
        assert response is not None
        body, truncated = bytes(received.data), received.cut_off is not None
        content_type = response.headers.get("content-type", "")
        details = {
            "status": response.status_code,
            "method": method,
            "url": shown,
            "content_type": content_type or None,
            "truncated": truncated,
        }
        text_body = _text(body, response, received.cut_off, self.config.max_response_bytes)
        if response.status_code >= 400:
            reason = response.reason_phrase
            start = text_body[:_ERROR_BODY_CHARS]
            more = "…" if len(text_body) > _ERROR_BODY_CHARS else ""
            raise ToolError(
                f"{method} {shown} → {response.status_code} {reason}".rstrip()
                + (f"\n\n{start}{more}" if start else ""),
                details=details,
            )
        content: list[ToolResultContent] = []
        mime = content_type.split(";")[0].strip().lower()
        if mime in _IMAGE_TYPES and not truncated and body:
            content.append(TextContent(f"[image: {mime}, {len(body)} bytes]"))
            content.append(ImageContent(base64.b64encode(body).decode("ascii"), mime))
        elif not body:
            content.append(
                TextContent(f"{response.status_code} {response.reason_phrase} (no content)")
            )
        else:
            content.append(TextContent(text_body))
        return ToolResult(tuple(content), details=details)

    def _request(self, arguments: Mapping[str, Any]) -> _Request:
        path = self.path
        query: list[str] = []
        shown_query: list[str] = []
        headers: dict[str, str] = {}
        cookies: list[str] = []
        for param in self._params:
            if param.key not in arguments or arguments[param.key] is None:
                if param.location == "path":
                    raise ToolError(
                        f"Missing required path parameter '{param.key}' for {self.path}"
                    )
                continue
            value = arguments[param.key]
            if param.json_content:
                value = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            if param.location == "path":
                text = path_value(param.name, value, param.style, param.explode)
                path = path.replace("{" + param.name + "}", text)
            elif param.location == "query":
                pieces = query_pairs(
                    param.name, value, param.style, param.explode, param.allow_reserved
                )
                query += pieces
                shown_query += pieces
            elif param.location == "header":
                headers[param.name] = header_value(param.name, value, param.explode)
            elif param.location == "cookie":
                cookies += cookie_pairs(param.name, value, param.explode)
        secrets = self._authorize(headers, query, shown_query, cookies)
        secrets += header_secrets(self.config.headers) + url_secrets(self.base_url)
        headers.update(self.config.headers)
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        url = self.base_url.rstrip("/") + path
        body = self._body_arguments(arguments, headers)
        tail = f"?{'&'.join(query)}" if query else ""
        shown_tail = f"?{'&'.join(shown_query)}" if shown_query else ""
        return _Request(url + tail, url + shown_tail, headers, body, secrets)

    def _authorize(
        self, headers: dict[str, str], query: list[str], shown: list[str], cookies: list[str]
    ) -> list[str]:
        """Apply the first satisfiable security requirement; return the secrets it sent."""
        credentials = self.config.credentials
        for requirement in self._security:
            if all(scheme.name in credentials for scheme in requirement):
                break
        else:
            return []  # nothing we can satisfy: the API will say so
        sent: list[str] = []
        for scheme in requirement:
            credential = credentials[scheme.name]
            if isinstance(credential, tuple):
                user, password = (part.reveal() for part in credential)
                secret = f"{user}:{password}"
                sent.append(password)
            else:
                secret = credential.reveal()
            sent.append(secret)
            if scheme.kind == "basic":
                token = base64.b64encode(secret.encode("utf-8")).decode("ascii")
                headers["Authorization"] = f"Basic {token}"
            elif scheme.kind == "bearer":
                headers["Authorization"] = f"Bearer {secret}"
            elif scheme.kind == "scheme":
                headers["Authorization"] = f"{scheme.param} {secret}"
            elif scheme.kind == "header":
                headers[scheme.param] = secret
            elif scheme.kind == "query":
                query.append(f"{encode(scheme.param)}={encode(secret)}")
                shown.append(f"{encode(scheme.param)}=***")
            elif scheme.kind == "cookie":
                cookies.append(f"{scheme.param}={encode(secret)}")
            sent.append(encode(secret))  # as the query and cookie forms carry it
        return sent

    def _body_arguments(
        self, arguments: Mapping[str, Any], headers: dict[str, str]
    ) -> dict[str, Any]:
        body = self._body
        if body is None:
            return {}
        if body.key is not None:
            if body.key not in arguments:
                return {}
            value = arguments[body.key]
        else:
            value = {f: arguments[f] for f in body.fields if f in arguments}
            if not value:
                return {}
        media_type = "application/json" if body.media_type == "*/*" else body.media_type
        headers.setdefault("Content-Type", media_type)
        if body.mode == "json":
            return {"content": json.dumps(value, ensure_ascii=False).encode("utf-8")}
        if body.mode == "text":
            return {"content": scalar(value).encode("utf-8")}
        if not isinstance(value, dict):
            raise ToolError(f"the body of {self.name} must be an object of fields")
        if body.mode == "form":
            return {"data": {k: _form_value(v) for k, v in value.items()}}
        # multipart: every field is a part, so that a body of text fields alone is
        # multipart too (httpx2 sends data= without files= as a urlencoded form). Text
        # fields are parts without a file name; httpx2 writes the boundary itself.
        del headers["Content-Type"]
        parts: list[tuple[str, tuple[str | None, bytes, str | None]]] = []
        for key, field in value.items():
            if key in body.binary_fields:
                parts.append(
                    (key, (key, scalar(field).encode("utf-8"), "application/octet-stream"))
                )
                continue
            for item in field if isinstance(field, list) else [field]:
                parts.append((key, (None, scalar(item).encode("utf-8"), None)))
        return {"files": parts}


@attrs.frozen
class _Request:
    url: str
    shown_url: str  # the URL with credentials replaced by ***
    headers: dict[str, str]
    body: dict[str, Any]
    secrets: list[str]  # every credential sent, to redact from what comes back


def _form_value(value: Any) -> str | list[str]:
    if isinstance(value, list):
        return [scalar(v) for v in value]
    return scalar(value)


@contextlib.asynccontextmanager
async def _client(config: OpenApiConfig) -> Any:
    if config.client is not None:
        yield config.client
        return
    async with httpx2.AsyncClient(follow_redirects=True) as client:
        yield client


class _Received:
    """A response body as it arrives: its first ``limit`` bytes, and why it was cut off.

    Past the limit the body is counted, not kept, up to :data:`_DRAIN_LIMIT`: the
    cut-off says the whole size, the counted one, or the server's
    ``Content-Length``, and ``more than`` the drain limit only when neither is known.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.size = 0
        self.cut_off: str | None = None

    async def read(self, response: httpx2.Response) -> None:
        # Reading on past the limit (and dropping it) ends the stream cleanly: leaving an
        # httpx2 stream early abandons its inner async generators, which trio warns about.
        # Only a body past _DRAIN_LIMIT is left early; config.timeout bounds the time.
        whole = True
        async for chunk in response.aiter_bytes():
            room = self.limit - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.size += len(chunk)
            if self.size > max(self.limit, _DRAIN_LIMIT):
                whole = False
                break
        if self.size > self.limit:
            self.cut_off = self._size_note(response, whole=whole)

    def _size_note(self, response: httpx2.Response, *, whole: bool) -> str:
        """``the response is N bytes, cut off at LIMIT`` (or ``more than N bytes``)."""
        size = str(self.size)
        if not whole:  # left at the drain limit
            length = response.headers.get("content-length", "")
            encoding = response.headers.get("content-encoding", "identity").lower()
            if length.isdigit() and encoding == "identity":
                size = str(int(length))  # the body is as long as the server said
            else:
                size = f"more than {max(self.limit, _DRAIN_LIMIT)}"
        return f"the response is {size} bytes, cut off at {self.limit}"


async def _read_document(response: httpx2.Response, url: str) -> bytes:
    """The body of ``response``, at most :data:`MAX_DOCUMENT_BYTES`; past it, an error
    (without reading the rest: one the server says is longer is not read at all)."""
    limit = MAX_DOCUMENT_BYTES
    length = response.headers.get("content-length", "")
    encoding = response.headers.get("content-encoding", "identity").lower()
    too_long = (
        f"cannot fetch {redact_url(url)}: the document is longer than {limit // (1024 * 1024)} MiB"
    )
    if length.isdigit() and int(length) > limit and encoding == "identity":
        raise OpenApiError(f"{too_long} ({int(length)} bytes)")
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            raise OpenApiError(too_long)
    return bytes(body)


def _text(body: bytes, response: httpx2.Response, cut_off: str | None, limit: int) -> str:
    """The body as the model reads it: at most ``limit`` bytes of it, and a marker if cut."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    is_json = content_type == "application/json" or content_type.endswith("+json")
    truncated = cut_off is not None
    if is_json and not truncated:
        try:
            pretty = json.dumps(loads(body), indent=2, ensure_ascii=False)
        except ValueError:
            pass
        else:
            # Indenting can make a body within the limit outgrow it: then it is shown
            # as it came, which fits.
            if len(pretty.encode("utf-8", "surrogatepass")) <= limit:
                return pretty
    textual = (
        content_type.startswith("text/")
        or is_json
        or content_type.endswith("+xml")
        or content_type in ("application/xml", "application/javascript", "")
    )
    if not textual and body:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return f"[binary response: {content_type or 'no content type'}, {len(body)} bytes]"
    else:
        text = body.decode(response.encoding or "utf-8", errors="replace")
        if truncated:  # the cut may have split a character
            text = text.rstrip("\ufffd")
    if truncated:
        text += f"\n… [truncated: {cut_off}]"
    return text


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
