"""From an MCP tool result to an agentloop one."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp.types as mcp_types

from .._types import ImageContent, TextContent, ToolResultContent

__all__ = ["convert_result"]

_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def _size(data: str) -> int:
    """The decoded size of base64 ``data`` (an estimate if it is not valid base64)."""
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def _describe_size(size: int) -> str:
    if size < 1024:
        return "1 byte" if size == 1 else f"{size} bytes"
    kib = size / 1024
    if round(kib, 1) < 1024:
        return f"{kib:.1f} KiB"
    return f"{kib / 1024:.1f} MiB"


def _block(block: Any, extras: list[dict[str, Any]]) -> ToolResultContent:
    """One MCP content block as agentloop content; what text cannot hold goes to ``extras``."""
    if isinstance(block, mcp_types.TextContent):
        return TextContent(block.text)
    if isinstance(block, mcp_types.ImageContent):
        return ImageContent(block.data, block.mime_type)
    if isinstance(block, mcp_types.AudioContent):
        extras.append({"type": "audio", "mime_type": block.mime_type, "data": block.data})
        return TextContent(f"[audio: {block.mime_type}, {_describe_size(_size(block.data))}]")
    if isinstance(block, mcp_types.ResourceLink):
        parts = [f"[resource link: {block.name} <{block.uri}>"]
        if block.mime_type:
            parts.append(f" ({block.mime_type})")
        if block.description:
            parts.append(f": {block.description}")
        extras.append({"type": "resource_link", **block.model_dump(mode="json", exclude_none=True)})
        return TextContent("".join(parts) + "]")
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return TextContent(f"[resource {resource.uri}]\n{resource.text}")
        mime = resource.mime_type or "application/octet-stream"
        if mime in _IMAGE_TYPES:
            return ImageContent(resource.blob, mime)
        extras.append(
            {"type": "resource", "uri": str(resource.uri), "mime_type": mime, "blob": resource.blob}
        )
        return TextContent(
            f"[resource {resource.uri}: {mime}, {_describe_size(_size(resource.blob))}]"
        )
    kind = getattr(block, "type", type(block).__name__)
    return TextContent(f"[unsupported content: {kind}]")


def convert_result(
    result: mcp_types.CallToolResult,
) -> tuple[tuple[ToolResultContent, ...], dict[str, Any]]:
    """The content and ``details`` of an agentloop result for an MCP ``CallToolResult``.

    Text and images map directly; audio, resource links and non-image blobs
    become a text line describing them, their data kept in
    ``details["content"]``; embedded text resources become their text.
    ``structuredContent`` goes to ``details["structured"]``, and, when the
    server sent no content besides, into the text as JSON.
    """
    extras: list[dict[str, Any]] = []
    content = [_block(block, extras) for block in result.content]
    details: dict[str, Any] = {}
    structured = result.structured_content
    if structured is not None:
        details["structured"] = structured
        if not content:
            content.append(TextContent(json.dumps(structured, ensure_ascii=False)))
    if extras:
        details["content"] = extras
    return tuple(content), details
