"""The values of an MCP server's resources and prompts, and their conversions to agentloop's."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import attrs
import mcp.types as mcp_types

from .._types import AssistantContent, ImageContent, TextContent, ToolResultContent
from ._base import public
from ._content import DEFAULT_MAX_IMAGE_BYTES, IMAGE_TYPES, cap, content_block, describe_size

if TYPE_CHECKING:
    from .._secrets import Redactor

__all__ = [
    "McpPrompt",
    "McpPromptArgument",
    "McpResource",
    "McpResourceContents",
    "McpResourceTemplate",
    "as_content",
    "assistant_block",
    "capped",
    "contents",
    "prompt_block",
    "redacted",
    "resource_line",
    "template_line",
]

_TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/yaml")


# --------------------------------------------------------------------------- values


@public
@attrs.frozen
class McpResource:
    """A resource a server lists (``resources/list``).

    Attributes:
        uri: Its URI, which :meth:`McpConnection.read_resource` takes.
        name: The server's name for it.
        title: A human-readable title, or None.
        description: What it is, or None.
        mime_type: Its MIME type, if the server says.
        size: Its size in bytes, if the server says.
    """

    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    size: int | None = None


@public
@attrs.frozen
class McpResourceTemplate:
    """A family of resources whose URIs follow a template (``resources/templates/list``).

    Attributes:
        uri_template: An RFC 6570 URI template, such as ``note://{name}``.
        name, title, description, mime_type: As for :class:`McpResource`.
    """

    uri_template: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None


@public
@attrs.frozen
class McpResourceContents:
    """One part of a resource as read, unconverted: its text or its bytes.

    Attributes:
        uri: The part's URI (the resource's, or one within it).
        mime_type: Its MIME type, if the server says.
        text: The text of a text resource (credentials redacted), else None.
        data: The bytes of a binary resource, else None.
    """

    uri: str
    mime_type: str | None = None
    text: str | None = None
    data: bytes | None = attrs.field(default=None, repr=False)


@public
@attrs.frozen
class McpPromptArgument:
    """An argument a prompt takes."""

    name: str
    description: str | None = None
    required: bool = False


def _arguments(value: Iterable[McpPromptArgument]) -> tuple[McpPromptArgument, ...]:
    return tuple(value)


@public
@attrs.frozen
class McpPrompt:
    """A prompt a server offers (``prompts/list``).

    Attributes:
        name: The name :meth:`McpConnection.get_prompt` takes.
        title: A human-readable title, or None.
        description: What it is for, or None.
        arguments: The arguments it takes, in the server's order.
    """

    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[McpPromptArgument, ...] = attrs.field(default=(), converter=_arguments)


# --------------------------------------------------------------------------- conversions


def decode(blob: str) -> bytes:
    try:
        return base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        return base64.b64decode(blob + "==", validate=False)


def is_text_type(mime: str | None) -> bool:
    if mime is None:
        return False
    mime = mime.split(";", 1)[0].strip().lower()
    return mime.startswith("text/") or mime in _TEXT_TYPES or mime.endswith(("+json", "+xml"))


def contents(item: Any, redact: Redactor) -> McpResourceContents:
    uri = str(item.uri)
    if isinstance(item, mcp_types.TextResourceContents):
        return McpResourceContents(uri, item.mime_type, text=redact.text(item.text))
    return McpResourceContents(uri, item.mime_type, data=decode(item.blob))


def as_content(part: McpResourceContents, *, header: bool) -> ToolResultContent:
    """A part of a resource as a content block: its text, an image, or a line describing it.

    A binary part of a text type (``text/*``, JSON, XML) that is valid UTF-8 is its text.
    """
    prefix = f"[resource {part.uri}]\n" if header else ""
    if part.text is not None:
        return TextContent(prefix + part.text)
    data = part.data or b""
    mime = part.mime_type or "application/octet-stream"
    if mime in IMAGE_TYPES:
        return ImageContent(base64.b64encode(data).decode("ascii"), mime)
    if is_text_type(mime):
        try:
            return TextContent(prefix + data.decode("utf-8"))
        except UnicodeDecodeError:
            pass
    return TextContent(f"[resource {part.uri}: {mime}, {describe_size(len(data))}]")


def redacted(block: ToolResultContent, redact: Redactor) -> ToolResultContent:
    return TextContent(redact.text(block.text)) if isinstance(block, TextContent) else block


def capped(content: list[ToolResultContent], max_bytes: int) -> list[ToolResultContent]:
    within = cap(content, max_bytes, DEFAULT_MAX_IMAGE_BYTES)
    return content if within is None else within[0]


def prompt_block(block: Any, redact: Redactor) -> ToolResultContent:
    if isinstance(block, mcp_types.EmbeddedResource):
        part = contents(block.resource, redact)
        return as_content(part, header=True)
    return redacted(content_block(block, []), redact)


def assistant_block(block: ToolResultContent) -> AssistantContent:
    if isinstance(block, ImageContent):  # an assistant message holds no images
        size = len(decode(block.data))
        return TextContent(f"[image: {block.mime_type}, {describe_size(size)}]")
    return block


def resource_line(resource: McpResource) -> str:
    facts = [f for f in (resource.mime_type, _size_text(resource.size)) if f]
    line = f"- {resource.uri}" + (f" ({', '.join(facts)})" if facts else "")
    line += f": {resource.title or resource.name}"
    return line + (f". {resource.description}" if resource.description else "")


def template_line(template: McpResourceTemplate) -> str:
    line = f"- {template.uri_template}" + (f" ({template.mime_type})" if template.mime_type else "")
    line += f": {template.title or template.name}"
    return line + (f". {template.description}" if template.description else "")


def _size_text(size: int | None) -> str | None:
    return None if size is None else describe_size(size)
