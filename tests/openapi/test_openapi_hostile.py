"""Hostile and malformed OpenAPI documents: only OpenApiError escapes, schemas stay valid."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trio
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openapi_fixtures import serve_openapi_echo
from sse_server import Reply, serve

import agentloop as al
from agentloop.openapi import OpenApiConfig, OpenApiError, OpenApiToolAdapter

DATA = Path(__file__).parent.parent / "data" / "openapi"
PETSTORE: dict[str, Any] = yaml.safe_load((DATA / "petstore-3.0.yaml").read_text())
MUSEUM: dict[str, Any] = yaml.safe_load((DATA / "museum-3.1.yaml").read_text())
CONFIG = OpenApiConfig(base_url="http://api.test")

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.sampled_from(["", "x", "string", "object", "array", "#/components/x", "query", "path"]),
)
JSON = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.sampled_from(
                [
                    "type",
                    "properties",
                    "items",
                    "allOf",
                    "anyOf",
                    "oneOf",
                    "required",
                    "enum",
                    "parameters",
                    "name",
                    "in",
                    "schema",
                    "content",
                    "requestBody",
                    "$ref",
                    "get",
                    "post",
                    "servers",
                    "url",
                    "security",
                    "minimum",
                    "maxLength",
                    "pattern",
                    "application/json",
                    "x",
                ]
            ),
            children,
            max_size=5,
        ),
    ),
    max_leaves=20,
)


def nodes(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every node of a JSON-like value (the root included)."""
    found = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            found += nodes(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += nodes(item, (*path, index))
    return found


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.deepcopy(document)
    node = copied
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copied


def check(document: Any) -> None:
    """Build tools from ``document``: OpenApiError or tools whose schemas are valid."""
    try:
        tools = OpenApiToolAdapter.from_spec(document, CONFIG)
    except OpenApiError:
        return
    for tool in tools:
        jsonschema.Draft202012Validator.check_schema(tool.parameters_schema)
        json.dumps(tool.parameters_schema)  # plain JSON, no cycles


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_valid_document_with_any_node_replaced(data: st.DataObject) -> None:
    base = data.draw(st.sampled_from([PETSTORE, MUSEUM]))
    path = data.draw(st.sampled_from(nodes(base)))
    check(replaced(base, path, data.draw(JSON)))


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["paths", "components", "servers", "security"]), JSON),
    st.sampled_from(["3.0.3", "3.1.0"]),
)
def test_any_json_like_document(body: dict[str, Any], version: str) -> None:
    check({"openapi": version, "info": {"title": "t", "version": "1"}, **body})


def ctx() -> al.ToolContext:
    return al.ToolContext("call_1", "tool", trio.CancelScope())


def document(paths: Any, **extra: Any) -> dict[str, Any]:
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": paths, **extra}


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ({"/pets": {"parameters": 5}}, "/paths/~1pets/parameters: expected an array, got 5"),
        (
            {"/pets": {"get": {"parameters": [5]}}},
            "/paths/~1pets/get/parameters/0: expected an object, got 5",
        ),
        (
            {"/pets": {"get": {"parameters": [{"name": "a"}]}}},
            "/paths/~1pets/get/parameters/0: a parameter needs 'name' and 'in'",
        ),
        (
            {"/pets": {"get": {"parameters": [{"name": 5, "in": "query"}]}}},
            "/paths/~1pets/get/parameters/0/name: expected a string, got 5",
        ),
        (
            {"/pets": {"get": {"requestBody": 5}}},
            "/paths/~1pets/get/requestBody: expected an object, got 5",
        ),
        (
            {"/pets": {"post": {"requestBody": {"content": {"application/json": 5}}}}},
            "/paths/~1pets/post/requestBody/content/application~1json: expected an object, got 5",
        ),
        ({"/pets": {"get": {"tags": 5}}}, "/paths/~1pets/get/tags: expected an array, got 5"),
        (
            {"/pets": {"get": {"security": 5}}},
            "/paths/~1pets/get/security: expected an array, got 5",
        ),
        (
            {"/pets": {"get": {"security": [5]}}},
            "/paths/~1pets/get/security/0: expected an object, got 5",
        ),
        ({"/pets": {"get": {"servers": 5}}}, "/paths/~1pets/get/servers: expected an array, got 5"),
        (
            {"/pets": {"get": {"servers": [5]}}},
            "/paths/~1pets/get/servers/0: expected an object, got 5",
        ),
        ({"/pets": 5}, "/paths/~1pets: expected an object, got 5"),
        ([], "/paths: expected an object, got []"),
    ],
)
def test_a_malformed_node_is_named_by_its_pointer(paths: Any, message: str) -> None:
    with pytest.raises(OpenApiError) as caught:
        OpenApiToolAdapter.from_spec(document(paths), OpenApiConfig())
    assert str(caught.value) == f"the OpenAPI document: {message}"


def test_bad_security_schemes_are_named_by_their_pointer() -> None:
    spec = document(
        {"/pets": {"get": {"security": [{"key": []}]}}},
        components={"securitySchemes": {"key": 5}},
    )
    with pytest.raises(OpenApiError) as caught:
        OpenApiToolAdapter.from_spec(spec, CONFIG)
    assert str(caught.value) == (
        "the OpenAPI document: /components/securitySchemes/key: expected an object, got 5"
    )


@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_empty_schema_lists_convert_to_a_valid_schema(keyword: str) -> None:
    spec = document(
        {
            "/pets": {
                "get": {
                    "parameters": [
                        {"name": "q", "in": "query", "schema": {keyword: [], "type": "string"}}
                    ]
                }
            }
        }
    )
    (tool,) = OpenApiToolAdapter.from_spec(spec, CONFIG)
    jsonschema.Draft202012Validator.check_schema(tool.parameters_schema)
    assert tool.parameters_schema["properties"]["q"] == {"type": "string"}


def test_an_empty_tuple_form_items_list_is_no_constraint() -> None:
    """OpenAPI 3.0's (invalid) ``items: [...]``: an empty list must not become an empty
    ``prefixItems``, which JSON Schema forbids (found by the hypothesis test above)."""
    schema = {"type": "array", "items": [], "maxItems": 3}
    spec = document(
        {"/p": {"get": {"parameters": [{"name": "q", "in": "query", "schema": schema}]}}}
    )
    (tool,) = OpenApiToolAdapter.from_spec(spec, CONFIG)
    jsonschema.Draft202012Validator.check_schema(tool.parameters_schema)
    assert tool.parameters_schema["properties"]["q"] == {"type": "array", "maxItems": 3}


def test_invalid_schema_keywords_are_dropped() -> None:
    schema = {
        "type": 5,
        "required": "name",
        "minLength": -1,
        "maxItems": 1.5,
        "enum": "a",
        "pattern": 7,
        "uniqueItems": "yes",
        "properties": {"a": {"type": "strin"}},
        "description": 3,
        "minimum": 2,
    }
    spec = document(
        {"/p": {"get": {"parameters": [{"name": "q", "in": "query", "schema": schema}]}}}
    )
    (tool,) = OpenApiToolAdapter.from_spec(spec, CONFIG)
    assert tool.parameters_schema["properties"]["q"] == {"properties": {"a": {}}, "minimum": 2}


# --------------------------------------------------------------------------- servers, bodies, sizes


def test_a_document_without_servers_and_no_url_asks_for_base_url() -> None:
    spec = document({"/pets": {"get": {"operationId": "list"}}})
    for servers in ({}, {"servers": []}):
        with pytest.raises(OpenApiError) as caught:
            OpenApiToolAdapter.from_spec({**spec, **servers})
        assert str(caught.value) == (
            "the OpenAPI document: the API names no server, and the default ('/', relative to "
            "where the document was loaded from) needs a document loaded from a URL; give "
            "OpenApiConfig(base_url=...)"
        )
    (tool,) = OpenApiToolAdapter.from_spec(spec, OpenApiConfig(base_url="http://given.test/v1"))
    assert tool.base_url == "http://given.test/v1"


async def test_a_document_without_servers_loaded_from_a_url_uses_its_origin() -> None:
    body = json.dumps(document({"/pets": {"get": {"operationId": "list"}}})).encode()
    async with serve(Reply([body], headers={"content-type": "application/json"})) as server:
        (tool,) = await OpenApiToolAdapter.from_url(f"{server.url}/specs/v2/openapi.json")
    assert tool.base_url == server.url


async def test_multipart_with_text_fields_only_is_sent_as_multipart() -> None:
    upload = {
        "type": "object",
        "properties": {"note": {"type": "string"}, "tags": {"type": "array"}},
    }
    spec = document(
        {
            "/echo/m": {
                "post": {
                    "operationId": "upload",
                    "requestBody": {"content": {"multipart/form-data": {"schema": upload}}},
                }
            }
        }
    )
    async with serve_openapi_echo() as base:
        (tool,) = OpenApiToolAdapter.from_spec(spec, OpenApiConfig(base_url=base))
        result = await tool.execute({"note": "hi é", "tags": ["a", "b"]}, ctx())
    seen = json.loads(result.text_content)
    boundary = seen["content_type"].removeprefix("multipart/form-data; boundary=")
    assert seen["content_type"] != boundary
    assert seen["body"] == (
        f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhi é\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="tags"\r\n\r\na\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="tags"\r\n\r\nb\r\n'
        f"--{boundary}--\r\n"
    )


async def test_pretty_printing_never_outgrows_the_response_limit() -> None:
    """A JSON body within the limit, whose indented form is not, is shown as it came."""
    spec = document({"/json-array": {"get": {"operationId": "array"}}})
    async with serve_openapi_echo() as base:
        tight = OpenApiConfig(base_url=base, max_response_bytes=30)
        (tool,) = OpenApiToolAdapter.from_spec(spec, tight)
        result = await tool.execute({}, ctx())
        (roomy,) = OpenApiToolAdapter.from_spec(spec, OpenApiConfig(base_url=base))
        pretty = await roomy.execute({}, ctx())
    assert result.text_content == '[{"id": 1}, {"id": 2}]'
    assert len(result.text_content.encode()) <= 30
    assert pretty.text_content == '[\n  {\n    "id": 1\n  },\n  {\n    "id": 2\n  }\n]'


async def test_a_cut_body_never_splits_a_character_and_says_it_was_cut() -> None:
    spec = document({"/text": {"get": {"operationId": "text"}}})
    async with serve_openapi_echo() as base:
        (tool,) = OpenApiToolAdapter.from_spec(
            spec, OpenApiConfig(base_url=base, max_response_bytes=12)
        )
        result = await tool.execute({}, ctx())
    # 12 bytes end inside the 3-byte '✓': the part of it that came is not shown.
    assert result.text_content == (
        "plain text \n… [truncated: the response is 14 bytes, cut off at 12]"
    )
    assert result.details is not None
    assert result.details["truncated"] is True
