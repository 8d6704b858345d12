"""The model's tools over a server's resources: ``list_resources``, ``read_resource``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import mcp.types as mcp_types

from .._tool import Claim, ToolContext, ToolResult, model_tool_name
from .._types import TextContent
from ._base import McpRequestError, public
from ._config import ServerHost
from ._resource_values import capped, resource_line, template_line

if TYPE_CHECKING:
    from .._types import ToolResultContent
    from ._resource_values import McpResource, McpResourceTemplate

__all__ = ["McpResourceTool", "resource_tools_of"]


class ResourceHost(ServerHost, Protocol):
    """What the tools need of their connection (an ``McpConnection``)."""

    async def list_resources(self) -> list[McpResource]: ...

    async def list_resource_templates(self) -> list[McpResourceTemplate]: ...

    async def read_resource(self, uri: str) -> list[ToolResultContent]: ...


def resource_tools_of(connection: ResourceHost) -> list[McpResourceTool]:
    """The two tools of a connection whose server has resources."""
    prefix = connection.prefix if connection.prefix is not None else connection.name
    list_name = model_tool_name(prefix, "list_resources")
    read_name = model_tool_name(prefix, "read_resource")
    return [
        McpResourceTool(
            connection,
            list_name,
            "list",
            f"List {connection.name} resources",
            f"List the resources (documents, files, data) of the MCP server '{connection.name}': "
            f"their URIs, types, names and descriptions, and the URI templates of "
            f"resources made on demand. Read one with {read_name}.",
            {"type": "object", "properties": {}, "additionalProperties": False},
        ),
        McpResourceTool(
            connection,
            read_name,
            "read",
            f"Read a {connection.name} resource",
            f"Read a resource of the MCP server '{connection.name}' by its URI: one that "
            f"{list_name} lists, or a template's URI with its placeholders filled in.",
            {
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
                "required": ["uri"],
                "additionalProperties": False,
            },
        ),
    ]


async def resource_listing(connection: ResourceHost) -> str:
    """What ``list_resources`` tells the model: the resources, then the templates."""
    resources = await connection.list_resources()
    try:
        templates = await connection.list_resource_templates()
    except McpRequestError as error:
        if error.code != mcp_types.METHOD_NOT_FOUND:
            raise
        templates = []
    if not resources and not templates:
        return f"The MCP server '{connection.name}' has no resources."
    lines: list[str] = []
    if resources:
        lines.append(f"Resources of the MCP server '{connection.name}':")
        lines += [resource_line(r) for r in resources]
    if templates:
        lines.append("Resource templates (fill in the {placeholders} to make a URI):")
        lines += [template_line(t) for t in templates]
    return "\n".join(lines)


def _uri_subject(params: Mapping[str, Any]) -> tuple[str, str]:
    return ("uri", str(params.get("uri", "")))


@public
@attrs.frozen(eq=False)
class McpResourceTool:
    """``PREFIX__list_resources`` or ``PREFIX__read_resource``: a server's resources, for a model.

    Made by :meth:`McpConnection.resource_tools`. Read-only: a call may run
    again after a crash (``replay_safe``), and claims the server's key
    ``"mcp:<name>"`` as read, so it runs beside the server's other read-only
    calls.
    """

    connection: ResourceHost = attrs.field(repr=False)
    name: str
    kind: str  # "list" or "read"
    label: str = attrs.field(repr=False)
    description: str = attrs.field(repr=False)
    parameters_schema: dict[str, Any] = attrs.field(repr=False)

    replay_safe = True

    @property
    def timeout(self) -> float | None:
        """Seconds a call may take: the connection's ``call_timeout``."""
        return self.connection.config.call_timeout

    @property
    def permission_subject(self) -> Callable[[Mapping[str, Any]], tuple[str, str]] | None:
        """For ``read_resource``: ``("uri", <the URI>)``, so a rule can name URIs.

        ``Permissions(allow=["docs__read_resource(note://*)"])`` lets the model
        read notes only. ``list_resources`` has no subject.
        """
        return _uri_subject if self.kind == "read" else None

    def resources(self, params: dict[str, Any]) -> Claim:
        """``Claim(reads={"mcp:<server name>"})``."""
        return Claim(reads={f"mcp:{self.connection.name}"})

    async def execute(self, params: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """List the resources, or read the one at ``params["uri"]``.

        Raises:
            McpRequestError: the server refused (an unknown URI), is
                unreachable, or timed out.
        """
        connection = self.connection
        if self.kind == "list":
            text = connection.redactor.text(await resource_listing(connection))
            limit = connection.config.max_result_bytes
            return ToolResult(tuple(capped([TextContent(text)], limit)))
        content = await connection.read_resource(str(params["uri"]))
        if not content:
            content = [TextContent(f"The resource {params['uri']} is empty.")]
        return ToolResult(tuple(content))
