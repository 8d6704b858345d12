"""From an MCP tool result to an agentloop one."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp.types as mcp_types

from .._types import ImageContent, TextContent, ToolResultContent
from ._base import DEFAULT_MAX_RESULT_BYTES

__all__ = [
    "DEFAULT_MAX_IMAGE_BYTES",
    "IMAGE_TYPES",
    "cap",
    "content_block",
    "convert_result",
    "describe_size",
]

#: Bytes (decoded) one image may have; larger ones are described instead.
DEFAULT_MAX_IMAGE_BYTES = 5 * 1024 * 1024

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def _size(data: str) -> int:
    """The decoded size of base64 ``data`` (an estimate if it is not valid base64)."""
    try:
        return len(base64.b64decode(data, validate=True))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def describe_size(size: int) -> str:
    if size < 1024:
        return "1 byte" if size == 1 else f"{size} bytes"
    kib = size / 1024
    if round(kib, 1) < 1024:
        return f"{kib:.1f} KiB"
    return f"{kib / 1024:.1f} MiB"


def content_block(block: Any, extras: list[dict[str, Any]]) -> ToolResultContent:
    """One MCP content block as agentloop content; what text cannot hold goes to ``extras``."""
    if isinstance(block, mcp_types.TextContent):
        return TextContent(block.text)
    if isinstance(block, mcp_types.ImageContent):
        return ImageContent(block.data, block.mime_type)
    if isinstance(block, mcp_types.AudioContent):
        extras.append({"type": "audio", "mime_type": block.mime_type, "data": block.data})
        return TextContent(f"[audio: {block.mime_type}, {describe_size(_size(block.data))}]")
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
        if mime in IMAGE_TYPES:
            return ImageContent(resource.blob, mime)
        extras.append(
            {"type": "resource", "uri": str(resource.uri), "mime_type": mime, "blob": resource.blob}
        )
        return TextContent(
            f"[resource {resource.uri}: {mime}, {describe_size(_size(resource.blob))}]"
        )
    kind = getattr(block, "type", type(block).__name__)
    return TextContent(f"[unsupported content: {kind}]")


def convert_result(
    result: mcp_types.CallToolResult,
    *,
    max_bytes: int = DEFAULT_MAX_RESULT_BYTES,
    max_image_bytes: int = DEFAULT_MAX_IMAGE_BYTES,
) -> tuple[tuple[ToolResultContent, ...], dict[str, Any]]:
    """The content and ``details`` of an agentloop result for an MCP ``CallToolResult``.

    Text and images map directly; audio, resource links and non-image blobs
    become a text line describing them, their data kept in
    ``details["content"]``; embedded text resources become their text.
    ``structuredContent`` goes to ``details["structured"]``, and, when the
    server sent no content besides, into the text as JSON.

    The result is capped: its text blocks together keep at most ``max_bytes``
    bytes of UTF-8 (cut on a character boundary; later blocks are dropped) and
    a last block says how much the server sent; an image over
    ``max_image_bytes`` becomes a line describing it; structured content or
    binary data in ``details`` over ``max_bytes`` is left out, its size noted
    (``details["omitted"]``), never cut into invalid JSON.
    """
    extras: list[dict[str, Any]] = []
    content = [content_block(block, extras) for block in result.content]
    details: dict[str, Any] = {}
    omitted: dict[str, int] = {}
    structured = result.structured_content
    if structured is not None:
        encoded = json.dumps(structured, ensure_ascii=False)
        if len(encoded.encode("utf-8")) <= max_bytes:
            details["structured"] = structured
        else:
            omitted["structured"] = len(encoded.encode("utf-8"))
        if not content:
            content.append(TextContent(encoded))
    kept_extras: list[dict[str, Any]] = []
    for extra in extras:
        key = "data" if "data" in extra else "blob" if "blob" in extra else None
        if key is not None and len(extra[key]) > max_bytes:
            size = _size(extra[key])
            extra = {k: v for k, v in extra.items() if k != key} | {"omitted_bytes": size}
        kept_extras.append(extra)
    if kept_extras:
        details["content"] = kept_extras
    capped = cap(content, max_bytes, max_image_bytes)
    if capped is not None:
        content, total = capped
        if total > max_bytes:
            omitted["text"] = total
    if omitted:
        details["omitted"] = omitted
    return tuple(content), details


def cap(
    content: list[ToolResultContent], max_bytes: int, max_image_bytes: int
) -> tuple[list[ToolResultContent], int] | None:
    """``content`` within the limits and the text's full size, or None if it was within."""
    total = 0
    for block in content:
        if isinstance(block, TextContent):
            total += len(block.text.encode("utf-8", "surrogatepass"))
    too_big_image = any(
        isinstance(b, ImageContent) and _size(b.data) > max_image_bytes for b in content
    )
    if total <= max_bytes and not too_big_image:
        return None
    kept: list[ToolResultContent] = []
    budget = max_bytes
    for block in content:
        if isinstance(block, ImageContent):
            size = _size(block.data)
            if size > max_image_bytes:
                block = TextContent(
                    f"[image: {block.mime_type}, {describe_size(size)}, over the "
                    f"{describe_size(max_image_bytes)} limit: left out]"
                )
            else:
                kept.append(block)
                continue
        data = block.text.encode("utf-8", "surrogatepass")
        if budget <= 0:
            continue
        if len(data) > budget:  # cut on a character boundary
            block = TextContent(data[:budget].decode("utf-8", "ignore"))
            data = data[:budget]
        budget -= len(data)
        kept.append(block)
    if total > max_bytes:
        kept.append(
            TextContent(
                f"[Result truncated: the server sent {describe_size(total)} of text; "
                f"the first {describe_size(max_bytes)} are shown.]"
            )
        )
    return kept, total
