"""Parameter styles against the style-examples table of the OpenAPI specification.

https://spec.openapis.org/oas/v3.1.0#style-examples: ``color`` is ``"blue"``, the
array ``["blue", "black", "brown"]`` or the object ``{"R": 100, "G": 200, "B": 150}``.
The table writes some separators unencoded for reading; what is sent is percent-encoded
(``%20`` for spaceDelimited, ``%7C`` for pipeDelimited, ``%5B``/``%5D`` for deepObject).
"""

from __future__ import annotations

from typing import Any

import pytest

from agentloop import ToolError
from agentloop.openapi._params import (
    cookie_pairs,
    encode,
    header_value,
    path_value,
    query_pairs,
    scalar,
)

STRING = "blue"
ARRAY = ["blue", "black", "brown"]
OBJECT = {"R": 100, "G": 200, "B": 150}


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        ("matrix", False, STRING, ";color=blue"),
        ("matrix", True, STRING, ";color=blue"),
        ("matrix", False, ARRAY, ";color=blue,black,brown"),
        ("matrix", True, ARRAY, ";color=blue;color=black;color=brown"),
        ("matrix", False, OBJECT, ";color=R,100,G,200,B,150"),
        ("matrix", True, OBJECT, ";R=100;G=200;B=150"),
        ("matrix", False, "", ";color"),
        ("label", False, STRING, ".blue"),
        ("label", True, STRING, ".blue"),
        ("label", False, ARRAY, ".blue,black,brown"),
        ("label", True, ARRAY, ".blue.black.brown"),
        ("label", False, OBJECT, ".R,100,G,200,B,150"),
        ("label", True, OBJECT, ".R=100.G=200.B=150"),
        ("simple", False, STRING, "blue"),
        ("simple", True, STRING, "blue"),
        ("simple", False, ARRAY, "blue,black,brown"),
        ("simple", True, ARRAY, "blue,black,brown"),
        ("simple", False, OBJECT, "R,100,G,200,B,150"),
        ("simple", True, OBJECT, "R=100,G=200,B=150"),
    ],
)
def test_path_styles(style: str, explode: bool, value: Any, expected: str) -> None:
    assert path_value("color", value, style, explode) == expected


@pytest.mark.parametrize(
    ("style", "explode", "value", "expected"),
    [
        ("form", False, STRING, ["color=blue"]),
        ("form", True, STRING, ["color=blue"]),
        ("form", False, ARRAY, ["color=blue,black,brown"]),
        ("form", True, ARRAY, ["color=blue", "color=black", "color=brown"]),
        ("form", False, OBJECT, ["color=R,100,G,200,B,150"]),
        ("form", True, OBJECT, ["R=100", "G=200", "B=150"]),
        ("spaceDelimited", False, ARRAY, ["color=blue%20black%20brown"]),
        ("spaceDelimited", False, OBJECT, ["color=R%20100%20G%20200%20B%20150"]),
        ("pipeDelimited", False, ARRAY, ["color=blue%7Cblack%7Cbrown"]),
        ("pipeDelimited", False, OBJECT, ["color=R%7C100%7CG%7C200%7CB%7C150"]),
        ("deepObject", True, OBJECT, ["color%5BR%5D=100", "color%5BG%5D=200", "color%5BB%5D=150"]),
    ],
)
def test_query_styles(style: str, explode: bool, value: Any, expected: list[str]) -> None:
    assert query_pairs("color", value, style, explode) == expected


def test_values_are_percent_encoded_but_separators_are_not() -> None:
    assert path_value("p", "a b/c?d#e%", "simple", False) == "a%20b%2Fc%3Fd%23e%25"
    assert path_value("p", ["a,b", "ü"], "simple", False) == "a%2Cb,%C3%BC"
    assert query_pairs("q x", "1&2=3", "form", True) == ["q%20x=1%262%3D3"]
    assert query_pairs("q", "a/b?c", "form", True, allow_reserved=True) == ["q=a/b?c"]
    assert encode("-._~") == "-._~"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (True, "true"),
        (False, "false"),
        (None, ""),
        (3, "3"),
        (2.5, "2.5"),
        ("x", "x"),
        ({"a": [1, "é"]}, '{"a":[1,"é"]}'),
    ],
)
def test_scalar(value: Any, text: str) -> None:
    assert scalar(value) == text


def test_headers() -> None:
    assert header_value("X", STRING, False) == "blue"
    assert header_value("X", ARRAY, False) == "blue,black,brown"
    assert header_value("X", OBJECT, False) == "R,100,G,200,B,150"
    assert header_value("X", OBJECT, True) == "R=100,G=200,B=150"
    assert header_value("X", "ä ö", False) == "ä ö"  # headers are not percent-encoded
    with pytest.raises(ToolError) as info:
        header_value("X-Trace", "a\r\nSet-Cookie: x=1", False)
    assert str(info.value) == "the header parameter 'X-Trace' may not contain line breaks"


def test_cookies() -> None:
    assert cookie_pairs("color", STRING, True) == ["color=blue"]
    assert cookie_pairs("color", ARRAY, False) == ["color=blue,black,brown"]
    assert cookie_pairs("color", ARRAY, True) == ["color=blue", "color=black", "color=brown"]
    assert cookie_pairs("color", OBJECT, True) == ["R=100", "G=200", "B=150"]
    assert cookie_pairs("color", "a; b=c", True) == ["color=a%3B%20b%3Dc"]
