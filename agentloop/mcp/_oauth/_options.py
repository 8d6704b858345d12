"""The OAuth options (:class:`OAuth`), where tokens are kept, and what is secret in them."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal, TypeAlias

import attrs
from mcp.client.auth.utils import is_valid_client_metadata_url
from mcp.shared.auth_utils import resource_url_from_server_url

from .._base import public
from ._store import TokenFile

__all__ = [
    "OAuth",
    "TokenAuthMethod",
    "default_token_store",
    "oauth_secrets",
    "store_dir",
]

#: Given the authorization URL, return the query of the redirect that ends it
#: (``code`` and ``state``, or ``error``). A plain or an async function.
AuthorizeHook: TypeAlias = Callable[[str], "Mapping[str, str] | Awaitable[Mapping[str, str]]"]
Grant: TypeAlias = Literal["authorization_code", "client_credentials"]
TokenAuthMethod: TypeAlias = Literal[
    "client_secret_basic", "client_secret_post", "private_key_jwt", "none"
]


def _hidden(value: str | None) -> str:
    return "None" if value is None else "'***'"


def _scopes(value: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return tuple(value.split())
    return tuple(str(scope) for scope in value)


def _optional_path(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.fspath(value)


@public
@attrs.frozen(kw_only=True)
class OAuth:
    """How to authorize with an MCP server that asks for OAuth.

    ``OAuth()`` does the whole flow on its own: it discovers the server's
    authorization server, registers a client there, opens the browser for the
    user to consent, and keeps the tokens for next time::

        HttpServer("https://mcp.example.com/mcp", oauth=OAuth())
        HttpServer(url, oauth=OAuth(client_id="my-app", client_secret=os.environ["SECRET"]))
        HttpServer(url, oauth=OAuth(grant="client_credentials", client_id="svc", client_secret=s))

    Attributes:
        scopes: The scopes to ask for. Default: the server's choice (the
            ``scope`` of its ``WWW-Authenticate`` header, else the
            ``scopes_supported`` of its resource metadata, else none).
        client_id: A client registered beforehand with the authorization
            server. Without one, the client is registered dynamically (or is
            ``client_metadata_url``).
        client_secret: That client's secret. Never shown in a ``repr``.
        client_metadata_url: An HTTPS URL where the client's metadata
            document is published (a client ID metadata document); used as
            the client ID by servers that accept those.
        client_name: The name the user sees on the consent page.
        redirect_port: The port of the ``http://127.0.0.1:PORT/callback``
            redirect; 0 picks a free one the first time and keeps it with the
            registered client.
        token_store: The directory where tokens and registered clients are
            kept, one file per server (mode 0600, the directory 0700).
            Default: :func:`default_token_store`.
        authorize: Given the authorization URL, returns the query of the
            redirect (``code``, ``state``). Default:
            :func:`authorize_in_browser`.
        open_browser: Whether the default ``authorize`` opens the browser
            (the URL is printed to stderr either way).
        authorize_timeout: Seconds the default ``authorize`` waits for the
            redirect.
        grant: ``"authorization_code"`` (a user consents) or
            ``"client_credentials"`` (a service, with ``client_id`` and
            ``client_secret`` or ``private_key``).
        token_endpoint_auth_method: How the client authenticates at the token
            endpoint. Default: the best the authorization server supports
            for the credentials given.
        private_key: A PEM private key for ``private_key_jwt`` (RFC 7523).
            Never shown in a ``repr``.
        signing_algorithm: The JWT algorithm for ``private_key``.
        issuer: The authorization server that pre-registered credentials
            belong to; if set, they are sent nowhere else.

    Raises:
        ValueError: a client-credentials grant without a client ID or a
            credential, a ``client_metadata_url`` that is not an HTTPS URL
            with a path, or a port out of range.
    """

    scopes: tuple[str, ...] | None = attrs.field(default=None, converter=_scopes)
    client_id: str | None = None
    client_secret: str | None = attrs.field(default=None, repr=_hidden)
    client_metadata_url: str | None = None
    client_name: str = "agentloop"
    redirect_port: int = 0
    token_store: str | None = attrs.field(default=None, converter=_optional_path)
    authorize: AuthorizeHook | None = attrs.field(default=None, repr=False)
    open_browser: bool = True
    authorize_timeout: float = 300.0
    grant: Grant = "authorization_code"
    token_endpoint_auth_method: TokenAuthMethod | None = None
    private_key: str | None = attrs.field(default=None, repr=_hidden)
    signing_algorithm: str = "RS256"
    issuer: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.grant not in ("authorization_code", "client_credentials"):
            raise ValueError(
                f"grant must be 'authorization_code' or 'client_credentials', got {self.grant!r}"
            )
        if self.grant == "client_credentials" and not self.client_id:
            raise ValueError("the client_credentials grant needs a client_id")
        if self.grant == "client_credentials" and not (self.client_secret or self.private_key):
            raise ValueError("the client_credentials grant needs a client_secret or a private_key")
        if self.client_metadata_url is not None and not is_valid_client_metadata_url(
            self.client_metadata_url
        ):
            raise ValueError(
                "client_metadata_url must be an HTTPS URL with a path, "
                f"got {self.client_metadata_url!r}"
            )
        if not 0 <= self.redirect_port <= 65535:
            raise ValueError(f"redirect_port must be 0 to 65535, got {self.redirect_port}")
        if not self.authorize_timeout > 0:
            raise ValueError(f"authorize_timeout must be above 0, got {self.authorize_timeout}")


@public
def default_token_store() -> Path:
    """Where tokens are kept by default: ``$XDG_CONFIG_HOME/agentloop/mcp-oauth``.

    ``~/.config/agentloop/mcp-oauth`` when ``XDG_CONFIG_HOME`` is not set.
    """
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(Path.home(), ".config")
    return Path(base) / "agentloop" / "mcp-oauth"


def oauth_secrets(oauth: OAuth, server_url: str) -> list[str]:
    """The secrets of ``oauth`` known before connecting: client secret, key, stored tokens."""
    found = [value for value in (oauth.client_secret, oauth.private_key) if value]
    record = TokenFile(store_dir(oauth), resource_url_from_server_url(server_url)).read()
    tokens = record.get("tokens") if record else None
    if isinstance(tokens, Mapping):
        found += [str(tokens[k]) for k in ("access_token", "refresh_token") if tokens.get(k)]
    client = record.get("client") if record else None
    if isinstance(client, Mapping) and client.get("client_secret"):
        found.append(str(client["client_secret"]))
    return found


def store_dir(oauth: OAuth) -> Path:
    return Path(oauth.token_store) if oauth.token_store is not None else default_token_store()
