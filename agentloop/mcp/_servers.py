"""Where an MCP server is: a command to run (stdio), a URL (streamable HTTP, legacy SSE).

And the usual JSON configuration file that names several of them::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "docs": {"url": "https://example.com/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}},
        "old": {"url": "https://example.com/sse", "type": "sse"}
    }}
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit

import attrs

from .._secrets import redact_url
from .._text import loads
from ._base import public

if TYPE_CHECKING:  # _oauth loads the MCP SDK: only a server that asks for OAuth needs it
    from ._oauth import OAuth

__all__ = [
    "HttpServer",
    "McpServerSpec",
    "SseServer",
    "StdioServer",
    "default_name",
    "load_mcp_config",
]


def _strings(value: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        raise TypeError(f"args takes a list of strings, got the string {value!r}")
    return tuple(str(item) for item in value)


def _mapping(value: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if value is None else {str(k): str(v) for k, v in value.items()}


def _path(value: str | os.PathLike[str] | None) -> str | None:
    return None if value is None else os.fspath(value)


def _oauth(value: OAuth | bool | None) -> OAuth | None:
    """``True`` is ``OAuth()``; ``False`` and None are no OAuth."""
    if value is None or value is False:
        return None
    from ._oauth import OAuth

    if value is True:
        return OAuth()
    if not isinstance(value, OAuth):
        raise TypeError(f"oauth takes an OAuth or True, got {value!r}")
    return value


@public
@attrs.frozen
class StdioServer:
    """A server run as a subprocess, spoken to over its stdin and stdout.

    The process gets the SDK's safe default environment (``PATH``, ``HOME``…)
    plus ``env``; it runs in ``cwd`` (default: this process's), in a process
    group of its own, which is ended when the connection closes.
    """

    command: str
    args: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    env: dict[str, str] | None = attrs.field(default=None, converter=_mapping, repr=False)
    cwd: str | None = attrs.field(default=None, converter=_path)


@attrs.frozen
class _UrlServer:
    """A server at a URL: what :class:`HttpServer` and :class:`SseServer` share."""

    url: str
    headers: dict[str, str] | None = attrs.field(default=None, converter=_mapping, repr=False)
    auth: Any = attrs.field(default=None, repr=False)
    oauth: OAuth | None = attrs.field(default=None, converter=_oauth, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.oauth is not None and self.auth is not None:
            raise ValueError(f"give {type(self).__name__} either oauth or auth, not both")

    def __repr__(self) -> str:
        """``HttpServer(url='...')``, with ``oauth`` if set: never headers or auth."""
        oauth = "" if self.oauth is None else f", oauth={self.oauth!r}"
        return f"{type(self).__name__}(url={redact_url(self.url)!r}{oauth})"


@public
@attrs.frozen(repr=False)
class HttpServer(_UrlServer):
    """A server at a streamable-HTTP endpoint (the current MCP transport).

    ``headers`` go with every request (an ``Authorization`` header, say); they
    never appear in a ``repr``. ``oauth`` authorizes with a server that asks
    for OAuth (``True`` for the defaults; see :class:`~agentloop.mcp.OAuth`).
    ``auth`` is any other ``httpx2.Auth``; give one or the other.

    Raises:
        TypeError: ``oauth`` is not an ``OAuth`` or a bool.
        ValueError: both ``oauth`` and ``auth`` are given.
    """


@public
@attrs.frozen(repr=False)
class SseServer(_UrlServer):
    """A server at a legacy HTTP+SSE endpoint (the transport before streamable HTTP).

    ``headers``, ``auth`` and ``oauth`` are as for :class:`HttpServer`.
    """


#: Where a server is. An ``mcp`` SDK server object (``MCPServer`` or a low-level
#: ``Server``) is also accepted by :func:`~agentloop.mcp.open_mcp`: it is served
#: in-process, which is what tests want.
McpServerSpec: TypeAlias = StdioServer | HttpServer | SseServer


def default_name(server: Any) -> str:
    """A server's name when none is given: the command's, the URL host's, or the SDK server's."""
    if isinstance(server, StdioServer):
        return Path(server.command).name
    if isinstance(server, HttpServer | SseServer):
        return urlsplit(server.url).hostname or redact_url(server.url)
    return str(getattr(server, "name", None) or type(server).__name__)


_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _text(entry: Mapping[str, Any], key: str, where: str) -> str | None:
    """``entry[key]``, which must be a string if present."""
    value = entry.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}.{key} must be a string, got {value!r}")
    return value


def _expand(text: str, environ: Mapping[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ValueError(f"{where}: the environment variable {name} is not set")
        return environ[name]

    return _VARIABLE.sub(value, text)


def _expanded(table: Any, environ: Mapping[str, str], where: str) -> dict[str, str] | None:
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ValueError(f"{where} must be an object of strings, got {table!r}")
    expanded: dict[str, str] = {}
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"{where}.{key} must be a string, got {value!r}")
        expanded[str(key)] = _expand(str(value), environ, f"{where}.{key}")
    return expanded


def _spec(name: str, entry: Any, environ: Mapping[str, str]) -> McpServerSpec:
    where = f"mcpServers.{name}"
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} must be an object, got {entry!r}")
    kind = str(entry.get("type", entry.get("transport", ""))).lower().replace("_", "-")
    if "command" in entry:
        if kind not in ("", "stdio"):
            raise ValueError(f"{where}: a server with a command is a stdio server, not {kind!r}")
        if "url" in entry:
            raise ValueError(f"{where} has both a 'command' (stdio) and a 'url' (HTTP): keep one")
        command = _text(entry, "command", where) or ""
        if not command:
            raise ValueError(f"{where}.command is empty")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError(f"{where}.args must be a list of strings, got {args!r}")
        cwd = _text(entry, "cwd", where)
        return StdioServer(
            _expand(command, environ, f"{where}.command"),
            [_expand(a, environ, f"{where}.args") for a in args],
            env=_expanded(entry.get("env"), environ, f"{where}.env"),
            cwd=None if cwd is None else _expand(cwd, environ, f"{where}.cwd"),
        )
    if "url" in entry:
        url = _expand(_text(entry, "url", where) or "", environ, f"{where}.url")
        headers = _expanded(entry.get("headers"), environ, f"{where}.headers")
        oauth = _oauth_entry(entry.get("oauth"), environ, f"{where}.oauth")
        if kind == "sse":
            return SseServer(url, headers, oauth=oauth)
        if kind in ("", "http", "streamable-http", "streamablehttp"):
            return HttpServer(url, headers, oauth=oauth)
        raise ValueError(f"{where}: unknown transport {kind!r} (use 'http' or 'sse')")
    raise ValueError(f"{where} needs a 'command' (stdio) or a 'url' (HTTP)")


#: The keys of an ``"oauth"`` entry, and the OAuth fields they set.
_OAUTH_KEYS = {
    "scopes": "scopes",
    "clientId": "client_id",
    "clientSecret": "client_secret",
    "clientMetadataUrl": "client_metadata_url",
    "clientName": "client_name",
    "redirectPort": "redirect_port",
    "callbackPort": "redirect_port",
    "tokenStore": "token_store",
    "openBrowser": "open_browser",
    "authorizeTimeout": "authorize_timeout",
    "grant": "grant",
    "tokenEndpointAuthMethod": "token_endpoint_auth_method",
    "privateKey": "private_key",
    "signingAlgorithm": "signing_algorithm",
    "issuer": "issuer",
}
_OAUTH_TYPES: dict[str, tuple[type, ...]] = {
    "redirect_port": (int,),
    "open_browser": (bool,),
    "authorize_timeout": (int, float),
}


def _oauth_entry(value: Any, environ: Mapping[str, str], where: str) -> OAuth | None:
    """An ``"oauth"`` entry: ``true``, ``false`` or an object of the keys above."""
    if value is None or isinstance(value, bool):
        return _oauth(value)
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be true or an object, got {value!r}")
    from ._oauth import OAuth

    fields: dict[str, Any] = {}
    for key, item in value.items():
        name = _OAUTH_KEYS.get(str(key))
        if name is None:
            known = ", ".join(sorted(_OAUTH_KEYS))
            raise ValueError(f"{where}: unknown key {key!r} (known: {known})")
        types = _OAUTH_TYPES.get(name)
        if name == "scopes":
            if isinstance(item, str):
                item = item.split()
            if not isinstance(item, list) or not all(isinstance(s, str) for s in item):
                raise ValueError(f"{where}.{key} must be a list of strings, got {item!r}")
            item = [_expand(s, environ, f"{where}.{key}") for s in item]
        elif types is not None:
            if isinstance(item, bool) != (bool in types) or not isinstance(item, types):
                kind = "true or false" if bool in types else "a number"
                raise ValueError(f"{where}.{key} must be {kind}, got {item!r}")
        elif isinstance(item, str):
            item = _expand(item, environ, f"{where}.{key}")
        else:
            raise ValueError(f"{where}.{key} must be a string, got {item!r}")
        fields[name] = item
    try:
        return OAuth(**fields)
    except ValueError as error:
        raise ValueError(f"{where}: {error}") from None


@public
def load_mcp_config(
    config: Mapping[str, Any] | str | os.PathLike[str],
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, McpServerSpec]:
    """The servers of an ``mcpServers`` configuration, by name, in the file's order.

    ``config`` is the parsed JSON or the path of the file. ``${NAME}`` in a
    command, an argument, an env or header value, a URL or a cwd is replaced
    by the environment variable ``NAME`` (from ``environ``, default
    ``os.environ``), so secrets can stay out of the file; so is it in the
    string values of an ``"oauth"`` entry (``true``, or an object with
    ``scopes``, ``clientId``, ``clientSecret``, ``clientMetadataUrl``,
    ``redirectPort``... see :class:`~agentloop.mcp.OAuth`). Entries with
    ``"disabled": true`` are left out.

    Raises:
        OSError: the file cannot be read.
        ValueError: the file is not JSON, has no ``mcpServers`` object, an entry
            is malformed, or a variable it names is not set.
    """
    if not isinstance(config, Mapping):
        path = Path(config)
        text = path.read_text(encoding="utf-8")
        try:
            config = loads(text)
        except ValueError as error:  # not JSON, or nested too deep to read
            raise ValueError(f"{path} is not JSON: {error}") from error
    servers = config.get("mcpServers") if isinstance(config, Mapping) else None
    if not isinstance(servers, Mapping):
        raise ValueError("an MCP configuration needs an 'mcpServers' object")
    env = os.environ if environ is None else environ
    return {
        str(name): _spec(str(name), entry, env)
        for name, entry in servers.items()
        if not (isinstance(entry, Mapping) and entry.get("disabled") is True)
    }
