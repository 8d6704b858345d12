"""OAuth for MCP servers: ``HttpServer(url, oauth=OAuth(...))``, against a real server.

:class:`AuthServer` is a small OAuth authorization server and MCP server in one,
served on 127.0.0.1 by this process (h11 over trio): protected-resource and
authorization-server metadata, dynamic registration, ``/authorize`` (which
redirects at once, as a consenting user would), ``/token`` (authorization code
with PKCE, refresh, client credentials) and an MCP endpoint that wants a bearer
token. It records what clients did, so tests assert on it exactly. The official
conformance suite (``test_conformance.py``) covers the specification's cases;
these tests cover agentloop's own promises: the token file, reuse, refresh,
secrets, the browser step and ``mcp.json``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import secrets
import socket
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import attrs
import h11
import httpx2
import pytest
import trio
import trio.lowlevel
import trio.testing

import agentloop as al
from agentloop.mcp import (
    HttpServer,
    McpAuthError,
    McpConnectionError,
    OAuth,
    authorize_in_browser,
    default_token_store,
    load_mcp_config,
    open_mcp,
)
from agentloop.mcp._oauth import pausable_deadline
from agentloop.mcp._oauth._browser import free_port, person_waits
from agentloop.providers import ScriptedProvider, call, reply

# ------------------------------------------------------------------ the server


@attrs.define
class AuthServer:
    """An OAuth authorization server and a protected MCP server, in one, on 127.0.0.1."""

    port: int = 0
    expires_in: int = 3600  # of the tokens an authorization-code grant issues
    token_methods: list[str] = attrs.Factory(lambda: ["none", "client_secret_basic"])
    registration: bool = True
    clients: dict[str, str | None] = attrs.Factory(dict)  # id -> secret
    codes: dict[str, dict[str, str]] = attrs.Factory(dict)
    access: dict[str, float] = attrs.Factory(dict)  # token -> expiry (trio clock: never)
    refresh: set[str] = attrs.Factory(set)
    authorizations: list[dict[str, str]] = attrs.Factory(list)  # /authorize queries
    grants: list[dict[str, str]] = attrs.Factory(list)  # /token forms (+ "basic": client id)
    registrations: list[dict[str, Any]] = attrs.Factory(list)
    bearers: list[str] = attrs.Factory(list)  # Authorization headers seen at /mcp
    # path -> (size, with Content-Length): the answer there has a body of that many bytes
    huge: dict[str, tuple[int, bool]] = attrs.Factory(dict)
    sent: dict[str, int] = attrs.Factory(dict)  # bytes of a huge body sent, by path

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Any:
        """``(status, headers, body)`` for one request; a huge body is ``Huge``."""
        status, extra, content = self._handle(method, target, headers, body)
        path = urlsplit(target).path
        if path in self.huge:
            size, with_length = self.huge[path]
            return status, extra, Huge(path, size, with_length)
        return status, extra, content

    def _handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> Any:
        path = urlsplit(target).path
        query = dict(parse_qsl(urlsplit(target).query))
        if method == "GET" and path == "/.well-known/oauth-protected-resource/mcp":
            return _json(200, {"resource": self.url, "authorization_servers": [self.base]})
        if method == "GET" and path == "/.well-known/oauth-authorization-server":
            metadata = {
                "issuer": self.base,
                "authorization_endpoint": f"{self.base}/authorize",
                "token_endpoint": f"{self.base}/token",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": self.token_methods,
            }
            if self.registration:
                metadata["registration_endpoint"] = f"{self.base}/register"
            return _json(200, metadata)
        if method == "POST" and path == "/register" and self.registration:
            asked = json.loads(body)
            self.registrations.append(asked)
            client_id = f"client-{len(self.clients) + 1}"
            self.clients[client_id] = None
            return _json(201, {**asked, "client_id": client_id})
        if method == "GET" and path == "/authorize":
            self.authorizations.append(query)
            code = f"code-{secrets.token_hex(8)}"
            self.codes[code] = query
            location = (
                f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"
            )
            return 302, [("Location", location)], b""
        if method == "POST" and path == "/token":
            return self._token(dict(parse_qsl(body.decode())), headers)
        if path == "/mcp":
            return self._mcp(method, headers, body)
        return 404, [], b"not found"

    def _token(self, form: dict[str, str], headers: dict[str, str]) -> Any:
        basic = headers.get("authorization", "")
        if basic.startswith("Basic "):
            user, _, password = base64.b64decode(basic[6:]).decode().partition(":")
            if self.clients.get(user) != password:
                return _json(401, {"error": "invalid_client"})
            form = {**form, "basic": user}
        self.grants.append(form)
        grant = form.get("grant_type")
        expires = self.expires_in
        if grant == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            verifier = form.get("code_verifier", "").encode()
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=")
            if asked is None or asked["code_challenge"] != challenge.decode():
                return _json(400, {"error": "invalid_grant"})
        elif grant == "refresh_token":
            if form.get("refresh_token") not in self.refresh:
                return _json(400, {"error": "invalid_grant"})
            self.refresh.discard(form["refresh_token"])
            expires = 3600
        elif grant != "client_credentials":
            return _json(400, {"error": "unsupported_grant_type"})
        token, renewal = f"at-{secrets.token_hex(12)}", f"rt-{secrets.token_hex(12)}"
        self.access[token] = float(expires)
        self.refresh.add(renewal)
        answer = {"access_token": token, "token_type": "Bearer", "expires_in": expires}
        return _json(200, {**answer, "refresh_token": renewal})

    def _mcp(self, method: str, headers: dict[str, str], body: bytes) -> Any:
        bearer = headers.get("authorization", "")
        token = bearer.removeprefix("Bearer ")
        if token not in self.access:
            challenge = (
                f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
            )
            return _json(401, {"error": "invalid_token"}, [("WWW-Authenticate", challenge)])
        self.bearers.append(bearer)
        if method != "POST":
            return 405, [], b""
        message = json.loads(body)
        if "id" not in message:
            return 202, [], b""
        name = message["method"]
        if name == "initialize":
            result: Any = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "auth-test", "version": "1"},
            }
        elif name == "tools/list":
            schema = {"type": "object", "properties": {}}
            result = {"tools": [{"name": "whoami", "inputSchema": schema}]}
        elif name == "tools/call":
            result = {"content": [{"type": "text", "text": f"You sent: {bearer}"}]}
        else:
            error = {"code": -32601, "message": f"no method {name}"}
            return _json(200, {"jsonrpc": "2.0", "id": message["id"], "error": error})
        return _json(200, {"jsonrpc": "2.0", "id": message["id"], "result": result})


@attrs.frozen
class Huge:
    """A body of ``size`` bytes, sent in pieces until the client stops reading."""

    path: str
    size: int
    with_length: bool


async def _send_huge(
    server: AuthServer, stream: trio.SocketStream, connection: h11.Connection, response: Any
) -> None:
    """Send a huge answer, counting the bytes of its body that got out, until the client goes."""
    huge: Huge = response[2]
    stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    headers = list(response[1])
    if huge.with_length:
        headers.append(("Content-Length", str(huge.size)))
    await stream.send_all(connection.send(h11.Response(status_code=response[0], headers=headers)))
    piece = b"x" * (64 * 1024)
    server.sent[huge.path] = 0
    try:
        while server.sent[huge.path] < huge.size:
            await stream.send_all(connection.send(h11.Data(data=piece)))
            server.sent[huge.path] += len(piece)
        await stream.send_all(connection.send(h11.EndOfMessage()))
    except trio.BrokenResourceError:
        pass


def _json(status: int, value: Any, headers: list[tuple[str, str]] | None = None) -> Any:
    return (
        status,
        [("Content-Type", "application/json"), *(headers or [])],
        json.dumps(value).encode(),
    )


async def _serve_one(server: AuthServer, stream: trio.SocketStream) -> None:
    connection = h11.Connection(h11.SERVER)
    async with stream:
        while True:
            request: h11.Request | None = None
            body = b""
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    connection.receive_data(data)
                elif isinstance(event, h11.Request):
                    request = event
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    return
            assert request is not None
            headers = {k.decode().lower(): v.decode() for k, v in request.headers}
            answer = server.handle(request.method.decode(), request.target.decode(), headers, body)
            if isinstance(answer[2], Huge):
                await _send_huge(server, stream, connection, answer)
                return
            status, extra, content = answer
            response = h11.Response(
                status_code=status, headers=[*extra, ("Content-Length", str(len(content)))]
            )
            await stream.send_all(
                connection.send(response) + connection.send(h11.Data(data=content))
            )
            await stream.send_all(connection.send(h11.EndOfMessage()))
            if connection.our_state is h11.MUST_CLOSE:
                return
            connection.start_next_cycle()


@asynccontextmanager
async def auth_server(**options: Any) -> AsyncIterator[AuthServer]:
    server = AuthServer(**options)
    async with trio.open_nursery() as nursery:

        async def serve(stream: trio.SocketStream) -> None:
            try:
                await _serve_one(server, stream)
            except (trio.BrokenResourceError, h11.RemoteProtocolError):
                pass

        listeners = await nursery.start(partial(trio.serve_tcp, serve, 0, host="127.0.0.1"))
        server.port = listeners[0].socket.getsockname()[1]
        yield server
        nursery.cancel_scope.cancel()


class Consent:
    """An ``authorize`` hook: follows the authorization URL's redirect as a user's browser would.

    With ``server``, it asks the server directly instead of over HTTP, so that the
    code in the redirect is in no log record of this process's HTTP client.
    """

    def __init__(self, server: AuthServer | None = None) -> None:
        self.urls: list[str] = []
        self.server = server

    async def __call__(self, url: str) -> dict[str, str]:
        self.urls.append(url)
        if self.server is not None:
            target = url.removeprefix(self.server.base)
            _, headers, _ = self.server.handle("GET", target, {}, b"")
            location = dict(headers)["Location"]
        else:
            async with httpx2.AsyncClient() as http:
                location = (await http.get(url)).headers["location"]
        return dict(parse_qsl(urlsplit(location).query))


async def whoami(server: HttpServer) -> str:
    """Connect, have a scripted model call the server's tool, return what the tool said."""
    async with open_mcp(server, name="secure") as connection:
        model = ScriptedProvider([reply(call("whoami", {})), reply("ok")])
        agent = al.Agent(model, tools=connection.tools)
        async with agent.prompt("Who am I?") as events:
            async for event in events:
                if isinstance(event, al.ToolExecutionEnd):
                    return event.result.text_content
    raise AssertionError("the tool was not called")


def token_files(store: Path) -> list[Path]:
    return sorted(store.iterdir())


# ------------------------------------------------------------------ the flow, end to end


HUGE = 50 * 1024 * 1024


# Leaving an httpx2 stream before its end leaves its transport's inner generator to the
# collector, which warns; the connection is closed all the same.
@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    ("path", "step"),
    [
        ("/mcp", "reading the MCP server's HTTP 401 answer"),
        (
            "/.well-known/oauth-protected-resource/mcp",
            "discovering the protected resource metadata",
        ),
        (
            "/.well-known/oauth-authorization-server",
            "discovering the authorization server metadata",
        ),
        ("/register", "registering the client"),
        ("/token", "exchanging the authorization code for a token"),
    ],
)
async def test_a_huge_answer_fails_the_flow_without_being_read(
    tmp_path: Path, path: str, step: str, with_length: bool
) -> None:
    """A 50 MB answer at any step: the flow fails naming the server, the step and the
    limit, and reads no more than the limit (the server could send only so much)."""
    async with auth_server(huge={path: (HUGE, with_length)}) as server:
        oauth = OAuth(token_store=tmp_path, authorize=Consent())
        with trio.fail_after(30), pytest.raises(McpConnectionError) as raised:
            async with open_mcp(HttpServer(server.url, oauth=oauth), name="secure"):
                pass
    assert type(raised.value) is McpAuthError
    size = f"{HUGE} bytes, more than" if with_length else "longer than"
    assert str(raised.value) == (
        f"OAuth with the MCP server at {server.url} failed while {step}: the answer is "
        f"{size} the 1 MiB an OAuth answer may be; the rest was not read"
    )
    assert (raised.value.server, raised.value.step) == (server.url, step)
    # Besides what the sockets' buffers took: nothing past the length, the limit otherwise.
    assert server.sent[path] < (1 if with_length else 3) * 1024 * 1024, server.sent[path]


async def test_the_first_connection_authorizes_and_the_next_reuse_the_tokens(
    tmp_path: Path,
) -> None:
    consent = Consent()
    store = tmp_path / "store"
    async with auth_server() as server:
        oauth = OAuth(token_store=store, authorize=consent)
        for _ in range(3):
            async with open_mcp(HttpServer(server.url, oauth=oauth)) as connection:
                assert [tool.tool_name for tool in connection.tools] == ["whoami"]
    assert len(consent.urls) == 1
    assert [grant["grant_type"] for grant in server.grants] == ["authorization_code"]
    assert len(server.registrations) == 1
    asked = server.authorizations[0]
    assert (asked["client_id"], asked["response_type"], asked["code_challenge_method"]) == (
        "client-1",
        "code",
        "S256",
    )
    assert asked["resource"] == server.url
    assert urlsplit(asked["redirect_uri"]).hostname == "127.0.0.1"
    assert urlsplit(asked["redirect_uri"]).path == "/callback"
    assert server.registrations[0]["client_name"] == "agentloop"
    assert server.registrations[0]["token_endpoint_auth_method"] == "none"


async def test_the_token_file_is_readable_by_the_user_only(tmp_path: Path) -> None:
    store = tmp_path / "config" / "mcp-oauth"
    old = os.umask(0o022)
    try:
        async with auth_server() as server:
            await whoami(
                HttpServer(server.url, oauth=OAuth(token_store=store, authorize=Consent()))
            )
    finally:
        os.umask(old)
    assert stat.S_IMODE(store.stat().st_mode) == 0o700
    [file] = token_files(store)
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert file.name.startswith("127.0.0.1_")
    assert file.suffix == ".json"
    saved = json.loads(file.read_text())
    assert saved["key"] == server.url
    assert sorted(saved["record"]) == [
        "authorization_server",
        "client",
        "expires_at",
        "redirect_uri",
        "resource_metadata",
        "saved_at",
        "tokens",
    ]
    assert saved["record"]["tokens"]["access_token"] in server.access


async def test_a_looser_existing_store_directory_is_tightened(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir(mode=0o755)
    os.chmod(store, 0o755)
    async with auth_server() as server:
        await whoami(HttpServer(server.url, oauth=OAuth(token_store=store, authorize=Consent())))
    assert stat.S_IMODE(store.stat().st_mode) == 0o700


async def test_an_expired_token_is_refreshed_not_authorized_again(tmp_path: Path) -> None:
    consent = Consent()
    async with auth_server(expires_in=0) as server:  # the first token is born expired
        oauth = OAuth(token_store=tmp_path, authorize=consent)
        said = await whoami(HttpServer(server.url, oauth=oauth))
        said_again = await whoami(HttpServer(server.url, oauth=oauth))
    assert len(consent.urls) == 1
    grants = [grant["grant_type"] for grant in server.grants]
    assert grants == ["authorization_code", "refresh_token"]
    assert said.startswith("You sent: ")
    assert said_again.startswith("You sent: ")


async def test_a_stored_token_past_its_expiry_is_refreshed(tmp_path: Path) -> None:
    consent = Consent()
    async with auth_server() as server:
        oauth = OAuth(token_store=tmp_path, authorize=consent)
        await whoami(HttpServer(server.url, oauth=oauth))
        expire_stored_tokens(tmp_path)  # as if the hour had passed
        said = await whoami(HttpServer(server.url, oauth=oauth))
    assert [grant["grant_type"] for grant in server.grants] == [
        "authorization_code",
        "refresh_token",
    ]
    assert len(consent.urls) == 1
    assert said == "You sent: Bearer ***"  # the token is redacted from what comes back
    assert server.bearers[-1] == f"Bearer {list(server.access)[-1]}"  # the refreshed one


async def test_a_refused_refresh_falls_back_to_authorizing_again(tmp_path: Path) -> None:
    consent = Consent()
    async with auth_server() as server:
        oauth = OAuth(token_store=tmp_path, authorize=consent)
        await whoami(HttpServer(server.url, oauth=oauth))
        expire_stored_tokens(tmp_path)
        server.refresh.clear()  # the server forgot every refresh token
        await whoami(HttpServer(server.url, oauth=oauth))
    grants = [grant["grant_type"] for grant in server.grants]
    assert grants == ["authorization_code", "refresh_token", "authorization_code"]
    assert len(consent.urls) == 2


def expire_stored_tokens(store: Path) -> None:
    [file] = token_files(store)
    saved = json.loads(file.read_text())
    saved["record"]["expires_at"] = 0
    file.write_text(json.dumps(saved))


async def test_a_pre_registered_client_authenticates_with_basic_and_never_registers(
    tmp_path: Path,
) -> None:
    async with auth_server(registration=False, token_methods=["client_secret_basic"]) as server:
        server.clients["my-app"] = "app-secret-1234"
        oauth = OAuth(
            client_id="my-app",
            client_secret="app-secret-1234",
            token_store=tmp_path,
            authorize=Consent(),
        )
        await whoami(HttpServer(server.url, oauth=oauth))
    assert server.registrations == []
    assert [(g["grant_type"], g.get("basic")) for g in server.grants] == [
        ("authorization_code", "my-app")
    ]
    assert server.authorizations[0]["client_id"] == "my-app"


async def test_client_credentials_need_no_person(tmp_path: Path) -> None:
    async with auth_server(token_methods=["client_secret_basic"]) as server:
        server.clients["service"] = "service-secret-99"
        oauth = OAuth(
            grant="client_credentials",
            client_id="service",
            client_secret="service-secret-99",
            token_store=tmp_path,
        )
        await whoami(HttpServer(server.url, oauth=oauth))
    assert server.authorizations == []
    assert server.grants == [
        {"grant_type": "client_credentials", "resource": server.url, "basic": "service"}
    ]


async def test_scopes_given_are_asked_for(tmp_path: Path) -> None:
    async with auth_server() as server:
        oauth = OAuth(scopes="files:read files:write", token_store=tmp_path, authorize=Consent())
        await whoami(HttpServer(server.url, oauth=oauth))
    assert server.authorizations[0]["scope"] == "files:read files:write"


# ------------------------------------------------------------------ secrets


def test_secrets_are_never_in_a_repr() -> None:
    oauth = OAuth(client_id="my-app", client_secret="s3cret-value", private_key="-----KEY-----")
    assert repr(oauth) == (
        "OAuth(scopes=None, client_id='my-app', client_secret='***', client_metadata_url=None, "
        "client_name='agentloop', redirect_port=0, token_store=None, open_browser=True, "
        "authorize_timeout=300.0, grant='authorization_code', token_endpoint_auth_method=None, "
        "private_key='***', signing_algorithm='RS256', issuer=None)"
    )
    assert repr(HttpServer("https://x.example/mcp", oauth=True)) == (
        "HttpServer(url='https://x.example/mcp', oauth=OAuth(scopes=None, client_id=None, "
        "client_secret=None, client_metadata_url=None, client_name='agentloop', redirect_port=0, "
        "token_store=None, open_browser=True, authorize_timeout=300.0, "
        "grant='authorization_code', token_endpoint_auth_method=None, private_key=None, "
        "signing_algorithm='RS256', issuer=None))"
    )


async def test_tokens_and_the_client_secret_are_redacted_from_results(
    tmp_path: Path,
) -> None:
    async with auth_server(token_methods=["client_secret_basic"]) as server:
        server.clients["my-app"] = "app-secret-1234"
        oauth = OAuth(
            client_id="my-app",
            client_secret="app-secret-1234",
            token_store=tmp_path,
            authorize=Consent(),
        )
        # The first connection authorizes: its token is fetched during the run.
        fresh = await whoami(HttpServer(server.url, oauth=oauth))
        said = await whoami(HttpServer(server.url, oauth=oauth))  # the stored token
    assert (fresh, said) == ("You sent: Bearer ***", "You sent: Bearer ***")


async def test_a_refused_authorization_names_the_server_and_step_and_no_secret(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[str] = []

    def refuse(url: str) -> dict[str, str]:
        seen.append(url)
        return {"error": "access_denied", "error_description": "The user said no"}

    caplog.set_level(logging.DEBUG)
    async with auth_server() as server:
        oauth = OAuth(
            client_id="my-app",
            client_secret="app-secret-1234",
            token_store=tmp_path,
            authorize=refuse,
        )
        with pytest.raises(McpConnectionError) as raised:
            async with open_mcp(HttpServer(server.url, oauth=oauth), name="secure"):
                pass
    assert type(raised.value) is McpAuthError  # itself, not wrapped
    assert str(raised.value) == (
        f"OAuth with the MCP server at {server.url} failed while authorizing: "
        "the authorization server refused: access_denied: The user said no"
    )
    assert (raised.value.server, raised.value.step) == (server.url, "authorizing")
    state = dict(parse_qsl(urlsplit(seen[0]).query))["state"]
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in ("app-secret-1234", state):
        assert secret not in logged
        assert secret not in str(raised.value)


async def test_no_token_code_or_verifier_reaches_a_log_record(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with auth_server(expires_in=0) as server:
        oauth = OAuth(token_store=tmp_path, authorize=Consent(server))
        await whoami(HttpServer(server.url, oauth=oauth))
        await whoami(HttpServer(server.url, oauth=oauth))
    secrets_seen = [*server.access, *server.refresh]
    secrets_seen += [grant["code"] for grant in server.grants if "code" in grant]
    secrets_seen += [grant["code_verifier"] for grant in server.grants if "code_verifier" in grant]
    secrets_seen += [grant["refresh_token"] for grant in server.grants if "refresh_token" in grant]
    assert (
        len(secrets_seen) == 6
    )  # 2 access tokens, the live refresh token, code, verifier, the used refresh token
    text = "\n".join(f"{r.getMessage()} {r.exc_text or ''}" for r in caplog.records)
    assert [secret for secret in secrets_seen if secret in text] == []


def _chain(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    todo: list[BaseException | None] = [error]
    while todo:
        item = todo.pop()
        if item is None or item in found:
            continue
        found.append(item)
        todo += [item.__cause__, item.__context__]
        if isinstance(item, BaseExceptionGroup):
            todo += list(item.exceptions)
    return found


# ------------------------------------------------------------------ the browser step


async def test_the_default_authorize_listens_on_127_0_0_1_for_the_redirect(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    redirect = f"http://127.0.0.1:{port}/callback"
    url = f"https://auth.example/authorize?{urlencode({'redirect_uri': redirect, 'state': 's1'})}"
    answers: list[dict[str, str]] = []
    async with trio.open_nursery() as nursery:

        async def wait() -> None:
            answers.append(await authorize_in_browser(url, open_browser=False))

        nursery.start_soon(wait)
        async with httpx2.AsyncClient() as http:
            while not capsys.readouterr().err:  # the URL is printed once it listens
                await trio.lowlevel.checkpoint()
            other = await http.get(f"http://127.0.0.1:{port}/favicon.ico")
            done = await http.get(f"{redirect}?code=c0de&state=s1")
    assert (other.status_code, done.status_code) == (404, 200)
    assert "agentloop is authorized" in done.text
    assert answers == [{"code": "c0de", "state": "s1"}]


async def test_the_default_authorize_prints_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    url = f"https://auth.example/authorize?redirect_uri=http://127.0.0.1:{port}/callback"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(partial(authorize_in_browser, url, open_browser=False))
        while not (printed := capsys.readouterr().err):
            await trio.lowlevel.checkpoint()
        nursery.cancel_scope.cancel()
    assert printed == f"Authorize agentloop in your browser: {url}\n"


async def test_the_default_authorize_gives_up_after_its_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    port = free_port()
    url = f"https://auth.example/authorize?redirect_uri=http://127.0.0.1:{port}/callback"
    with pytest.raises(McpAuthError) as raised:
        await authorize_in_browser(url, open_browser=False, give_up_after=120)
    assert str(raised.value) == (
        f"no answer from the browser within 120s (the redirect to 127.0.0.1:{port} never came)"
    )


async def test_a_redirect_off_127_0_0_1_is_refused() -> None:
    url = "https://auth.example/authorize?redirect_uri=https://evil.example/cb"
    with pytest.raises(McpAuthError) as raised:
        await authorize_in_browser(url, open_browser=False)
    assert str(raised.value) == (
        "the authorization URL's redirect_uri is not on http://127.0.0.1: 'https://evil.example/cb'"
    )


async def test_a_person_authorizing_stops_the_handshake_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    handshake = trio.CancelScope(deadline=trio.current_time() + 30)
    with handshake, pausable_deadline(handshake):
        await trio.sleep(10)
        with person_waits():
            await trio.sleep(600)  # a slow person
        assert handshake.deadline == pytest.approx(trio.current_time() + 20)
        await trio.sleep(19)
    assert not handshake.cancelled_caught


@pytest.fixture
def autojump_clock() -> trio.testing.MockClock:
    return trio.testing.MockClock(autojump_threshold=0)


# ------------------------------------------------------------------ configuration


def test_mcp_json_oauth_true_is_the_defaults() -> None:
    servers = load_mcp_config(
        {"mcpServers": {"docs": {"url": "https://d.example/mcp", "oauth": True}}}
    )
    assert servers == {"docs": HttpServer("https://d.example/mcp", oauth=OAuth())}


def test_mcp_json_oauth_fields_expand_variables() -> None:
    config = {
        "mcpServers": {
            "docs": {
                "url": "https://d.example/sse",
                "type": "sse",
                "oauth": {
                    "scopes": ["read", "${EXTRA}"],
                    "clientId": "app",
                    "clientSecret": "${DOCS_SECRET}",
                    "redirectPort": 8765,
                    "openBrowser": False,
                    "tokenStore": "/tmp/tokens",
                },
            }
        }
    }
    [server] = load_mcp_config(
        config, environ={"DOCS_SECRET": "shh-1234", "EXTRA": "write"}
    ).values()
    assert server.oauth == OAuth(
        scopes=("read", "write"),
        client_id="app",
        client_secret="shh-1234",
        redirect_port=8765,
        open_browser=False,
        token_store="/tmp/tokens",
    )
    assert type(server).__name__ == "SseServer"


@pytest.mark.parametrize(
    ("oauth", "message"),
    [
        ({"clientID": "x"}, "mcpServers.docs.oauth: unknown key 'clientID' (known: "),
        ({"redirectPort": "80"}, "mcpServers.docs.oauth.redirectPort must be a number, got '80'"),
        ({"openBrowser": 1}, "mcpServers.docs.oauth.openBrowser must be true or false, got 1"),
        ({"scopes": [1]}, "mcpServers.docs.oauth.scopes must be a list of strings, got [1]"),
        (
            {"clientSecret": "${NOPE}"},
            "mcpServers.docs.oauth.clientSecret: the environment variable NOPE is not set",
        ),
        (
            {"grant": "client_credentials"},
            "mcpServers.docs.oauth: the client_credentials grant needs a client_id",
        ),
        ("yes", "mcpServers.docs.oauth must be true or an object, got 'yes'"),
    ],
)
def test_mcp_json_oauth_mistakes_are_named(oauth: Any, message: str) -> None:
    config = {"mcpServers": {"docs": {"url": "https://d.example/mcp", "oauth": oauth}}}
    with pytest.raises(ValueError, match=r"^mcpServers\.docs\.oauth") as raised:
        load_mcp_config(config, environ={})
    assert str(raised.value).startswith(message)


def test_oauth_and_auth_together_are_refused() -> None:
    with pytest.raises(ValueError, match="not both") as raised:
        HttpServer("https://x.example/mcp", auth=httpx2.BasicAuth("a", "b"), oauth=True)
    assert str(raised.value) == "give HttpServer either oauth or auth, not both"


def test_the_default_token_store_follows_xdg(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", "/cfg")
    assert default_token_store() == Path("/cfg/agentloop/mcp-oauth")
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert default_token_store() == Path.home() / ".config" / "agentloop" / "mcp-oauth"
