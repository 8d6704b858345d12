"""Thousands of tools, many with one name: naming is linear, long work yields, timeouts hold.

An MCP server listing 5,000 tools named alike took 16.6 s to connect with
``connect_timeout=2``, and nothing else ran meanwhile: each copy's name was found by
trying ``name_2``, ``name_3``... from the start (quadratic), in one stretch of CPU
work no deadline could interrupt. Names now come from :class:`UniqueNames` (each
name's next number remembered), adapting a listing checkpoints every
``ADAPT_BATCH`` tools, and a plain parameters schema is not checked against the
meta-schema (a millisecond each).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import jsonschema
import mcp.types as mcp_types
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_crowded_server import NAME, build_crowded_server

import agentloop as al
import agentloop.mcp._adapter as adapter_module
from agentloop._tool._names import UniqueNames
from agentloop._tool._registry import ToolRegistry, _plain
from agentloop.mcp import McpConfig, McpConnectionError, StdioServer, open_mcp
from agentloop.mcp._adapter import ADAPT_BATCH, adapt_tools
from agentloop.openapi import OpenApiToolAdapter

COUNT = 5_000
SERVER = Path(__file__).parent / "mcp_crowded_server.py"
EXPECTED = [NAME] + [f"{NAME}_{n}" for n in range(2, COUNT + 1)]


class CountingSet(set[str]):
    """A set that counts membership tests."""

    checks = 0

    def __contains__(self, item: object) -> bool:
        CountingSet.checks += 1
        return super().__contains__(item)


def test_unique_names_take_linear_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """5,000 copies of one name: two membership tests each (trying name_2, name_3...
    from the start every time took 12.5 million)."""
    names = UniqueNames()
    monkeypatch.setattr(names, "_taken", CountingSet())
    CountingSet.checks = 0
    assert [names.add(NAME) for _ in range(COUNT)] == EXPECTED
    assert CountingSet.checks == 2 * COUNT - 1


def test_unique_names_skip_names_taken_otherwise() -> None:
    names = UniqueNames(["a_3"])
    given = [names.add(name) for name in ("a", "a", "a_2", "a", "a")]
    assert given == ["a", "a_2", "a_2_2", "a_4", "a_5"]
    long = "x" * 64
    assert names.add(long) == long
    assert names.add(long) == "x" * 62 + "_2"
    assert "a_3" in names
    assert "a_6" not in names


class Host:
    """What adapters need of a connection, without a server."""

    name = "crowded"
    call_timeout = None
    max_result_bytes = 1000
    destructive_exclusive = True
    redactor: Any = None

    def offers(self, adapter: Any) -> bool:
        return True

    async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("not called")


def listing(count: int = COUNT) -> list[mcp_types.Tool]:
    return [
        mcp_types.Tool(name=NAME, description=f"Tool {i}.", input_schema={"type": "object"})
        for i in range(count)
    ]


class Yields(trio.abc.Instrument):
    """Counts the times one task gives way to the others."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.count = 0

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.count += 1


async def test_adapting_a_long_listing_lets_other_tasks_run() -> None:
    """Between batches of ADAPT_BATCH tools, the adapting task gives way."""
    yields = Yields(trio.lowlevel.current_task())
    trio.lowlevel.add_instrument(yields)
    try:
        tools = await adapt_tools(Host(), listing(), None, {})
    finally:
        trio.lowlevel.remove_instrument(yields)
    assert list(tools) == EXPECTED
    assert [tool.description for tool in tools.values()] == [f"Tool {i}." for i in range(COUNT)]
    assert yields.count == COUNT // ADAPT_BATCH - 1  # after each batch but the last


async def test_a_connect_timeout_expiring_while_tools_are_adapted_ends_the_connection(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deadline passes while the listing is adapted: the next checkpoint ends it.

    A task jumps the clock past the deadline at its first turn once the adapting
    started; without checkpoints it would get no turn before the connection was made.
    """
    adapting = trio.Event()
    name_of = adapter_module.model_tool_name

    def naming(prefix: str | None, raw: str) -> str:
        adapting.set()
        return name_of(prefix, raw)

    monkeypatch.setattr(adapter_module, "model_tool_name", naming)

    async def jump() -> None:
        await adapting.wait()
        autojump_clock.jump(10)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(jump)
        with pytest.raises(McpConnectionError) as caught:
            async with open_mcp(
                build_crowded_server(COUNT), McpConfig(connect_timeout=2), name="crowded"
            ):
                pass  # pragma: no cover - the connection must not be made
    assert str(caught.value) == "MCP server 'crowded' did not complete the handshake within 2s"


async def test_a_real_server_listing_5000_tools_of_one_name() -> None:
    """Over stdio, from a real process: every tool is there, each with its own name."""
    server = StdioServer(sys.executable, [str(SERVER), str(COUNT)])
    async with open_mcp(server, McpConfig(prefix="srv", connect_timeout=60)) as connection:
        names = [tool.name for tool in connection.tools]
        descriptions = [tool.description for tool in connection.tools]
        agent = al.Agent(al.providers.ScriptedProvider([]), tools=connection.tools)
    assert names == [f"srv__{name}" for name in EXPECTED]
    assert descriptions == [f"Tool {i}." for i in range(COUNT)]
    assert len(agent.tools) == COUNT


def test_openapi_operations_of_one_id_are_named_in_order() -> None:
    paths = {
        f"/items/{i}": {"get": {"operationId": "same", "responses": {"200": {"description": "ok"}}}}
        for i in range(COUNT)
    }
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "http://127.0.0.1:9"}],
        "paths": paths,
    }
    tools = OpenApiToolAdapter.from_spec(spec)
    assert [tool.name for tool in tools] == EXPECTED


# --------------------------------------------------------------------------- schemas


class Tool:
    def __init__(self, name: str, schema: dict[str, Any]) -> None:
        self.name = name
        self.label = name
        self.description = "A tool."
        self.parameters_schema = schema

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        raise AssertionError("not called")


def test_plain_schemas_skip_the_meta_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    """5,000 tools, each with its own plain schema: no meta-schema check (a millisecond
    each); a schema with other keywords is checked as before."""
    checked: list[Any] = []
    real = jsonschema.Draft202012Validator.check_schema

    def counting(schema: Any, *args: Any, **kwargs: Any) -> None:
        checked.append(schema)
        real(schema, *args, **kwargs)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "check_schema", counting)
    tools = [
        Tool(
            f"t{i}",
            {
                "type": "object",
                "properties": {f"p{i}": {"type": "integer", "description": f"Number {i}."}},
                "required": [f"p{i}"],
            },
        )
        for i in range(COUNT)
    ]
    ToolRegistry(tools)
    assert checked == []
    patterned = {"type": "object", "properties": {"p": {"type": "string", "pattern": "^a+$"}}}
    ToolRegistry([Tool("p", patterned)])
    assert checked == [patterned]
    with pytest.raises(ValueError, match="invalid parameters_schema") as caught:
        ToolRegistry([Tool("bad", {"type": "object", "properties": {"p": {"pattern": "("}}})])
    assert str(caught.value).startswith("tool 'bad' has an invalid parameters_schema: ")


KINDS = st.sampled_from(["string", "integer", "number", "boolean", "null", "array", "object", "x"])
ANY = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3)
SCHEMAS = st.recursive(
    st.booleans() | st.fixed_dictionaries({}, optional={"type": KINDS | st.lists(KINDS)}),
    lambda children: st.fixed_dictionaries(
        {},
        optional={
            "type": KINDS | st.lists(KINDS, max_size=3) | ANY,
            "properties": st.dictionaries(st.text(max_size=3), children, max_size=3) | ANY,
            "items": children | ANY,
            "additionalProperties": children | ANY,
            "not": children,
            "anyOf": st.lists(children, max_size=3) | ANY,
            "required": st.lists(st.text(max_size=2), max_size=3) | ANY,
            "description": st.text(max_size=3) | ANY,
            "enum": st.lists(ANY, max_size=2) | ANY,
            "const": ANY,
            "minimum": ANY,
            "maxLength": ANY,
            "uniqueItems": ANY,
            "pattern": st.sampled_from(["a", "("]),
            "$ref": st.just("#"),
        },
    ),
    max_leaves=10,
)


@settings(max_examples=500, deadline=None)
@given(SCHEMAS)
def test_a_schema_taken_as_plain_passes_the_meta_schema(schema: Any) -> None:
    """Plain means valid: whatever the quick test lets through, the meta-schema accepts."""
    if _plain(schema):
        jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "objects"},
        {"type": []},
        {"type": ["string", "string"]},
        {"required": ["a", "a"]},
        {"required": "a"},
        {"properties": {"a": {"type": 1}}},
        {"items": [{"type": "string"}]},
        {"minLength": -1},
        {"minLength": True},
        {"maximum": "1"},
        {"anyOf": []},
        {"enum": "a"},
        {"description": 1},
    ],
)
def test_a_schema_the_meta_schema_refuses_is_not_plain(schema: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.SchemaError):
        jsonschema.Draft202012Validator.check_schema(schema)
    assert not _plain(schema)
