"""Unit tests of the pure parts of ``agentloop.mcp``: no server, no network, no clock.

* ``load_mcp_config`` and the server specs (``_servers.py``);
* ``convert_result``, from an MCP ``CallToolResult`` to agentloop content (``_content.py``);
* ``tool_name``, the names the model sees (``_connection.py``);
* ``McpToolAdapter.from_tool`` and the adapter's pure properties (``_adapter.py``);
* importing ``agentloop.mcp`` without the SDK (in a subprocess).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp.types as mcp_types
import pytest
from mcp_servers import ALL_CONTENT_BLOCKS, PNG_BYTES, WAV_BYTES

from agentloop import AgentTool, ImageContent, TextContent
from agentloop._tool._names import model_tool_name as tool_name
from agentloop.mcp import (
    HttpServer,
    McpConfig,
    McpConnection,
    McpToolAdapter,
    SseServer,
    StdioServer,
    load_mcp_config,
)
from agentloop.mcp._content import convert_result, describe_size

REPO = Path(__file__).resolve().parent.parent.parent
PNG_B64 = base64.b64encode(PNG_BYTES).decode("ascii")
WAV_B64 = base64.b64encode(WAV_BYTES).decode("ascii")


def b64(size: int) -> str:
    """Valid base64 of ``size`` bytes."""
    return base64.b64encode(bytes(range(256)) * (size // 256) + bytes(size % 256)).decode()


def config(**servers: Any) -> dict[str, Any]:
    return {"mcpServers": servers}


def raises_exactly(error: type[BaseException], text: str) -> Any:
    """``pytest.raises`` that wants exactly ``text`` as the message."""
    return pytest.raises(error, match=f"^{re.escape(text)}$")


# =========================================================================== server specs


class TestServerSpecs:
    def test_stdio_converts_args_env_and_cwd(self, tmp_path: Path) -> None:
        args = ["-y", "server"]
        env = {"TZ": "UTC"}
        server = StdioServer("npx", args, env=env, cwd=tmp_path)
        assert server.command == "npx"
        assert server.args == ("-y", "server")
        assert server.env == {"TZ": "UTC"}
        assert server.env is not env  # copied: the caller's dict can change freely
        assert server.cwd == str(tmp_path)
        assert isinstance(server.cwd, str)

    def test_stdio_defaults(self) -> None:
        server = StdioServer("uvx")
        assert (server.args, server.env, server.cwd) == ((), None, None)

    def test_stdio_args_string_is_refused(self) -> None:
        with raises_exactly(TypeError, "args takes a list of strings, got the string 'x'"):
            StdioServer("cmd", args="x")

    def test_stdio_repr_hides_env(self) -> None:
        server = StdioServer("uvx", ["time"], env={"API_KEY": "sekrit-env"})
        assert repr(server) == "StdioServer(command='uvx', args=('time',), cwd=None)"

    def test_http_repr_hides_headers_and_auth(self) -> None:
        server = HttpServer(
            "https://example.com/mcp",
            headers={"Authorization": "Bearer sekrit-token"},
            auth="sekrit-auth",
        )
        assert repr(server) == "HttpServer(url='https://example.com/mcp')"
        assert "sekrit" not in repr(server)
        assert server.headers == {"Authorization": "Bearer sekrit-token"}

    def test_sse_repr_hides_headers(self) -> None:
        server = SseServer("https://example.com/sse", headers={"X-Key": "sekrit"})
        assert repr(server) == "SseServer(url='https://example.com/sse')"


# =========================================================================== load_mcp_config


class TestLoadMcpConfig:
    def test_stdio_entry(self) -> None:
        servers = load_mcp_config(
            config(
                files={
                    "command": "npx",
                    "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                    "env": {"TZ": "UTC", "PORT": 8080},
                    "cwd": "/srv/files",
                }
            ),
            environ={},
        )
        assert servers == {
            "files": StdioServer(
                "npx",
                ["-y", "@modelcontextprotocol/server-filesystem", "."],
                env={"TZ": "UTC", "PORT": "8080"},
                cwd="/srv/files",
            )
        }
        # Equality sees env (it is only left out of the repr).
        without_env = StdioServer(
            "npx", ["-y", "@modelcontextprotocol/server-filesystem", "."], cwd="/srv/files"
        )
        assert servers != {"files": without_env}

    @pytest.mark.parametrize("kind", ["stdio", "STDIO"])
    def test_stdio_entry_with_explicit_type(self, kind: str) -> None:
        servers = load_mcp_config(config(t={"command": "uvx", "type": kind}), environ={})
        assert servers == {"t": StdioServer("uvx")}

    def test_stdio_entry_without_args(self) -> None:
        (server,) = load_mcp_config(config(t={"command": "uvx"}), environ={}).values()
        assert server == StdioServer("uvx", [], env=None, cwd=None)

    @pytest.mark.parametrize(
        "extra",
        [
            {},
            {"type": "http"},
            {"type": "HTTP"},
            {"type": "streamable-http"},
            {"type": "streamable_http"},
            {"type": "streamableHttp"},
            {"transport": "http"},
            {"transport": "streamable_http"},
        ],
    )
    def test_http_entry(self, extra: dict[str, str]) -> None:
        servers = load_mcp_config(
            config(docs={"url": "https://example.com/mcp", "headers": {"X-A": "1"}, **extra}),
            environ={},
        )
        assert servers == {"docs": HttpServer("https://example.com/mcp", {"X-A": "1"})}
        assert type(servers["docs"]) is HttpServer

    def test_http_entry_without_headers(self) -> None:
        (server,) = load_mcp_config(config(d={"url": "http://h/mcp"}), environ={}).values()
        assert isinstance(server, HttpServer)
        assert server.headers is None

    @pytest.mark.parametrize("extra", [{"type": "sse"}, {"type": "SSE"}, {"transport": "sse"}])
    def test_sse_entry(self, extra: dict[str, str]) -> None:
        servers = load_mcp_config(
            config(old={"url": "https://example.com/sse", "headers": {"K": "v"}, **extra}),
            environ={},
        )
        assert servers == {"old": SseServer("https://example.com/sse", {"K": "v"})}
        assert type(servers["old"]) is SseServer

    def test_type_wins_over_transport(self) -> None:
        servers = load_mcp_config(
            config(s={"url": "http://h/sse", "type": "sse", "transport": "http"}), environ={}
        )
        assert type(servers["s"]) is SseServer

    def test_command_and_url_together_are_refused(self) -> None:
        with pytest.raises(ValueError, match="both") as info:
            load_mcp_config(config(s={"command": "uvx", "url": "http://h/mcp"}), environ={})
        assert str(info.value) == (
            "mcpServers.s has both a 'command' (stdio) and a 'url' (HTTP): keep one"
        )

    @pytest.mark.parametrize(
        ("entry", "message"),
        [
            (
                {"command": ["npx", "-y", "pkg"]},
                "mcpServers.s.command must be a string, got ['npx', '-y', 'pkg']",
            ),
            ({"command": ""}, "mcpServers.s.command is empty"),
            ({"command": "x", "cwd": 3}, "mcpServers.s.cwd must be a string, got 3"),
            ({"url": 5}, "mcpServers.s.url must be a string, got 5"),
            ({"command": "x", "env": {"A": True}}, "mcpServers.s.env.A must be a string, got True"),
            ({"command": "x", "env": {"A": None}}, "mcpServers.s.env.A must be a string, got None"),
            (
                {"url": "http://h", "headers": {"H": {}}},
                "mcpServers.s.headers.H must be a string, got {}",
            ),
        ],
    )
    def test_values_of_the_wrong_type_are_refused(
        self, entry: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(ValueError, match=r"^mcpServers\.s") as info:
            load_mcp_config(config(s=entry), environ={})
        assert str(info.value) == message

    def test_variables_are_expanded_everywhere(self) -> None:
        environ = {"TOOL": "uvx", "PKG": "mcp-server-time", "ZONE": "UTC", "DIR": "/work"}
        environ |= {"HOST": "example.com", "TOKEN": "t0k3n"}
        servers = load_mcp_config(
            config(
                time={
                    "command": "${TOOL}",
                    "args": ["--from", "${PKG}==1", "${ZONE}-${ZONE}"],
                    "env": {"TZ": "${ZONE}", "PLAIN": "no $ZONE or ${1X} expansion"},
                    "cwd": "${DIR}/time",
                },
                docs={
                    "url": "https://${HOST}/mcp",
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                },
                old={"url": "https://${HOST}/sse", "type": "sse", "headers": {"T": "${TOKEN}"}},
            ),
            environ=environ,
        )
        time, docs, old = servers.values()
        assert isinstance(time, StdioServer)
        assert time.command == "uvx"
        assert time.args == ("--from", "mcp-server-time==1", "UTC-UTC")
        assert time.env == {"TZ": "UTC", "PLAIN": "no $ZONE or ${1X} expansion"}
        assert time.cwd == "/work/time"
        assert isinstance(docs, HttpServer)
        assert docs.url == "https://example.com/mcp"
        assert docs.headers == {"Authorization": "Bearer t0k3n"}
        assert isinstance(old, SseServer)
        assert old.url == "https://example.com/sse"
        assert old.headers == {"T": "t0k3n"}

    def test_expanded_values_are_not_expanded_again(self) -> None:
        servers = load_mcp_config(
            config(s={"command": "${A}"}), environ={"A": "${B}", "B": "never"}
        )
        assert servers == {"s": StdioServer("${B}")}

    def test_variables_come_from_os_environ_by_default(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("AGENTLOOP_TEST_MCP_CMD", "from-os-environ")
        servers = load_mcp_config(config(s={"command": "${AGENTLOOP_TEST_MCP_CMD}"}))
        assert servers == {"s": StdioServer("from-os-environ")}

    def test_explicit_environ_replaces_os_environ(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv("AGENTLOOP_TEST_MCP_CMD", "from-os-environ")
        with raises_exactly(
            ValueError,
            "mcpServers.s.command: the environment variable AGENTLOOP_TEST_MCP_CMD is not set",
        ):
            load_mcp_config(config(s={"command": "${AGENTLOOP_TEST_MCP_CMD}"}), environ={})

    @pytest.mark.parametrize(
        ("entry", "where"),
        [
            ({"command": "${MISSING}"}, "mcpServers.s.command"),
            ({"command": "c", "args": ["ok", "${MISSING}"]}, "mcpServers.s.args"),
            ({"command": "c", "env": {"KEY": "${MISSING}"}}, "mcpServers.s.env.KEY"),
            ({"command": "c", "cwd": "${MISSING}/x"}, "mcpServers.s.cwd"),
            ({"url": "https://${MISSING}/mcp"}, "mcpServers.s.url"),
            (
                {"url": "u", "headers": {"Authorization": "${MISSING}"}},
                "mcpServers.s.headers.Authorization",
            ),
        ],
    )
    def test_missing_variable(self, entry: dict[str, Any], where: str) -> None:
        with raises_exactly(ValueError, f"{where}: the environment variable MISSING is not set"):
            load_mcp_config(config(s=entry), environ={"OTHER": "x"})

    def test_disabled_entries_are_left_out(self) -> None:
        servers = load_mcp_config(
            config(
                a={"command": "a"},
                off={"command": "${NOT_SET}", "disabled": True},  # not even expanded
                broken_off={"args": "not a list", "disabled": True},  # not even checked
                b={"url": "http://b/mcp", "disabled": False},
                c={"command": "c", "disabled": "false"},  # only JSON true disables
                d={"command": "d", "disabled": 1},
            ),
            environ={},
        )
        assert servers == {
            "a": StdioServer("a"),
            "b": HttpServer("http://b/mcp"),
            "c": StdioServer("c"),
            "d": StdioServer("d"),
        }

    def test_order_is_preserved(self) -> None:
        names = ["zeta", "alpha", "mid", "beta"]
        servers = load_mcp_config(
            {"mcpServers": {name: {"command": name} for name in names}}, environ={}
        )
        assert list(servers) == names
        assert [s.command for s in servers.values()] == names  # type: ignore[union-attr]

    @pytest.mark.parametrize("as_str", [True, False])
    def test_from_file(self, tmp_path: Path, as_str: bool) -> None:
        path = tmp_path / "mcp.json"
        path.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "time": {"command": "uvx", "args": ["mcp-server-time"]},
                        "docs": {"url": "https://${HOST}/mcp", "headers": {"A": "Bearer é"}},
                    }
                },
                ensure_ascii=False,
            ),
            encoding="utf-8",
        )
        servers = load_mcp_config(str(path) if as_str else path, environ={"HOST": "h"})
        assert servers == {
            "time": StdioServer("uvx", ["mcp-server-time"]),
            "docs": HttpServer("https://h/mcp", {"A": "Bearer é"}),
        }

    def test_file_that_is_not_json(self, tmp_path: Path) -> None:
        path = tmp_path / "mcp.json"
        path.write_text("{not json", encoding="utf-8")
        with pytest.raises(ValueError) as info:  # noqa: PT011 - the text is checked below
            load_mcp_config(path)
        assert str(info.value) == (
            f"{path} is not JSON: "
            "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
        )
        assert isinstance(info.value.__cause__, json.JSONDecodeError)

    def test_missing_file(self, tmp_path: Path) -> None:
        path = tmp_path / "absent.json"
        with pytest.raises(FileNotFoundError) as info:
            load_mcp_config(str(path))
        assert info.value.filename == str(path)
        assert isinstance(info.value, OSError)

    @pytest.mark.parametrize(
        "document",
        [{}, {"servers": {}}, {"mcpServers": None}, {"mcpServers": [{"command": "x"}]}],
    )
    def test_no_mcp_servers_object(self, document: dict[str, Any]) -> None:
        with raises_exactly(ValueError, "an MCP configuration needs an 'mcpServers' object"):
            load_mcp_config(document, environ={})

    @pytest.mark.parametrize("document", ["[]", '"text"', "null", '{"mcpServers": 1}'])
    def test_file_without_mcp_servers_object(self, tmp_path: Path, document: str) -> None:
        path = tmp_path / "mcp.json"
        path.write_text(document, encoding="utf-8")
        with raises_exactly(ValueError, "an MCP configuration needs an 'mcpServers' object"):
            load_mcp_config(path)

    def test_empty_mcp_servers(self) -> None:
        assert load_mcp_config({"mcpServers": {}}, environ={}) == {}

    @pytest.mark.parametrize("entry", ["uvx", ["uvx"], None, 3])
    def test_entry_not_an_object(self, entry: Any) -> None:
        with raises_exactly(ValueError, f"mcpServers.bad must be an object, got {entry!r}"):
            load_mcp_config(config(bad=entry), environ={})

    @pytest.mark.parametrize("args", ["-y server", ["ok", 1], [None], {"a": "b"}, None])
    def test_args_not_a_list_of_strings(self, args: Any) -> None:
        with raises_exactly(
            ValueError, f"mcpServers.s.args must be a list of strings, got {args!r}"
        ):
            load_mcp_config(config(s={"command": "c", "args": args}), environ={})

    @pytest.mark.parametrize("table", ["env", "headers"])
    def test_env_or_headers_not_an_object(self, table: str) -> None:
        entry = {"command": "c"} if table == "env" else {"url": "u"}
        with raises_exactly(
            ValueError, f"mcpServers.s.{table} must be an object of strings, got ['A=1']"
        ):
            load_mcp_config(config(s={**entry, table: ["A=1"]}), environ={})

    @pytest.mark.parametrize(("kind", "shown"), [("sse", "sse"), ("http", "http")])
    def test_command_with_http_type_is_refused(self, kind: str, shown: str) -> None:
        with raises_exactly(
            ValueError, f"mcpServers.s: a server with a command is a stdio server, not {shown!r}"
        ):
            load_mcp_config(config(s={"command": "c", "type": kind}), environ={})

    def test_command_with_transport_sse_is_refused(self) -> None:
        with raises_exactly(
            ValueError, "mcpServers.s: a server with a command is a stdio server, not 'sse'"
        ):
            load_mcp_config(config(s={"command": "c", "transport": "sse"}), environ={})

    @pytest.mark.parametrize(
        ("kind", "shown"),
        [("websocket", "websocket"), ("stdio", "stdio"), ("Web_Socket", "web-socket")],
    )
    def test_url_with_unknown_transport(self, kind: str, shown: str) -> None:
        with raises_exactly(
            ValueError, f"mcpServers.s: unknown transport {shown!r} (use 'http' or 'sse')"
        ):
            load_mcp_config(config(s={"url": "ws://h", "type": kind}), environ={})

    @pytest.mark.parametrize("entry", [{}, {"type": "stdio"}, {"args": ["x"], "env": {}}])
    def test_entry_without_command_or_url(self, entry: dict[str, Any]) -> None:
        with raises_exactly(ValueError, "mcpServers.s needs a 'command' (stdio) or a 'url' (HTTP)"):
            load_mcp_config(config(s=entry), environ={})


# =========================================================================== convert_result


def convert(*blocks: Any, structured: Any = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    return convert_result(
        mcp_types.CallToolResult(content=list(blocks), structured_content=structured)
    )


class TestConvertResult:
    def test_sizes_of_the_fixtures(self) -> None:
        # The expected texts below rely on these.
        assert (len(PNG_BYTES), len(WAV_BYTES)) == (68, 60)

    def test_text(self) -> None:
        assert convert(mcp_types.TextContent(text="héllo")) == ((TextContent("héllo"),), {})

    def test_image(self) -> None:
        content, details = convert(mcp_types.ImageContent(data=PNG_B64, mime_type="image/png"))
        assert content == (ImageContent(PNG_B64, "image/png"),)
        assert details == {}

    def test_image_of_another_type_is_passed_as_is(self) -> None:
        block = mcp_types.ImageContent(data="PHN2Zz4=", mime_type="image/svg+xml")
        assert convert(block) == ((ImageContent("PHN2Zz4=", "image/svg+xml"),), {})

    def test_audio(self) -> None:
        content, details = convert(mcp_types.AudioContent(data=WAV_B64, mime_type="audio/wav"))
        assert content == (TextContent("[audio: audio/wav, 60 bytes]"),)
        assert details == {
            "content": [{"type": "audio", "mime_type": "audio/wav", "data": WAV_B64}]
        }

    def test_audio_size_in_kib(self) -> None:
        content, _ = convert(mcp_types.AudioContent(data=b64(1536), mime_type="audio/ogg"))
        assert content == (TextContent("[audio: audio/ogg, 1.5 KiB]"),)

    def test_audio_with_invalid_base64_gets_an_estimate(self) -> None:
        # 11 characters of invalid base64: 11 * 3 // 4 == 8 bytes.
        content, details = convert(
            mcp_types.AudioContent(data="not base64!", mime_type="audio/ogg")
        )
        assert content == (TextContent("[audio: audio/ogg, 8 bytes]"),)
        assert details == {
            "content": [{"type": "audio", "mime_type": "audio/ogg", "data": "not base64!"}]
        }

    def test_resource_link_with_everything(self) -> None:
        link = mcp_types.ResourceLink(
            uri="file:///tmp/report.txt",
            name="report.txt",
            mime_type="text/plain",
            description="A report the tool wrote.",
        )
        content, details = convert(link)
        assert content == (
            TextContent(
                "[resource link: report.txt <file:///tmp/report.txt> (text/plain): "
                "A report the tool wrote.]"
            ),
        )
        assert details == {
            "content": [
                {
                    "type": "resource_link",
                    "name": "report.txt",
                    "uri": "file:///tmp/report.txt",
                    "mime_type": "text/plain",
                    "description": "A report the tool wrote.",
                }
            ]
        }

    def test_resource_link_bare(self) -> None:
        content, details = convert(mcp_types.ResourceLink(uri="mem://x", name="x"))
        assert content == (TextContent("[resource link: x <mem://x>]"),)
        assert details == {"content": [{"type": "resource_link", "name": "x", "uri": "mem://x"}]}

    def test_resource_link_with_description_only(self) -> None:
        link = mcp_types.ResourceLink(uri="mem://x", name="x", description="d", size=12)
        content, details = convert(link)
        assert content == (TextContent("[resource link: x <mem://x>: d]"),)
        assert details["content"] == [
            {"type": "resource_link", "name": "x", "uri": "mem://x", "description": "d", "size": 12}
        ]

    def test_embedded_text_resource(self) -> None:
        block = mcp_types.EmbeddedResource(
            resource=mcp_types.TextResourceContents(
                uri="mem://notes", text="line 1\nline 2", mime_type="text/markdown"
            )
        )
        assert convert(block) == ((TextContent("[resource mem://notes]\nline 1\nline 2"),), {})

    @pytest.mark.parametrize("mime", ["image/png", "image/jpeg", "image/gif", "image/webp"])
    def test_embedded_image_blob(self, mime: str) -> None:
        block = mcp_types.EmbeddedResource(
            resource=mcp_types.BlobResourceContents(uri="mem://img", blob=PNG_B64, mime_type=mime)
        )
        assert convert(block) == ((ImageContent(PNG_B64, mime),), {})

    @pytest.mark.parametrize(
        ("mime", "shown"),
        [
            ("application/pdf", "application/pdf"),
            ("image/svg+xml", "image/svg+xml"),  # not an image the models take
            (None, "application/octet-stream"),
        ],
    )
    def test_embedded_other_blob(self, mime: str | None, shown: str) -> None:
        blob = b64(2048)
        block = mcp_types.EmbeddedResource(
            resource=mcp_types.BlobResourceContents(uri="mem://data", blob=blob, mime_type=mime)
        )
        content, details = convert(block)
        assert content == (TextContent(f"[resource mem://data: {shown}, 2.0 KiB]"),)
        assert details == {
            "content": [{"type": "resource", "uri": "mem://data", "mime_type": shown, "blob": blob}]
        }

    def test_embedded_blob_size_in_mib(self) -> None:
        block = mcp_types.EmbeddedResource(
            resource=mcp_types.BlobResourceContents(
                uri="mem://big", blob=b64(3 * 1024 * 1024 + 1024 * 1024 // 4), mime_type="a/b"
            )
        )
        content, _ = convert(block)
        assert content == (TextContent("[resource mem://big: a/b, 3.2 MiB]"),)

    def test_embedded_blob_with_invalid_base64(self) -> None:
        block = mcp_types.EmbeddedResource(
            resource=mcp_types.BlobResourceContents(uri="mem://b", blob="%%%%%%%%", mime_type="a/b")
        )
        content, _ = convert(block)
        assert content == (TextContent("[resource mem://b: a/b, 6 bytes]"),)

    def test_all_content_blocks_of_the_test_server(self) -> None:
        content, details = convert(*ALL_CONTENT_BLOCKS)
        assert content == (
            TextContent("plain text"),
            ImageContent(PNG_B64, "image/png"),
            TextContent("[audio: audio/wav, 60 bytes]"),
            TextContent(
                "[resource link: report.txt <file:///tmp/report.txt> (text/plain): "
                "A report the tool wrote.]"
            ),
            TextContent("[resource mem://notes]\nembedded notes"),
            ImageContent(PNG_B64, "image/png"),
        )
        assert details == {
            "content": [
                {"type": "audio", "mime_type": "audio/wav", "data": WAV_B64},
                {
                    "type": "resource_link",
                    "name": "report.txt",
                    "uri": "file:///tmp/report.txt",
                    "mime_type": "text/plain",
                    "description": "A report the tool wrote.",
                },
            ]
        }

    def test_unsupported_block(self) -> None:
        result = mcp_types.CallToolResult.model_construct(
            content=[SimpleNamespace(type="video"), object()]
        )
        content, details = convert_result(result)
        assert content == (
            TextContent("[unsupported content: video]"),
            TextContent("[unsupported content: object]"),
        )
        assert details == {}

    def test_structured_content_besides_content_is_not_repeated(self) -> None:
        content, details = convert(
            mcp_types.TextContent(text='{"n": 3}'), structured={"n": 3, "squared": 9}
        )
        assert content == (TextContent('{"n": 3}'),)
        assert details == {"structured": {"n": 3, "squared": 9}}

    def test_structured_content_alone_becomes_json_text(self) -> None:
        structured = {"city": "Zürich", "temps": [1.5, -2], "ok": True, "none": None}
        content, details = convert(structured=structured)
        assert content == (
            TextContent('{"city": "Zürich", "temps": [1.5, -2], "ok": true, "none": null}'),
        )
        assert details == {"structured": structured}

    def test_empty_structured_content_alone(self) -> None:
        assert convert(structured={}) == ((TextContent("{}"),), {"structured": {}})

    def test_structured_content_and_extras(self) -> None:
        content, details = convert(
            mcp_types.ResourceLink(uri="mem://x", name="x"), structured={"k": "v"}
        )
        assert content == (TextContent("[resource link: x <mem://x>]"),)
        assert details == {
            "structured": {"k": "v"},
            "content": [{"type": "resource_link", "name": "x", "uri": "mem://x"}],
        }

    def test_nothing_at_all(self) -> None:
        assert convert() == ((), {})


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 bytes"),
        (1, "1 byte"),
        (1023, "1023 bytes"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024 * 1024 - 1024, "1023.0 KiB"),
        (1024 * 1024, "1.0 MiB"),
        (5 * 1024 * 1024 + 512 * 1024, "5.5 MiB"),
        (1024**3, "1024.0 MiB"),
    ],
)
def testdescribe_size(size: int, text: str) -> None:
    assert describe_size(size) == text


def test_describe_size_just_under_a_mib() -> None:
    assert describe_size(1024 * 1024 - 52) == "1023.9 KiB"
    assert describe_size(1024 * 1024 - 51) == "1.0 MiB"
    assert describe_size(1024 * 1024 - 1) == "1.0 MiB"


# =========================================================================== tool_name


def long_name_expected(unsanitized: str, sanitized: str) -> str:
    digest = hashlib.sha256(unsanitized.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return sanitized[:55] + "_" + digest


class TestToolName:
    @pytest.mark.parametrize(
        ("prefix", "raw", "expected"),
        [
            (None, "echo", "echo"),
            ("", "echo", "echo"),
            ("time", "now", "time__now"),
            (None, "get-time_v2", "get-time_v2"),
            (None, "get.time", "get_time"),
            ("my server", "files/read", "my_server__files_read"),
            (None, "naïve tool✓", "na_ve_tool_"),
            (None, "", "_"),
            ("", "", "_"),
            ("p", "", "p__"),
        ],
    )
    def test_names(self, prefix: str | None, raw: str, expected: str) -> None:
        assert tool_name(prefix, raw) == expected

    def test_64_characters_are_kept(self) -> None:
        raw = "a" * 64
        assert tool_name(None, raw) == raw
        assert tool_name("p", "b" * 61) == "p__" + "b" * 61

    def test_long_name_is_cut_and_hashed(self) -> None:
        raw = "x" * 70
        name = tool_name(None, raw)
        assert name == "x" * 55 + "_" + hashlib.sha256(raw.encode()).hexdigest()[:8]
        assert len(name) == 64
        assert re.fullmatch(r"x{55}_[0-9a-f]{8}", name)

    def test_long_name_hash_is_of_the_whole_unsanitized_name(self) -> None:
        prefix, raw = "srv.one", "tool." + "y" * 60
        unsanitized = "srv.one__tool." + "y" * 60
        sanitized = "srv_one__tool_" + "y" * 60
        name = tool_name(prefix, raw)
        assert name == long_name_expected(unsanitized, sanitized)
        assert len(name) == 64
        # Same sanitized text, different original: different names.
        other = tool_name("srv/one", raw)
        assert other == long_name_expected("srv/one__tool." + "y" * 60, sanitized)
        assert other != name
        assert other[:56] == name[:56]

    def test_long_non_ascii_name(self) -> None:
        raw = "é" * 40 + "\ud800" * 30  # a lone surrogate, as JSON can carry
        name = tool_name(None, raw)
        assert name == long_name_expected(raw, "_" * 70)
        assert len(name) == 64

    def test_65_characters_are_hashed(self) -> None:
        raw = "a" * 65
        assert tool_name(None, raw) == long_name_expected(raw, raw)


# =========================================================================== McpToolAdapter


def connection(call_timeout: float | None = 30.0, prefix: str | None = None) -> McpConnection:
    return McpConnection(
        StdioServer("true"),
        McpConfig(prefix=prefix, call_timeout=call_timeout, connect_timeout=1),
        name="x",
    )


def tool(**fields: Any) -> mcp_types.Tool:
    return mcp_types.Tool(**{"name": "t", "input_schema": {"type": "object"}, **fields})


class TestAdapter:
    def test_from_tool(self) -> None:
        conn = connection()
        schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
        output = {"type": "object", "properties": {"n": {"type": "integer"}}}
        adapter = McpToolAdapter.from_tool(
            conn,
            tool(
                name="search.docs",
                title="Search",
                description="Search the docs.",
                input_schema=schema,
                output_schema=output,
            ),
            "docs__search_docs",
        )
        assert adapter.connection is conn
        assert adapter.tool_name == "search.docs"
        assert adapter.name == "docs__search_docs"
        assert adapter.label == "Search"
        assert adapter.description == "Search the docs."
        assert adapter.parameters_schema == schema
        assert adapter.annotations == {}
        assert adapter.output_schema == output
        assert adapter.read_only is False
        assert repr(adapter) == "McpToolAdapter(tool_name='search.docs', name='docs__search_docs')"
        assert isinstance(adapter, AgentTool)

    @pytest.mark.parametrize(
        ("title", "annotation_title", "label"),
        [
            ("Title", "Annotated", "Title"),
            (None, "Annotated", "Annotated"),
            ("", "Annotated", "Annotated"),
            (None, None, "t"),
            ("", "", "t"),
        ],
    )
    def test_label(self, title: str | None, annotation_title: str | None, label: str) -> None:
        annotations = mcp_types.ToolAnnotations(title=annotation_title)
        adapter = McpToolAdapter.from_tool(
            connection(), tool(title=title, annotations=annotations), "t"
        )
        assert adapter.label == label

    def test_label_without_annotations(self) -> None:
        adapter = McpToolAdapter.from_tool(connection(), tool(name="raw"), "n")
        assert adapter.label == "raw"

    def test_description_none_is_empty(self) -> None:
        adapter = McpToolAdapter.from_tool(connection(), tool(description=None), "t")
        assert adapter.description == ""

    @pytest.mark.parametrize("schema", [{}, None])
    def test_missing_or_empty_schema(self, schema: Any) -> None:
        raw = mcp_types.Tool.model_construct(name="t", input_schema=schema)
        adapter = McpToolAdapter.from_tool(connection(), raw, "t")
        assert adapter.parameters_schema == {"type": "object", "properties": {}}

    def test_schema_without_type_gets_object(self) -> None:
        schema = {"properties": {"a": {"type": "string"}}, "required": ["a"]}
        adapter = McpToolAdapter.from_tool(connection(), tool(input_schema=schema), "t")
        assert adapter.parameters_schema == {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "required": ["a"],
        }
        assert list(adapter.parameters_schema) == ["type", "properties", "required"]
        assert schema == {"properties": {"a": {"type": "string"}}, "required": ["a"]}

    def test_schema_with_type_is_copied(self) -> None:
        raw = tool(input_schema={"type": "object", "additionalProperties": False})
        adapter = McpToolAdapter.from_tool(connection(), raw, "t")
        assert adapter.parameters_schema == {"type": "object", "additionalProperties": False}
        assert adapter.parameters_schema is not raw.input_schema

    def test_empty_schemas_are_independent(self) -> None:
        first = McpToolAdapter.from_tool(connection(), tool(input_schema={}), "a")
        second = McpToolAdapter.from_tool(connection(), tool(input_schema={}), "b")
        first.parameters_schema["properties"]["added"] = {"type": "string"}
        assert second.parameters_schema == {"type": "object", "properties": {}}

    def test_annotations_by_alias(self) -> None:
        annotations = mcp_types.ToolAnnotations(
            title="Lookup",
            read_only_hint=True,
            destructive_hint=False,
            idempotent_hint=True,
            open_world_hint=False,
        )
        adapter = McpToolAdapter.from_tool(connection(), tool(annotations=annotations), "t")
        assert adapter.annotations == {
            "title": "Lookup",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        }
        assert adapter.read_only is True
        assert adapter.label == "Lookup"

    def test_annotations_leave_out_unset_hints(self) -> None:
        annotations = mcp_types.ToolAnnotations(destructive_hint=True)
        adapter = McpToolAdapter.from_tool(connection(), tool(annotations=annotations), "t")
        assert adapter.annotations == {"destructiveHint": True}
        assert adapter.read_only is False

    def test_read_only_false_hint(self) -> None:
        annotations = mcp_types.ToolAnnotations(read_only_hint=False)
        adapter = McpToolAdapter.from_tool(connection(), tool(annotations=annotations), "t")
        assert adapter.annotations == {"readOnlyHint": False}
        assert adapter.read_only is False

    def test_output_schema_absent(self) -> None:
        adapter = McpToolAdapter.from_tool(connection(), tool(), "t")
        assert adapter.output_schema is None

    @pytest.mark.parametrize(("call_timeout", "timeout"), [(30.0, 30.0), (0.5, 0.5), (None, None)])
    def test_timeout_mirrors_the_connection(
        self, call_timeout: float | None, timeout: float | None
    ) -> None:
        adapter = McpToolAdapter.from_tool(connection(call_timeout), tool(), "t")
        assert adapter.timeout == timeout

    def test_timeout_follows_the_connection_live(self) -> None:
        conn = connection(10.0)
        adapter = McpToolAdapter.from_tool(conn, tool(), "t")
        conn.call_timeout = 2.5
        assert adapter.timeout == 2.5

    def test_same_definition(self) -> None:
        conn, other_conn = connection(), connection()
        raw = tool(description="d", annotations=mcp_types.ToolAnnotations(read_only_hint=True))
        first = McpToolAdapter.from_tool(conn, raw, "t")
        assert first.same_definition(McpToolAdapter.from_tool(conn, raw, "t"))
        assert not first.same_definition(McpToolAdapter.from_tool(other_conn, raw, "t"))
        assert not first.same_definition(McpToolAdapter.from_tool(conn, raw, "renamed"))
        changed = tool(description="d2", annotations=mcp_types.ToolAnnotations(read_only_hint=True))
        assert not first.same_definition(McpToolAdapter.from_tool(conn, changed, "t"))

    async def test_connection_names_and_deduplicates_tools(self) -> None:
        conn = connection(prefix="srv")
        await conn._tool_list.update([tool(name="a.b"), tool(name="a_b"), tool(name="a-b")])
        assert [(a.tool_name, a.name) for a in conn.tools] == [
            ("a.b", "srv__a_b"),
            ("a_b", "srv__a_b_2"),
            ("a-b", "srv__a-b"),
        ]
        assert repr(conn) == "<McpConnection 'x' disconnected tools=3>"

    async def test_connection_keeps_unchanged_adapters(self) -> None:
        conn = connection()
        await conn._tool_list.update([tool(name="keep"), tool(name="change", description="old")])
        kept, changed = conn.tools
        await conn._tool_list.update([tool(name="keep"), tool(name="change", description="new")])
        assert conn.tools[0] is kept
        assert conn.tools[1] is not changed
        assert conn.tools[1].description == "new"
        assert conn.offers(kept)
        assert not conn.offers(changed)


# =========================================================================== without the SDK

_BLOCKER = """
import sys

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == BLOCKED or name.startswith(BLOCKED + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

for module in [m for m in sys.modules if m == BLOCKED or m.startswith(BLOCKED + ".")]:
    del sys.modules[module]
sys.meta_path.insert(0, Blocker())

import agentloop
print("agentloop:", agentloop.__file__)
print("Agent:", agentloop.Agent.__name__)
try:
    import agentloop.mcp
    agentloop.mcp.McpConnection  # the SDK loads here, not at the import
except ImportError as error:
    print("raised:", type(error).__name__)
    print("message:", error)
    print("cause:", type(error.__cause__).__name__, error.__cause__ and error.__cause__.name)
    print("name:", getattr(error, "name", None))
else:
    print("imported")
"""


def run_without(blocked: str) -> list[str]:
    code = f"BLOCKED = {blocked!r}\n" + textwrap.dedent(_BLOCKER)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.splitlines()


def test_import_without_the_sdk() -> None:
    assert run_without("mcp") == [
        f"agentloop: {REPO / 'agentloop' / '__init__.py'}",
        "Agent: Agent",
        "raised: ImportError",
        "message: agentloop.mcp needs the MCP SDK, which is not installed: "
        "pip install 'agentloop[mcp]' (or: pip install 'mcp>=2.3')",
        "cause: ModuleNotFoundError mcp",
        "name: None",
    ]


def test_import_with_a_broken_sdk_dependency_is_not_disguised() -> None:
    # The SDK is there but one of its own dependencies is not: that error goes through
    # (when the SDK loads: with McpConnection, McpToolAdapter or the first connection).
    assert run_without("pydantic") == [
        f"agentloop: {REPO / 'agentloop' / '__init__.py'}",
        "Agent: Agent",
        "raised: ModuleNotFoundError",
        "message: No module named 'pydantic'",
        "cause: NoneType None",
        "name: pydantic",
    ]


def test_import_with_the_sdk() -> None:
    # The control: the same script, blocking nothing the SDK needs, imports agentloop.mcp.
    assert run_without("no_such_module_blocked") == [
        f"agentloop: {REPO / 'agentloop' / '__init__.py'}",
        "Agent: Agent",
        "imported",
    ]
