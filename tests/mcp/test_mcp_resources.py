"""MCP resources and prompts, against real servers: in-process, stdio, and server-everything.

The test server is :func:`build_library` (a low-level SDK ``Server``: paged
resources, text and binary, a template, prompts with arguments, subscriptions
on both protocols). Run as a script, this file serves it over stdio::

    python tests/test_mcp_resources.py [--secret-env NAME]

``--secret-env NAME`` puts the value of the environment variable ``NAME`` into
the text of ``note://env`` (to check that credentials sent to the server are
redacted). Server-everything (npm) runs as ``mcp-server-everything stdio``.
No test sleeps: waits are on trio events, bounded with ``fail_after``.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import re
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
import trio.testing
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp.types import (
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    EmbeddedResource,
    EmptyResult,
    GetPromptRequestParams,
    GetPromptResult,
    ImageContent,
    ListPromptsResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    Prompt,
    PromptArgument,
    PromptMessage,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    SubscribeRequestParams,
    TextContent,
    TextResourceContents,
    Tool,
    UnsubscribeRequestParams,
)

if __name__ == "__main__":  # run as a server script: the shared helpers are one folder up
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from server_common import png_1x1

import agentloop as al
from agentloop.mcp import (
    McpConfig,
    McpPrompt,
    McpPromptArgument,
    McpRequestError,
    McpResource,
    McpResourceContents,
    McpResourceTemplate,
    StdioServer,
    open_mcp,
)
from agentloop.providers import ScriptedProvider, call, reply
from agentloop.testing import EventRecorder

PROTOCOLS = pytest.mark.parametrize("protocol", ["auto", "legacy"])
BOUND = 30.0  # seconds: a ceiling on waits for real processes, never the expected time
PNG = png_1x1()
PNG_B64 = base64.b64encode(PNG).decode("ascii")
BIG_TEXT = "é" * 150  # 300 bytes of UTF-8
SECRET = "sk-test-0123456789abcdef"

# --------------------------------------------------------------------------- the server

#: The resources of :func:`build_library`: uri -> (name, title, description, mime, content).
RESOURCES: dict[str, tuple[str, str | None, str | None, str, str | bytes]] = {
    "note://greeting": ("greeting", "Greeting", "A friendly note", "text/plain", "Hello, world"),
    "image://logo.png": ("logo", None, None, "image/png", PNG),
    "data://archive.bin": ("archive", None, "Raw bytes", "application/octet-stream", b"\0\1\2\xff"),
    "data://config.json": ("config", None, None, "application/json", b'{"debug": true}'),
    "note://big": ("big", None, None, "text/plain", BIG_TEXT),
}
PAGE = 2  # resources per page of resources/list


def build_library(secret_env: str | None = None) -> Server[Any]:
    """The test server: see the module docstring."""
    bus = InMemorySubscriptionBus()
    legacy_subscribed: set[str] = set()  # resources/subscribe (handshake-era clients)
    uris = list(RESOURCES)

    async def list_resources(
        ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = uris[start : start + PAGE]
        resources = [
            Resource(
                uri=uri,
                name=RESOURCES[uri][0],
                title=RESOURCES[uri][1],
                description=RESOURCES[uri][2],
                mime_type=RESOURCES[uri][3],
                size=len(RESOURCES[uri][4]) if uri == "note://greeting" else None,
            )
            for uri in page
        ]
        more = start + PAGE < len(uris)
        return ListResourcesResult(
            resources=resources, next_cursor=str(start + PAGE) if more else None
        )

    async def list_templates(
        ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        template = ResourceTemplate(
            uri_template="note://{name}",
            name="note",
            title="Note by name",
            description="Any note",
            mime_type="text/plain",
        )
        return ListResourceTemplatesResult(resource_templates=[template])

    async def read_resource(ctx: Any, params: ReadResourceRequestParams) -> ReadResourceResult:
        uri = str(params.uri)
        if uri == "note://env" and secret_env:
            text = f"token={os.environ.get(secret_env, '')}"
            return ReadResourceResult(contents=[TextResourceContents(uri=uri, text=text)])
        if uri in RESOURCES:
            mime, content = RESOURCES[uri][3:]
            if isinstance(content, str):
                item: Any = TextResourceContents(uri=uri, text=content, mime_type=mime)
            else:
                blob = base64.b64encode(content).decode("ascii")
                item = BlobResourceContents(uri=uri, blob=blob, mime_type=mime)
            return ReadResourceResult(contents=[item])
        if uri == "note://slow":
            await anyio.sleep_forever()
        if uri.startswith("note://") and uri != "note://missing":
            name = uri.removeprefix("note://")
            return ReadResourceResult(
                contents=[
                    TextResourceContents(uri=uri, text=f"Note {name}", mime_type="text/plain")
                ]
            )
        raise MCPError(INVALID_PARAMS, f"Resource not found: {uri}")

    async def subscribe(ctx: Any, params: SubscribeRequestParams) -> EmptyResult:
        legacy_subscribed.add(str(params.uri))
        return EmptyResult()

    async def unsubscribe(ctx: Any, params: UnsubscribeRequestParams) -> EmptyResult:
        legacy_subscribed.discard(str(params.uri))
        return EmptyResult()

    async def list_prompts(ctx: Any, params: PaginatedRequestParams | None) -> ListPromptsResult:
        if params is None or not params.cursor:
            greet = Prompt(
                name="greet",
                title="Greeting",
                description="Greet someone",
                arguments=[
                    PromptArgument(name="name", description="Who to greet", required=True),
                    PromptArgument(name="style"),
                ],
            )
            return ListPromptsResult(prompts=[greet], next_cursor="2")
        return ListPromptsResult(prompts=[Prompt(name="review")])

    async def get_prompt(ctx: Any, params: GetPromptRequestParams) -> GetPromptResult:
        args = params.arguments or {}
        if params.name == "greet":
            if "name" not in args:
                raise MCPError(INVALID_PARAMS, "Missing required argument: name")
            style = f" in a {args['style']} way" if "style" in args else ""
            text = f"Say hello to {args['name']}{style}."
            return GetPromptResult(
                messages=[PromptMessage(role="user", content=TextContent(text=text))]
            )
        if params.name == "review":
            note = TextResourceContents(uri="note://greeting", text="Hello, world")
            blob = BlobResourceContents(
                uri="data://archive.bin", blob="AAEC/w==", mime_type="application/octet-stream"
            )
            image = ImageContent(data=PNG_B64, mime_type="image/png")
            return GetPromptResult(
                messages=[
                    PromptMessage(role="user", content=TextContent(text="Review this note:")),
                    PromptMessage(role="user", content=EmbeddedResource(resource=note)),
                    PromptMessage(role="user", content=EmbeddedResource(resource=blob)),
                    PromptMessage(role="user", content=image),
                    PromptMessage(role="assistant", content=TextContent(text="It is short.")),
                    PromptMessage(role="assistant", content=image),
                ]
            )
        raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        schema = {"type": "object", "properties": {"uri": {"type": "string"}}}
        return ListToolsResult(tools=[Tool(name="touch", input_schema=schema)])

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        uri = str((params.arguments or {})["uri"])
        await bus.publish(ResourceUpdated(uri=uri))  # reaches 2026-07-28 listen streams
        if uri in legacy_subscribed:
            await ctx.session.send_resource_updated(uri)
        return CallToolResult(content=[TextContent(text=f"touched {uri}")])

    return Server(
        "library",
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_subscriptions_listen=ListenHandler(bus),
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def build_toolbox() -> Server[Any]:
    """A server with tools only: no resources capability."""

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="noop", input_schema={"type": "object"})])

    return Server("toolbox", on_list_tools=list_tools)


def build_unsubscribable() -> Server[Any]:
    """A server with resources but no subscriptions (on either protocol)."""

    async def list_resources(
        ctx: Any, params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(resources=[])

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[])

    return Server("plain", on_list_resources=list_resources, on_list_tools=list_tools)


class Updates:
    """An ``on_resource_updated`` hook that records the URIs and wakes a waiter."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._changed = trio.Event()

    async def __call__(self, uri: str) -> None:
        await trio.lowlevel.checkpoint()
        self.uris.append(uri)
        self._changed.set()

    async def wait_for(self, count: int) -> list[str]:
        with trio.fail_after(BOUND):
            while len(self.uris) < count:
                self._changed = trio.Event()
                await self._changed.wait()
        return self.uris


def library(**options: Any) -> Any:
    return open_mcp(build_library(), McpConfig(prefix="lib", **options), name="library")


async def run_calls(
    tools: Any, *calls: tuple[str, dict[str, Any]]
) -> dict[str, al.ToolResultMessage]:
    """An agent whose model makes ``calls`` in one message; the results by call id."""
    script = [
        reply(*(call(name, args, id=f"c{i}") for i, (name, args) in enumerate(calls))),
        reply("done"),
    ]
    agent = al.Agent(ScriptedProvider(script), tools=tools)
    recorder = EventRecorder()
    async with agent.prompt("go") as events:
        await recorder.consume(events)
    return {m.tool_call_id: m for m in agent.messages if isinstance(m, al.ToolResultMessage)}


# --------------------------------------------------------------------------- resources


@PROTOCOLS
async def test_every_page_of_resources_is_listed(protocol: str) -> None:
    async with library(protocol=protocol) as lib:
        assert await lib.list_resources() == [
            McpResource(
                "note://greeting", "greeting", "Greeting", "A friendly note", "text/plain", 12
            ),
            McpResource("image://logo.png", "logo", mime_type="image/png"),
            McpResource(
                "data://archive.bin", "archive", None, "Raw bytes", "application/octet-stream"
            ),
            McpResource("data://config.json", "config", mime_type="application/json"),
            McpResource("note://big", "big", mime_type="text/plain"),
        ]
        assert await lib.list_resource_templates() == [
            McpResourceTemplate("note://{name}", "note", "Note by name", "Any note", "text/plain")
        ]


@PROTOCOLS
async def test_text_and_binary_resources_are_read_as_content(protocol: str) -> None:
    async with library(protocol=protocol, max_result_bytes=100) as lib:
        assert await lib.read_resource("note://greeting") == [al.TextContent("Hello, world")]
        assert await lib.read_resource("note://from-template") == [
            al.TextContent("Note from-template")
        ]
        assert await lib.read_resource("image://logo.png") == [
            al.ImageContent(PNG_B64, "image/png")
        ]
        assert await lib.read_resource("data://archive.bin") == [
            al.TextContent("[resource data://archive.bin: application/octet-stream, 4 bytes]")
        ]
        # Binary data of a text type is its text.
        assert await lib.read_resource("data://config.json") == [al.TextContent('{"debug": true}')]
        # Capped like a tool result: 100 bytes is 50 characters of "é".
        assert await lib.read_resource("note://big") == [
            al.TextContent("é" * 50),
            al.TextContent(
                "[Result truncated: the server sent 300 bytes of text; "
                "the first 100 bytes are shown.]"
            ),
        ]
        # Unconverted and uncapped: bytes as bytes.
        assert await lib.read_resource_contents("data://archive.bin") == [
            McpResourceContents(
                "data://archive.bin", "application/octet-stream", data=b"\0\1\2\xff"
            )
        ]
        assert await lib.read_resource_contents("note://big") == [
            McpResourceContents("note://big", "text/plain", text=BIG_TEXT)
        ]


@PROTOCOLS
async def test_an_unknown_resource_is_a_request_error_naming_server_and_method(
    protocol: str,
) -> None:
    async with library(protocol=protocol) as lib:
        with pytest.raises(McpRequestError) as raised:
            await lib.read_resource("note://missing")
    error = raised.value
    assert str(error) == (
        "MCP server 'library' refused resources/read 'note://missing': "
        "Resource not found: note://missing"
    )
    assert (error.server, error.method, error.code) == ("library", "resources/read", INVALID_PARAMS)
    assert isinstance(error, al.ToolError)


async def test_a_request_past_the_call_timeout_is_a_request_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with library(call_timeout=5.0) as lib:
        with pytest.raises(McpRequestError) as raised:
            await lib.read_resource("note://slow")
        # The server was told; the connection goes on.
        assert await lib.read_resource("note://greeting") == [al.TextContent("Hello, world")]
    assert str(raised.value) == (
        "MCP server 'library' did not answer resources/read 'note://slow' within 5s"
    )
    assert raised.value.code is None


async def test_after_the_block_requests_say_the_server_is_closed() -> None:
    async with library() as lib:
        pass
    with pytest.raises(McpRequestError, match=r"^MCP server 'library' is closed$") as raised:
        await lib.list_resources()
    assert raised.value.method == "resources/list"


async def test_resources_attach_to_a_prompt_as_content() -> None:
    async with library() as lib:
        blocks = await lib.read_resource("note://greeting")
        agent = al.Agent(ScriptedProvider([reply("A greeting.")]))
        await agent.run(al.UserMessage([al.TextContent("What is this?"), *blocks]))
    assert agent.messages[0].content == (
        al.TextContent("What is this?"),
        al.TextContent("Hello, world"),
    )


# --------------------------------------------------------------------------- resource tools


@PROTOCOLS
async def test_resource_tools_let_the_model_list_and_read(protocol: str) -> None:
    async with library(protocol=protocol) as lib:
        tools = await lib.resource_tools()
        assert [tool.name for tool in tools] == ["lib__list_resources", "lib__read_resource"]
        results = await run_calls(
            tools,
            ("lib__list_resources", {}),
            ("lib__read_resource", {"uri": "note://greeting"}),
            ("lib__read_resource", {"uri": "image://logo.png"}),
            ("lib__read_resource", {"uri": "note://missing"}),
        )
    assert (results["c0"].is_error, results["c0"].text) == (
        False,
        "Resources of the MCP server 'library':\n"
        "- note://greeting (text/plain, 12 bytes): Greeting. A friendly note\n"
        "- image://logo.png (image/png): logo\n"
        "- data://archive.bin (application/octet-stream): archive. Raw bytes\n"
        "- data://config.json (application/json): config\n"
        "- note://big (text/plain): big\n"
        "Resource templates (fill in the {placeholders} to make a URI):\n"
        "- note://{name} (text/plain): Note by name. Any note",
    )
    assert (results["c1"].is_error, results["c1"].text) == (False, "Hello, world")
    assert results["c2"].content == (al.ImageContent(PNG_B64, "image/png"),)
    assert (results["c3"].is_error, results["c3"].text) == (
        True,
        "MCP server 'library' refused resources/read 'note://missing': "
        "Resource not found: note://missing",
    )


async def test_resource_tools_are_read_only_and_claim_the_server_as_read() -> None:
    async with open_mcp(build_library(), McpConfig(call_timeout=12.0), name="library") as lib:
        listing, read = await lib.resource_tools()
        assert (listing.name, read.name) == ("library__list_resources", "library__read_resource")
        for tool in (listing, read):
            assert tool.replay_safe is True
            assert tool.timeout == 12.0
            assert tool.resources({}) == al.Claim(reads={"mcp:library"})
        assert read.parameters_schema == {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI."}},
            "required": ["uri"],
            "additionalProperties": False,
        }
        assert listing.parameters_schema == {
            "type": "object",
            "properties": {},
            "additionalProperties": False,
        }


async def test_a_server_without_resources_gets_no_resource_tools() -> None:
    async with open_mcp(build_toolbox(), name="toolbox") as box:
        assert await box.resource_tools() == []
        with pytest.raises(McpRequestError) as raised:
            await box.list_resources()
    assert str(raised.value) == "MCP server 'toolbox' refused resources/list: Method not found"
    assert raised.value.code == METHOD_NOT_FOUND


# --------------------------------------------------------------------------- prompts


@PROTOCOLS
async def test_prompts_are_listed_and_rendered(protocol: str) -> None:
    async with library(protocol=protocol) as lib:
        assert await lib.list_prompts() == [
            McpPrompt(
                "greet",
                "Greeting",
                "Greet someone",
                (McpPromptArgument("name", "Who to greet", True), McpPromptArgument("style")),
            ),
            McpPrompt("review"),
        ]
        (greet,) = await lib.get_prompt("greet", {"name": "Ada", "style": "formal"})
        assert isinstance(greet, al.UserMessage)
        assert greet.content == (al.TextContent("Say hello to Ada in a formal way."),)
        review = await lib.get_prompt("review")
    assert [(type(m).__name__, m.content) for m in review] == [
        ("UserMessage", (al.TextContent("Review this note:"),)),
        ("UserMessage", (al.TextContent("[resource note://greeting]\nHello, world"),)),
        (
            "UserMessage",
            (al.TextContent("[resource data://archive.bin: application/octet-stream, 4 bytes]"),),
        ),
        ("UserMessage", (al.ImageContent(PNG_B64, "image/png"),)),
        ("AssistantMessage", (al.TextContent("It is short."),)),
        ("AssistantMessage", (al.TextContent(f"[image: image/png, {len(PNG)} bytes]"),)),
    ]
    assert all(
        m.stop_reason is al.StopReason.STOP for m in review if isinstance(m, al.AssistantMessage)
    )


@PROTOCOLS
async def test_an_unknown_prompt_or_a_missing_argument_is_a_request_error(protocol: str) -> None:
    async with library(protocol=protocol) as lib:
        with pytest.raises(McpRequestError) as unknown:
            await lib.get_prompt("nope")
        with pytest.raises(McpRequestError) as missing:
            await lib.get_prompt("greet")
    assert (
        str(unknown.value)
        == "MCP server 'library' refused prompts/get 'nope': Unknown prompt: nope"
    )
    assert str(missing.value) == (
        "MCP server 'library' refused prompts/get 'greet': Missing required argument: name"
    )
    assert missing.value.method == "prompts/get"


async def test_a_rendered_prompt_starts_a_run() -> None:
    async with library() as lib:
        messages = await lib.get_prompt("greet", {"name": "Ada"})
    agent = al.Agent(ScriptedProvider([reply("Hello, Ada!")]))
    new = await agent.run(*[m for m in messages if isinstance(m, al.UserMessage)])
    assert [m.text for m in new] == ["Say hello to Ada.", "Hello, Ada!"]


# --------------------------------------------------------------------------- subscriptions


@PROTOCOLS
async def test_a_subscribed_resource_reports_its_updates(protocol: str) -> None:
    updates = Updates()
    async with library(protocol=protocol) as lib:
        lib.on_resource_updated = updates
        await lib.subscribe("note://greeting")
        await lib.subscribe("note://big")
        assert lib.subscriptions == ("note://greeting", "note://big")
        await lib.call_tool("touch", {"uri": "note://greeting"})
        assert await updates.wait_for(1) == ["note://greeting"]
        await lib.unsubscribe("note://greeting")
        assert lib.subscriptions == ("note://big",)
        # No update for the unsubscribed resource: the next one to arrive is note://big's.
        await lib.call_tool("touch", {"uri": "note://greeting"})
        await lib.call_tool("touch", {"uri": "note://big"})
        assert await updates.wait_for(2) == ["note://greeting", "note://big"]


async def test_a_failing_update_hook_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[str] = []
    done = trio.Event()

    def hook(uri: str) -> None:  # a plain function works too
        seen.append(uri)
        if len(seen) == 2:
            done.set()
        if len(seen) == 1:
            raise RuntimeError("hook broke")

    async with library() as lib:
        lib.on_resource_updated = hook
        await lib.subscribe("note://greeting")
        await lib.call_tool("touch", {"uri": "note://greeting"})
        await lib.call_tool("touch", {"uri": "note://greeting"})
        with trio.fail_after(BOUND):
            await done.wait()
    assert seen == ["note://greeting", "note://greeting"]
    failures = [r for r in caplog.records if r.name == "agentloop.mcp" and r.exc_info]
    assert [r.getMessage() for r in failures] == [
        "MCP server 'library': on_resource_updated failed"
    ]


@PROTOCOLS
async def test_subscribing_needs_the_servers_support(protocol: str) -> None:
    async with open_mcp(
        build_unsubscribable(), McpConfig(protocol=protocol), name="plain"
    ) as plain:
        with pytest.raises(McpRequestError) as raised:
            await plain.subscribe("note://x")
    assert str(raised.value) == "MCP server 'plain' does not support resource subscriptions"
    assert raised.value.method == "resources/subscribe"


# --------------------------------------------------------------------------- a stdio server


def library_process(*extra: str, env: dict[str, str] | None = None) -> StdioServer:
    return StdioServer(sys.executable, [__file__, *extra], env=env)


@PROTOCOLS
async def test_a_stdio_server_redacts_credentials_and_renews_subscriptions(protocol: str) -> None:
    server = library_process("--secret-env", "API_TOKEN", env={"API_TOKEN": SECRET})
    updates = Updates()
    async with open_mcp(server, McpConfig(protocol=protocol), name="library") as lib:
        lib.on_resource_updated = updates
        assert await lib.read_resource("note://env") == [al.TextContent("token=***")]
        assert await lib.read_resource_contents("note://env") == [
            McpResourceContents("note://env", text="token=***")
        ]
        await lib.subscribe("note://greeting")
        first = lib.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        # A request finds the connection gone; the next one starts the server again.
        errors: list[str] = []
        with trio.fail_after(BOUND):
            while lib.connections < 2:
                try:
                    await lib.list_resources()
                except McpRequestError as error:
                    errors.append(str(error))
        assert errors in ([], ["MCP server 'library' closed the connection during resources/list"])
        assert lib.connections == 2
        # The new server process knows the subscription without being asked again.
        await lib.call_tool("touch", {"uri": "note://greeting"})
        assert await updates.wait_for(1) == ["note://greeting"]


# --------------------------------------------------------------------------- server-everything


def everything() -> StdioServer:
    from node_tools import node_bin, node_env

    return StdioServer(
        node_bin("mcp-server-everything"), ["stdio"], env={"PATH": node_env()["PATH"]}
    )


def everything_docs() -> Path:
    from node_tools import ensure_node_tools

    package = ensure_node_tools() / "node_modules" / "@modelcontextprotocol" / "server-everything"
    return package / "dist" / "docs"


TIME = r"\d{1,2}:\d{2}:\d{2}\s?[AP]M"  # toLocaleTimeString() in the server's locale


def matches(pattern: str) -> Callable[[str], bool]:
    return lambda text: re.fullmatch(pattern, text) is not None


async def test_server_everything_resources() -> None:
    docs = everything_docs()
    async with open_mcp(everything(), name="everything") as ev:
        resources = await ev.list_resources()
        templates = await ev.list_resource_templates()
        static = await ev.read_resource("demo://resource/static/document/features.md")
        text = await ev.read_resource("demo://resource/dynamic/text/1")
        blob = await ev.read_resource("demo://resource/dynamic/blob/2")
        (raw,) = await ev.read_resource_contents("demo://resource/dynamic/blob/2")
        with pytest.raises(McpRequestError) as unknown:
            await ev.read_resource("demo://nope")
    names = sorted(path.name for path in docs.iterdir() if path.is_file())
    assert resources == [
        McpResource(
            f"demo://resource/static/document/{name}",
            name,
            description=f"Static document file exposed from /docs: {name}",
            mime_type="text/markdown",
        )
        for name in names
    ]
    assert templates == [
        McpResourceTemplate(
            "demo://resource/dynamic/text/{resourceId}",
            "Dynamic Text Resource",
            description="Plaintext dynamic resource fabricated from the {resourceId} variable, "
            "which must be an integer.",
            mime_type="text/plain",
        ),
        McpResourceTemplate(
            "demo://resource/dynamic/blob/{resourceId}",
            "Dynamic Blob Resource",
            description="Binary (base64) dynamic resource fabricated from the {resourceId} "
            "variable, which must be an integer.",
            mime_type="application/octet-stream",
        ),
    ]
    assert static == [al.TextContent((docs / "features.md").read_text())]
    (text_block,) = text
    assert matches(rf"Resource 1: This is a plaintext resource created at {TIME}")(text_block.text)
    # A blob of type text/plain: its bytes, and as content its text.
    (blob_block,) = blob
    assert matches(rf"Resource 2: This is a base64 blob created at {TIME}")(blob_block.text)
    assert (raw.uri, raw.mime_type, raw.text) == (
        "demo://resource/dynamic/blob/2",
        "text/plain",
        None,
    )
    assert raw.data == blob_block.text.encode()
    assert str(unknown.value) == (
        "MCP server 'everything' refused resources/read 'demo://nope': "
        "MCP error -32602: Resource demo://nope not found"
    )


async def test_server_everything_prompts() -> None:
    async with open_mcp(everything(), name="everything") as ev:
        prompts = await ev.list_prompts()
        simple = await ev.get_prompt("simple-prompt")
        args = await ev.get_prompt("args-prompt", {"city": "Lima", "state": "Lima"})
        embedded = await ev.get_prompt(
            "resource-prompt", {"resourceType": "Text", "resourceId": "3"}
        )
        with pytest.raises(McpRequestError) as unknown:
            await ev.get_prompt("nope")
    assert prompts == [
        McpPrompt("simple-prompt", "Simple Prompt", "A prompt with no arguments"),
        McpPrompt(
            "args-prompt",
            "Arguments Prompt",
            "A prompt with two arguments, one required and one optional",
            (McpPromptArgument("city", "Name of the city", True), McpPromptArgument("state")),
        ),
        McpPrompt(
            "completable-prompt",
            "Team Management",
            "First argument choice narrows values for second argument.",
            (
                McpPromptArgument("department", "Choose the department.", True),
                McpPromptArgument(
                    "name", "Choose a team member to lead the selected department.", True
                ),
            ),
        ),
        McpPrompt(
            "resource-prompt",
            "Resource Prompt",
            "A prompt that includes an embedded resource reference",
            (
                McpPromptArgument("resourceType", "Type of resource to fetch", True),
                McpPromptArgument("resourceId", "ID of the text resource to fetch", True),
            ),
        ),
    ]
    assert [m.content for m in simple] == [
        (al.TextContent("This is a simple prompt without arguments."),)
    ]
    assert [m.content for m in args] == [(al.TextContent("What's weather in Lima, Lima?"),)]
    assert all(isinstance(m, al.UserMessage) for m in [*simple, *args, *embedded])
    intro, resource = embedded
    assert intro.content == (
        al.TextContent(
            "This prompt includes the Text resource with id: 3. "
            "Please analyze the following resource:"
        ),
    )
    (block,) = resource.content
    assert isinstance(block, al.TextContent)
    assert matches(
        rf"\[resource demo://resource/dynamic/text/3\]\n"
        rf"Resource 3: This is a plaintext resource created at {TIME}"
    )(block.text)
    assert str(unknown.value) == (
        "MCP server 'everything' refused prompts/get 'nope': "
        "MCP error -32602: Prompt nope not found"
    )


async def test_server_everything_sends_updates_of_a_subscribed_resource() -> None:
    updates = Updates()
    uri = "demo://resource/dynamic/text/1"
    async with open_mcp(everything(), name="everything") as ev:
        ev.on_resource_updated = updates
        await ev.subscribe(uri)
        # The server sends an update at once for each subscribed URI, then every 5 s.
        await ev.call_tool("toggle-subscriber-updates", {})
        assert (await updates.wait_for(1))[0] == uri
        await ev.call_tool("toggle-subscriber-updates", {})  # stop them
        await ev.unsubscribe(uri)
        assert ev.subscriptions == ()
        tools = await ev.resource_tools()
        results = await run_calls(tools, ("everything__read_resource", {"uri": uri}))
    assert [tool.name for tool in tools] == [
        "everything__list_resources",
        "everything__read_resource",
    ]
    assert matches(rf"Resource 1: This is a plaintext resource created at {TIME}")(
        results["c0"].text
    )


# --------------------------------------------------------------------------- as a script


async def _serve(secret_env: str | None) -> None:
    server = build_library(secret_env)
    options = server.create_initialization_options(NotificationOptions())
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, options)


def _main() -> None:
    parser = argparse.ArgumentParser(description="the test MCP server of resources and prompts")
    parser.add_argument("--secret-env", default=None)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    anyio.run(_serve, args.secret_env, backend="trio")


if __name__ == "__main__":
    _main()
