"""Turning a document's operations into OpenApiToolAdapter objects."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin, urlsplit

from .._names import model_tool_name, unique_name
from ._adapter import OpenApiToolAdapter
from ._config import OpenApiConfig, OperationFilter
from ._plan import Body, Param, Security
from ._schema import SchemaConverter
from ._spec import OpenApiError, Resolver

__all__ = ["METHODS", "Builder"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_MAX_DESCRIPTION = 1024  # OpenAI's limit for a function description
_TEMPLATE = re.compile(r"\{([^{}]+)\}")


class Builder:
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
        params: list[Param] = []
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
                Param(
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
    ) -> Body | None:
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
            return Body(media_type, mode, None, tuple(fields), binary)
        key = next(k for k in ("body", "request_body", "_request_body") if k not in properties)
        if mode == "text":
            schema = {"type": "string"}
        if description and "description" not in schema:
            schema = {**schema, "description": description}
        properties[key] = schema
        if body_required:
            required.append(key)
        return Body(media_type, mode, key)

    def _security(self, operation: dict[str, Any]) -> tuple[tuple[Security, ...], ...]:
        requirements = operation.get("security", self.document.get("security"))
        if not requirements:
            return ()
        out: list[tuple[Security, ...]] = []
        for requirement in requirements:
            schemes: list[Security] = []
            for name in requirement or {}:
                scheme = self._scheme(str(name))
                if scheme is None:
                    break
                schemes.append(scheme)
            else:
                out.append(tuple(schemes))
        return tuple(out)

    def _scheme(self, name: str) -> Security | None:
        raw = self.schemes.get(name)
        if raw is None:
            return None
        _, scheme = self.resolver.deref(raw, self.resolver.root_base)
        kind = str(scheme.get("type", "")).lower()
        if kind == "http":
            http = str(scheme.get("scheme", "")).lower()
            if http in ("basic", "bearer"):
                return Security(name, http, http)
            return Security(name, "scheme", str(scheme.get("scheme", "")).capitalize())
        if kind == "apikey":
            location = scheme.get("in")
            if location in ("header", "query", "cookie"):
                return Security(name, str(location), str(scheme.get("name", "")))
            return None
        if kind in ("oauth2", "openidconnect"):
            return Security(name, "bearer", "bearer")
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
