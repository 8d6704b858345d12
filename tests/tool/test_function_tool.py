"""The @tool decorator: schemas from type hints, descriptions from docstrings, results."""

from __future__ import annotations

import dataclasses
import doctest
import enum
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Optional, Required, TypedDict

import attrs
import jsonschema
import pytest
import trio

import agentloop._tool._function
from agentloop import (
    Agent,
    AgentTool,
    FunctionTool,
    ImageContent,
    TextContent,
    ToolContext,
    ToolError,
    ToolResult,
    ToolResultMessage,
    tool,
)
from agentloop.providers import ScriptedProvider, ToolDefinition, call, reply

# --------------------------------------------------------------------------- helpers


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Pair(enum.Enum):
    A = (1, 2)


class Point(TypedDict):
    x: int
    y: Annotated[int, "Vertical."]
    color: NotRequired[Color]


class Options(TypedDict, total=False):
    verbose: bool
    depth: int


class Person(TypedDict, total=False):
    name: Annotated[Required[str], "Full name."]
    age: int


class Node(TypedDict):
    children: list[Node]


def property_schema(annotation: object) -> dict[str, Any]:
    """The schema @tool makes for a parameter ``x`` annotated ``annotation``."""

    async def fn(x):
        return None

    fn.__annotations__ = {"x": annotation}
    return tool(fn).parameters_schema["properties"]["x"]


async def received(annotation: object, value: object) -> object:
    """What a tool whose parameter ``x`` is ``annotation`` receives for the JSON ``value``."""
    seen: list[object] = []

    async def fn(x):
        seen.append(x)

    fn.__annotations__ = {"x": annotation}
    await tool(fn).execute({"x": value}, make_ctx())
    [argument] = seen
    return argument


def make_ctx() -> ToolContext:
    return ToolContext("call_1", "t", trio.CancelScope())


async def result_of(value: object) -> ToolResult:
    """The result of a tool whose function returns ``value``."""

    @tool
    async def produce() -> object:
        return value

    return await produce.execute({}, make_ctx())


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


# --------------------------------------------------------------------------- the tool


def test_tool_satisfies_the_agent_tool_protocol() -> None:
    """A decorated function is an AgentTool and a FunctionTool."""

    @tool
    async def ping() -> str:
        return "pong"

    assert isinstance(ping, FunctionTool)
    assert isinstance(ping, AgentTool)


def test_tool_keeps_the_function() -> None:
    """The original function is kept as ``fn``."""

    async def ping() -> str:
        return "pong"

    assert tool(ping).fn is ping


async def test_calling_the_tool_calls_the_function() -> None:
    """``__call__`` forwards positional and keyword arguments to the function."""

    @tool
    async def add(a: int, b: int) -> int:
        return a + b

    assert await add(2, b=3) == 5


def test_tool_is_frozen() -> None:
    """Attributes cannot be reassigned."""

    @tool
    async def ping() -> None:
        pass

    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        ping.name = "pong"


def test_repr_names_the_tool() -> None:
    """The repr shows the name, label and timeout, not the schema."""

    async def ping() -> None:
        pass

    assert repr(tool(ping)) == (
        f"FunctionTool(fn={ping!r}, name='ping', label='Ping', timeout=None)"
    )


def test_name_is_the_function_name() -> None:
    """The name is ``__name__`` and the label is it in words, capitalised."""

    @tool
    async def read_file() -> None:
        pass

    assert (read_file.name, read_file.label) == ("read_file", "Read file")


def test_parenthesised_form_without_arguments() -> None:
    """``@tool()`` is the same as ``@tool``."""

    @tool()
    async def read_file() -> None:
        pass

    assert (read_file.name, read_file.label, read_file.timeout) == ("read_file", "Read file", None)


def test_name_argument_overrides_and_makes_the_label() -> None:
    """``name=`` replaces the function's name; the label follows it."""

    @tool(name="list_all_files")
    async def ls() -> None:
        pass

    assert (ls.name, ls.label) == ("list_all_files", "List all files")


def test_label_argument_overrides() -> None:
    """``label=`` replaces the label made from the name."""

    @tool(label="Files")
    async def ls() -> None:
        pass

    assert (ls.name, ls.label) == ("ls", "Files")


def test_timeout_argument() -> None:
    """``timeout=`` is kept as the tool's timeout."""

    @tool(timeout=2.5)
    async def slow() -> None:
        pass

    assert slow.timeout == 2.5


def test_timeout_must_be_positive() -> None:
    """A timeout of 0 is rejected when decorating."""
    with pytest.raises(ValueError, match=exactly("@tool: timeout must be > 0 or None, got 0")):
        tool(timeout=0)


def test_tool_docstring_example_runs() -> None:
    """The example in ``tool``'s docstring passes as a doctest."""
    [test] = doctest.DocTestFinder().find(tool, "tool", globs={"tool": tool})
    runner = doctest.DocTestRunner()
    assert runner.run(test) == doctest.TestResults(failed=0, attempted=4)


# --------------------------------------------------------------------------- docstrings

ARGS_DOCSTRING = """Read a text file.

    Lines are numbered.

    Args:
        path: The file, relative to the root.
        limit (int): The most lines
            to return, counting
            blank lines.

    Returns:
        The numbered lines.

    Raises:
        OSError: The file cannot be read.
    """


def test_description_drops_google_sections() -> None:
    """The description is the docstring without Args, Returns and Raises."""

    async def read(path: str, limit: int) -> str:
        return ""

    read.__doc__ = ARGS_DOCSTRING
    assert tool(read).description == "Read a text file.\n\nLines are numbered."


def test_args_section_describes_parameters() -> None:
    """Args entries describe parameters; continuation lines are joined with spaces."""

    async def read(path: str, limit: int) -> str:
        return ""

    read.__doc__ = ARGS_DOCSTRING
    assert tool(read).parameters_schema["properties"] == {
        "path": {"type": "string", "description": "The file, relative to the root."},
        "limit": {
            "type": "integer",
            "description": "The most lines to return, counting blank lines.",
        },
    }


def test_docstring_without_args_section() -> None:
    """A docstring without sections is the description, whole; no parameter is described."""

    @tool
    async def search(query: str) -> str:
        """Search the code.

        Matches are case-insensitive.
        """
        return ""

    assert search.description == "Search the code.\n\nMatches are case-insensitive."
    assert search.parameters_schema["properties"] == {"query": {"type": "string"}}


def test_docstring_of_sections_only() -> None:
    """A docstring that is only sections gives the description ""."""

    @tool
    async def greet(name: str) -> str:
        """
        Args:
            name: Who to greet.
        """
        return ""

    assert greet.description == ""
    assert greet.parameters_schema["properties"] == {
        "name": {"type": "string", "description": "Who to greet."}
    }


def test_no_docstring_means_empty_description() -> None:
    """A function without a docstring has the description ""."""

    @tool
    async def ping() -> None:
        pass

    assert ping.description == ""


@pytest.mark.parametrize("header", ["Arguments:", "Parameters:"])
def test_args_section_aliases(header: str) -> None:
    """``Arguments:`` and ``Parameters:`` work like ``Args:``."""

    async def greet(name: str) -> str:
        return ""

    greet.__doc__ = f"Greet someone.\n\n{header}\n    name: Who to greet.\n"
    greeter = tool(greet)
    assert greeter.description == "Greet someone."
    assert greeter.parameters_schema["properties"] == {
        "name": {"type": "string", "description": "Who to greet."}
    }


def test_text_after_a_section_is_kept() -> None:
    """A paragraph after a removed section stays, one blank line from the text before."""

    @tool
    async def greet(name: str) -> str:
        """Greet someone.

        Args:
            name: Who to greet.

        Be polite.
        """
        return ""

    assert greet.description == "Greet someone.\n\nBe polite."


def test_other_sections_are_kept() -> None:
    """Sections other than Args, Returns and Raises stay in the description."""

    @tool
    async def greet() -> str:
        """Greet someone.

        Example:
            greet()
        """
        return ""

    assert greet.description == "Greet someone.\n\nExample:\n    greet()"


def test_description_argument_keeps_parameter_descriptions() -> None:
    """``description=`` replaces the docstring's text; Args entries still describe parameters."""

    @tool(description="Say hello.")
    async def greet(name: str) -> str:
        """Greet someone.

        Args:
            name: Who to greet.
        """
        return ""

    assert greet.description == "Say hello."
    assert greet.parameters_schema["properties"] == {
        "name": {"type": "string", "description": "Who to greet."}
    }


def test_annotated_description_wins_over_docstring() -> None:
    """An ``Annotated`` description is used instead of the Args entry."""

    @tool
    async def greet(name: Annotated[str, "From Annotated."]) -> str:
        """Greet someone.

        Args:
            name: From the docstring.
        """
        return ""

    assert greet.parameters_schema["properties"] == {
        "name": {"type": "string", "description": "From Annotated."}
    }


# --------------------------------------------------------------------------- the schema


def test_whole_schema() -> None:
    """Properties in signature order, required ones listed, no additional properties."""

    @tool
    async def copy(source: str, target: str, overwrite: bool = False) -> None:
        pass

    assert copy.parameters_schema == {
        "type": "object",
        "properties": {
            "source": {"type": "string"},
            "target": {"type": "string"},
            "overwrite": {"type": "boolean", "default": False},
        },
        "required": ["source", "target"],
        "additionalProperties": False,
    }


def test_no_parameters() -> None:
    """A function without parameters has an empty object schema, without "required"."""

    @tool
    async def ping() -> None:
        pass

    assert ping.parameters_schema == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_schema_is_valid_json_schema() -> None:
    """A schema using every kind of type passes the JSON Schema meta-schema."""

    @tool
    async def everything(
        a: Point,
        b: tuple[int, str],
        c: dict[str, list[Color]],
        d: Literal["x", 1] | None = None,
        e: Annotated[Options, "Flags."] = {},  # noqa: B006
    ) -> None:
        pass

    jsonschema.Draft202012Validator.check_schema(everything.parameters_schema)


def test_str() -> None:
    """``str`` is a JSON string."""
    assert property_schema(str) == {"type": "string"}


def test_int() -> None:
    """``int`` is a JSON integer."""
    assert property_schema(int) == {"type": "integer"}


def test_float() -> None:
    """``float`` is a JSON number."""
    assert property_schema(float) == {"type": "number"}


def test_float_accepts_integers() -> None:
    """A ``float`` parameter's schema accepts integers too."""
    assert jsonschema.Draft202012Validator(property_schema(float)).is_valid(3)


def test_bool() -> None:
    """``bool`` is a JSON boolean."""
    assert property_schema(bool) == {"type": "boolean"}


def test_none() -> None:
    """``None`` is JSON null."""
    assert property_schema(None) == {"type": "null"}


def test_any() -> None:
    """``Any`` allows anything."""
    assert property_schema(Any) == {}


def test_missing_annotation() -> None:
    """A parameter without an annotation allows anything."""

    @tool
    async def echo(value) -> None:
        pass

    assert echo.parameters_schema["properties"] == {"value": {}}


def test_list() -> None:
    """``list[X]`` is an array of X."""
    assert property_schema(list[int]) == {"type": "array", "items": {"type": "integer"}}


def test_typing_list() -> None:
    """``typing.List[X]`` is an array of X."""
    assert property_schema(typing.List[str]) == {"type": "array", "items": {"type": "string"}}  # noqa: UP006


def test_sequence() -> None:
    """``Sequence[X]`` is an array of X."""
    assert property_schema(Sequence[str]) == {"type": "array", "items": {"type": "string"}}


def test_variadic_tuple() -> None:
    """``tuple[X, ...]`` is an array of X."""
    assert property_schema(tuple[float, ...]) == {"type": "array", "items": {"type": "number"}}


def test_set() -> None:
    """``set[X]`` is an array of X."""
    assert property_schema(set[str]) == {"type": "array", "items": {"type": "string"}}


def test_frozenset() -> None:
    """``frozenset[X]`` is an array of X."""
    assert property_schema(frozenset[int]) == {"type": "array", "items": {"type": "integer"}}


def test_bare_list() -> None:
    """A bare ``list`` is an array of anything."""
    assert property_schema(list) == {"type": "array"}


def test_bare_tuple() -> None:
    """A bare ``tuple`` is an array of anything."""
    assert property_schema(tuple) == {"type": "array"}


def test_fixed_tuple() -> None:
    """``tuple[X, Y]`` is an array of exactly those items."""
    assert property_schema(tuple[int, str]) == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "string"}],
        "minItems": 2,
        "maxItems": 2,
    }


def test_empty_tuple() -> None:
    """``tuple[()]`` is an empty array."""
    assert property_schema(tuple[()]) == {"type": "array", "maxItems": 0}


def test_dict() -> None:
    """``dict[str, X]`` is an object whose values are X."""
    assert property_schema(dict[str, int]) == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
    }


def test_mapping() -> None:
    """``Mapping[str, X]`` is an object whose values are X."""
    assert property_schema(Mapping[str, bool]) == {
        "type": "object",
        "additionalProperties": {"type": "boolean"},
    }


def test_bare_dict() -> None:
    """A bare ``dict`` is any object."""
    assert property_schema(dict) == {"type": "object"}


def test_nested_containers() -> None:
    """Containers nest."""
    assert property_schema(dict[str, list[tuple[int, int]]]) == {
        "type": "object",
        "additionalProperties": {
            "type": "array",
            "items": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "integer"}],
                "minItems": 2,
                "maxItems": 2,
            },
        },
    }


def test_literal_strings() -> None:
    """A Literal of strings is a string enum."""
    assert property_schema(Literal["a", "b"]) == {"type": "string", "enum": ["a", "b"]}


def test_literal_integers() -> None:
    """A Literal of integers is an integer enum."""
    assert property_schema(Literal[1, 2]) == {"type": "integer", "enum": [1, 2]}


def test_literal_booleans() -> None:
    """A Literal of booleans is a boolean enum, not an integer one."""
    assert property_schema(Literal[True]) == {"type": "boolean", "enum": [True]}


def test_literal_none() -> None:
    """``Literal[None]`` is a null enum."""
    assert property_schema(Literal[None]) == {"type": "null", "enum": [None]}


def test_literal_integers_and_floats() -> None:
    """A Literal mixing integers and floats is a number enum."""
    assert property_schema(Literal[1, 2.5]) == {"type": "number", "enum": [1, 2.5]}


def test_literal_mixed_types() -> None:
    """A Literal of values of different JSON types is an enum without a type."""
    assert property_schema(Literal["a", 1]) == {"enum": ["a", 1]}


def test_enum() -> None:
    """An Enum is an enum of its members' values."""
    assert property_schema(Color) == {"enum": ["red", "blue"]}


def test_int_enum() -> None:
    """An IntEnum is an enum of its members' integer values."""
    assert property_schema(Level) == {"enum": [1, 2]}


def test_optional() -> None:
    """``X | None`` is X or null."""
    assert property_schema(int | None) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_typing_optional() -> None:
    """``Optional[X]`` is X or null."""
    assert property_schema(Optional[str]) == {"anyOf": [{"type": "string"}, {"type": "null"}]}  # noqa: UP045


def test_none_first_goes_last() -> None:
    """``None | X`` lists null last too."""
    assert property_schema(None | int) == {"anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_union() -> None:
    """Other unions are ``anyOf`` their members, in order."""
    assert property_schema(int | str | list[int]) == {
        "anyOf": [
            {"type": "integer"},
            {"type": "string"},
            {"type": "array", "items": {"type": "integer"}},
        ]
    }


def test_annotated_description() -> None:
    """A string in ``Annotated`` becomes the description."""
    assert property_schema(Annotated[int, "How many."]) == {
        "type": "integer",
        "description": "How many.",
    }


def test_annotated_without_string() -> None:
    """``Annotated`` metadata other than strings is ignored."""
    assert property_schema(Annotated[int, 42]) == {"type": "integer"}


def test_annotated_inside_containers() -> None:
    """``Annotated`` describes the items of a container too."""
    assert property_schema(list[Annotated[str, "A name."]]) == {
        "type": "array",
        "items": {"type": "string", "description": "A name."},
    }


def test_typed_dict() -> None:
    """A TypedDict is an object with its keys; NotRequired keys are optional."""
    assert property_schema(Point) == {
        "type": "object",
        "properties": {
            "x": {"type": "integer"},
            "y": {"type": "integer", "description": "Vertical."},
            "color": {"enum": ["red", "blue"]},
        },
        "required": ["x", "y"],
        "additionalProperties": False,
    }


def test_typed_dict_total_false() -> None:
    """A ``total=False`` TypedDict has no required keys."""
    assert property_schema(Options) == {
        "type": "object",
        "properties": {"verbose": {"type": "boolean"}, "depth": {"type": "integer"}},
        "additionalProperties": False,
    }


def test_typed_dict_required_key_when_total_false() -> None:
    """A ``Required`` key of a ``total=False`` TypedDict is required, through ``Annotated``."""
    assert property_schema(Person) == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Full name."},
            "age": {"type": "integer"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }


# --------------------------------------------------------------------------- defaults


def test_default_makes_optional() -> None:
    """A parameter with a default is optional and shows the default."""

    @tool
    async def head(path: str, lines: int = 10) -> None:
        pass

    assert head.parameters_schema["required"] == ["path"]
    assert head.parameters_schema["properties"]["lines"] == {"type": "integer", "default": 10}


def test_none_default() -> None:
    """A ``None`` default is shown as null."""

    @tool
    async def find(name: str | None = None) -> None:
        pass

    assert find.parameters_schema["properties"]["name"] == {
        "anyOf": [{"type": "string"}, {"type": "null"}],
        "default": None,
    }


def test_enum_default_is_its_value() -> None:
    """An Enum member default is shown as its value."""

    @tool
    async def paint(color: Color = Color.BLUE) -> None:
        pass

    assert paint.parameters_schema["properties"]["color"] == {
        "enum": ["red", "blue"],
        "default": "blue",
    }


def test_tuple_default_is_a_list() -> None:
    """A tuple default is shown as a JSON array."""

    @tool
    async def move(to: tuple[int, int] = (0, 0)) -> None:
        pass

    assert move.parameters_schema["properties"]["to"]["default"] == [0, 0]


def test_dict_default() -> None:
    """A dict default with string keys is shown as a JSON object."""

    @tool
    async def tag(labels: dict[str, str] = {"env": "dev"}) -> None:  # noqa: B006
        pass

    assert tag.parameters_schema["properties"]["labels"]["default"] == {"env": "dev"}


@pytest.mark.parametrize("default", [object(), float("nan"), {1: "a"}, [object()]])
def test_unserializable_default_is_not_shown(default: object) -> None:
    """A default that is not JSON is left out of the schema; the parameter stays optional."""

    async def fn(x: Any = default) -> None:
        pass

    assert tool(fn).parameters_schema == {
        "type": "object",
        "properties": {"x": {}},
        "additionalProperties": False,
    }


async def test_missing_optional_argument_uses_the_default() -> None:
    """An argument the model leaves out gets the function's default."""

    @tool
    async def head(path: str, lines: int = 10) -> str:
        return f"{path}:{lines}"

    assert await head.execute({"path": "a.txt"}, make_ctx()) == ToolResult.text("a.txt:10")


# --------------------------------------------------------------------------- the context


async def test_context_parameter_receives_the_context() -> None:
    """A ToolContext parameter, whatever its name, gets the call's context."""
    seen: list[ToolContext] = []

    @tool
    async def work(job: str, call_context: ToolContext) -> None:
        seen.append(call_context)

    ctx = make_ctx()
    await work.execute({"job": "x"}, ctx)
    assert seen == [ctx]
    assert seen[0] is ctx


def test_context_parameter_is_not_in_the_schema() -> None:
    """The ToolContext parameter is neither a property nor required."""

    @tool
    async def work(ctx: ToolContext, job: str) -> None:
        pass

    assert work.parameters_schema == {
        "type": "object",
        "properties": {"job": {"type": "string"}},
        "required": ["job"],
        "additionalProperties": False,
    }


async def test_annotated_context_parameter() -> None:
    """``Annotated[ToolContext, ...]`` is a context parameter too."""
    seen: list[ToolContext] = []

    @tool
    async def work(ctx: Annotated[ToolContext, "The call."]) -> None:
        seen.append(ctx)

    ctx = make_ctx()
    await work.execute({}, ctx)
    assert work.parameters_schema["properties"] == {}
    assert seen[0] is ctx


def test_two_context_parameters() -> None:
    """Two ToolContext parameters are rejected."""

    async def work(a: ToolContext, b: ToolContext) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(work)
    assert str(excinfo.value) == (
        "@tool: parameters 'a' and 'b' of work() are both ToolContext; a tool takes at most one"
    )


# --------------------------------------------------------------------------- arguments


async def test_arguments_are_passed_by_keyword() -> None:
    """``execute`` passes the params as keyword arguments."""

    @tool
    async def divide(numerator: float, denominator: float) -> float:
        return numerator / denominator

    result = await divide.execute({"denominator": 4, "numerator": 2}, make_ctx())
    assert result == ToolResult.text("0.5", details=0.5)


async def test_enum_argument_becomes_the_member() -> None:
    """An Enum argument arrives as the member, not its value."""
    assert await received(Color, "blue") is Color.BLUE


async def test_enum_items_become_members() -> None:
    """The items of a ``list[Enum]`` arrive as members."""
    assert await received(list[Color], ["red", "blue"]) == [Color.RED, Color.BLUE]


async def test_enum_mapping_values_become_members() -> None:
    """The values of a ``dict[str, Enum]`` arrive as members."""
    assert await received(dict[str, Color], {"a": "red"}) == {"a": Color.RED}


async def test_optional_enum_accepts_none() -> None:
    """``Enum | None`` passes null through as ``None``."""
    assert await received(Color | None, None) is None


async def test_optional_enum_converts_a_value() -> None:
    """``Enum | None`` turns a value into the member."""
    assert await received(Color | None, "red") is Color.RED


async def test_union_converts_by_the_matching_member() -> None:
    """In ``Enum | int``, an integer stays an integer."""
    assert await received(Color | int, 3) == 3


async def test_typed_dict_enum_field_becomes_the_member() -> None:
    """An Enum field of a TypedDict arrives as the member."""
    assert await received(Point, {"x": 1, "y": 2, "color": "red"}) == {
        "x": 1,
        "y": 2,
        "color": Color.RED,
    }


async def test_variadic_tuple_argument_is_a_tuple() -> None:
    """A ``tuple[X, ...]`` argument arrives as a tuple."""
    assert await received(tuple[int, ...], [1, 2]) == (1, 2)


async def test_fixed_tuple_argument_is_a_tuple() -> None:
    """A ``tuple[X, Y]`` argument arrives as a tuple, items converted."""
    assert await received(tuple[Color, int], ["red", 2]) == (Color.RED, 2)


async def test_set_argument_is_a_set() -> None:
    """A ``set[X]`` argument arrives as a set."""
    assert await received(set[str], ["a", "b", "a"]) == {"a", "b"}


async def test_frozenset_argument_is_a_frozenset() -> None:
    """A ``frozenset[X]`` argument arrives as a frozenset."""
    value = await received(frozenset[Color], ["red"])
    assert (type(value), value) == (frozenset, frozenset({Color.RED}))


async def test_list_argument_is_passed_as_is() -> None:
    """A ``list[int]`` argument is the very list from the arguments."""
    values = [1, 2]
    assert await received(list[int], values) is values


async def test_function_exceptions_propagate() -> None:
    """An exception from the function leaves ``execute`` unchanged."""
    error = ValueError("bad path")

    @tool
    async def fail() -> None:
        raise error

    with pytest.raises(ValueError, match=exactly("bad path")) as excinfo:
        await fail.execute({}, make_ctx())
    assert excinfo.value is error


# --------------------------------------------------------------------------- results


async def test_tool_result_is_returned_as_is() -> None:
    """A returned ToolResult is the result."""
    result = ToolResult.text("hi", details={"n": 1})
    assert await result_of(result) is result


async def test_str_result() -> None:
    """A returned str becomes a text result."""
    assert await result_of("hello") == ToolResult.text("hello")


async def test_str_enum_result_is_plain_text() -> None:
    """A returned str subclass becomes a plain str."""

    class Mood(str, enum.Enum):  # noqa: UP042
        HAPPY = "happy"

    result = await result_of(Mood.HAPPY)
    assert result == ToolResult.text("happy")
    assert type(result.content[0].text) is str


async def test_none_result() -> None:
    """A returned None becomes an empty text result."""
    assert await result_of(None) == ToolResult.text("")


async def test_text_content_result() -> None:
    """A returned TextContent becomes a one-block result."""
    assert await result_of(TextContent("hi")) == ToolResult((TextContent("hi"),))


async def test_image_content_result() -> None:
    """A returned ImageContent becomes a one-block result."""
    image = ImageContent("aGk=", "image/png")
    assert await result_of(image) == ToolResult((image,))


async def test_list_of_blocks_result() -> None:
    """A returned list of content blocks becomes a result with those blocks."""
    blocks = [TextContent("a"), ImageContent("aGk=", "image/png")]
    assert await result_of(blocks) == ToolResult(tuple(blocks))


async def test_tuple_of_blocks_result() -> None:
    """A returned tuple of content blocks becomes a result with those blocks."""
    blocks = (TextContent("a"), TextContent("b"))
    assert await result_of(blocks) == ToolResult(blocks)


async def test_dict_result() -> None:
    """A returned dict becomes its JSON text, with the dict as details."""
    value = {"name": "café", "size": 3}
    assert await result_of(value) == ToolResult.text('{"name": "café", "size": 3}', details=value)


async def test_list_result() -> None:
    """A returned list of JSON values becomes its JSON text, with the list as details."""
    assert await result_of([1, "a", None]) == ToolResult.text(
        '[1, "a", null]', details=[1, "a", None]
    )


async def test_empty_list_result() -> None:
    """A returned empty list is JSON, not an empty set of blocks."""
    assert await result_of([]) == ToolResult.text("[]", details=[])


async def test_int_result() -> None:
    """A returned int becomes its JSON text, with the int as details."""
    assert await result_of(42) == ToolResult.text("42", details=42)


async def test_float_result() -> None:
    """A returned float becomes its JSON text, with the float as details."""
    assert await result_of(1.5) == ToolResult.text("1.5", details=1.5)


async def test_bool_result() -> None:
    """A returned bool becomes JSON ``true``, with the bool as details."""
    assert await result_of(True) == ToolResult.text("true", details=True)


async def test_unsupported_result() -> None:
    """A returned value that is not JSON raises ToolError naming its type."""
    message = (
        "Tool 'produce' returned complex, expected a ToolResult, str, None, "
        "content blocks or a JSON value"
    )
    with pytest.raises(ToolError, match=exactly(message)):
        await result_of(1j)


async def test_unserializable_dict_result() -> None:
    """A returned dict holding a non-JSON value raises ToolError."""
    message = (
        "Tool 'produce' returned a dict that is not JSON-serializable: "
        "Object of type complex is not JSON serializable"
    )
    with pytest.raises(ToolError, match=exactly(message)):
        await result_of({"z": 1j})


async def test_mixed_blocks_and_values_result() -> None:
    """A returned list mixing content blocks and other values raises ToolError."""
    message = (
        "Tool 'produce' returned a list that is not JSON-serializable: "
        "Object of type TextContent is not JSON serializable"
    )
    with pytest.raises(ToolError, match=exactly(message)):
        await result_of([TextContent("a"), 1])


# --------------------------------------------------------------------------- decoration errors


def test_sync_function_is_rejected() -> None:
    """A plain ``def`` function is rejected, pointing to async def and to_thread."""

    def read_file(path: str) -> str:
        return ""

    with pytest.raises(TypeError) as excinfo:
        tool(read_file)
    assert str(excinfo.value) == (
        "@tool needs an async function: define read_file() with 'async def', and run "
        "blocking work in it with 'await trio.to_thread.run_sync(...)'"
    )


def test_async_generator_is_rejected() -> None:
    """An async generator function is rejected."""

    async def lines() -> typing.AsyncIterator[str]:
        yield ""

    with pytest.raises(TypeError) as excinfo:
        tool(lines)
    assert str(excinfo.value) == (
        "@tool: lines() is an async generator; a tool returns one result "
        "(send partial results with 'await ctx.update(...)')"
    )


def test_string_instead_of_function() -> None:
    """``@tool("name")`` is rejected, pointing to ``name=``."""
    with pytest.raises(TypeError) as excinfo:
        tool("search")
    assert str(excinfo.value) == (
        "tool() takes an async function, got the string 'search'; "
        "to name the tool, write @tool(name='search')"
    )


def test_not_callable() -> None:
    """A value that is not callable is rejected."""
    with pytest.raises(TypeError) as excinfo:
        tool(42)
    assert str(excinfo.value) == "tool() takes an async function, got int"


def test_var_positional_is_rejected() -> None:
    """``*args`` is rejected, naming the parameter."""

    async def run(*commands: str) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(run)
    assert str(excinfo.value) == (
        "@tool: parameter *commands of run() is not supported; tool arguments are passed by name"
    )


def test_var_keyword_is_rejected() -> None:
    """``**kwargs`` is rejected, naming the parameter."""

    async def run(**options: str) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(run)
    assert str(excinfo.value) == (
        "@tool: parameter **options of run() is not supported; tool arguments are passed by name"
    )


def test_positional_only_is_rejected() -> None:
    """A positional-only parameter is rejected, naming it."""

    async def run(command: str, /) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(run)
    assert str(excinfo.value) == (
        "@tool: parameter 'command' of run() is positional-only; tool arguments are passed by name"
    )


UNSUPPORTED_HINT = (
    "; use str, int, float, bool, None, Any, Literal, an Enum, a TypedDict, "
    "an attrs class, a dataclass, or a list, tuple, set, dict or union of these"
)


def test_unsupported_type_is_rejected() -> None:
    """A type without a JSON Schema is rejected, naming the parameter and the type."""

    async def scale(factor: complex) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(scale)
    assert str(excinfo.value) == (
        f"@tool: parameter 'factor' of scale() has unsupported type complex{UNSUPPORTED_HINT}"
    )


def test_nested_unsupported_type_is_rejected() -> None:
    """An unsupported type inside a container is named, with the whole annotation."""

    async def scale(factors: list[complex] | None) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(scale)
    assert str(excinfo.value) == (
        "@tool: parameter 'factors' of scale() has unsupported type complex "
        f"(in list[complex] | None){UNSUPPORTED_HINT}"
    )


def test_non_string_dict_keys_are_rejected() -> None:
    """``dict[int, X]`` is rejected: JSON object keys are strings."""

    async def lookup(table: dict[int, str]) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(lookup)
    assert str(excinfo.value) == (
        "@tool: parameter 'table' of lookup() has unsupported type dict[int, str]: "
        "JSON object keys are strings, so use dict[str, ...]"
    )


def test_enum_with_non_json_values_is_rejected() -> None:
    """An Enum whose values are not JSON scalars is rejected."""

    async def pick(pair: Pair) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(pick)
    assert str(excinfo.value) == (
        "@tool: parameter 'pair' of pick() has unsupported type Pair: "
        "its values must be str, int, float, bool or None"
    )


def test_literal_of_enum_member_is_rejected() -> None:
    """A Literal of an Enum member is rejected."""

    async def pick(color: Literal[Color.RED]) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(pick)
    assert str(excinfo.value) == (
        "@tool: parameter 'color' of pick() has unsupported type "
        "Literal[<Color.RED: 'red'>]: Literal values must be str, int, float, bool or None"
    )


def test_recursive_typed_dict_is_rejected() -> None:
    """A TypedDict that contains itself is rejected."""

    async def walk(tree: Node) -> None:
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(walk)
    assert str(excinfo.value) == (
        "@tool: parameter 'tree' of walk() has unsupported type Node: "
        "recursive types are not supported"
    )


def test_unresolvable_annotation_is_rejected() -> None:
    """An annotation that names nothing is rejected."""

    async def use(thing: Missing) -> None:  # noqa: F821
        pass

    with pytest.raises(TypeError) as excinfo:
        tool(use)
    assert str(excinfo.value) == (
        "@tool: cannot resolve the type hints of use(): name 'Missing' is not defined"
    )


# --------------------------------------------------------------------------- end to end


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


async def test_agent_runs_a_decorated_tool() -> None:
    """The loop calls the tool and sends its result back to the model."""
    provider = ScriptedProvider(
        [reply("Adding.", call("add", {"a": 2, "b": 3}, id="c1")), reply("done")]
    )
    agent = Agent(provider, tools=[add])
    await agent.run("What is 2 + 3?")
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_call_id, m.tool_name, m.content, m.is_error) for m in results] == [
        ("c1", "add", (TextContent("5"),), False)
    ]


async def test_agent_sends_the_tool_definition() -> None:
    """The model is sent the tool's name, description and schema."""
    provider = ScriptedProvider([reply("done")])
    await Agent(provider, tools=[add]).run("hi")
    assert provider.requests[0].tools == (
        ToolDefinition(
            "add",
            "Add two integers.",
            {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "The first."},
                    "b": {"type": "integer", "description": "The second."},
                },
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        ),
    )


async def test_agent_rejects_arguments_of_the_wrong_type() -> None:
    """The loop checks the arguments against the schema before calling the function."""
    calls: list[object] = []

    @tool
    async def double(x: int) -> int:
        calls.append(x)
        return 2 * x

    provider = ScriptedProvider([reply(call("double", {"x": "two"}, id="c1")), reply("done")])
    agent = Agent(provider, tools=[double])
    await agent.run("Double two.")
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [(m.content, m.is_error) for m in results] == [
        ((TextContent("Invalid arguments: $.x: 'two' is not of type 'integer'"),), True)
    ]
    assert calls == []


async def test_agent_reports_an_exception_from_the_function() -> None:
    """An exception the function raises becomes an error result naming it."""

    @tool
    async def explode() -> None:
        raise RuntimeError("boom")

    provider = ScriptedProvider([reply(call("explode", id="c1")), reply("done")])
    agent = Agent(provider, tools=[explode])
    await agent.run("Go.")
    results = [m for m in agent.messages if isinstance(m, ToolResultMessage)]
    assert [(m.content, m.is_error) for m in results] == [
        ((TextContent("RuntimeError: boom"),), True)
    ]


def test_module_exports() -> None:
    """The module exports exactly ``tool`` and ``FunctionTool``."""
    assert agentloop._tool._function.__all__ == ["FunctionTool", "tool"]


# --------------------------------------------------------------------------- records


@attrs.frozen
class Address:
    """Where to send it."""

    street: str
    number: int = 1


@dataclasses.dataclass
class Size:
    width: int
    height: int = 0


async def test_attrs_and_dataclass_parameters_are_built() -> None:
    """attrs classes and dataclasses are objects of their init fields, built for the call."""
    seen: list[object] = []

    @tool
    async def ship(to: Address, box: Size) -> str:
        """Ship a box."""
        seen.extend([to, box])
        return "ok"

    assert ship.parameters_schema["properties"] == {
        "to": {
            "type": "object",
            "description": "Where to send it.",
            "properties": {"street": {"type": "string"}, "number": {"type": "integer"}},
            "required": ["street"],
            "additionalProperties": False,
        },
        "box": {
            "type": "object",
            "properties": {"width": {"type": "integer"}, "height": {"type": "integer"}},
            "required": ["width"],
            "additionalProperties": False,
        },
    }
    result = await ship.execute({"to": {"street": "Main"}, "box": {"width": 2}}, make_ctx())
    assert result.text_content == "ok"
    assert seen == [Address("Main"), Size(2)]
