"""A stdio MCP server whose tools ask things of the client, for the terminal agent's tests.

    python tests/mcp_asking_server.py

Its tools ask through resolvers (``Resolve``), which the SDK serves on every protocol:
standalone requests on 2025-11-25 and before, an ``InputRequiredResult`` that the
client answers by calling again on 2026-07-28 (what ``auto`` negotiates here).

Tools: ``order`` asks the user where to deliver (a form with defaults), ``title``
asks the client's model for a title (sampling), ``roots`` lists the client's roots.
"""

from __future__ import annotations

import json
from typing import Annotated

import pydantic
from mcp.server.elicitation import ElicitationResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resolve import Elicit, ListRoots, Resolve, Sample
from mcp.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent

server = MCPServer("shop")


class Delivery(pydantic.BaseModel):
    address: str = pydantic.Field(title="Address", description="Street and number")
    floor: int = pydantic.Field(default=0, ge=0, le=200, title="Floor")
    speed: str = pydantic.Field(
        default="normal", title="Speed", json_schema_extra={"enum": ["normal", "express"]}
    )


def where(item: str) -> Elicit[Delivery]:
    return Elicit(f"Where should the {item} go?", Delivery)


@server.tool()
async def order(item: str, delivery: Annotated[ElicitationResult[Delivery], Resolve(where)]) -> str:
    """Order an item, asking the user where to deliver it."""
    if delivery.action != "accept":
        return f"not ordered ({delivery.action})"
    data = delivery.data
    return f"{item} to {data.address}, floor {data.floor}, {data.speed}"


def ask_model(text: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=text))
    return Sample([message], max_tokens=20)


@server.tool()
async def title(text: str, result: Annotated[CreateMessageResult, Resolve(ask_model)]) -> str:
    """A title from the client's model."""
    assert result.content.type == "text"
    return f"title: {result.content.text}"


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def roots(listed: Annotated[ListRootsResult, Resolve(ask_roots)]) -> str:
    """The client's roots."""
    return json.dumps([str(root.uri) for root in listed.roots])


if __name__ == "__main__":
    server.run("stdio")
