"""Structured output: Output, the final-result tool, native mode, retries, partial events."""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any, TypedDict

import attrs
import pytest
from helpers import Echo
from hypothesis import given, settings
from hypothesis import strategies as st

import agentloop as al
from agentloop._loop._output import PartialJSON
from agentloop.providers import ModelRequest, OutputFormat, ScriptedProvider, call, reply
from agentloop.testing import EventRecorder, assert_well_formed
from agentloop.tools import SubAgentTool


@attrs.frozen
class City:
    """A city and how many live there."""

    name: str
    population: int
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class Point:
    x: float
    y: float


class Kind(enum.Enum):
    BUG = "bug"
    FEATURE = "feature"


class Ticket(TypedDict):
    title: str
    kind: Kind


async def run(agent: al.Agent, *messages: str) -> tuple[EventRecorder, al.AgentEnd]:
    recorder = EventRecorder()
    async with agent.prompt(*messages) as events:
        await recorder.consume(events)
    end = recorder.events[-1]
    assert isinstance(end, al.AgentEnd)
    return recorder, end


def results(end: al.AgentEnd) -> list[tuple[str, str, bool]]:
    return [
        (m.tool_name, m.content[0].text, m.is_error)  # type: ignore[union-attr]
        for m in end.messages
        if isinstance(m, al.ToolResultMessage)
    ]


# --------------------------------------------------------------------------- Output


def test_attrs_class_schema_and_tool() -> None:
    output = al.Output(City)
    assert output.schema == {
        "type": "object",
        "description": "A city and how many live there.",
        "properties": {
            "name": {"type": "string"},
            "population": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "population"],
        "additionalProperties": False,
    }
    assert output.definition.name == "final_result"
    assert output.definition.parameters == output.schema
    assert output.strict is False  # "tags" is optional
    assert repr(output) == "Output(City, mode='tool', name='final_result', retries=2)"


def test_dataclass_typeddict_and_enum() -> None:
    assert al.Output(Point).schema == {
        "type": "object",
        "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
        "required": ["x", "y"],
        "additionalProperties": False,
    }
    assert al.Output(Point).strict is True
    ticket = al.Output(Ticket)
    value, error = ticket.check(al.ToolCall("c", "final_result", {"title": "t", "kind": "bug"}))
    assert (value, error) == ({"title": "t", "kind": Kind.BUG}, None)


def test_a_non_object_type_is_wrapped_on_the_wire() -> None:
    output = al.Output(list[City])
    assert output.wire_schema == {
        "type": "object",
        "properties": {"result": output.schema},
        "required": ["result"],
        "additionalProperties": False,
    }
    value, error = output.check(
        al.ToolCall("c", "final_result", {"result": [{"name": "Lima", "population": 9}]})
    )
    assert error is None
    assert value == [City("Lima", 9)]
    assert output.dump(value) == [{"name": "Lima", "population": 9, "tags": []}]


def test_a_json_schema_dict_gives_the_json_itself() -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    output = al.Output(schema, mode="native")
    assert output.parse('```json\n{"ok": true}\n```') == ({"ok": True}, None)
    assert output.parse('{"ok": 1}') == (None, "$.ok: 1 is not of type 'boolean'")
    assert output.parse("{") == (
        None,
        "the answer is not valid JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))",
    )
    assert output.request_format == OutputFormat("final_result", schema, strict=False)
    assert output.request_tools(()) == ()


def test_check_names_every_problem_by_path() -> None:
    output = al.Output(City)
    call_ = al.ToolCall("c", "final_result", {"name": 5, "tags": ["a", 2], "extra": 1})
    assert output.check(call_) == (
        None,
        "$: 'population' is a required property; "
        "$: Additional properties are not allowed ('extra' was unexpected); "
        "$.name: 5 is not of type 'string'; "
        "$.tags[1]: 2 is not of type 'string'",
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"type": complex}, TypeError, "output_type complex has no JSON Schema; use an attrs"),
        ({"type": {"type": 5}}, ValueError, "output schema is not valid JSON Schema: 5 is not"),
        ({"type": City, "mode": "json"}, ValueError, "Output mode must be 'tool' or 'native'"),
        ({"type": City, "name": "final result"}, ValueError, "Output name must be 1-64"),
        ({"type": City, "retries": -1}, ValueError, "Output retries must be an integer >= 0"),
    ],
)
def test_bad_outputs_are_refused(kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error) as caught:
        al.Output(**kwargs)
    assert str(caught.value).startswith(message)


def test_a_tool_with_the_output_name_is_refused() -> None:
    with pytest.raises(ValueError, match="final-result tool") as caught:
        al.Agent(ScriptedProvider([]), tools=[Echo(name="final_result")], output_type=City)
    assert str(caught.value) == (
        "a tool is named 'final_result', the name of the final-result tool; give the tool "
        "another name or the output another: Output(..., name=...)"
    )
    al.Agent(
        ScriptedProvider([]),
        tools=[Echo(name="final_result")],
        output_type=al.Output(City, name="answer"),
    )


# --------------------------------------------------------------------------- the loop, tool mode


async def test_a_valid_final_result_ends_the_run_with_the_typed_value() -> None:
    requests: list[ModelRequest] = []

    def answer(request: ModelRequest) -> Any:
        requests.append(request)
        return reply(call("final_result", {"name": "Lima", "population": 9_000_000}))

    agent = al.Agent(ScriptedProvider([answer]), output_type=City, agent_id="a")
    recorder, end = await run(agent, "Largest city in Peru?")
    assert end.output == City("Lima", 9_000_000)
    assert end.stop_reason == al.AgentStop(al.StopKind.COMPLETED)
    assert results(end) == [("final_result", "Final result accepted.", False)]
    assert [d.name for d in requests[0].tools] == ["final_result"]
    assert requests[0].output is None
    names = recorder.names()
    assert names[names.index("ToolExecutionStart") - 1 :] == [
        "MessageEnd",
        "ToolExecutionStart",
        "ToolExecutionEnd",
        "MessageStart",
        "MessageEnd",
        "TurnEnd",
        "AgentEnd",
    ]


async def test_invalid_output_is_explained_and_retried() -> None:
    provider = ScriptedProvider(
        [
            reply(call("final_result", {"name": "Lima", "population": "many"})),
            reply("It is Lima."),
            reply(call("final_result", {"name": "Lima", "population": 9})),
        ]
    )
    agent = al.Agent(provider, output_type=City)
    _, end = await run(agent, "go")
    assert end.output == City("Lima", 9)
    assert results(end) == [
        (
            "final_result",
            "Invalid output: $.population: 'many' is not of type 'integer'. "
            "Call final_result again with the corrected answer.",
            True,
        ),
        ("final_result", "Final result accepted.", False),
    ]
    prompts = [m.text for m in end.messages if isinstance(m, al.UserMessage)]  # type: ignore[attr-defined]
    assert prompts == ["go", "Give your final answer by calling the final_result tool."]


async def test_retries_run_out_with_output_failed() -> None:
    bad = reply(call("final_result", {"name": "Lima"}))
    agent = al.Agent(ScriptedProvider([bad, bad]), output_type=al.Output(City, retries=1))
    with pytest.raises(al.OutputError) as caught:
        await agent.run_output("go")
    stop = caught.value.stop
    assert stop == al.AgentStop(
        al.StopKind.OUTPUT_FAILED,
        "No valid output after 2 attempts: the final result did not match its schema",
        error="the final result did not match its schema",
    )
    assert str(caught.value) == (
        "the run ended without a valid output: No valid output after 2 attempts: "
        "the final result did not match its schema"
    )


async def test_text_answers_count_as_failures() -> None:
    agent = al.Agent(ScriptedProvider([reply("Lima.")]), output_type=al.Output(City, retries=0))
    _, end = await run(agent, "go")
    assert end.output is None
    assert end.stop_reason == al.AgentStop(
        al.StopKind.OUTPUT_FAILED,
        "No valid output after 1 attempt: the model answered in text without calling final_result",
        error="the model answered in text without calling final_result",
    )


async def test_other_calls_of_the_final_reply_are_answered_not_run() -> None:
    echo = Echo()
    provider = ScriptedProvider(
        [
            reply(call("echo", {"text": "a"}), call("echo", {"text": "b"})),
            reply(
                call("echo", {"text": "c"}),
                call("final_result", {"name": "Oslo", "population": 1}),
                call("final_result", {"name": "Bergen", "population": 2}),
            ),
        ]
    )
    agent = al.Agent(provider, tools=[echo], output_type=City)
    assert await agent.run_output("go") == City("Oslo", 1)
    assert sorted(call["text"] for call in echo.calls) == ["a", "b"]  # run at once
    given = "Not executed: the final result was given in the same reply."
    tool_results = [
        (m.tool_name, m.content[0].text, m.is_error)  # type: ignore[union-attr]
        for m in agent.messages
        if isinstance(m, al.ToolResultMessage)
    ]
    assert tool_results == [
        ("echo", "A", False),
        ("echo", "B", False),
        ("echo", given, True),
        ("final_result", "Final result accepted.", False),
        ("final_result", given, True),
    ]
    assert_well_formed(agent.messages)


async def test_an_invalid_final_call_beside_tools_lets_the_tools_run() -> None:
    echo = Echo()
    provider = ScriptedProvider(
        [
            reply(call("echo", {"text": "x"}), call("final_result", {"name": "Oslo"})),
            reply(call("final_result", {"name": "Oslo", "population": 1})),
        ]
    )
    agent = al.Agent(provider, tools=[echo], output_type=City)
    _, end = await run(agent, "go")
    assert end.output == City("Oslo", 1)
    assert echo.calls == [{"text": "x"}]
    assert results(end)[:2] == [
        ("echo", "X", False),
        (
            "final_result",
            "Invalid output: $: 'population' is a required property. "
            "Call final_result again with the corrected answer.",
            True,
        ),
    ]


async def test_partial_output_streams_as_events() -> None:
    arguments = {"name": "Lima", "population": 9, "tags": ["coast"]}
    provider = ScriptedProvider([reply(call("final_result", arguments))], chunk_size=6)
    agent = al.Agent(provider, output_type=City)
    recorder, end = await run(agent, "go")
    partials = [event.partial for event in recorder.of_type(al.OutputUpdate)]
    # Pieces: '{"name' '": "Li' 'ma", "' 'popula' 'tion":' ' 9, "t' 'ags": ' '["coas' 't"]}'
    assert partials == [
        {},
        {"name": "Li"},
        {"name": "Lima"},
        {"name": "Lima", "population": 9},
        {"name": "Lima", "population": 9, "tags": ["coas"]},
        {"name": "Lima", "population": 9, "tags": ["coast"]},
    ]
    names = recorder.names()
    first = names.index("OutputUpdate")
    assert names[first - 1] == "MessageUpdate"
    assert end.output == City("Lima", 9, ("coast",))


async def test_output_in_a_sub_agent_comes_back_as_json() -> None:
    child = ScriptedProvider(
        [reply(call("final_result", {"result": [{"name": "Lima", "population": 9}]}))]
    )
    finder = SubAgentTool("finder", child, output_type=list[City])
    parent = ScriptedProvider([reply(call("finder", {"task": "find"}, id="s1")), reply("ok")])
    agent = al.Agent(parent, tools=[finder])
    recorder, end = await run(agent, "go")
    (tool_end,) = [e for e in recorder.of_type(al.ToolExecutionEnd) if e.tool_call_id == "s1"]
    assert tool_end.result.text_content == '[{"name": "Lima", "population": 9, "tags": []}]'
    assert tool_end.result.details is not None
    assert tool_end.result.details["output"] == [City("Lima", 9)]
    assert end.output is None  # the parent has no output_type


async def test_a_sub_agent_without_valid_output_fails_the_call() -> None:
    child = ScriptedProvider([reply("no idea")])
    finder = SubAgentTool("finder", child, output_type=al.Output(City, retries=0))
    parent = ScriptedProvider([reply(call("finder", {"task": "find"}, id="s1")), reply("ok")])
    agent = al.Agent(parent, tools=[finder])
    _, end = await run(agent, "go")
    assert results(end) == [
        (
            "finder",
            "Sub-agent 'finder' failed: No valid output after 1 attempt: the model answered "
            "in text without calling final_result\n\nIts last output:\nno idea",
            True,
        )
    ]


async def test_run_output_needs_an_output_type() -> None:
    with pytest.raises(ValueError, match="needs an agent") as caught:
        await al.Agent(ScriptedProvider([])).run_output("go")
    assert str(caught.value) == "run_output() needs an agent with an output_type"


# --------------------------------------------------------------------------- native mode


async def test_native_mode_reads_the_text_and_asks_for_the_format() -> None:
    requests: list[ModelRequest] = []
    answers = iter(['{"name": "Lima"}', '{"name": "Lima", "population": 9}'])

    def answer(request: ModelRequest) -> Any:
        requests.append(request)
        return reply(next(answers))

    output = al.Output(City, mode="native")
    agent = al.Agent(ScriptedProvider([answer, answer]), output_type=output)
    recorder, end = await run(agent, "go")
    assert end.output == City("Lima", 9)
    assert requests[0].tools == ()
    assert requests[0].output == OutputFormat("final_result", output.schema, strict=False)
    prompts = [m.text for m in end.messages if isinstance(m, al.UserMessage)]  # type: ignore[attr-defined]
    assert prompts == [
        "go",
        "Your answer is not valid: $: 'population' is a required property. Reply again with "
        "only the JSON answer, matching the schema.",
    ]
    assert [e.partial for e in recorder.of_type(al.OutputUpdate)][-1] == {
        "name": "Lima",
        "population": 9,
    }


async def test_native_mode_runs_tools_until_the_text_answer() -> None:
    echo = Echo()
    provider = ScriptedProvider([reply(call("echo", {"text": "q"})), reply('{"x": 1, "y": 2}')])
    agent = al.Agent(provider, tools=[echo], output_type=al.Output(Point, mode="native"))
    assert await agent.run_output("go") == Point(1.0, 2.0)
    assert echo.calls == [{"text": "q"}]


# --------------------------------------------------------------------------- PartialJSON


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES, st.booleans(), st.integers(min_value=1, max_value=7))
def test_partial_json_parses_every_prefix_and_ends_exact(
    value: Any, ascii_only: bool, step: int
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    reader = PartialJSON()
    for start in range(0, len(text), step):
        reader.feed(text[start : start + step])
        reader.value()  # never raises, whatever the cut
    assert reader.value() == value
    whole = PartialJSON()
    whole.feed(text + " ")
    assert whole.value() == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": "x\\', {"a": "x"}),
        ('{"a": "x\\u00', {"a": "x"}),
        ('{"a": "x\\u00e9', {"a": "xé"}),
        ('{"a": tru', {}),
        ('{"a": [1, {"b', {"a": [1, {}]}),
        ('{"a"', {}),
        ('"ab', "ab"),
        ("[", []),
        ("", None),
    ],
)
def test_partial_json_cuts(text: str, expected: Any) -> None:
    reader = PartialJSON()
    reader.feed(text)
    assert reader.value() == expected


# --------------------------------------------------------------------------- on the wire


def _sse(events: list[tuple[str | None, dict[str, Any] | str]]) -> bytes:
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        out.append((f"event: {name}\n" if name else "") + f"data: {text}\n\n")
    return "".join(out).encode()


def _client(bodies: list[bytes], seen: list[Any]) -> Any:
    import httpx2

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(json.loads(request.content))
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=bodies[len(seen) - 1]
        )

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handler))


async def test_native_output_over_openai_chat_completions() -> None:
    """response_format goes out; the streamed JSON text comes back typed, partial on the way."""
    from agentloop.providers import OpenAIProvider

    pieces = ['{"x": 1', ".5, ", '"y": -2}']
    body = _sse(
        [
            (None, {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
            *[(None, {"choices": [{"index": 0, "delta": {"content": piece}}]}) for piece in pieces],
            (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
            (None, "[DONE]"),
        ]
    )
    seen: list[Any] = []
    provider = OpenAIProvider("gpt-5.4", api_key="sk-test", client=_client([body], seen))
    output = al.Output(Point, mode="native")
    agent = al.Agent(provider, output_type=output)
    recorder, end = await run(agent, "Where?")
    assert end.output == Point(1.5, -2.0)
    assert seen[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "final_result", "schema": output.schema, "strict": True},
    }
    assert [e.partial for e in recorder.of_type(al.OutputUpdate)] == [
        {},
        {"x": 1.5},
        {"x": 1.5, "y": -2},
    ]


async def test_tool_output_over_anthropic_messages() -> None:
    """The final_result tool goes out with the tools; its streamed input comes back typed."""
    from agentloop.providers import AnthropicProvider

    arguments = json.dumps({"name": "Lima", "population": 9})
    body = _sse(
        [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "model": "claude-sonnet-5",
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": 20, "output_tokens": 1},
                    },
                },
            ),
            (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "final_result",
                        "input": {},
                    },
                },
            ),
            *[
                (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "input_json_delta", "partial_json": arguments[i : i + 9]},
                    },
                )
                for i in range(0, len(arguments), 9)
            ],
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use"},
                    "usage": {"output_tokens": 12},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )
    seen: list[Any] = []
    provider = AnthropicProvider(
        "claude-sonnet-5", api_key="sk-ant-test", client=_client([body], seen)
    )
    agent = al.Agent(provider, output_type=City)
    _, end = await run(agent, "Largest city in Peru?")
    assert end.output == City("Lima", 9)
    (tool,) = seen[0]["tools"]
    assert (tool["name"], tool["input_schema"]) == ("final_result", al.Output(City).schema)
    assert results(end) == [("final_result", "Final result accepted.", False)]
