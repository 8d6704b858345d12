"""The OpenAPI spec files under ``tests/data/openapi`` (see its README.md) load and hold what
the adapter tests rely on: versions, operationIds, refs that resolve, the GitHub op count."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_fixtures import OPENAPI_DATA, load_spec, operations

GITHUB_OPERATIONS = 1223
"""Operations (path x method, each with an operationId) in github-api.json.gz."""

ECHO_OPERATION_IDS = [
    "pathSimplePrimitive",
    "pathSimpleArray",
    "pathSimpleObject",
    "pathSimpleObjectExplode",
    "pathLabel",
    "pathMatrix",
    "pathMatrixExplode",
    "pathEncoded",
    "pathLevelOverride",
    "pathLevelInherit",
    "queryForm",
    "queryDelimited",
    "queryDeepObject",
    "queryAllowReserved",
    "queryRequired",
    "queryJsonContent",
    "headerParams",
    "cookieParams",
    "bodyJson",
    "bodyForm",
    "bodyMultipart",
    "bodyText",
    "bodyParamNamedBody",
    "bodyRef",
    "authBearer",
    "authBasic",
    "authApiKeyHeader",
    "authApiKeyQuery",
    "authApiKeyCookie",
    "authOAuth2",
    "authOpenIdConnect",
    "authAlternatives",
    "authCombined",
    "authNone",
    "methodGet",
    "methodPut",
    "methodPost",
    "methodPatch",
    "methodDelete",
    "methodHead",
    "methodOptions",
    "getStatus",
    "hang",
    "getBig",
    "getImage",
    "getText",
    "getJsonArray",
    "getRedirect",
    "getCookieSet",
    None,  # GET /echo/no-id
    "deprecatedOperation",
    "taggedAlpha",
    "taggedAlphaBeta",
    "get echo/weird.name!",
    "thisOperationIdIsDeliberatelyLongerThanSixtyFourCharactersSoToolNamesMustBeShortA",
    "thisOperationIdIsDeliberatelyLongerThanSixtyFourCharactersSoToolNamesMustBeShortB",
    "responseRef",
]

PETSTORE_OPERATIONS = {
    ("/pet", "put"): "updatePet",
    ("/pet", "post"): "addPet",
    ("/pet/findByStatus", "get"): "findPetsByStatus",
    ("/pet/findByTags", "get"): "findPetsByTags",
    ("/pet/{petId}", "get"): "getPetById",
    ("/pet/{petId}", "post"): "updatePetWithForm",
    ("/pet/{petId}", "delete"): "deletePet",
    ("/pet/{petId}/uploadImage", "post"): "uploadFile",
    ("/store/inventory", "get"): "getInventory",
    ("/store/order", "post"): "placeOrder",
    ("/store/order/{orderId}", "get"): "getOrderById",
    ("/store/order/{orderId}", "delete"): "deleteOrder",
    ("/user", "post"): "createUser",
    ("/user/createWithList", "post"): "createUsersWithListInput",
    ("/user/login", "get"): "loginUser",
    ("/user/logout", "get"): "logoutUser",
    ("/user/{username}", "get"): "getUserByName",
    ("/user/{username}", "put"): "updateUser",
    ("/user/{username}", "delete"): "deleteUser",
}


def _refs(node: Any) -> Iterator[str]:
    """Every ``$ref`` string in a parsed document, depth first."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            yield ref
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


@functools.cache
def _load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _resolve(base: Path, ref: str) -> tuple[Path, Any]:
    """``ref`` as seen from the file ``base``: the target file and the value it points to."""
    file, _, pointer = ref.partition("#")
    target = (base.parent / file).resolve() if file else base
    value = _load_yaml(target)
    for token in pointer.split("/")[1:]:
        key = token.replace("~1", "/").replace("~0", "~")
        value = value[int(key)] if isinstance(value, list) else value[key]
    return target, value


def _all_refs_resolve(start: Path) -> set[str]:
    """Follow every ``$ref`` from ``start`` across files; the set of files reached."""
    seen: set[Path] = set()
    pending = [start.resolve()]
    while pending:
        path = pending.pop()
        if path in seen:
            continue
        seen.add(path)
        for ref in _refs(_load_yaml(path)):
            target, value = _resolve(path, ref)  # raises KeyError / OSError when dangling
            assert value is not None, ref
            pending.append(target)
    return {str(path.relative_to(OPENAPI_DATA)) for path in seen}


@pytest.mark.parametrize(
    ("name", "key", "version"),
    [
        ("petstore-3.0.yaml", "openapi", "3.0.3"),
        ("museum-3.1.yaml", "openapi", "3.1.0"),
        ("echo.yaml", "openapi", "3.0.3"),
        ("echo-refs/main.yaml", "openapi", "3.0.3"),
        ("github-api.json.gz", "openapi", "3.0.3"),
        ("swagger-2.0.json", "swagger", "2.0"),
    ],
)
def test_spec_versions(name: str, key: str, version: str) -> None:
    spec = load_spec(name)
    assert spec[key] == version
    assert ("openapi" in spec, "swagger" in spec) == (key == "openapi", key == "swagger")


def test_invalid_is_yaml_but_not_a_document() -> None:
    assert load_spec("invalid.yaml") == [
        {"openapi": "3.0.3"},
        {"paths": {}},
        "just a string",
    ]


def test_broken_is_not_yaml() -> None:
    with pytest.raises(yaml.YAMLError):
        load_spec("broken.yaml")


def test_petstore() -> None:
    spec = load_spec("petstore-3.0.yaml")
    assert spec["info"]["title"] == "Swagger Petstore - OpenAPI 3.0"
    assert spec["servers"] == [{"url": "/api/v3"}]
    found = {(path, method): op["operationId"] for path, method, op in operations(spec)}
    assert found == PETSTORE_OPERATIONS
    components = spec["components"]
    assert list(components["schemas"]) == [
        "Order",
        "Customer",
        "Address",
        "Category",
        "User",
        "Tag",
        "Pet",
        "ApiResponse",
    ]
    assert list(components["requestBodies"]) == ["Pet", "UserArray"]
    schemes = components["securitySchemes"]
    assert schemes["petstore_auth"]["type"] == "oauth2"
    assert list(schemes["petstore_auth"]["flows"]) == ["implicit"]
    assert schemes["api_key"] == {"type": "apiKey", "name": "api_key", "in": "header"}
    assert _all_refs_resolve(OPENAPI_DATA / "petstore-3.0.yaml") == {"petstore-3.0.yaml"}


def test_museum_uses_3_1_features() -> None:
    spec = load_spec("museum-3.1.yaml")
    assert [op["operationId"] for _, _, op in operations(spec)] == [
        "getMuseumHours",
        "createSpecialEvent",
        "listSpecialEvents",
        "getSpecialEvent",
        "updateSpecialEvent",
        "deleteSpecialEvent",
        "buyMuseumTickets",
        "getTicketCode",
        "getServiceStatus",
    ]
    assert list(spec["webhooks"]) == ["newTicket", "newEvent"]
    assert spec["servers"][0]["url"] == "https://{env}.museum.example/api"
    assert spec["servers"][0]["variables"]["env"]["default"] == "api"
    assert spec["components"]["securitySchemes"] == {
        "MuseumPlaceholderAuth": {"type": "http", "scheme": "basic"}
    }
    schemas = spec["components"]["schemas"]
    assert schemas["EventCategory"]["type"] == ["string", "null"]
    assert schemas["CreateSpecialEventRequest"]["properties"]["kind"]["const"] == "special-event"
    assert schemas["TicketId"]["examples"] == ["382c0820-0530-4f4b-99af-13811ad0f17a"]
    event_id = schemas["BuyMuseumTicketsRequest"]["properties"]["eventId"]
    assert set(event_id) == {"$ref", "description"}  # a $ref with a sibling (3.1 only)
    delete = spec["paths"]["/special-events/{eventId}"]["delete"]
    assert delete["responses"]["401"] == {"$ref": "#/components/responses/Unauthorized"}
    assert spec["paths"]["/status"]["get"]["security"] == []
    assert _all_refs_resolve(OPENAPI_DATA / "museum-3.1.yaml") == {"museum-3.1.yaml"}


def test_echo_operation_ids() -> None:
    """The operationIds the adapter tests call, in document order; one has none."""
    spec = load_spec("echo.yaml")
    assert [op.get("operationId") for _, _, op in operations(spec)] == ECHO_OPERATION_IDS
    long_ids = [i for i in ECHO_OPERATION_IDS if i is not None and len(i) > 64]
    assert [len(i) for i in long_ids] == [81, 81]
    assert long_ids[0][:80] == long_ids[1][:80]


def test_echo_features() -> None:
    spec = load_spec("echo.yaml")
    assert spec["servers"][0]["url"] == "http://127.0.0.1:{port}"
    assert spec["servers"][0]["variables"] == {"port": {"default": "8000"}}
    assert spec["security"] == [{"bearer": []}]
    by_id = {op.get("operationId"): (path, method, op) for path, method, op in operations(spec)}
    assert by_id["authNone"][2]["security"] == []
    assert by_id["authAlternatives"][2]["security"] == [{"apiKeyHeader": []}, {"basic": []}]
    assert by_id["deprecatedOperation"][2]["deprecated"] is True
    tagged = sorted(i for i, (_, _, op) in by_id.items() if "tags" in op)
    assert tagged == ["taggedAlpha", "taggedAlphaBeta"]
    assert {name: s["type"] for name, s in spec["components"]["securitySchemes"].items()} == {
        "bearer": "http",
        "basic": "http",
        "apiKeyHeader": "apiKey",
        "apiKeyQuery": "apiKey",
        "apiKeyCookie": "apiKey",
        "oauth": "oauth2",
        "oidc": "openIdConnect",
    }
    assert by_id["bodyRef"][2]["requestBody"] == {"$ref": "#/components/requestBodies/ItemBody"}
    item = spec["paths"]["/echo/path-level/{itemId}"]
    assert item["parameters"][2] == {"$ref": "#/components/parameters/TraceId"}
    tree = spec["components"]["schemas"]["TreeNode"]["properties"]["children"]["items"]
    assert tree == {"$ref": "#/components/schemas/TreeNode"}
    assert _all_refs_resolve(OPENAPI_DATA / "echo.yaml") == {"echo.yaml"}


def test_echo_refs_resolve_relative_to_the_file_holding_them() -> None:
    spec = load_spec("echo-refs/main.yaml")
    assert [op["operationId"] for _, _, op in operations(spec)] == ["createThing", "listThings"]
    assert _all_refs_resolve(OPENAPI_DATA / "echo-refs" / "main.yaml") == {
        "echo-refs/main.yaml",
        "echo-refs/schemas.yaml",
        "echo-refs/common/params.yaml",
    }


def test_github_spec() -> None:
    """GitHub's REST API description: every operation has a unique operationId."""
    assert (OPENAPI_DATA / "github-api.json.gz").stat().st_size < 2_500_000
    spec = load_spec("github-api.json.gz")
    assert spec["info"]["version"] == "23.0.2"
    assert spec["servers"] == [{"url": "https://api.github.com"}]
    ids = [op.get("operationId") for _, _, op in operations(spec)]
    assert len(ids) == len(set(ids)) == GITHUB_OPERATIONS
    assert None not in ids
    assert len(spec["paths"]) == 811
    assert sum(len(i) > 64 for i in ids) == 25
    assert all("/" in i for i in ids)  # e.g. "repos/get": not a valid model tool name
    overrides = {
        op["operationId"]: op["servers"][0]["url"]
        for _, _, op in operations(spec)
        if "servers" in op
    }
    assert overrides == {"repos/upload-release-asset": "https://uploads.github.com"}


def test_every_yaml_and_json_file_parses() -> None:
    """Everything in the folder parses, except broken.yaml (on purpose)."""
    parsed = []
    for path in sorted(OPENAPI_DATA.rglob("*")):
        name = str(path.relative_to(OPENAPI_DATA))
        if path.suffix in (".yaml", ".json") and name != "broken.yaml":
            text = path.read_text(encoding="utf-8")
            document = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
            assert document, name
            parsed.append(name)
    assert parsed == [
        "echo-refs/common/params.yaml",
        "echo-refs/main.yaml",
        "echo-refs/schemas.yaml",
        "echo.yaml",
        "invalid.yaml",
        "museum-3.1.yaml",
        "petstore-3.0.yaml",
        "swagger-2.0.json",
    ]
