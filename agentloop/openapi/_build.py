"""Reading a document's operations: what each tool shows the model and how it is called."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin, urlsplit

from .._tool import UniqueNames, model_tool_name
from ._config import OpenApiConfig, OperationFilter
from ._plan import Body, Operation, Param, Security
from ._schema import SchemaConverter
from ._spec import (
    OpenApiError,
    Resolver,
    expect_list,
    expect_object,
    expect_string,
    pointer,
    shown,
)

__all__ = ["Builder"]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_MAX_DESCRIPTION = 1024  # OpenAI's limit for a function description
_TEMPLATE = re.compile(r"\{([^{}]+)\}")


class Builder:
    """Reads a document's operations into :class:`~._plan.Operation` records."""

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
        components = document.get("components")
        components = {} if components is None else expect_object(components, "/components", source)
        schemes = components.get("securitySchemes")
        self.schemes = (
            {} if schemes is None else expect_object(schemes, "/components/securitySchemes", source)
        )

    def build(self) -> list[Operation]:
        """The tools.

        Raises:
            OpenApiError: a node has the wrong shape (named by its JSON pointer),
                or as :meth:`OpenApiToolAdapter.from_spec` says.
        """
        try:
            return self._build()
        except RecursionError:
            raise OpenApiError(f"{self.source}: the document nests too deeply") from None

    def _build(self) -> list[Operation]:
        tools: list[Operation] = []
        names = UniqueNames()
        source = self.source
        raw_paths = self.document.get("paths")
        paths = {} if raw_paths is None else expect_object(raw_paths, "/paths", source)
        base = self.resolver.root_base
        for path, raw_item in paths.items():
            item_base, item, item_at = self.resolver.locate(raw_item, base, pointer("/paths", path))
            item = expect_object(item, item_at, source)
            if item.get("parameters") is not None:
                expect_list(item["parameters"], pointer(item_at, "parameters"), source)
            for method in METHODS:
                if method not in item:
                    continue
                at = pointer(item_at, method)
                operation = expect_object(item[method], at, source)
                operation_id = operation.get("operationId")
                if operation_id is not None:
                    operation_id = expect_string(operation_id, pointer(at, "operationId"), source)
                raw_tags = operation.get("tags")
                if raw_tags is None:
                    raw_tags = []
                tags = [str(t) for t in expect_list(raw_tags, pointer(at, "tags"), source)]
                if not self.filter.matches(operation_id, method, path, tags):
                    continue
                raw_name = operation_id or f"{method}_{path.strip('/')}"
                name = names.add(model_tool_name(self.config.prefix, str(raw_name)))
                tools.append(
                    self._tool(name, path, method, item, item_base, item_at, operation, tags)
                )
        return tools

    def _tool(
        self,
        name: str,
        path: str,
        method: str,
        item: dict[str, Any],
        base: str,
        item_at: str,
        operation: dict[str, Any],
        tags: list[str],
    ) -> Operation:
        where = f"{method.upper()} {path}"
        at = pointer(item_at, method)
        properties: dict[str, Any] = {}
        required: list[str] = []
        params: list[Param] = []
        for param, param_base in self._parameters(item, operation, base, item_at, at):
            location = param["in"]
            key = (
                param["name"] if param["name"] not in properties else f"{param['name']}_{location}"
            )
            style = param.get("style") or ("form" if location in ("query", "cookie") else "simple")
            explode = param.get("explode", style == "form")
            schema, json_content = self._parameter_schema(param, param_base)
            if isinstance(param.get("description"), str) and "description" not in schema:
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
        body = self._request_body(operation, base, properties, required, at)
        security = self._security(operation, at)
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
        return Operation(
            name=name,
            label=summary or str(operation.get("operationId") or where),
            description=description,
            parameters_schema=arguments,
            method=method,
            path=path,
            operation_id=operation.get("operationId"),
            tags=tuple(tags),
            deprecated=bool(operation.get("deprecated", False)),
            base_url=self._base_url(operation, item, item_at, at),
            params=tuple(params),
            body=body,
            security=security,
        )

    def _parameters(
        self, item: dict[str, Any], operation: dict[str, Any], base: str, item_at: str, at: str
    ) -> list[tuple[dict[str, Any], str]]:
        """Path-item and operation parameters, resolved; the operation's win (by name and in)."""
        source = self.source
        merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        located: list[tuple[Any, str]] = []
        for owner, owner_at in ((item, item_at), (operation, at)):
            raw_list = owner.get("parameters")
            if raw_list is None:
                continue
            list_at = pointer(owner_at, "parameters")
            for index, raw in enumerate(expect_list(raw_list, list_at, source)):
                located.append((raw, pointer(list_at, index)))
        for raw, raw_at in located:
            param_base, param, param_at = self.resolver.locate(raw, base, raw_at)
            param = expect_object(param, param_at, source)
            if "name" not in param or "in" not in param:
                raise OpenApiError(f"{source}: {param_at}: a parameter needs 'name' and 'in'")
            expect_string(param["name"], pointer(param_at, "name"), source)
            if param["in"] not in ("path", "query", "header", "cookie"):
                raise OpenApiError(
                    f"{source}: {pointer(param_at, 'in')}: parameter {param['name']!r} has an "
                    f"unknown location {shown(param['in'])}"
                )
            for key in ("style",):
                if key in param and param[key] is not None:
                    expect_string(param[key], pointer(param_at, key), source)
            content = param.get("content")
            if content is not None:
                content = expect_object(content, pointer(param_at, "content"), source)
                for media_type, media in content.items():
                    if media is not None:
                        expect_object(media, pointer(param_at, "content", media_type), source)
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
        at: str,
    ) -> Body | None:
        raw = operation.get("requestBody")
        if raw is None:
            return None
        source = self.source
        body_base, request_body, body_at = self.resolver.locate(
            raw, base, pointer(at, "requestBody")
        )
        request_body = expect_object(request_body, body_at, source)
        raw_content = request_body.get("content")
        if raw_content is None:
            return None
        content = expect_object(raw_content, pointer(body_at, "content"), source)
        if not content:
            return None
        media_type = _pick_media_type(content)
        raw_media = content[media_type]
        media = (
            {}
            if raw_media is None
            else expect_object(raw_media, pointer(body_at, "content", media_type), source)
        )
        schema = self.schemas.convert(media.get("schema"), body_base, request=True)
        description = request_body.get("description")
        if not isinstance(description, str):
            description = None
        body_required = request_body.get("required") is True
        mode = _mode(media_type)
        fields = schema.get("properties") if mode in ("form", "multipart") else None
        if isinstance(fields, dict) and fields and not (set(fields) & set(properties)):
            properties.update(fields)
            if body_required:
                required += [f for f in schema.get("required", ()) if f in fields]
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

    def _security(self, operation: dict[str, Any], at: str) -> tuple[tuple[Security, ...], ...]:
        source = self.source
        if "security" in operation:
            requirements, where = operation["security"], pointer(at, "security")
        else:
            requirements, where = self.document.get("security"), "/security"
        if requirements is None:
            return ()
        out: list[tuple[Security, ...]] = []
        for index, requirement in enumerate(expect_list(requirements, where, source)):
            schemes: list[Security] = []
            for name in expect_object(requirement, pointer(where, index), source):
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
        _, scheme, at = self.resolver.locate(
            raw, self.resolver.root_base, pointer("/components/securitySchemes", name)
        )
        scheme = expect_object(scheme, at, self.source)
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

    def _base_url(
        self, operation: dict[str, Any], item: dict[str, Any], item_at: str, at: str
    ) -> str:
        source = self.source
        servers: list[Any] = []
        where = ""
        for owner, owner_at in ((operation, at), (item, item_at), (self.document, "")):
            if owner.get("servers") is not None:
                where = pointer(owner_at, "servers")
                servers = expect_list(owner["servers"], where, source)
                for index, server in enumerate(servers):
                    expect_object(server, pointer(where, index), source)
                if servers:
                    break
        if self.config.base_url:
            return self.config.base_url.rstrip("/")
        if not servers:
            # The specification's default: one server at "/", relative to the document.
            if "://" not in self.resolver.root_base:
                raise OpenApiError(
                    f"{source}: the API names no server, and the default ('/', relative to "
                    "where the document was loaded from) needs a document loaded from a URL; "
                    "give OpenApiConfig(base_url=...)"
                )
            return urljoin(self.resolver.root_base, "/").rstrip("/")
        server = servers[0]
        url = server.get("url", "")
        url = expect_string(url, pointer(where, 0, "url"), source)
        raw_variables = server.get("variables")
        variables = (
            {}
            if raw_variables is None
            else expect_object(raw_variables, pointer(where, 0, "variables"), source)
        )

        def value(match: re.Match[str]) -> str:
            variable = match.group(1)
            if variable in self.config.server_variables:
                return self.config.server_variables[variable]
            spec = variables.get(variable)
            if not isinstance(spec, dict) or "default" not in spec:
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
