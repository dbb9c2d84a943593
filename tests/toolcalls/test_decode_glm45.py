from __future__ import annotations

import pytest

from sommelier_mlflow.toolcalls._decode_glm45 import decode_glm45
from tests.support.decoder_texts import TYPED_TOOLS as TOOLS
from tests.support.decoder_texts import glm45_call


def block(name: str, *, compact: bool = False, **arguments: str) -> str:
    return glm45_call(name, arguments, compact=compact)


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (
            block("get_weather", city="Paris", days="3"),
            "ok",
            ({"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},),
        ),
        (
            block("get_weather", compact=True, city="Paris", days="3"),
            "ok",
            ({"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},),
        ),
        (  # parallel calls in output order; text outside blocks is ignored
            "Checking.\n" + block("get_weather", city="Oslo") + block("book", quiet="false"),
            "ok",
            (
                {"name": "get_weather", "arguments": {"city": "Oslo"}},
                {"name": "book", "arguments": {"quiet": False}},
            ),
        ),
        (  # a string parameter keeps its text exactly, spaces included
            block("get_weather", city=" 12 "),
            "ok",
            ({"name": "get_weather", "arguments": {"city": " 12 "}},),
        ),
        (
            block("book", tags='["x"]', filters='{"a": [1]}', price="2.5"),
            "ok",
            ({"name": "book", "arguments": {"tags": ["x"], "filters": {"a": [1]}, "price": 2.5}},),
        ),
        ("<tool_call>ping\n</tool_call>", "ok", ({"name": "ping", "arguments": {}},)),
        ("<tool_call>ping</tool_call>", "ok", ({"name": "ping", "arguments": {}},)),
        ("The weather is fine.", "no_json", None),
        (block("get_weather", days="3 days"), "invalid_shape", None),
        (block("get_weather", days="-0.5"), "invalid_shape", None),
        (block("book", quiet="yes"), "invalid_shape", None),
        (block("book", tags="a, b"), "invalid_shape", None),
        (block("get_weather", days="9" * 400), "invalid_json", None),
        ("<tool_call>get_weather\n<arg_key>city</arg_key>", "invalid_json", None),  # unclosed
        ("<tool_call>get_weather<arg_key>city</arg_key></tool_call>", "invalid_json", None),
        (
            "<tool_call>f<arg_key>a</arg_key><arg_value>1</tool_call>",
            "invalid_json",
            None,
        ),
        ("<tool_call>\n</tool_call>", "invalid_json", None),  # no name
        ("<tool_call>get weather</tool_call>", "invalid_json", None),
        ('<tool_call>f\n{"a": 1}</tool_call>', "invalid_json", None),  # GLM-4's JSON form
        (
            "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>x"
            "<arg_key>b</arg_key><arg_value>2</arg_value></tool_call>",
            "invalid_json",
            None,
        ),
        (
            "<tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value>"
            "<arg_key>a</arg_key><arg_value>2</arg_value></tool_call>",
            "invalid_json",
            None,
        ),
        (block("get_weather", days="x") + "<tool_call>f", "invalid_json", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_glm45(text, TOOLS)
    assert (result.status, result.calls) == (status, calls)


def test_without_tools_every_value_is_a_string() -> None:
    result = decode_glm45(block("get_weather", days="3", quiet="true"))
    assert result.calls == ({"name": "get_weather", "arguments": {"days": "3", "quiet": "true"}},)


@pytest.mark.parametrize(
    ("text", "status", "in_reasoning"),
    [
        ("<think>" + block("get_weather", city="Paris") + "</think>No.", "no_json", True),
        ("opened in the prompt " + block("f") + "</think>No.", "no_json", True),
        ("<think></think>" + block("get_weather", city="Paris"), "ok", False),
        ("<think>" + block("f") + "</think>" + block("get_weather"), "ok", False),
        ("<think>unfinished " + block("get_weather"), "invalid_json", False),
    ],
)
def test_thoughts_are_removed_and_calls_in_them_counted(
    text: str, status: str, in_reasoning: bool
) -> None:
    result = decode_glm45(text, TOOLS)
    assert (result.status, result.calls_in_reasoning) == (status, in_reasoning)
