"""The OpenAPI echo server itself (``openapi_server.py``), pinned route by route over real HTTP."""

from __future__ import annotations

import base64
import json
import socket
import struct
import subprocess
import sys
from collections.abc import AsyncIterator

import httpx2
import pytest
import trio
from openapi_fixtures import ECHO_SERVER_PATH, serve_openapi_echo
from openapi_server import (
    COOKIE_SET_BODY,
    JSON_ARRAY_BODY,
    PNG_BYTES,
    REDIRECT_LOCATION,
    SET_COOKIE,
    STATUS_DETAIL,
    TEXT_BODY,
    big_body,
    status_body,
)

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@pytest.fixture
async def base_url() -> AsyncIterator[str]:
    async with serve_openapi_echo() as url:
        yield url


@pytest.fixture
async def client(base_url: str) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(base_url=base_url, timeout=10.0) as client:
        yield client


# -- process ------------------------------------------------------------------


async def test_the_process_prints_exactly_one_port_line() -> None:
    """``--port N`` binds N; stdout holds ``PORT N`` and nothing else until the kill."""
    with socket.socket() as probe:  # a port that was free a moment ago
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await trio.lowlevel.open_process(
        [sys.executable, ECHO_SERVER_PATH, "--port", str(port)], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    output = b""
    try:
        with trio.fail_after(30):
            while not output.endswith(b"\n"):
                chunk = await process.stdout.receive_some()
                assert chunk, output
                output += chunk
            async with httpx2.AsyncClient() as http:
                response = await http.get(f"http://127.0.0.1:{port}/text")
        assert response.status_code == 200
    finally:
        with trio.CancelScope(shield=True):
            process.kill()
            with trio.move_on_after(5):
                await process.wait()
            with trio.move_on_after(5):
                while chunk := await process.stdout.receive_some():
                    output += chunk
            await process.stdout.aclose()
    assert output == f"PORT {port}\n".encode()


async def test_the_fixture_yields_a_base_url_without_a_path(base_url: str) -> None:
    host, _, port = base_url.removeprefix("http://").partition(":")
    assert (base_url.startswith("http://"), host, port.isdigit()) == (True, "127.0.0.1", True)


# -- /echo --------------------------------------------------------------------


async def test_echo_keeps_the_raw_path_and_query(client: httpx2.AsyncClient) -> None:
    """Percent-escapes (``%2F`` too) and the query arrive exactly as sent."""
    response = await client.get("/echo/a%2Fb?x=1&y=a%20b")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    echo = response.json()
    assert (echo["method"], echo["path"], echo["query"]) == ("GET", "/echo/a%2Fb", "x=1&y=a%20b")
    assert (echo["body"], echo["body_base64"], echo["cookie"]) == ("", "", None)
    assert echo["content_type"] is None


async def test_echo_without_a_query_and_bare_echo(client: httpx2.AsyncClient) -> None:
    bare = (await client.get("/echo")).json()
    nested = (await client.get("/echo/x/y;m=1/%E2%9C%93")).json()
    assert (bare["path"], bare["query"]) == ("/echo", "")
    assert (nested["path"], nested["query"]) == ("/echo/x/y;m=1/%E2%9C%93", "")


@pytest.mark.parametrize("method", METHODS)
async def test_echo_answers_every_method(client: httpx2.AsyncClient, method: str) -> None:
    response = await client.request(method, "/echo/m?q=1")
    assert response.status_code == 200
    assert (response.json()["method"], response.json()["query"]) == (method, "q=1")


async def test_echo_head_sends_the_headers_without_a_body(client: httpx2.AsyncClient) -> None:
    """HEAD: 200 with the JSON content type and the length the GET body would have."""
    response = await client.head("/echo/h")
    assert response.status_code == 200
    assert response.content == b""
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) > 0


async def test_echo_headers_are_lower_cased_and_repeats_joined(
    client: httpx2.AsyncClient,
) -> None:
    response = await client.get(
        "/echo/h",
        headers=[("X-Multi", "a"), ("X-Single", "One Two"), ("x-multi", "b, c"), ("X-MULTI", "d")],
    )
    headers = response.json()["headers"]
    assert headers["x-multi"] == "a, b, c, d"
    assert headers["x-single"] == "One Two"
    assert headers["host"] == client.base_url.netloc.decode()
    assert all(name == name.lower() for name in headers)


async def test_echo_reports_the_raw_cookie_header(client: httpx2.AsyncClient) -> None:
    echo = (await client.get("/echo/c", headers={"Cookie": "a=1; b=x%20y"})).json()
    assert echo["cookie"] == "a=1; b=x%20y"
    assert echo["headers"]["cookie"] == "a=1; b=x%20y"


async def test_echo_json_body(client: httpx2.AsyncClient) -> None:
    response = await client.post("/echo/j", json={"name": "Rex", "tags": ["a", "✓"]})
    echo = response.json()
    raw = base64.b64decode(echo["body_base64"])
    assert echo["content_type"] == "application/json"
    assert raw == response.request.content
    assert echo["body"] == raw.decode("utf-8")
    assert json.loads(echo["body"]) == {"name": "Rex", "tags": ["a", "✓"]}
    assert echo["headers"]["content-length"] == str(len(raw))


async def test_echo_form_body(client: httpx2.AsyncClient) -> None:
    echo = (await client.put("/echo/f", data={"a": "1", "b": "x y&z", "c": ["1", "2"]})).json()
    assert echo["method"] == "PUT"
    assert echo["content_type"] == "application/x-www-form-urlencoded"
    assert echo["body"] == "a=1&b=x+y%26z&c=1&c=2"


async def test_echo_multipart_body(client: httpx2.AsyncClient) -> None:
    """The multipart body arrives byte for byte, with its boundary in the content type."""
    request = client.build_request(
        "POST",
        "/echo/upload",
        data={"note": "hello"},
        files={"file": ("a.bin", b"\x00\xff\x01", "application/octet-stream")},
    )
    sent = request.read()
    echo = (await client.send(request)).json()
    boundary = request.headers["content-type"].partition("boundary=")[2]
    assert echo["content_type"] == f"multipart/form-data; boundary={boundary}"
    assert base64.b64decode(echo["body_base64"]) == sent
    assert echo["body"] is None  # the 0xff byte is not UTF-8
    assert b'name="note"\r\n\r\nhello\r\n' in sent
    assert b'filename="a.bin"' in sent


async def test_echo_non_utf8_body_is_null_but_base64_is_exact(
    client: httpx2.AsyncClient,
) -> None:
    payload = bytes(range(256))
    echo = (
        await client.patch(
            "/echo/b", content=payload, headers={"Content-Type": "application/octet-stream"}
        )
    ).json()
    assert (echo["body"], echo["content_type"]) == (None, "application/octet-stream")
    assert base64.b64decode(echo["body_base64"]) == payload


async def test_echo_text_body(client: httpx2.AsyncClient) -> None:
    echo = (
        await client.post(
            "/echo/t", content="héllo\n".encode(), headers={"Content-Type": "text/plain"}
        )
    ).json()
    assert (echo["body"], echo["content_type"]) == ("héllo\n", "text/plain")


async def test_echo_reads_a_chunked_body(client: httpx2.AsyncClient) -> None:
    async def pieces() -> AsyncIterator[bytes]:
        for piece in (b"first,", b"", b"second,", b"third"):
            yield piece

    echo = (await client.post("/echo/chunked", content=pieces())).json()
    assert echo["headers"]["transfer-encoding"] == "chunked"
    assert "content-length" not in echo["headers"]
    assert echo["body"] == "first,second,third"


async def test_keep_alive_connection_serves_consecutive_requests(
    client: httpx2.AsyncClient,
) -> None:
    """Bodies are read in full, so one connection carries several requests in sync."""
    first = await client.post("/echo/1", content=b"one")
    second = await client.post("/echo/2", content=b"two")
    assert (first.json()["body"], second.json()["body"]) == ("one", "two")
    assert first.http_version == "HTTP/1.1"


# -- other routes ---------------------------------------------------------------


@pytest.mark.parametrize("code", [200, 201, 400, 401, 403, 404, 409, 422, 429, 500, 503])
async def test_status_route(client: httpx2.AsyncClient, code: int) -> None:
    response = await client.get(f"/status/{code}")
    assert response.status_code == code
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"error": f"status {code}", "detail": STATUS_DETAIL}
    assert response.content == status_body(code)
    assert len(STATUS_DETAIL) == 3000


async def test_status_204_has_no_body(client: httpx2.AsyncClient) -> None:
    response = await client.delete("/status/204")
    assert (response.status_code, response.content) == (204, b"")


async def test_status_outside_200_599_is_a_bad_request(client: httpx2.AsyncClient) -> None:
    response = await client.get("/status/100")
    assert response.status_code == 400


async def test_hang_is_cut_by_the_client_timeout(client: httpx2.AsyncClient) -> None:
    with pytest.raises(httpx2.ReadTimeout):
        await client.get("/hang", timeout=httpx2.Timeout(10.0, read=0.5))
    assert (await client.get("/echo/after")).status_code == 200


async def test_a_pending_hang_blocks_no_other_request(
    base_url: str, client: httpx2.AsyncClient
) -> None:
    """A ``/hang`` request sent whole on its own connection first; another one is answered."""
    host, _, port = base_url.removeprefix("http://").partition(":")
    stream = await trio.open_tcp_stream(host, int(port))
    try:
        await stream.send_all(f"GET /hang HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        with trio.fail_after(10):
            response = await client.get("/text")
        assert response.text == TEXT_BODY
        with trio.move_on_after(0.2):  # the hung request still has no answer
            assert await stream.receive_some() == b"never"
    finally:
        await stream.aclose()


@pytest.mark.parametrize("n", [0, 1, 10, 25, 65536, 1_000_003])
async def test_big_body_has_exactly_n_bytes(client: httpx2.AsyncClient, n: int) -> None:
    response = await client.get(f"/big/{n}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain"
    assert response.headers["content-length"] == str(n)
    assert response.content == big_body(n)
    assert len(response.content) == n
    assert response.content[:12] == b"012345678901"[:n]


async def test_image_is_a_1x1_png(client: httpx2.AsyncClient) -> None:
    response = await client.get("/image")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/png"
    assert response.content == PNG_BYTES
    assert response.content[:8] == b"\x89PNG\r\n\x1a\n"
    assert response.content[12:16] == b"IHDR"
    assert struct.unpack(">II", response.content[16:24]) == (1, 1)


async def test_text(client: httpx2.AsyncClient) -> None:
    response = await client.get("/text")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.content == "plain text ✓".encode()
    assert response.text == TEXT_BODY == "plain text ✓"


async def test_json_array(client: httpx2.AsyncClient) -> None:
    response = await client.get("/json-array")
    assert response.headers["content-type"] == "application/json"
    assert response.content == JSON_ARRAY_BODY == b'[{"id": 1}, {"id": 2}]'
    assert response.json() == [{"id": 1}, {"id": 2}]


async def test_redirect(client: httpx2.AsyncClient) -> None:
    response = await client.post("/redirect", content=b"x")
    assert response.status_code == 302
    assert response.headers["location"] == REDIRECT_LOCATION == "/echo/redirected"
    assert response.content == b""
    followed = await client.get("/redirect?a=1", follow_redirects=True)
    assert followed.status_code == 200
    assert (followed.json()["path"], followed.json()["query"]) == ("/echo/redirected", "")
    assert [r.status_code for r in followed.history] == [302]


async def test_cookie_set(client: httpx2.AsyncClient) -> None:
    response = await client.get("/cookie-set")
    assert response.status_code == 200
    assert response.headers.get_list("set-cookie") == [SET_COOKIE]
    assert response.content == COOKIE_SET_BODY
    assert response.json() == {"ok": True}


async def test_unknown_route_is_404(client: httpx2.AsyncClient) -> None:
    response = await client.get("/nope/x?y=1")
    assert response.status_code == 404
    assert response.json() == {"error": "no route", "path": "/nope/x"}
