"""The flow: the SDK's ``OAuthClientProvider`` with agentloop's steps, storage and errors."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx2
import trio
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_client_info_from_metadata_url,
    create_client_registration_request,
    create_oauth_metadata_request,
    credentials_match_issuer,
    extract_field_from_www_auth,
    extract_resource_metadata_from_www_auth,
    extract_scope_from_www_auth,
    get_client_metadata_scopes,
    handle_auth_metadata_response,
    handle_protected_resource_response,
    handle_registration_response,
    issuers_match,
    should_use_client_metadata_url,
    union_scopes,
    validate_metadata_issuer,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthMetadata,
    OAuthToken,
    ProtectedResourceMetadata,
)
from mcp.shared.auth_utils import resource_url_from_server_url
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from pydantic import AnyUrl, ValidationError

from ..._secrets import Redactor
from ..._text import loads
from ..._util import call_hook
from .._base import McpAuthError
from ._browser import REDIRECT_HOST, authorize_in_browser, free_port, person_waits
from ._options import OAuth, TokenAuthMethod, store_dir
from ._store import TokenFile

__all__ = ["oauth_auth"]

log = logging.getLogger("agentloop.mcp")

_REDIRECT_PATH = "/callback"
_JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_EXPIRY_MARGIN = 30.0  # seconds before expiry that a token counts as expired
#: The most bytes of one answer the flow reads (metadata, registration, token, a 401's
#: body): past it, the flow fails without reading the rest.
MAX_ANSWER_BYTES = 1024 * 1024

# ------------------------------------------------------------------ the flow


class _Failed(Exception):
    """A step of the flow failed; the message says why, with no secret in it."""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class _Provider(OAuthClientProvider):
    """The SDK's OAuth provider with agentloop's flow, storage and errors."""

    def __init__(self, server_url: str, oauth: OAuth, redactor: Redactor | None = None) -> None:
        self.oauth = oauth
        self.file = TokenFile(store_dir(oauth), resource_url_from_server_url(server_url))
        self.redactor = redactor
        self._secrets: set[str] = {v for v in (oauth.client_secret, oauth.private_key) if v}
        self._expires_at: float | None = None
        self._authorization_url = ""
        self._redirect_uri = ""
        self._step = ""
        client_credentials = oauth.grant == "client_credentials"
        metadata = OAuthClientMetadata(
            redirect_uris=None,
            client_name=oauth.client_name,
            grant_types=(
                ["client_credentials"]
                if client_credentials
                else ["authorization_code", "refresh_token"]
            ),
            response_types=[] if client_credentials else ["code"],
            scope=" ".join(oauth.scopes) if oauth.scopes else None,
        )
        super().__init__(
            server_url,
            metadata,
            storage=_NoStorage(),
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=oauth.client_metadata_url,
        )

    # -- state kept in the token file

    async def _initialize(self) -> None:
        record = await trio.to_thread.run_sync(self.file.read) or {}
        context = self.context
        client = _model(OAuthClientInformationFull, record.get("client"))
        if self.oauth.client_id is not None:
            # Pre-registered: what is stored counts only if it is that client.
            client = client if client and client.client_id == self.oauth.client_id else None
            client = client or self._preregistered()
        context.client_info = client
        if client is not None and client.client_secret:
            self._secrets.add(client.client_secret)
        context.current_tokens = _model(OAuthToken, record.get("tokens")) if client else None
        expires = record.get("expires_at")
        self._expires_at = float(expires) if isinstance(expires, int | float) else None
        context.oauth_metadata = _model(OAuthMetadata, record.get("authorization_server"))
        context.protected_resource_metadata = _model(
            ProtectedResourceMetadata, record.get("resource_metadata")
        )
        if context.protected_resource_metadata is not None:
            servers = context.protected_resource_metadata.authorization_servers
            context.auth_server_url = str(servers[0]) if servers else None
        redirect = record.get("redirect_uri")
        port = self.oauth.redirect_port
        if isinstance(redirect, str) and (port == 0 or urlsplit(redirect).port == port):
            self._redirect_uri = redirect
        self._note_tokens(context.current_tokens)
        self._initialized = True

    def _preregistered(self) -> OAuthClientInformationFull:
        return OAuthClientInformationFull(
            client_id=self.oauth.client_id or "",
            client_secret=self.oauth.client_secret,
            token_endpoint_auth_method=self.oauth.token_endpoint_auth_method,
            grant_types=list(self.context.client_metadata.grant_types),
            redirect_uris=None,
        )

    async def _save(self) -> None:
        context = self.context
        record: dict[str, Any] = {"saved_at": time.time()}
        if context.client_info is not None:
            record["client"] = context.client_info.model_dump(mode="json", exclude_none=True)
        if context.current_tokens is not None:
            record["tokens"] = context.current_tokens.model_dump(mode="json", exclude_none=True)
            record["expires_at"] = self._expires_at
        if context.oauth_metadata is not None:
            record["authorization_server"] = context.oauth_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if context.protected_resource_metadata is not None:
            record["resource_metadata"] = context.protected_resource_metadata.model_dump(
                mode="json", exclude_none=True
            )
        if self._redirect_uri:
            record["redirect_uri"] = self._redirect_uri
        try:
            await trio.to_thread.run_sync(self.file.write, record)
        except OSError as error:
            raise _Failed(
                f"cannot write the token file {self.file.path}: {error.strerror or error}"
            ) from error

    def _note_tokens(self, tokens: OAuthToken | None) -> None:
        if tokens is None:
            return
        found = [v for v in (tokens.access_token, tokens.refresh_token) if v]
        self._secrets.update(found)
        if self.redactor is not None:
            self.redactor.add(found)

    def _fresh(self) -> bool:
        tokens = self.context.current_tokens
        if tokens is None or not tokens.access_token:
            return False
        if self._expires_at is None:
            return True
        margin = min(_EXPIRY_MARGIN, max(0.0, (tokens.expires_in or 0) / 10))
        return time.time() < self._expires_at - margin

    def _clear_tokens(self) -> None:
        self.context.clear_tokens()
        self._expires_at = None

    # -- the browser step, through the SDK's authorization-code grant

    async def _redirect(self, url: str) -> None:
        self._authorization_url = url
        self._secrets.add(dict(parse_qsl(urlsplit(url).query)).get("state", ""))

    async def _callback(self) -> AuthorizationCodeResult:
        hook = self.oauth.authorize
        with person_waits():
            if hook is None:
                query = await authorize_in_browser(
                    self._authorization_url,
                    open_browser=self.oauth.open_browser,
                    give_up_after=self.oauth.authorize_timeout,
                )
            else:
                query = await call_hook(hook, self._authorization_url)
        answer = {str(k): str(v) for k, v in dict(query).items()}
        if "error" in answer:
            reason = answer["error"]
            if answer.get("error_description"):
                reason += f": {answer['error_description']}"
            raise _Failed(f"the authorization server refused: {reason}")
        if not answer.get("code"):
            raise _Failed("the redirect carried no authorization code")
        self._secrets.add(answer["code"])
        return AuthorizationCodeResult(
            code=answer["code"], state=answer.get("state"), iss=answer.get("iss")
        )

    # -- answers: each read here first, at most MAX_ANSWER_BYTES of it

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The flow, with every answer it is given read at most :data:`MAX_ANSWER_BYTES`.

        The flow's own requests (metadata, registration, token, and the redirects
        the SDK follows for them) are read before the flow looks at them; an answer
        to the request being authorized that leads to another request (a 401) is
        read before httpx2 reads it for its history. Only the answer the flow
        ends with, the MCP server's own, streams as it comes.
        """
        flow = super().async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                if outgoing is not request:
                    await self._read_answer(response)
                try:
                    following = await flow.asend(response)
                except StopAsyncIteration:
                    return
                if outgoing is request:
                    # httpx2 reads it for its history before sending what follows.
                    step = self._step
                    self._step = f"reading the MCP server's HTTP {response.status_code} answer"
                    await self._read_answer(response)
                    self._step = step
                outgoing = following
        finally:
            await flow.aclose()

    async def _read_answer(self, response: httpx2.Response) -> None:
        """Read ``response`` into itself (its ``aread`` then returns the body), or fail.

        Raises:
            McpAuthError: the answer is longer than :data:`MAX_ANSWER_BYTES` (said
                by its Content-Length, or found while reading: the rest is not read).
        """
        if hasattr(response, "_content"):
            return  # read already
        limit = MAX_ANSWER_BYTES
        length = response.headers.get("content-length", "")
        encoded = response.headers.get("content-encoding", "identity").lower() != "identity"
        if length.isdigit() and int(length) > limit and not encoded:
            raise self._too_long(f"{int(length)} bytes")
        body = bytearray()
        async with contextlib.aclosing(response.aiter_bytes()) as parts:
            async for part in parts:
                body += part
                if len(body) > limit:
                    raise self._too_long("longer")
        response._content = bytes(body)  # what aread() keeps: read once, here

    def _too_long(self, size: str) -> McpAuthError:
        what = "longer than" if size == "longer" else f"{size}, more than"
        return self._fail(
            _Failed(
                f"the answer is {what} the {MAX_ANSWER_BYTES // 1024 // 1024} MiB an OAuth "
                "answer may be; the rest was not read"
            )
        )

    # -- requests

    def _choose_auth_method(self) -> None:
        """Pick how a client with a secret (or key) authenticates, from what the server supports."""
        client = self.context.client_info
        if client is None or self.oauth.token_endpoint_auth_method is not None:
            return
        metadata = self.context.oauth_metadata
        supported = (metadata.token_endpoint_auth_methods_supported if metadata else None) or [
            "client_secret_basic"
        ]
        if self.oauth.private_key and self.oauth.client_id == client.client_id:
            client.token_endpoint_auth_method = "private_key_jwt"
        elif client.client_secret and client.token_endpoint_auth_method is None:
            wanted = ("client_secret_basic", "client_secret_post")
            client.token_endpoint_auth_method = next(
                (m for m in wanted if m in supported), "client_secret_basic"
            )

    def _registration_metadata(self) -> None:
        """The auth method to register with: none (a public client) if the server allows it."""
        metadata = self.context.oauth_metadata
        supported = (metadata.token_endpoint_auth_methods_supported if metadata else None) or []
        method = self.oauth.token_endpoint_auth_method
        if method is None and supported:
            preferred: tuple[TokenAuthMethod, ...] = (
                "none",
                "client_secret_basic",
                "client_secret_post",
            )
            method = next((m for m in preferred if m in supported), None)
        self.context.client_metadata.token_endpoint_auth_method = method

    async def _client_assertion(self) -> dict[str, str]:
        import jwt

        metadata = self.context.oauth_metadata
        audience = str(metadata.issuer) if metadata else _origin(self.context.server_url)
        now = int(time.time())
        claims = {
            "iss": self.oauth.client_id,
            "sub": self.oauth.client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 300,
            "jti": str(uuid.uuid4()),
        }
        try:
            assertion = jwt.encode(
                claims, self.oauth.private_key or "", algorithm=self.oauth.signing_algorithm
            )
        except Exception as error:  # a malformed key: its text holds no key material
            raise _Failed(
                f"cannot sign the client assertion ({self.oauth.signing_algorithm}): "
                f"{type(error).__name__}"
            ) from None
        self._secrets.add(assertion)
        return {"client_assertion": assertion, "client_assertion_type": _JWT_BEARER}

    async def _client_credentials_request(self) -> httpx2.Request:
        context = self.context
        data: dict[str, str] = {"grant_type": "client_credentials"}
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        client = context.client_info
        if client is not None and client.token_endpoint_auth_method == "private_key_jwt":
            data["client_id"] = client.client_id
            data.update(await self._client_assertion())
        else:
            data, headers = context.prepare_token_auth(data, headers)
        if context.should_include_resource_param(context.protocol_version):
            data["resource"] = context.get_resource_url()
        if context.client_metadata.scope:
            data["scope"] = context.client_metadata.scope
        return httpx2.Request("POST", self._get_token_endpoint(), data=data, headers=headers)

    async def _refresh_request(self) -> httpx2.Request:
        request = await self._refresh_token()
        client = self.context.client_info
        if client is not None and client.token_endpoint_auth_method == "private_key_jwt":
            data = dict(parse_qsl(request.content.decode("ascii")))
            data.update(await self._client_assertion())
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            request = httpx2.Request("POST", request.url, data=data, headers=headers)
        return request

    async def _took_tokens(self, response: httpx2.Response, *, refresh: bool) -> bool:
        """Keep the tokens of a token response; whether there were any (a refresh may fail)."""
        body = await response.aread()
        if response.status_code not in (200, 201):
            if refresh:
                log.info(
                    "MCP server %s: the token refresh was refused (HTTP %d); authorizing again",
                    self.context.server_url,
                    response.status_code,
                )
                self._clear_tokens()
                return False
            raise _Failed(f"HTTP {response.status_code}{_oauth_error(body)}")
        try:
            tokens = OAuthToken.model_validate_json(body)
        except ValidationError:
            if refresh:
                self._clear_tokens()
                return False
            raise _Failed("the token response is not a token") from None
        prior = self.context.current_tokens
        if tokens.scope is None:
            tokens.scope = (
                prior.scope if refresh and prior is not None else self.context.client_metadata.scope
            )
        if refresh and tokens.refresh_token is None and prior is not None:
            tokens.refresh_token = prior.refresh_token
        self.context.current_tokens = tokens
        self._expires_at = None if tokens.expires_in is None else time.time() + tokens.expires_in
        self._note_tokens(tokens)
        await self._save()
        return True

    def _fail(self, error: BaseException) -> McpAuthError:
        if isinstance(error, _Failed | OAuthFlowError):
            reason = str(error)
        elif isinstance(error, ValidationError):
            reason = f"a malformed answer ({error.error_count()} problems)"
        else:
            reason = f"{type(error).__name__}: {error}"
        redact = Redactor(self._secrets)
        message = redact.text(
            f"OAuth with the MCP server at {self.context.server_url} failed while "
            f"{self._step}: {reason}"
        )
        return McpAuthError(message, server=self.context.server_url, step=self._step)

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        context = self.context
        async with context.lock:
            try:
                if not self._initialized:
                    self._step = "reading the token store"
                    await self._initialize()
                context.protocol_version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER)
                refreshed = False
                if not self._fresh() and context.can_refresh_token():
                    self._step = "refreshing the access token"
                    refreshed = True
                    response = yield await self._refresh_request()
                    await self._took_tokens(response, refresh=True)
                if self._fresh():
                    self._add_auth_header(request)
            except Exception as error:
                raise self._fail(error) from None

            response = yield request

            step_up = (
                response.status_code == 403
                and extract_field_from_www_auth(response, "error") == "insufficient_scope"
            )
            if response.status_code != 401 and not step_up:
                return

            try:
                if response.status_code == 401 and not refreshed and context.can_refresh_token():
                    # The server refused a token thought fresh: a refresh may be enough.
                    self._step = "refreshing the access token"
                    refresh = yield await self._refresh_request()
                    if await self._took_tokens(refresh, refresh=True):
                        self._add_auth_header(request)
                        response = yield request
                        step_up = (
                            response.status_code == 403
                            and extract_field_from_www_auth(response, "error")
                            == "insufficient_scope"
                        )
                        if response.status_code != 401 and not step_up:
                            return

                granted = context.current_tokens.scope if context.current_tokens else None
                challenged_scope = extract_scope_from_www_auth(response)
                if step_up and _covers(
                    union_scopes(context.client_metadata.scope, granted), challenged_scope
                ):
                    # Authorized for all of that already: another round would not help.
                    return

                if response.status_code == 401 or context.oauth_metadata is None:
                    async for outgoing, incoming in self._discover(response):
                        incoming.append((yield outgoing))

                self._step = "choosing the scopes"
                if self.oauth.scopes is not None and not step_up:
                    chosen: str | None = " ".join(self.oauth.scopes) or None
                else:
                    chosen = get_client_metadata_scopes(
                        challenged_scope,
                        context.protected_resource_metadata,
                        context.oauth_metadata,
                        context.client_metadata.grant_types,
                    )
                if step_up:
                    prior = union_scopes(context.client_metadata.scope, granted)
                    context.client_metadata.scope = union_scopes(prior, chosen)
                else:
                    context.client_metadata.scope = chosen

                if self.oauth.grant == "client_credentials":
                    if context.client_info is None:
                        context.client_info = self._preregistered()
                    self._choose_auth_method()
                    self._step = "requesting a token (client credentials)"
                    tokens = yield await self._client_credentials_request()
                    await self._took_tokens(tokens, refresh=False)
                else:
                    if not self._redirect_uri:
                        port = self.oauth.redirect_port or free_port()
                        self._redirect_uri = f"http://{REDIRECT_HOST}:{port}{_REDIRECT_PATH}"
                    context.client_metadata.redirect_uris = [AnyUrl(self._redirect_uri)]
                    if context.client_info is None:
                        async for outgoing, incoming in self._register():
                            incoming.append((yield outgoing))
                    self._choose_auth_method()
                    await self._save()
                    self._step = "authorizing"
                    code, verifier = await self._perform_authorization_code_grant()
                    self._secrets.add(verifier)
                    self._step = "exchanging the authorization code for a token"
                    tokens = yield await self._exchange_token_authorization_code(code, verifier)
                    await self._took_tokens(tokens, refresh=False)
            except McpAuthError:
                raise
            except Exception as error:
                raise self._fail(error) from None

            self._add_auth_header(request)
            yield request

    async def _discover(
        self, response: httpx2.Response
    ) -> AsyncGenerator[tuple[httpx2.Request, list[httpx2.Response]], None]:
        """Find the resource's and the authorization server's metadata.

        Yields each request with a list that the caller appends its response to.
        """
        context = self.context
        self._step = "discovering the protected resource metadata"
        urls = build_protected_resource_metadata_discovery_urls(
            extract_resource_metadata_from_www_auth(response), context.server_url
        )
        context.protected_resource_metadata = None
        context.auth_server_url = None
        failed: int | None = None
        for url in urls:
            answer: list[httpx2.Response] = []
            yield create_oauth_metadata_request(url), answer
            if answer[0].status_code >= 500 or answer[0].status_code == 429:
                failed = answer[0].status_code
            found = await handle_protected_resource_response(answer[0])
            if found is not None:
                await self._validate_resource_match(found)
                context.protected_resource_metadata = found
                advertised = [str(server) for server in found.authorization_servers]
                context.auth_server_url = self._select_authorization_server(advertised)
                break
        else:
            if failed is not None:
                raise _Failed(f"the metadata request failed with HTTP {failed}")

        expected = self._expected_issuer()
        if context.client_info is not None and not credentials_match_issuer(
            context.client_info, expected, context.client_metadata_url
        ):
            log.info("MCP server %s: another authorization server; registering again", expected)
            context.client_info = None
            self._clear_tokens()
        issuer = self.oauth.issuer
        server = context.auth_server_url or _origin(context.server_url)
        if issuer is not None and not issuers_match(server, issuer):
            raise _Failed(
                f"the server sends clients to {server}, not to the configured issuer {issuer}"
            )

        self._step = "discovering the authorization server metadata"
        context.oauth_metadata = None
        legacy = context.auth_server_url is None
        for url in build_oauth_authorization_server_metadata_discovery_urls(
            context.auth_server_url, context.server_url
        ):
            answer = []
            yield create_oauth_metadata_request(url), answer
            ok, metadata = await handle_auth_metadata_response(answer[0])
            if not ok:
                break
            if metadata is None:
                continue
            if legacy:
                # 2025-03-26: the metadata lives at the MCP server's origin, and its
                # issuer may carry a path there; it must not name another origin.
                if _origin(str(metadata.issuer)) != _origin(context.server_url):
                    raise _Failed(f"the metadata at {url} names another issuer: {metadata.issuer}")
            else:
                validate_metadata_issuer(metadata, expected)
            context.oauth_metadata = metadata
            break

    async def _register(
        self,
    ) -> AsyncGenerator[tuple[httpx2.Request, list[httpx2.Response]], None]:
        context = self.context
        if should_use_client_metadata_url(context.oauth_metadata, context.client_metadata_url):
            self._step = "using the client metadata document"
            client = create_client_info_from_metadata_url(
                context.client_metadata_url or "",
                redirect_uris=context.client_metadata.redirect_uris,
            )
            if context.oauth_metadata is not None:
                client.issuer = self._expected_issuer()
            context.client_info = client
            return
        self._step = "registering the client"
        if (
            context.oauth_metadata is not None
            and context.oauth_metadata.registration_endpoint is None
        ):
            raise _Failed(
                "the authorization server does not register clients dynamically: "
                "give OAuth(client_id=...) a client registered with it"
            )
        self._registration_metadata()
        base = context.get_authorization_base_url(context.server_url)
        answer: list[httpx2.Response] = []
        yield (
            create_client_registration_request(
                context.oauth_metadata, context.client_metadata, base
            ),
            answer,
        )
        client = await handle_registration_response(answer[0])
        if client.client_secret:
            self._secrets.add(client.client_secret)
        if context.oauth_metadata is not None:
            client.issuer = self._expected_issuer()
        context.client_info = client


class _NoStorage:
    """The SDK's storage protocol, unused: :class:`_Provider` keeps its own file."""

    async def get_tokens(self) -> OAuthToken | None:
        return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        return None

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        return None


def _model(model: Any, data: Any) -> Any:
    if not isinstance(data, Mapping):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def _covers(granted: str | None, wanted: str | None) -> bool:
    if not wanted:
        return True
    return set(wanted.split()) <= set((granted or "").split())


def _oauth_error(body: bytes) -> str:
    """The OAuth error of a refused token request, briefly: never the whole body."""
    try:
        data = loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        return ""
    text = f": {data['error']}"
    description = data.get("error_description")
    if isinstance(description, str) and description:
        text += f" ({description[:200]})"
    return text


def oauth_auth(server_url: str, oauth: OAuth, redactor: Redactor | None = None) -> httpx2.Auth:
    """The ``httpx2.Auth`` that does ``oauth`` for the server at ``server_url``."""
    return _Provider(server_url, oauth, redactor)
