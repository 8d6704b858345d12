"""How agentloop talks to MCP servers: :class:`McpConfig`, one value for every entry point.

:func:`~agentloop.mcp.open_mcp`, :func:`~agentloop.mcp.open_mcp_servers` and
:class:`~agentloop.mcp.McpConnection` take it alike, as the OpenAPI tools take an
:class:`~agentloop.openapi.OpenApiConfig`. Their keyword arguments of before it
still work, with a :class:`DeprecationWarning` (:func:`config_with`).
Needs no MCP SDK.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from .._check import number_field
from ._base import DEFAULT_MAX_RESULT_BYTES, public
from ._request_values import LOG_LEVELS, ElicitationHandler, LogHandler, McpRoot
from ._sampling import McpSampling

if TYPE_CHECKING:
    from .._secrets import Redactor

__all__ = ["McpConfig", "ServerHost", "config_with"]

#: Seconds a tool call (or a resource or prompt request) may take, by default.
DEFAULT_CALL_TIMEOUT = 300.0
#: Seconds connecting and the handshake may take, by default.
DEFAULT_CONNECT_TIMEOUT = 30.0


def _roots(
    value: Iterable[McpRoot | str | os.PathLike[str]] | None,
) -> tuple[McpRoot, ...] | None:
    return None if value is None else tuple(McpRoot.of(root) for root in value)


def _check_protocol(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value in ("auto", "legacy"):
        return
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # light: not the SDK itself

    if value not in MODERN_PROTOCOL_VERSIONS:
        versions = ", ".join(repr(v) for v in MODERN_PROTOCOL_VERSIONS)
        raise ValueError(f"protocol must be 'auto', 'legacy' or one of {versions}, got {value!r}")


def _check_log_level(instance: object, attribute: attrs.Attribute[str | None], value: Any) -> None:
    if value is not None and value not in LOG_LEVELS:
        levels = ", ".join(repr(level) for level in LOG_LEVELS)
        raise ValueError(f"log_level must be None or one of {levels}, got {value!r}")


@public
@attrs.frozen(kw_only=True)
class McpConfig:
    """How agentloop connects to MCP servers, and what it offers them.

    One value for :func:`~agentloop.mcp.open_mcp`,
    :func:`~agentloop.mcp.open_mcp_servers` and
    :class:`~agentloop.mcp.McpConnection`, with the same defaults for each::

        async with open_mcp(server, McpConfig(prefix="time", call_timeout=60)) as time:
            ...

    Attributes:
        prefix: Tool names become ``PREFIX__tool``; the server is still called
            with the tool's own name. A string is the prefix; ``True`` is the
            server's name; ``False`` is no prefix. None (the default): no
            prefix for one server (``open_mcp``), the server's name for the
            servers of a configuration (``open_mcp_servers``, where a string
            is refused: the servers' tools would clash).
        call_timeout: Seconds a tool call may take (the tools' ``timeout``);
            past it the call is cancelled on the server. A resource or prompt
            request waits as long. None: no limit.
        connect_timeout: Seconds to connect and complete the handshake, for
            the first connection and any reconnection.
        protocol: ``"auto"`` (ask the server which protocol it speaks, and
            fall back to the ``initialize`` handshake of older servers),
            ``"legacy"`` (the handshake only), or a protocol version to speak.
        max_result_bytes: Bytes of text (UTF-8) one tool result may put into
            the context; more is cut on a character boundary, with a last line
            giving the full size. Images over 5 MiB are described instead;
            structured content or binary data in ``details`` over the limit
            is left out, its size in ``details["omitted"]``.
        destructive_exclusive: A call of a tool the server hints is destructive
            (``destructiveHint``, and not ``readOnlyHint``) claims the key
            ``"mcp:<name>"`` as written, so it runs apart from the server's
            other read-only and destructive calls, anywhere in the agent tree.
            False: such a call claims nothing. A read-only tool's calls always
            claim the key as read (they run together); see
            :meth:`~agentloop.mcp.McpToolAdapter.resources`.
        elicitation: Answers the server's questions to the user
            (``elicitation/create``): a plain or async function of an
            :class:`~agentloop.mcp.Elicitation` returning an
            :class:`~agentloop.mcp.ElicitationAnswer`. An accepted form gets
            the schema's defaults for fields it leaves out and is checked
            against the schema; content that does not fit is handed back with
            ``problems`` (three tries, then ``cancel``). None: the client does
            not declare elicitation, and a server that asks gets the error
            "Elicitation not supported".
        sampling: Lets the server ask a model for replies
            (``sampling/createMessage``); see :class:`~agentloop.mcp.McpSampling`.
            None: not declared.
        roots: The directories the server may work in (paths, made absolute,
            or ``file://`` URIs), answered to ``roots/list``; change them with
            :meth:`~agentloop.mcp.McpConnection.set_roots`. None: not declared.
        on_log: Called (plain or async) with each
            :class:`~agentloop.mcp.McpLogMessage` the server sends; its
            exceptions are logged. Every message is also a record of the
            ``agentloop.mcp.server`` logger at the matching level, and, while
            one of the server's tools runs, a progress line of that call
            (``[level] text``).
        log_level: The least severe level the server should send
            (``"debug"`` … ``"emergency"``): ``logging/setLevel`` on older
            connections, a per-request opt-in on 2026-07-28 ones. None: the
            server's default (2026-07-28 servers then send none).
        on_tools_changed: Called (plain or async) with the connection when its
            tools changed: the server said so and was listed again, or it came
            back from a reconnection with other tools. Its exceptions are
            logged (``agentloop.mcp``), not raised.
        on_resource_updated: Called (plain or async) with the URI of a
            resource subscribed to with
            :meth:`~agentloop.mcp.McpConnection.subscribe` when the server says
            it changed, in order; its exceptions are logged. With several
            servers, set ``connection.on_resource_updated`` on each to tell
            them apart.

    Raises:
        ValueError: a timeout is not a positive number, ``max_result_bytes``
            is not an integer >= 1, or ``protocol`` or ``log_level`` is not one
            of those named.
    """

    prefix: str | bool | None = None
    call_timeout: float | None = attrs.field(
        default=DEFAULT_CALL_TIMEOUT, validator=number_field(above=0, optional=True)
    )
    connect_timeout: float = attrs.field(
        default=DEFAULT_CONNECT_TIMEOUT, validator=number_field(above=0)
    )
    protocol: str = attrs.field(default="auto", validator=_check_protocol)
    max_result_bytes: int = attrs.field(
        default=DEFAULT_MAX_RESULT_BYTES, validator=number_field(at_least=1, integer=True)
    )
    destructive_exclusive: bool = True
    elicitation: ElicitationHandler | None = None
    sampling: McpSampling | None = None
    roots: tuple[McpRoot, ...] | None = attrs.field(default=None, converter=_roots)
    on_log: LogHandler | None = None
    log_level: str | None = attrs.field(default=None, validator=_check_log_level)
    # Given the McpConnection; typed Any here: the connection's module imports this one.
    on_tools_changed: Callable[[Any], Any] | None = None
    on_resource_updated: Callable[[str], Any] | None = None


_FIELDS = frozenset(field.name for field in attrs.fields(McpConfig))


def config_with(config: McpConfig | None, options: Mapping[str, Any], caller: str) -> McpConfig:
    """``config`` (default ``McpConfig()``) with the keyword arguments of before it applied.

    Those arguments are deprecated: a :class:`DeprecationWarning` names them
    and the new form, at the line that called ``caller``.

    Raises:
        TypeError: ``config`` is not an :class:`McpConfig`, or an option is not
            one of its fields.
        ValueError: as for :class:`McpConfig`.
    """
    if config is None:
        config = McpConfig()
    elif not isinstance(config, McpConfig):
        raise TypeError(f"{caller}() takes an McpConfig as its options, got {config!r}")
    if not options:
        return config
    unknown = sorted(set(options) - _FIELDS)
    if unknown:
        raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}")
    names = ", ".join(f"{name}=..." for name in options)
    warnings.warn(
        f"{caller}(..., {names}) is deprecated: give the options as one value, "
        f"{caller}(..., McpConfig({names}))",
        DeprecationWarning,
        stacklevel=3,  # the line that called ``caller``
    )
    return attrs.evolve(config, **options)


class ServerHost(Protocol):
    """What a part made for a connection (a tool, a tool list) reads of it: an ``McpConnection``."""

    name: str
    prefix: str | None

    @property
    def config(self) -> McpConfig: ...

    @property
    def redactor(self) -> Redactor: ...
