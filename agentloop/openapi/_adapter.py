"""OpenApiToolAdapter: one operation of an OpenAPI description, as an agentloop tool."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import attrs
import httpx2
import trio

from .._names import model_tool_name, unique_name
from .._tool import ToolContext, ToolError, ToolResult, format_duration
from .._types import ImageContent, TextContent, ToolResultContent
from ._config import OpenApiConfig, OperationFilter
from ._params import cookie_pairs, encode, header_value, path_value, query_pairs, scalar
from ._schema import SchemaConverter
from ._spec import OpenApiError, Resolver, check_version, parse_document, url_base

__all__ = ["OpenApiToolAdapter"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_MAX_DESCRIPTION = 1024  # OpenAI's limit for a function description
_ERROR_BODY_CHARS = 2000
_DRAIN_LIMIT = 16 * 1024 * 1024  # past this, a long body is left unread
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_TEMPLATE = re.compile(r"\{([^{}]+)\}")


@attrs.frozen
class _Param:
    """One parameter: where it goes and how it is written."""

    name: str  # the API's name
    key: str  # the property name in the tool's arguments
    location: str  # path, query, header, cookie
    style: str
    explode: bool
    allow_reserved: bool
    json_content: bool  # declared with `content: application/json`: sent as JSON text


@attrs.frozen
class _Body:
    """The request body: its media type, and which arguments make it."""

    media_type: str
    mode: str  # json, form, multipart, text
    key: str | None  # the argument holding the whole body, or None if its fields are arguments
    fields: tuple[str, ...] = ()
    binary_fields: frozenset[str] = frozenset()


@attrs.frozen
class _Security:
    """One security scheme as the request applies it."""

    name: str
    kind: str  # bearer, basic, header, query, cookie, scheme
    param: str  # header / query / cookie name, or the HTTP auth scheme


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
    the ``repr``: an API key sent in the query shows as ``***``.
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
    _params: tuple[_Param, ...] = attrs.field(repr=False, alias="params")
    _body: _Body | None = attrs.field(repr=False, alias="body")
    _security: tuple[tuple[_Security, ...], ...] = attrs.field(repr=False, alias="security")

    @property
    def timeout(self) -> None:
        """None: the request's own timeout (``config.timeout``) applies, with a clearer error."""
        return None

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
        document = dict(spec)
        check_version(document, name)
        resolver = Resolver(document, base)
        return _Builder(document, resolver, config, filter or OperationFilter(), name).build()

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
        uses ``config.client`` if given, and ``config.timeout``.

        Raises:
            OpenApiError: the document cannot be fetched (with the status), or
                as :meth:`from_str`.

        Cancellation: the request is abandoned.
        """
        config = config or OpenApiConfig()
        async with _client(config) as client:
            try:
                response = await client.get(url, timeout=config.timeout)
            except httpx2.HTTPError as error:
                raise OpenApiError(f"cannot fetch {url}: {_describe(error)}") from error
        if response.status_code >= 400:
            raise OpenApiError(f"cannot fetch {url}: HTTP {response.status_code}")
        source = url_base(str(response.url))
        document = parse_document(response.content, source)
        return cls.from_spec(document, config, filter, source=source)

    # ----------------------------------------------------------------- calls

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Send the request; see the class docstring.

        Raises:
            ToolError: a required path parameter is missing, the request failed
                or timed out, or the status is not 2xx/3xx.

        Cancellation: the request is abandoned (its connection closed).
        """
        request = self._request(params)
        method = self.method.upper()
        shown = request.shown_url
        timeout = self.config.timeout
        received = _Received(self.config.max_response_bytes)
        response: httpx2.Response | None = None
        async with _client(self.config) as client:
            with trio.move_on_after(timeout if timeout is not None else math.inf) as deadline:
                try:
                    async with client.stream(
                        method, request.url, headers=request.headers, timeout=None, **request.body
                    ) as response:
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
        text_body = _text(body, response, received.cut_off)
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
        self._authorize(headers, query, shown_query, cookies)
        headers.update(self.config.headers)
        if cookies:
            headers["Cookie"] = "; ".join(cookies)
        url = self.base_url.rstrip("/") + path
        body = self._body_arguments(arguments, headers)
        tail = f"?{'&'.join(query)}" if query else ""
        shown_tail = f"?{'&'.join(shown_query)}" if shown_query else ""
        return _Request(url + tail, url + shown_tail, headers, body)

    def _authorize(
        self, headers: dict[str, str], query: list[str], shown: list[str], cookies: list[str]
    ) -> None:
        credentials = self.config.credentials
        for requirement in self._security:
            if all(scheme.name in credentials for scheme in requirement):
                break
        else:
            return  # nothing we can satisfy: the API will say so
        for scheme in requirement:
            credential = credentials[scheme.name]
            if isinstance(credential, tuple):
                user, password = (part.reveal() for part in credential)
                secret = f"{user}:{password}"
            else:
                secret = credential.reveal()
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
        # multipart: httpx2 writes the boundary into the content type itself
        del headers["Content-Type"]
        data = {k: _form_value(v) for k, v in value.items() if k not in body.binary_fields}
        files = {
            k: (k, scalar(v).encode("utf-8"), "application/octet-stream")
            for k, v in value.items()
            if k in body.binary_fields
        }
        return {"data": data, "files": files} if files else {"data": data, "files": {}}


@attrs.frozen
class _Request:
    url: str
    shown_url: str  # the URL with credentials replaced by ***
    headers: dict[str, str]
    body: dict[str, Any]


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
    """A response body as it arrives: its first ``limit`` bytes, and why it was cut off."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.size = 0
        self.cut_off: str | None = None

    async def read(self, response: httpx2.Response) -> None:
        # Reading on past the limit (and dropping it) ends the stream cleanly: leaving an
        # httpx2 stream early abandons its inner async generators, which trio warns about.
        # Only a body past _DRAIN_LIMIT is left early; config.timeout bounds the time.
        async for chunk in response.aiter_bytes():
            room = self.limit - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.size += len(chunk)
            if self.size > self.limit:
                self.cut_off = f"the response is longer than {self.limit} bytes"
            if self.size > max(self.limit, _DRAIN_LIMIT):
                break


def _text(body: bytes, response: httpx2.Response, cut_off: str | None) -> str:
    """The body as the model reads it."""
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    is_json = content_type == "application/json" or content_type.endswith("+json")
    truncated = cut_off is not None
    if is_json and not truncated:
        try:
            return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
        except ValueError:
            pass
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


# --------------------------------------------------------------------------- building


class _Builder:
    """Turns a document's operations into adapters."""

    def __init__(
        self,
        document: dict[str, Any],
        resolver: Resolver,
        config: OpenApiConfig,
        filter: OperationFilter,
        source: str,
    ) -> None:
        self.document = document
        self.resolver = resolver
        self.config = config
        self.filter = filter
        self.source = source
        self.schemas = SchemaConverter(resolver)
        components = document.get("components") or {}
        self.schemes = components.get("securitySchemes") or {}

    def build(self) -> list[OpenApiToolAdapter]:
        tools: list[OpenApiToolAdapter] = []
        names: set[str] = set()
        paths = self.document.get("paths") or {}
        if not isinstance(paths, dict):
            raise OpenApiError(f"{self.source}: 'paths' must be an object")
        base = self.resolver.root_base
        for path, raw_item in paths.items():
            item_base, item = self.resolver.deref(raw_item, base)
            if not isinstance(item, dict):
                continue
            for method in METHODS:
                operation = item.get(method)
                if not isinstance(operation, dict):
                    continue
                operation_id = operation.get("operationId")
                tags = [str(t) for t in operation.get("tags") or ()]
                if not self.filter.matches(operation_id, method, path, tags):
                    continue
                raw_name = operation_id or f"{method}_{path.strip('/')}"
                name = unique_name(model_tool_name(self.config.prefix, str(raw_name)), names)
                names.add(name)
                tools.append(self._tool(name, path, method, item, item_base, operation, tags))
        return tools

    def _tool(
        self,
        name: str,
        path: str,
        method: str,
        item: dict[str, Any],
        base: str,
        operation: dict[str, Any],
        tags: list[str],
    ) -> OpenApiToolAdapter:
        where = f"{method.upper()} {path}"
        properties: dict[str, Any] = {}
        required: list[str] = []
        params: list[_Param] = []
        for param, param_base in self._parameters(item, operation, base, where):
            location = param["in"]
            key = (
                param["name"] if param["name"] not in properties else f"{param['name']}_{location}"
            )
            style = param.get("style") or ("form" if location in ("query", "cookie") else "simple")
            explode = param.get("explode", style == "form")
            schema, json_content = self._parameter_schema(param, param_base)
            if param.get("description") and "description" not in schema:
                schema = {**schema, "description": param["description"]}
            properties[key] = schema
            if param.get("required") or location == "path":
                required.append(key)
            params.append(
                _Param(
                    str(param["name"]),
                    key,
                    location,
                    str(style),
                    bool(explode),
                    bool(param.get("allowReserved", False)),
                    json_content,
                )
            )
        body = self._request_body(operation, base, properties, required, where)
        arguments: dict[str, Any] = {"type": "object", "properties": properties}
        if required:
            arguments["required"] = required
        summary = str(operation.get("summary") or "").strip()
        text = str(operation.get("description") or "").strip()
        description = "\n\n".join(p for p in (summary, text) if p) or where
        if operation.get("deprecated"):
            description = f"(deprecated) {description}"
        if len(description) > _MAX_DESCRIPTION:
            description = description[: _MAX_DESCRIPTION - 1] + "…"
        return OpenApiToolAdapter(
            name=name,
            label=summary or str(operation.get("operationId") or where),
            description=description,
            parameters_schema=arguments,
            method=method,
            path=path,
            operation_id=operation.get("operationId"),
            tags=tuple(tags),
            deprecated=bool(operation.get("deprecated", False)),
            base_url=self._base_url(operation, item, where),
            config=self.config,
            params=tuple(params),
            body=body,
            security=self._security(operation),
        )

    def _parameters(
        self, item: dict[str, Any], operation: dict[str, Any], base: str, where: str
    ) -> list[tuple[dict[str, Any], str]]:
        """Path-item and operation parameters, resolved; the operation's win (by name and in)."""
        merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        for raw in [*(item.get("parameters") or ()), *(operation.get("parameters") or ())]:
            param_base, param = self.resolver.deref(raw, base)
            if not isinstance(param, dict) or "name" not in param or "in" not in param:
                raise OpenApiError(f"{self.source}: {where}: a parameter needs 'name' and 'in'")
            if param["in"] not in ("path", "query", "header", "cookie"):
                raise OpenApiError(
                    f"{self.source}: {where}: parameter {param['name']!r} has an unknown "
                    f"location {param['in']!r}"
                )
            if param["in"] == "header" and str(param["name"]).lower() in (
                "accept",
                "content-type",
                "authorization",
            ):
                continue  # the spec says these are ignored: they come from elsewhere
            merged[(str(param["name"]), str(param["in"]))] = (param, param_base)
        return list(merged.values())

    def _parameter_schema(self, param: dict[str, Any], base: str) -> tuple[dict[str, Any], bool]:
        if "schema" in param:
            return self.schemas.convert(param["schema"], base, request=True), False
        content = param.get("content")
        if isinstance(content, dict) and content:
            media = next(iter(content.values())) or {}
            schema = self.schemas.convert(media.get("schema"), base, request=True)
            return schema, True
        return {}, False

    def _request_body(
        self,
        operation: dict[str, Any],
        base: str,
        properties: dict[str, Any],
        required: list[str],
        where: str,
    ) -> _Body | None:
        raw = operation.get("requestBody")
        if raw is None:
            return None
        body_base, request_body = self.resolver.deref(raw, base)
        content = request_body.get("content") or {}
        if not isinstance(content, dict) or not content:
            return None
        media_type = _pick_media_type(content)
        media = content[media_type] or {}
        schema = self.schemas.convert(media.get("schema"), body_base, request=True)
        description = request_body.get("description")
        body_required = bool(request_body.get("required", False))
        mode = _mode(media_type)
        fields = schema.get("properties") if mode in ("form", "multipart") else None
        if isinstance(fields, dict) and fields and not (set(fields) & set(properties)):
            properties.update(fields)
            if body_required:
                required += [f for f in schema.get("required", []) if f in fields]
            binary = frozenset(
                name
                for name, field in fields.items()
                if isinstance(field, dict) and field.get("format") in ("binary", "base64")
            )
            return _Body(media_type, mode, None, tuple(fields), binary)
        key = next(k for k in ("body", "request_body", "_request_body") if k not in properties)
        if mode == "text":
            schema = {"type": "string"}
        if description and "description" not in schema:
            schema = {**schema, "description": description}
        properties[key] = schema
        if body_required:
            required.append(key)
        return _Body(media_type, mode, key)

    def _security(self, operation: dict[str, Any]) -> tuple[tuple[_Security, ...], ...]:
        requirements = operation.get("security", self.document.get("security"))
        if not requirements:
            return ()
        out: list[tuple[_Security, ...]] = []
        for requirement in requirements:
            schemes: list[_Security] = []
            for name in requirement or {}:
                scheme = self._scheme(str(name))
                if scheme is None:
                    break
                schemes.append(scheme)
            else:
                out.append(tuple(schemes))
        return tuple(out)

    def _scheme(self, name: str) -> _Security | None:
        raw = self.schemes.get(name)
        if raw is None:
            return None
        _, scheme = self.resolver.deref(raw, self.resolver.root_base)
        kind = str(scheme.get("type", "")).lower()
        if kind == "http":
            http = str(scheme.get("scheme", "")).lower()
            if http in ("basic", "bearer"):
                return _Security(name, http, http)
            return _Security(name, "scheme", str(scheme.get("scheme", "")).capitalize())
        if kind == "apikey":
            location = scheme.get("in")
            if location in ("header", "query", "cookie"):
                return _Security(name, str(location), str(scheme.get("name", "")))
            return None
        if kind in ("oauth2", "openidconnect"):
            return _Security(name, "bearer", "bearer")
        return None  # mutualTLS and unknown kinds: not something a header carries

    def _base_url(self, operation: dict[str, Any], item: dict[str, Any], where: str) -> str:
        if self.config.base_url:
            return self.config.base_url.rstrip("/")
        servers = operation.get("servers") or item.get("servers") or self.document.get("servers")
        if not servers:
            raise OpenApiError(
                f"{self.source}: {where}: the API names no server; give OpenApiConfig(base_url=...)"
            )
        server = servers[0]
        url = str(server.get("url", ""))
        variables = server.get("variables") or {}

        def value(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable in self.config.server_variables:
                return self.config.server_variables[variable]
            spec = variables.get(variable) or {}
            if "default" not in spec:
                raise OpenApiError(
                    f"{self.source}: the server URL {url!r} has the variable {variable!r} "
                    "with no default; give OpenApiConfig(server_variables=...)"
                )
            return str(spec["default"])

        url = _TEMPLATE.sub(value, url)
        if not urlsplit(url).scheme:
            origin = self.resolver.root_base
            if "://" not in origin:
                raise OpenApiError(
                    f"{self.source}: the server URL {url!r} is relative and the document was "
                    "not loaded from a URL; give OpenApiConfig(base_url=...)"
                )
            url = urljoin(origin, url)
        return url.rstrip("/")


def _pick_media_type(content: dict[str, Any]) -> str:
    """JSON first, then forms, then text, then whatever the operation lists first."""
    types = list(content)
    for wanted in (
        lambda t: t.split(";")[0].strip().lower() in ("application/json", "*/*"),
        lambda t: t.split(";")[0].strip().lower().endswith("+json"),
        lambda t: t.startswith("application/x-www-form-urlencoded"),
        lambda t: t.startswith("multipart/form-data"),
        lambda t: t.startswith("text/"),
    ):
        for media_type in types:
            if wanted(media_type):
                return media_type
    return types[0]


def _mode(media_type: str) -> str:
    mime = media_type.split(";")[0].strip().lower()
    if mime in ("application/json", "*/*") or mime.endswith("+json"):
        return "json"
    if mime == "application/x-www-form-urlencoded":
        return "form"
    if mime == "multipart/form-data":
        return "multipart"
    return "text"
