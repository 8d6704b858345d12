"""The test HTTP server itself: chunked bodies arrive whole; a drop cuts the body."""

from __future__ import annotations

import httpx2
import pytest
from sse_server import Reply, serve


async def test_server_sends_chunks_and_records_requests() -> None:
    """A reply's chunks arrive as one body; the request is recorded."""
    async with (
        serve(Reply([b"data: a\n\n", b"data: b\n\n"])) as server,
        httpx2.AsyncClient() as client,
    ):
        response = await client.post(f"{server.url}/v1/x", json={"q": 1})
    assert response.status_code == 200
    assert response.text == "data: a\n\ndata: b\n\n"
    assert (server.requests[0].method, server.requests[0].path) == ("POST", "/v1/x")
    assert server.requests[0].json() == {"q": 1}


async def test_server_can_drop_the_connection_mid_body() -> None:
    """drop_after closes the connection mid-body: the client sees a protocol error."""
    async with (
        serve(Reply([b"data: a\n\n", b"data: b\n\n"], drop_after=1)) as server,
        httpx2.AsyncClient() as client,
    ):
        with pytest.raises(httpx2.RemoteProtocolError):
            await client.post(server.url, json={})
