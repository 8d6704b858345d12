"""JSON nested far too deep, wherever agentloop reads JSON it did not write.

Python's JSON decoder, and what walks a decoded value (a schema check, ``repr``,
a copy), recurse once or more per level: 100,000 levels raised ``RecursionError``
out of ``Agent.run``. Every decoder now refuses text nested deeper than
``MAX_JSON_DEPTH`` before decoding it (``agentloop._text.check_depth``, linear),
and each caller turns that into what a malformed value already was: an
``InvalidArgs`` result the model reads, a structured answer tried again, a
skipped session line, a refused file.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sse_server import Reply, serve

import agentloop as al
from agentloop._loop._output import PartialJSON
from agentloop._text import MAX_JSON_DEPTH, JSONTooDeep, check_depth, loads
from agentloop.providers import (
    AnthropicProvider,
    ModelConfig,
    OpenAIProvider,
    OpenAIResponsesProvider,
    RetryConfig,
    ScriptedProvider,
    call,
    parse_tool_arguments,
    reply,
)
from agentloop.testing import EventRecorder

DEEP = 100_000
ARGUMENTS = '{"a": ' + "[" * DEEP + "]" * DEEP + "}"
TOO_DEEP = f"nested deeper than {MAX_JSON_DEPTH} levels"


def received(text: str) -> str:
    """How a tool result quotes the arguments the model sent (2,000 characters at most)."""
    return f"{text[:2000]}... ({len(text) - 2000} more characters)"


INVALID = (
    f"Invalid arguments: the arguments are {TOO_DEEP} (the most agentloop reads). "
    f"Received: {received(ARGUMENTS)}"
)


@attrs.define(eq=False)
class Lists:
    """A tool taking a list, recording what it was called with."""

    calls: list[dict[str, Any]] = attrs.field(factory=list)
    name: str = "t"
    label: str = "Lists"
    description: str = "Take a list."
    parameters_schema: dict[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {"a": {"type": "array"}}}
    )

    async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
        self.calls.append(params)
        return al.ToolResult.text("ran")


async def run(agent: al.Agent, *prompts: str) -> EventRecorder:
    recorder = EventRecorder()
    async with agent.prompt(*prompts) as events:
        await recorder.consume(events)
    return recorder


def tool_ends(recorder: EventRecorder) -> list[tuple[str, str, bool]]:
    return [
        (event.tool_call_id, event.result.text_content, event.is_error)
        for event in recorder.of_type(al.ToolExecutionEnd)
    ]


def nested(levels: int) -> Any:
    """A list ``levels`` deep: ``[]`` is one level."""
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


# --------------------------------------------------------------------------- the check


def reference_too_deep(text: str, limit: int) -> bool | None:
    """Character by character: whether brackets outside strings nest past ``limit``.

    None where the decoder would stop first (a backslash outside a string).
    """
    depth, in_string, escape = 0, False, False
    for char in text:
        if in_string:
            if escape:
                escape = False
            elif char == "\\":
                escape = True
            elif char == '"':
                in_string = False
        elif char == "\\":
            return None
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False


def too_deep(text: str, limit: int) -> bool:
    try:
        check_depth(text, limit)
    except JSONTooDeep as error:
        message = str(error)
    else:
        return False
    assert message == f"nested deeper than {limit} levels"
    return True


def depth_of(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(item) for item in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(item) for item in value.values()), default=0)
    return 0


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ ab\n'),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\a', max_size=3), children, max_size=3)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(JSON, st.integers(min_value=0, max_value=8))
def test_the_check_measures_the_nesting_of_any_json(value: Any, limit: int) -> None:
    """Brackets inside strings (escaped quotes and backslashes too) do not count."""
    text = json.dumps(value)
    assert too_deep(text, limit) is (depth_of(value) > limit)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet='[[[{{]}"\\ a,é', max_size=300), st.integers(min_value=0, max_value=12))
def test_the_check_agrees_with_a_plain_scan_on_any_text(text: str, limit: int) -> None:
    """On any text, JSON or not, up to where a decoder would stop."""
    expected = reference_too_deep(text, limit)
    if expected is not None:
        assert too_deep(text, limit) is expected


@pytest.mark.parametrize(
    "text",
    [
        "[" * DEEP,  # never closed
        "[" * DEEP + "]" * DEEP,
        '{"a": ' * DEEP,
        '"x", ' + "[" * DEEP,
        "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1),
    ],
)
def test_deep_text_is_refused_without_decoding(text: str) -> None:
    with pytest.raises(JSONTooDeep) as caught:
        loads(text)
    assert str(caught.value) == TOO_DEEP


def test_the_limit_itself_is_read() -> None:
    assert loads("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH) == nested(MAX_JSON_DEPTH)
    assert loads('["' + "[" * DEEP + '"]') == ["[" * DEEP]  # brackets in a string


# --------------------------------------------------------------------------- every decoder


def test_tool_arguments_too_deep_are_kept_as_text() -> None:
    assert parse_tool_arguments(ARGUMENTS) == ({}, ARGUMENTS)


def test_serialization_refuses_deep_json() -> None:
    from agentloop.serialization import DeserializationError, from_json

    with pytest.raises(DeserializationError) as caught:
        from_json('{"a": ' + "[" * DEEP + "]" * DEEP + "}", dict[str, Any])
    assert str(caught.value) == f"cannot read dict[str, Any]: invalid JSON: {TOO_DEEP}"


def test_a_deep_session_line_is_skipped(tmp_path: Path) -> None:
    from agentloop.session import load_session

    path = tmp_path / "s.jsonl"
    path.write_text('{"type": "session", "session_id": "s"}\n' + ARGUMENTS + "\n")
    session = load_session(path)
    assert session.messages == ()
    assert session.warnings == (f"{path}: skipped line 2: {TOO_DEEP}",)


def test_a_deep_mcp_configuration_is_refused(tmp_path: Path) -> None:
    from agentloop.mcp import load_mcp_config

    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": ' + "[" * DEEP + "]" * DEEP + "}")
    with pytest.raises(ValueError, match="is not JSON") as caught:
        load_mcp_config(path)
    assert str(caught.value) == f"{path} is not JSON: {TOO_DEEP}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": ' + "[" * DEEP + "]" * DEEP + "}", f"not valid JSON: {TOO_DEEP}"),
        ("a: " + "[" * DEEP + "]" * DEEP, "the document nests too deeply"),  # YAML
    ],
)
def test_a_deep_openapi_document_is_refused(text: str, message: str) -> None:
    from agentloop.openapi import OpenApiError, OpenApiToolAdapter

    with pytest.raises(OpenApiError) as caught:
        OpenApiToolAdapter.from_str(text)
    assert str(caught.value) == f"the OpenAPI document: {message}"


def test_a_deep_error_body_is_shown_as_text() -> None:
    from agentloop.providers._errors import _BODY_LIMIT, error_detail

    body = "[" * DEEP
    assert error_detail(body) == (None, body[:_BODY_LIMIT] + "...")


def test_a_deep_answer_text_is_an_output_failure() -> None:
    output = al.Output(dict[str, Any])
    assert output.parse(ARGUMENTS) == (
        None,
        f"the answer is {TOO_DEEP} (the most agentloop reads)",
    )


def test_partial_json_stops_reading_at_the_limit() -> None:
    reader = PartialJSON()
    for start in range(0, len(ARGUMENTS), 1000):
        reader.feed(ARGUMENTS[start : start + 1000])
    assert reader.value() == {"a": nested(MAX_JSON_DEPTH - 1)}


# --------------------------------------------------------------------------- runs


async def test_deep_arguments_are_invalid_arguments_the_model_reads() -> None:
    tool = Lists()
    provider = ScriptedProvider(
        [reply(call("t", ARGUMENTS, id="c1")), reply("done")], chunk_size=4096
    )
    recorder = await run(al.Agent(provider, tools=[tool]), "go")
    assert tool_ends(recorder) == [("c1", INVALID, True)]
    assert tool.calls == []
    (end,) = recorder.of_type(al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)
    result = provider.requests[1].messages[-1]
    assert isinstance(result, al.ToolResultMessage)
    assert (result.content, result.is_error) == ((al.TextContent(INVALID),), True)


def _chat(arguments: list[str]) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: %s\n\n" % json.dumps(data).encode()

    head = {"index": 0, "id": "c1", "type": "function", "function": {"name": "t"}}
    return [
        chunk({"role": "assistant", "tool_calls": [head]}),
        *[
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            for piece in arguments
        ],
        chunk({}, "tool_calls"),
        b"data: [DONE]\n\n",
    ]


def _chat_text(text: str) -> list[bytes]:
    data = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]}
    return [b"data: %s\n\n" % json.dumps(data).encode(), b"data: [DONE]\n\n"]


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps({'type': name, **data})}\n\n".encode()


def _messages(arguments: list[str]) -> list[bytes]:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    use = {"type": "tool_use", "id": "c1", "name": "t", "input": {}}
    return [
        _event("message_start", {"message": message}),
        _event("content_block_start", {"index": 0, "content_block": use}),
        *[
            _event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "input_json_delta", "partial_json": piece}},
            )
            for piece in arguments
        ],
        _event("content_block_stop", {"index": 0}),
        _event("message_delta", {"delta": {"stop_reason": "tool_use"}, "usage": {}}),
        _event("message_stop", {}),
    ]


def _messages_text(text: str) -> list[bytes]:
    message = {
        "id": "msg_2",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-5",
        "content": [],
        "stop_reason": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    return [
        _event("message_start", {"message": message}),
        _event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
        _event("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text}}),
        _event("content_block_stop", {"index": 0}),
        _event("message_delta", {"delta": {"stop_reason": "end_turn"}, "usage": {}}),
        _event("message_stop", {}),
    ]


_USAGE = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}


def _responses(arguments: list[str]) -> list[bytes]:
    whole = "".join(arguments)
    item = {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "t"}
    done = {**item, "status": "completed", "arguments": whole}
    response = {"id": "resp_1", "model": "gpt-5.4", "status": "in_progress", "output": []}
    return [
        _event("response.created", {"response": response}),
        _event(
            "response.output_item.added",
            {"output_index": 0, "item": {**item, "status": "in_progress", "arguments": ""}},
        ),
        *[
            _event(
                "response.function_call_arguments.delta",
                {"output_index": 0, "item_id": "fc_1", "delta": piece},
            )
            for piece in arguments
        ],
        _event(
            "response.function_call_arguments.done",
            {"output_index": 0, "item_id": "fc_1", "arguments": whole},
        ),
        _event("response.output_item.done", {"output_index": 0, "item": done}),
        _event(
            "response.completed",
            {"response": {**response, "status": "completed", "output": [done], "usage": _USAGE}},
        ),
    ]


def _responses_text(text: str) -> list[bytes]:
    item = {"id": "msg_1", "type": "message", "role": "assistant", "content": []}
    part = {"type": "output_text", "text": text, "annotations": []}
    done = {**item, "status": "completed", "content": [part]}
    response = {"id": "resp_2", "model": "gpt-5.4", "status": "in_progress", "output": []}
    return [
        _event("response.created", {"response": response}),
        _event("response.output_item.added", {"output_index": 0, "item": item}),
        _event(
            "response.output_text.delta",
            {"output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": text},
        ),
        _event("response.output_item.done", {"output_index": 0, "item": done}),
        _event(
            "response.completed",
            {"response": {**response, "status": "completed", "output": [done], "usage": _USAGE}},
        ),
    ]


Streams = tuple[Callable[[list[str]], list[bytes]], Callable[[str], list[bytes]]]
APIS: dict[str, Streams] = {
    "openai": (_chat, _chat_text),
    "anthropic": (_messages, _messages_text),
    "responses": (_responses, _responses_text),
}


def _provider(api: str, url: str) -> Any:
    retry = RetryConfig.none()
    if api == "openai":
        return OpenAIProvider(
            ModelConfig.openai("gpt-5.4", api_key="sk-test", base_url=f"{url}/v1"), retry=retry
        )
    if api == "anthropic":
        model = ModelConfig.anthropic("claude-sonnet-5", api_key="sk-ant-test", base_url=url)
        return AnthropicProvider(model, retry=retry)
    model = ModelConfig.openai_responses("gpt-5.4", api_key="sk-test", base_url=f"{url}/v1")
    return OpenAIResponsesProvider(model, retry=retry)


@pytest.mark.parametrize("api", sorted(APIS))
async def test_deep_arguments_over_a_real_stream(api: str) -> None:
    """The arguments arrive over HTTP in pieces of 1,000 characters, as an API sends them."""
    arguments, text = APIS[api]
    pieces = [ARGUMENTS[i : i + 1000] for i in range(0, len(ARGUMENTS), 1000)]
    tool = Lists()
    async with (
        serve(Reply(arguments(pieces)), Reply(text("done"))) as server,
        _provider(api, server.url) as provider,
    ):
        recorder = await run(al.Agent(provider, tools=[tool]), "go")
    assert tool_ends(recorder) == [("c1", INVALID, True)]
    assert tool.calls == []
    assert len(server.requests) == 2
    (end,) = recorder.of_type(al.AgentEnd)
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)


# An error raised while a real connection's body is still open leaves httpx2's innermost
# stream generator (httpcore2's PoolByteStream.__aiter__) to the garbage collector: the
# same with any malformed event, not only a deep one (a bug of the HTTP stack, reported).
@pytest.mark.filterwarnings("ignore:Async generator 'httpcore2:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("api", sorted(APIS))
async def test_a_deep_event_of_a_stream_does_not_escape(api: str) -> None:
    """An event whose own JSON nests 100,000 deep is what any unreadable event is."""
    text = APIS[api][1]
    stream = text("done")
    stream.insert(1, b"event: %s\ndata: %s\n\n" % (b"message", b"[" * DEEP))
    async with serve(Reply(stream)) as server, _provider(api, server.url) as provider:
        recorder = await run(al.Agent(provider), "go")
    (end,) = recorder.of_type(al.AgentEnd)
    final = end.messages[-1]
    assert isinstance(final, al.AssistantMessage)
    if api == "anthropic":  # a malformed event ends the reply as an error
        assert final.stop_reason is al.StopReason.ERROR
        assert final.error_message == (
            "Anthropic API sent a malformed message event: " + "[" * 200 + "..."
        )
    else:  # an event that is not JSON is skipped (a proxy's keep-alive...)
        assert (final.text, final.stop_reason) == ("done", al.StopReason.STOP)


# --------------------------------------------------------------------------- structured output


@attrs.frozen
class Point:
    x: int
    y: int


async def test_a_deep_final_result_is_retried_in_tool_mode() -> None:
    provider = ScriptedProvider(
        [
            reply(call("final_result", ARGUMENTS, id="f1")),
            reply(call("final_result", {"x": 1, "y": 2}, id="f2")),
        ],
        chunk_size=4096,
    )
    recorder = await run(al.Agent(provider, output_type=Point), "go")
    (end,) = recorder.of_type(al.AgentEnd)
    assert end.output == Point(1, 2)
    assert tool_ends(recorder) == [
        (
            "f1",
            f"Invalid output: the arguments are {TOO_DEEP} (the most agentloop reads). "
            f"Received: {received(ARGUMENTS)}. Call final_result again with the corrected answer.",
            True,
        ),
        ("f2", "Final result accepted.", False),
    ]
    # The partial answer stopped at the limit, then the second answer streamed.
    partials = [event.partial for event in recorder.of_type(al.OutputUpdate)]
    assert partials == [{"a": nested(MAX_JSON_DEPTH - 1)}, {"x": 1, "y": 2}]


async def test_a_deep_answer_is_retried_in_native_mode() -> None:
    provider = ScriptedProvider([reply(ARGUMENTS), reply('{"x": 1, "y": 2}')])
    agent = al.Agent(provider, output_type=al.Output(Point, mode="native"))
    recorder = await run(agent, "go")
    (end,) = recorder.of_type(al.AgentEnd)
    assert end.output == Point(1, 2)
    retry = provider.requests[1].messages[-1]
    assert isinstance(retry, al.UserMessage)
    assert retry.text == (
        f"Your answer is not valid: the answer is {TOO_DEEP} (the most agentloop reads). "
        "Reply again with only the JSON answer, matching the schema."
    )
    partials = [event.partial for event in recorder.of_type(al.OutputUpdate)]
    # Text streams word by word: '{"a": ', then the brackets (read up to the limit).
    assert partials == [{}, {"a": nested(MAX_JSON_DEPTH - 1)}, {}, {"x": 1}, {"x": 1, "y": 2}]


# --------------------------------------------------------------------------- deep values of tools


def chain(levels: int, leaf: Any) -> Any:
    """``levels`` containers, each holding the next and a string to scrub."""
    value = leaf
    for level in range(levels):
        value = [value, "x\ud800"] if level % 2 else {"k\udc80": value}
    return value


def same(left: Any, right: Any) -> bool:
    """``left == right``, without recursion (``==`` recurses per level)."""
    pairs = [(left, right)]
    while pairs:
        a, b = pairs.pop()
        if type(a) is not type(b):
            return False
        if isinstance(a, dict):
            if list(a) != list(b):
                return False
            pairs.extend((a[key], b[key]) for key in a)
        elif isinstance(a, list | tuple):
            if len(a) != len(b):
                return False
            pairs.extend(zip(a, b, strict=True))
        elif a != b:
            return False
    return True


def test_a_value_of_any_depth_is_scrubbed_without_recursion() -> None:
    from agentloop._text import scrub_json

    assert same(scrub_json(chain(DEEP, "\udfff")), chain_clean(DEEP, "\ufffd"))
    assert not same(scrub_json(chain(DEEP, "\udfff")), chain_clean(DEEP, "?"))
    clean = chain_clean(DEEP, "a")
    assert scrub_json(clean) is clean
    looped: dict[str, Any] = {"s": "\ud800", "deep": chain_clean(200, "a")}
    looped["self"] = looped
    scrubbed = scrub_json(looped)  # copied 65 levels down, then left as it is
    inner = scrubbed
    for _ in range(65):
        assert inner["s"] == "\ufffd"
        assert inner["deep"] is looped["deep"]
        inner = inner["self"]
    assert inner is looped


def chain_clean(levels: int, leaf: Any) -> Any:
    value = leaf
    for level in range(levels):
        value = [value, "x\ufffd"] if level % 2 else {"k\ufffd": value}
    return value


async def test_a_tool_result_with_deep_details_does_not_crash_the_run() -> None:
    """``details`` are the tool's own: any depth is kept, scrubbed, and the run goes on."""

    @attrs.define(eq=False)
    class Deep(Lists):
        async def execute(self, params: dict[str, Any], ctx: al.ToolContext) -> al.ToolResult:
            return al.ToolResult.text("ran", details=chain(5_000, "\udfff"))

    provider = ScriptedProvider([reply(call("t", {"a": []}, id="c1")), reply("done")])
    recorder = await run(al.Agent(provider, tools=[Deep()]), "go")
    assert tool_ends(recorder) == [("c1", "ran", False)]
    (end,) = recorder.of_type(al.ToolExecutionEnd)
    assert same(end.result.details, chain_clean(5_000, "\ufffd"))
    (agent_end,) = recorder.of_type(al.AgentEnd)
    assert agent_end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)


def test_the_terminal_agents_files_refuse_deep_json(tmp_path: Path) -> None:
    """The terminal agent's own JSON files (an MCP config, a model script) are outside
    JSON too: too deep is a clear error, not a RecursionError."""
    from agentloop._cli._models import ModelError, load_script
    from agentloop._cli._setup import oauth_by_default

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"^.*deep\.json is not valid JSON: nested deeper than 128 levels$"
    ):
        oauth_by_default(deep)
    with pytest.raises(ModelError, match=r"is not JSON: nested deeper than 128 levels$"):
        load_script(deep)
