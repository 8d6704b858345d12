"""agentloop.openapi: specs in, tools out, requests checked on the wire of a real server.

The echo server (tests/openapi_server.py, a real process on 127.0.0.1) answers
``/echo/...`` with what it received, byte for byte: each parameter style, body
type and auth scheme is asserted as the server saw it.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import pickle
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import jsonschema
import pytest
import trio
import yaml
from openapi_fixtures import serve_openapi_echo
from sse_server import Reply, serve

import agentloop as al
import agentloop.openapi
from agentloop.openapi import OpenApiConfig, OpenApiError, OpenApiToolAdapter, OperationFilter
from agentloop.openapi import _adapter as openapi_adapter
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import EventRecorder, assert_well_formed

DATA = Path(__file__).resolve().parent.parent / "data" / "openapi"
BOUND = 30.0


def spec(paths: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A 3.0.3 document with ``paths`` (servers point nowhere: tests give a base URL)."""
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "test", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": paths,
    }
    document.update(top)
    return document


def op(operation_id: str, **fields: Any) -> dict[str, Any]:
    return {"operationId": operation_id, **fields}


def param(name: str, where: str, schema: Any = None, **fields: Any) -> dict[str, Any]:
    return {"name": name, "in": where, "schema": schema or {"type": "string"}, **fields}


def ctx() -> al.ToolContext:
    return al.ToolContext(tool_call_id="c1", tool_name="t", cancel_scope=trio.CancelScope())


def only(tools: list[OpenApiToolAdapter]) -> OpenApiToolAdapter:
    assert len(tools) == 1
    return tools[0]


async def echo(tool: OpenApiToolAdapter, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call ``tool`` against the echo server; what the server saw."""
    result = await tool.execute(arguments, ctx())
    seen: dict[str, Any] = json.loads(result.text_content)
    return seen


async def last_request(base: str) -> dict[str, Any]:
    """What the echo server last saw on the wire (the tool's result may hide parts)."""
    async with httpx2.AsyncClient() as client:
        seen: dict[str, Any] = (await client.get(f"{base}/last")).json()
    return seen


async def echo_tool(
    base: str, paths: dict[str, Any], config: dict[str, Any] | None = None, **top: Any
) -> OpenApiToolAdapter:
    return only(
        OpenApiToolAdapter.from_spec(
            spec(paths, **top), OpenApiConfig(base_url=base, **(config or {}))
        )
    )


# --------------------------------------------------------------------------- parsing


def test_petstore_30_every_operation_in_document_order() -> None:
    tools = OpenApiToolAdapter.from_file(
        DATA / "petstore-3.0.yaml", OpenApiConfig(base_url="http://pets.example/api/v3")
    )
    names = [t.name for t in tools]
    assert names[:4] == ["updatePet", "addPet", "findPetsByStatus", "findPetsByTags"]
    assert len(names) == len(set(names)) == 19
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool.parameters_schema)
    add = tools[1]
    assert (add.method, add.path, add.label) == ("post", "/pet", "Add a new pet to the store")
    body = add.parameters_schema["properties"]["body"]
    assert body["required"] == ["name", "photoUrls"]
    assert body["properties"]["status"]["enum"] == ["available", "pending", "sold"]
    assert add.parameters_schema["required"] == ["body"]
    assert add.base_url == "http://pets.example/api/v3"


def test_a_relative_server_needs_a_base_url() -> None:
    with pytest.raises(OpenApiError) as info:
        OpenApiToolAdapter.from_file(DATA / "petstore-3.0.yaml")
    source = str(DATA / "petstore-3.0.yaml")
    assert str(info.value) == (
        f"{source}: the server URL '/api/v3' is relative and the document was not loaded "
        "from a URL; give OpenApiConfig(base_url=...)"
    )


async def test_from_url_resolves_a_relative_server_against_the_spec_url() -> None:
    text = (DATA / "petstore-3.0.yaml").read_bytes()
    async with serve(Reply([text], headers={"content-type": "application/yaml"})) as server:
        tools = await OpenApiToolAdapter.from_url(f"{server.url}/specs/petstore.yaml")
    assert {t.base_url for t in tools} == {f"{server.url}/api/v3"}
    assert server.requests[0].path == "/specs/petstore.yaml"


async def test_from_url_reports_a_failed_fetch() -> None:
    async with serve(Reply([b"nope"], status=404)) as server:
        with pytest.raises(OpenApiError) as info:
            await OpenApiToolAdapter.from_url(f"{server.url}/missing.json")
    assert str(info.value) == f"cannot fetch {server.url}/missing.json: HTTP 404"


def test_json_and_yaml_text_and_31_type_lists() -> None:
    document = spec(
        {
            "/things": {
                "post": op(
                    "makeThing",
                    requestBody={
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {
                                        "note": {"type": ["string", "null"]},
                                        "kind": {"const": "thing"},
                                    },
                                }
                            }
                        }
                    },
                )
            }
        },
        openapi="3.1.0",
    )
    from_json = only(OpenApiToolAdapter.from_str(json.dumps(document)))
    from_yaml = only(OpenApiToolAdapter.from_str(yaml.safe_dump(document)))
    assert from_json.parameters_schema == from_yaml.parameters_schema
    assert from_json.parameters_schema["properties"]["body"]["properties"] == {
        "note": {"type": ["string", "null"]},
        "kind": {"const": "thing"},
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '{"swagger": "2.0", "paths": {}}',
            "Swagger 2.0 is not supported; convert it to OpenAPI 3 first "
            "(for example with swagger2openapi)",
        ),
        (
            '{"openapi": "4.0.0", "paths": {}}',
            "OpenAPI 4.0.0 is not supported (only 3.0.x and 3.1.x are)",
        ),
        ('{"info": {}}', "not an OpenAPI document (no 'openapi' version field)"),
        ("- a\n- list\n", "an OpenAPI document is an object, not list"),
        ("", "an OpenAPI document is an object, not empty"),
        ('{"openapi": ', "not valid JSON: Expecting value: line 1 column 13 (char 12)"),
    ],
)
def test_documents_that_are_refused(text: str, message: str) -> None:
    with pytest.raises(OpenApiError) as info:
        OpenApiToolAdapter.from_str(text)
    assert str(info.value) == f"the OpenAPI document: {message}"


def test_invalid_yaml_is_refused() -> None:
    with pytest.raises(OpenApiError) as info:
        OpenApiToolAdapter.from_str("openapi: 3.0.3\npaths: [unclosed\n")
    assert str(info.value).startswith("the OpenAPI document: not valid YAML: ")


def test_refs_are_resolved_everywhere_and_recursion_is_cut(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "params.yaml").write_text(
        "Limit: {name: limit, in: query, description: How many., schema: {type: integer}}\n"
    )
    (tmp_path / "schemas.yaml").write_text(
        "Node:\n  type: object\n  properties:\n    name: {type: string}\n"
        "    children: {type: array, items: {$ref: '#/Node'}}\n"
        "    owner: {$ref: 'schemas.yaml#/Owner'}\n"
        "Owner: {type: object, required: [id, nick], properties:\n"
        "  {id: {type: integer, readOnly: true}, nick: {type: string}}}\n"
    )
    document = spec(
        {
            "/trees": {"$ref": "#/components/pathItems/Trees"},
        },
        components={
            "pathItems": {
                "Trees": {
                    "post": op(
                        "plantTree",
                        parameters=[{"$ref": "common/params.yaml#/Limit"}],
                        requestBody={"$ref": "#/components/requestBodies/Tree"},
                    )
                }
            },
            "requestBodies": {
                "Tree": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "schemas.yaml#/Node"}}},
                }
            },
        },
    )
    (tmp_path / "api.json").write_text(json.dumps(document))
    tool = only(OpenApiToolAdapter.from_file(tmp_path / "api.json"))
    assert tool.parameters_schema == {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "description": "How many."},
            "body": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"description": "(recursive: Node)"}},
                    "owner": {
                        "type": "object",
                        "properties": {"nick": {"type": "string"}},
                        "required": ["nick"],
                    },
                },
            },
        },
        "required": ["body"],
    }


def test_a_ref_to_nothing_is_an_error() -> None:
    document = spec({"/x": {"get": op("x", parameters=[{"$ref": "#/components/parameters/Nope"}])}})
    with pytest.raises(OpenApiError) as info:
        OpenApiToolAdapter.from_spec(document)
    assert (
        str(info.value) == "$ref '#/components/parameters/Nope' points to nothing (no 'components')"
    )


def test_30_keywords_become_json_schema() -> None:
    schema = {
        "type": "object",
        "discriminator": {"propertyName": "kind"},
        "properties": {
            "age": {"type": "integer", "minimum": 0, "exclusiveMinimum": True, "example": 3},
            "nick": {"type": "string", "nullable": True, "enum": ["a", "b"]},
            "id": {"type": "string", "readOnly": True},
            "secret": {"type": "string", "writeOnly": True, "x-internal": True},
        },
        "required": ["id", "age"],
    }
    document = spec(
        {"/x": {"post": op("x", requestBody={"content": {"application/json": {"schema": schema}}})}}
    )
    body = only(OpenApiToolAdapter.from_spec(document)).parameters_schema["properties"]["body"]
    assert body == {
        "type": "object",
        "properties": {
            "age": {"type": "integer", "exclusiveMinimum": 0},
            "nick": {"type": ["string", "null"], "enum": ["a", "b", None]},
            "secret": {"type": "string"},
        },
        "required": ["age"],
    }
    jsonschema.Draft202012Validator.check_schema(body)


# --------------------------------------------------------------------------- tools


def test_names_labels_descriptions() -> None:
    long_id = "get" + "VeryLong" * 10
    document = spec(
        {
            "/a/{id}": {
                "get": op("get echo/weird.name!", summary="Get A.", description="Longer text."),
                "delete": {"summary": "Delete A."},
                "put": op(long_id, deprecated=True),
            },
            "/b": {"get": op("get echo/weird.name!")},
        }
    )
    tools = OpenApiToolAdapter.from_spec(document, OpenApiConfig(prefix="api"))
    assert [t.name for t in tools] == [
        "api__get_echo_weird_name_",
        "api__" + long_id[:50] + "_" + tools[1].name[-8:],
        "api__delete_a__id_",
        "api__get_echo_weird_name__2",
    ]
    assert len(tools[1].name) == 64
    assert [t.label for t in tools] == ["Get A.", long_id, "Delete A.", "get echo/weird.name!"]
    assert [t.description for t in tools] == [
        "Get A.\n\nLonger text.",
        "(deprecated) PUT /a/{id}",
        "Delete A.",
        "GET /b",
    ]
    assert tools[1].deprecated


def test_filters() -> None:
    document = spec(
        {
            "/pets": {
                "get": op("listPets", tags=["pets"]),
                "post": op("addPet", tags=["pets", "write"]),
            },
            "/users": {"get": op("listUsers", tags=["users"])},
        }
    )

    def names(**criteria: Any) -> list[str]:
        tools = OpenApiToolAdapter.from_spec(document, filter=OperationFilter(**criteria))
        return [t.name for t in tools]

    assert names() == ["listPets", "addPet", "listUsers"]
    assert names(tags="write") == ["addPet"]
    assert names(methods=["GET"]) == ["listPets", "listUsers"]
    assert names(path_prefixes="/users") == ["listUsers"]
    assert names(operation_ids={"addPet", "listUsers"}) == ["addPet", "listUsers"]
    assert names(tags="pets", methods="get") == ["listPets"]


def test_path_item_parameters_merge_with_the_operations() -> None:
    document = spec(
        {
            "/items/{id}": {
                "parameters": [
                    param("id", "path", required=True, description="From the path item."),
                    param("trace", "header", description="Inherited."),
                ],
                "get": op(
                    "getItem",
                    parameters=[
                        param(
                            "id", "path", {"type": "integer"}, required=True, description="Wins."
                        ),
                        param(
                            "fields",
                            "query",
                            {"type": "string", "enum": ["a", "b"], "default": "a"},
                        ),
                    ],
                ),
            }
        }
    )
    tool = only(OpenApiToolAdapter.from_spec(document))
    assert tool.parameters_schema == {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "description": "Wins."},
            "trace": {"type": "string", "description": "Inherited."},
            "fields": {"type": "string", "enum": ["a", "b"], "default": "a"},
        },
        "required": ["id"],
    }


def test_the_repr_holds_no_credentials() -> None:
    config = OpenApiConfig(
        base_url="http://x", credentials={"k": "sk-live-123", "b": ("me", "pw-456")}
    )
    tool = only(OpenApiToolAdapter.from_spec(spec({"/x": {"get": op("x")}}), config))
    assert repr(tool) == "OpenApiToolAdapter(name='x', method='get', path='/x')"
    assert "sk-live-123" not in repr(config)
    assert "pw-456" not in repr(config)


def test_server_variables() -> None:
    servers = [
        {
            "url": "https://{env}.example.com:{port}/v1",
            "variables": {"env": {"default": "api"}, "port": {"default": "443"}},
        }
    ]
    document = spec({"/x": {"get": op("x")}}, servers=servers)
    assert only(OpenApiToolAdapter.from_spec(document)).base_url == "https://api.example.com:443/v1"
    config = OpenApiConfig(server_variables={"env": "staging"})
    tool = only(OpenApiToolAdapter.from_spec(document, config))
    assert tool.base_url == "https://staging.example.com:443/v1"


# --------------------------------------------------------------------------- the wire


async def test_path_and_query_styles_on_the_wire() -> None:
    paths = {
        "/echo/{plain}/{label}/{matrix}": {
            "get": op(
                "styles",
                parameters=[
                    param("plain", "path", required=True),
                    param(
                        "label",
                        "path",
                        {"type": "array"},
                        required=True,
                        style="label",
                        explode=True,
                    ),
                    param(
                        "matrix",
                        "path",
                        {"type": "object"},
                        required=True,
                        style="matrix",
                        explode=False,
                    ),
                    param("ids", "query", {"type": "array"}),
                    param("csv", "query", {"type": "array"}, explode=False),
                    param(
                        "space", "query", {"type": "array"}, style="spaceDelimited", explode=False
                    ),
                    param("pipe", "query", {"type": "array"}, style="pipeDelimited", explode=False),
                    param("filter", "query", {"type": "object"}, style="deepObject", explode=True),
                    param("raw", "query", allowReserved=True),
                    param("absent", "query"),
                ],
            )
        }
    }
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tool = await echo_tool(base, paths)
            seen = await echo(
                tool,
                {
                    "plain": "a b/ü",
                    "label": ["x", "y"],
                    "matrix": {"k": "v w"},
                    "ids": [1, 2],
                    "csv": ["a", "b,c"],
                    "space": ["a", "b"],
                    "pipe": ["a", "b"],
                    "filter": {"role": "admin", "n": 2},
                    "raw": "a/b?c",
                },
            )
    assert seen["method"] == "GET"
    assert seen["path"] == "/echo/a%20b%2F%C3%BC/.x.y/;matrix=k,v%20w"
    assert seen["query"] == (
        "ids=1&ids=2&csv=a,b%2Cc&space=a%20b&pipe=a%7Cb"
        "&filter%5Brole%5D=admin&filter%5Bn%5D=2&raw=a/b?c"
    )


async def test_headers_and_cookies_on_the_wire() -> None:
    paths = {
        "/echo/h": {
            "get": op(
                "headers",
                parameters=[
                    param("X-One", "header"),
                    param("X-List", "header", {"type": "array"}),
                    param("X-Obj", "header", {"type": "object"}, explode=True),
                    param("Accept", "header"),  # ignored, as the spec says
                    param("session", "cookie"),
                    param("prefs", "cookie", {"type": "array"}, explode=False),
                ],
            )
        }
    }
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tool = await echo_tool(base, paths, {"headers": {"X-Client": "agentloop"}})
            assert list(tool.parameters_schema["properties"]) == [
                "X-One",
                "X-List",
                "X-Obj",
                "session",
                "prefs",
            ]
            seen = await echo(
                tool,
                {
                    "X-One": "1",
                    "X-List": ["a", "b"],
                    "X-Obj": {"k": 1},
                    "session": "s 1",
                    "prefs": ["dark", "wide"],
                },
            )
    headers = seen["headers"]
    assert (headers["x-one"], headers["x-list"], headers["x-obj"]) == ("1", "a,b", "k=1")
    assert headers["x-client"] == "agentloop"
    assert seen["cookie"] == "session=s%201; prefs=dark,wide"


async def test_a_missing_path_parameter_is_an_error() -> None:
    paths = {"/echo/{id}": {"get": op("get", parameters=[param("id", "path", required=True)])}}
    tool = only(OpenApiToolAdapter.from_spec(spec(paths), OpenApiConfig(base_url="http://x")))
    with pytest.raises(al.ToolError) as info:
        await tool.execute({}, ctx())
    assert str(info.value) == "Missing required path parameter 'id' for /echo/{id}"


def body_op(media_type: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return op(
        "send", requestBody={"required": True, "content": {media_type: {"schema": schema}}}, **extra
    )


async def test_request_bodies_on_the_wire() -> None:
    fields = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "tags": {"type": "array"}},
    }
    upload = {
        "type": "object",
        "properties": {"note": {"type": "string"}, "file": {"type": "string", "format": "binary"}},
    }
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            json_tool = await echo_tool(
                base,
                {
                    "/echo/j": {
                        "post": body_op(
                            "application/json",
                            {"type": "object"},
                            parameters=[param("body", "query")],
                        )
                    }
                },
            )
            assert list(json_tool.parameters_schema["properties"]) == ["body", "request_body"]
            seen = await echo(json_tool, {"body": "q", "request_body": {"é": [1, None]}})
            assert (seen["query"], seen["content_type"]) == ("body=q", "application/json")
            assert json.loads(seen["body"]) == {"é": [1, None]}

            form_tool = await echo_tool(
                base, {"/echo/f": {"post": body_op("application/x-www-form-urlencoded", fields)}}
            )
            assert list(form_tool.parameters_schema["properties"]) == ["name", "tags"]
            seen = await echo(form_tool, {"name": "a b&c", "tags": ["x", "y"]})
            assert seen["content_type"] == "application/x-www-form-urlencoded"
            assert seen["body"] == "name=a+b%26c&tags=x&tags=y"

            multipart_tool = await echo_tool(
                base, {"/echo/m": {"put": body_op("multipart/form-data", upload)}}
            )
            seen = await echo(multipart_tool, {"note": "hi", "file": "file text"})
            assert seen["content_type"].startswith("multipart/form-data; boundary=")
            assert 'name="note"\r\n\r\nhi\r\n' in seen["body"]
            assert (
                'name="file"; filename="file"\r\n'
                "Content-Type: application/octet-stream\r\n\r\nfile text\r\n" in seen["body"]
            )

            text_tool = await echo_tool(
                base, {"/echo/t": {"post": body_op("text/plain", {"type": "string"})}}
            )
            assert text_tool.parameters_schema["properties"] == {"body": {"type": "string"}}
            seen = await echo(text_tool, {"body": "just text ✓"})
            assert (seen["content_type"], seen["body"]) == ("text/plain", "just text ✓")


SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer"},
    "basic": {"type": "http", "scheme": "basic"},
    "headerKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
    "queryKey": {"type": "apiKey", "in": "query", "name": "api_key"},
    "cookieKey": {"type": "apiKey", "in": "cookie", "name": "session"},
    "oauth": {
        "type": "oauth2",
        "flows": {"clientCredentials": {"tokenUrl": "https://t", "scopes": {}}},
    },
    "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://o/.well-known"},
}
CREDENTIALS = {
    "bearer": "tok-bearer",
    "basic": ("user", "pa:ss"),
    "headerKey": "key-header",
    "queryKey": "key/query",
    "cookieKey": "key-cookie",
    "oauth": "tok-oauth",
    "oidc": "tok-oidc",
}


@pytest.mark.parametrize(
    ("scheme", "where", "expected"),
    [
        ("bearer", "authorization", "Bearer tok-bearer"),
        ("basic", "authorization", "Basic " + base64.b64encode(b"user:pa:ss").decode()),
        ("headerKey", "x-api-key", "key-header"),
        ("queryKey", "query", "api_key=key%2Fquery"),
        ("cookieKey", "cookie", "session=key-cookie"),
        ("oauth", "authorization", "Bearer tok-oauth"),
        ("oidc", "authorization", "Bearer tok-oidc"),
    ],
)
async def test_auth_schemes_on_the_wire_and_never_shown(
    scheme: str, where: str, expected: str
) -> None:
    """The credential goes out; what the echo brings back of it, and details, show ***."""
    paths = {"/echo/auth": {"get": op("auth", security=[{scheme: []}])}}
    components = {"securitySchemes": SCHEMES}
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tool = await echo_tool(base, paths, {"credentials": CREDENTIALS}, components=components)
            result = await tool.execute({}, ctx())
            wire = await last_request(base)

    def pick(seen: dict[str, Any]) -> Any:
        if where in ("query", "cookie"):
            return seen[where]
        return seen["headers"].get(where)

    assert pick(wire) == expected
    shown = {"query": "api_key=***", "cookie": "session=***", "x-api-key": "***"}
    assert pick(json.loads(result.text_content)) == shown.get(
        where, expected.split(" ")[0] + " ***"
    )
    assert result.details is not None
    everything = result.text_content + json.dumps(result.details)
    secret = CREDENTIALS[scheme]
    for form in [secret] if isinstance(secret, str) else [":".join(secret), secret[1]]:
        assert form not in everything
    assert "key%2Fquery" not in everything
    assert expected not in everything
    if scheme == "queryKey":
        assert result.details["url"] == f"{base}/echo/auth?api_key=***"


@pytest.mark.parametrize(
    ("scheme", "sent"),
    [
        ("bearer", "tok-bearer"),
        ("basic", "pa:ss"),
        ("headerKey", "key-header"),
        ("queryKey", "key/query"),
        ("cookieKey", "key-cookie"),
    ],
)
async def test_a_credential_in_an_error_body_is_redacted(scheme: str, sent: str) -> None:
    """A 4xx answer quoting the credential (URL-encoded or not) is redacted too."""
    paths = {"/echo/status/{code}": {"get": op("status", security=[{scheme: []}])}}
    paths["/echo/status/{code}"]["get"]["parameters"] = [
        param("code", "path", {"type": "integer"}, required=True),
        param("echo", "query"),
    ]
    components = {"securitySchemes": SCHEMES}
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tool = await echo_tool(base, paths, {"credentials": CREDENTIALS}, components=components)
            with pytest.raises(al.ToolError) as caught:
                await tool.execute({"code": 403, "echo": f"{sent} and {quote(sent)}"}, ctx())
    text = str(caught.value) + json.dumps(caught.value.details)
    assert sent not in text
    assert quote(sent, safe="") not in text
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


async def test_the_first_satisfiable_security_requirement_is_used() -> None:
    paths = {
        "/echo/a": {"get": op("both", security=[{"bearer": [], "headerKey": []}, {"basic": []}])},
        "/echo/b": {"get": op("open", security=[])},
    }
    components = {"securitySchemes": SCHEMES}
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tools = OpenApiToolAdapter.from_spec(
                spec(paths, components=components, security=[{"headerKey": []}]),
                OpenApiConfig(base_url=base, credentials={"basic": ("u", "p"), "headerKey": "k"}),
            )
            both = await echo(tools[0], {})
            open_ = await echo(tools[1], {})
    # {bearer + headerKey} lacks the bearer token: the basic alternative is used.
    assert both["headers"]["authorization"] == "Basic " + base64.b64encode(b"u:p").decode()
    assert "x-api-key" not in both["headers"]
    assert "authorization" not in open_["headers"]
    assert "x-api-key" not in open_["headers"]


# --------------------------------------------------------------------------- responses


RESPONSES = {
    "/status/{code}": {
        "get": op("status", parameters=[param("code", "path", {"type": "integer"}, required=True)])
    },
    "/hang": {"get": op("hang")},
    "/big/{n}": {
        "get": op("big", parameters=[param("n", "path", {"type": "integer"}, required=True)])
    },
    "/chunked/{n}": {
        "get": op("chunked", parameters=[param("n", "path", {"type": "integer"}, required=True)])
    },
    "/image": {"get": op("image")},
    "/text": {"get": op("text")},
    "/json-array": {"get": op("jsonArray")},
}


async def response_tools(base: str, **config: Any) -> dict[str, OpenApiToolAdapter]:
    tools = OpenApiToolAdapter.from_spec(spec(RESPONSES), OpenApiConfig(base_url=base, **config))
    return {t.name: t for t in tools}


async def test_successful_responses() -> None:
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tools = await response_tools(base, max_response_bytes=1000)
            array = await tools["jsonArray"].execute({}, ctx())
            text = await tools["text"].execute({}, ctx())
            image = await tools["image"].execute({}, ctx())
            big = await tools["big"].execute({"n": 2500}, ctx())
            exact = await tools["big"].execute({"n": 1000}, ctx())
    assert array.text_content == '[\n  {\n    "id": 1\n  },\n  {\n    "id": 2\n  }\n]'
    assert array.details == {
        "status": 200,
        "method": "GET",
        "url": f"{base}/json-array",
        "content_type": "application/json",
        "truncated": False,
    }
    assert text.text_content == "plain text ✓"
    assert isinstance(image.content[1], al.ImageContent)
    assert image.content[1].mime_type == "image/png"
    assert image.text_content.startswith("[image: image/png, ")
    assert big.text_content == (
        "0123456789" * 100 + "\n… [truncated: the response is 2500 bytes, cut off at 1000]"
    )
    assert big.details is not None
    assert big.details["truncated"] is True
    assert exact.text_content == "0123456789" * 100


MIB = 1024 * 1024


# A body past the drain limit is left before its end: the transport's inner generator is
# left to the collector, which warns.
@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_a_cut_response_says_how_long_it_was() -> None:
    """The whole size, counted or as the server said it; "more than" only when neither."""
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tools = await response_tools(base, max_response_bytes=1000)
            sizes = [
                (await tools[name].execute({"n": n}, ctx())).text_content.rpartition("[")[2]
                for name, n in [
                    ("big", 10 * MIB),  # Content-Length, and read to its end
                    ("chunked", 10 * MIB),  # counted to its end
                    ("big", 20 * MIB),  # past the drain limit: Content-Length says
                    ("chunked", 20 * MIB),  # past the drain limit, no length: unknown
                ]
            ]
    assert sizes == [
        "truncated: the response is 10485760 bytes, cut off at 1000]",
        "truncated: the response is 10485760 bytes, cut off at 1000]",
        "truncated: the response is 20971520 bytes, cut off at 1000]",
        "truncated: the response is more than 16777216 bytes, cut off at 1000]",
    ]


@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_from_url_reads_at_most_the_document_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openapi_adapter, "MAX_DOCUMENT_BYTES", MIB)
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            errors = []
            for route in ("big", "chunked"):
                with pytest.raises(OpenApiError) as info:
                    await OpenApiToolAdapter.from_url(f"{base}/{route}/{50 * MIB}")
                errors.append(str(info.value))
    assert errors == [
        f"cannot fetch {base}/big/{50 * MIB}: the document is longer than 1 MiB (52428800 bytes)",
        f"cannot fetch {base}/chunked/{50 * MIB}: the document is longer than 1 MiB",
    ]


async def test_error_statuses_are_error_results_with_the_start_of_the_body() -> None:
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tools = await response_tools(base)
            with pytest.raises(al.ToolError) as info:
                await tools["status"].execute({"code": 503}, ctx())
    message = str(info.value)
    first, _, rest = message.partition("\n\n")
    assert first == f"GET {base}/status/503 → 503 Service Unavailable"
    assert rest.startswith('{\n  "error": "status 503",\n  "detail": "xxx')
    assert rest.endswith("…")
    assert len(rest) == 2001
    assert info.value.details == {
        "status": 503,
        "method": "GET",
        "url": f"{base}/status/503",
        "content_type": "application/json",
        "truncated": False,
    }


async def test_hang_times_out_with_a_clear_error() -> None:
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tools = await response_tools(base, timeout=0.5)
            with pytest.raises(al.ToolError) as info:
                await tools["hang"].execute({}, ctx())
    assert str(info.value) == f"GET {base}/hang: no response within 500ms"


async def test_a_server_that_is_not_there() -> None:
    with trio.socket.socket() as sock:
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    tools = await response_tools(f"http://127.0.0.1:{port}")
    with pytest.raises(al.ToolError) as info:
        await tools["text"].execute({}, ctx())
    assert str(info.value) == (
        f"GET http://127.0.0.1:{port}/text failed: ConnectError: "
        f"all attempts to connect to 127.0.0.1:{port} failed"
    )


# --------------------------------------------------------------------------- end to end


async def test_an_agent_calls_an_operation_and_abort_stops_a_hanging_one() -> None:
    paths = {
        "/echo/pets/{id}": {
            "get": op(
                "getPet", parameters=[param("id", "path", {"type": "integer"}, required=True)]
            )
        },
        "/hang": {"get": op("hang")},
    }
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tools = OpenApiToolAdapter.from_spec(
                spec(paths), OpenApiConfig(base_url=base, prefix="pets")
            )
            model = ScriptedProvider(
                [
                    reply(call("pets__getPet", {"id": 7}, id="c1")),
                    reply(call("pets__hang", {}, id="c2")),
                    reply("done"),
                ]
            )
            agent = al.Agent(model, tools=tools)
            recorder = EventRecorder()
            async with agent.prompt("go") as events:
                async for event in events:
                    recorder.events.append(event)
                    if isinstance(event, al.ToolExecutionStart) and event.tool_call_id == "c2":
                        agent.abort()
    assert_well_formed(agent.messages)
    results = {m.tool_call_id: m for m in agent.messages if isinstance(m, al.ToolResultMessage)}
    assert json.loads(results["c1"].text)["path"] == "/echo/pets/7"
    assert (results["c2"].is_error, results["c2"].text) == (True, "Cancelled: the run was aborted.")


def test_a_large_public_spec() -> None:
    """GitHub's REST API description (tests/data/openapi/README.md): every operation a tool."""
    document = json.loads(gzip.decompress((DATA / "github-api.json.gz").read_bytes()))
    original = copy.deepcopy(document)
    tools = OpenApiToolAdapter.from_spec(document)
    assert document == original  # the document is not changed
    assert len(tools) == len({t.name for t in tools}) > 1000
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool.parameters_schema)
    # One operation names a server of its own, which wins over the document's.
    elsewhere = [
        (t.operation_id, t.base_url) for t in tools if t.base_url != "https://api.github.com"
    ]
    assert elsewhere == [("repos/upload-release-asset", "https://uploads.github.com")]
    assert len(tools) == 1223


async def test_refs_across_files_from_the_data_directory_on_the_wire() -> None:
    """echo-refs/main.yaml: a parameter in common/params.yaml whose schema is in ../schemas.yaml."""
    with trio.fail_after(BOUND):
        async with serve_openapi_echo() as base:
            tools = OpenApiToolAdapter.from_file(
                DATA / "echo-refs" / "main.yaml", OpenApiConfig(base_url=base)
            )
            assert [t.name for t in tools] == ["listThings", "createThing"]
            create = tools[1]
            assert create.parameters_schema == {
                "type": "object",
                "properties": {
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": 50,
                        "default": 10,
                        "description": "Maximum number of things.",
                    },
                    "body": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "description": "The thing's name."},
                            "part": {
                                "type": "object",
                                "properties": {"size": {"type": "integer", "minimum": 0}},
                            },
                        },
                    },
                },
                "required": ["body"],
            }
            seen = await echo(create, {"limit": 5, "body": {"name": "x", "part": {"size": 2}}})
    assert (seen["method"], seen["path"], seen["query"]) == ("POST", "/echo/refs/things", "limit=5")
    assert json.loads(seen["body"]) == {"name": "x", "part": {"size": 2}}


def test_a_31_description_with_server_variables_and_ref_siblings() -> None:
    tools = {t.name: t for t in OpenApiToolAdapter.from_file(DATA / "museum-3.1.yaml")}
    assert len(tools) == 9
    event = tools["getSpecialEvent"]
    assert event.base_url == "https://api.museum.example/api"
    assert event.parameters_schema == {
        "type": "object",
        "properties": {
            "eventId": {
                "type": "string",
                "format": "uuid",
                "examples": ["dad4bce8-f5cb-4078-a211-995864315e39"],
                "description": "Identifier for a special event.",
            }
        },
        "required": ["eventId"],
    }


# --------------------------------------------------------------------------- the public home


def test_the_public_classes_live_in_agentloop_openapi() -> None:
    homes = {
        name: getattr(agentloop.openapi, name).__module__
        for name in agentloop.openapi.__all__
        if name != "Credential"  # a type alias, not a class
    }
    assert homes == dict.fromkeys(homes, "agentloop.openapi")
    assert repr(OpenApiConfig) == "<class 'agentloop.openapi.OpenApiConfig'>"


@pytest.mark.parametrize(
    "value",
    [
        OpenApiConfig(base_url="https://api.example.com", headers={"X-Trace": "1"}, prefix="p"),
        OperationFilter(tags="pet", methods=["GET"]),
        OpenApiError("not an OpenAPI document"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_values_pickle_under_their_public_home(value: Any) -> None:
    data = pickle.dumps(value)
    assert b"agentloop.openapi._" not in data
    assert b"agentloop.openapi" in data
    again = pickle.loads(data)
    assert type(again) is type(value)
    if isinstance(value, Exception):
        assert again.args == value.args
    else:
        assert again == value
