from __future__ import annotations

import pytest

from sommelier_mlflow.toolcalls._decode_qwen3_xml import decode_qwen3_xml
from tests.support.decoder_texts import TYPED_TOOLS as TOOLS
from tests.support.decoder_texts import qwen3_xml_call


def block(name: str, **parameters: str) -> str:
    return qwen3_xml_call(name, parameters)


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (
            block("get_weather", city="Paris", days="3"),
            "ok",
            ({"name": "get_weather", "arguments": {"city": "Paris", "days": 3}},),
        ),
        (  # parallel calls, in output order, text outside blocks ignored
            "Sure.\n" + block("get_weather", city="Oslo") + "\n" + block("book", price="12.5"),
            "ok",
            (
                {"name": "get_weather", "arguments": {"city": "Oslo"}},
                {"name": "book", "arguments": {"price": 12.5}},
            ),
        ),
        (  # typed by the schema: a string parameter stays a string, whatever it looks like
            block("get_weather", city="42", units="null"),
            "ok",
            ({"name": "get_weather", "arguments": {"city": "42", "units": "null"}},),
        ),
        (
            block("book", quiet="true", tags='["a", "b"]', filters='{"max": 3}', price="7"),
            "ok",
            (
                {
                    "name": "book",
                    "arguments": {
                        "quiet": True,
                        "tags": ["a", "b"],
                        "filters": {"max": 3},
                        "price": 7,
                    },
                },
            ),
        ),
        (  # a union with string keeps the text; an untyped parameter is a string too
            block("book", code="12", note="[1]"),
            "ok",
            ({"name": "book", "arguments": {"code": "12", "note": "[1]"}},),
        ),
        (  # only one newline is removed on each side: the rest is the value
            "<tool_call><function=get_weather><parameter=city>\n\nParis \n</parameter>"
            "</function></tool_call>",
            "ok",
            ({"name": "get_weather", "arguments": {"city": "\nParis "}},),
        ),
        (  # a parameter the tool does not declare, and a tool not offered: strings
            block("get_weather", hour="9") + block("other", n="1"),
            "ok",
            (
                {"name": "get_weather", "arguments": {"hour": "9"}},
                {"name": "other", "arguments": {"n": "1"}},
            ),
        ),
        (block("ping"), "ok", ({"name": "ping", "arguments": {}},)),
        ("No tool is needed.", "no_json", None),
        ('{"name": "get_weather", "arguments": {}}', "no_json", None),
        # an integer parameter must read as a JSON integer
        (block("get_weather", days="three"), "invalid_shape", None),
        (block("get_weather", days="3.0"), "invalid_shape", None),
        (block("get_weather", days="true"), "invalid_shape", None),
        (block("book", quiet="True"), "invalid_shape", None),
        (block("book", tags="[1,"), "invalid_shape", None),
        (block("book", tags='{"a": 1}'), "invalid_shape", None),
        (block("get_weather", days="1" * 309), "invalid_json", None),  # as every format
        ("<tool_call>\n<function=get_weather>\n</function>", "invalid_json", None),  # unclosed
        (
            "<tool_call><function=get_weather><parameter=city>Paris</function></tool_call>",
            "invalid_json",
            None,
        ),
        ("<tool_call><function=get_weather></tool_call>", "invalid_json", None),
        ("<tool_call><function=>x</function></tool_call>", "invalid_json", None),
        ("<tool_call><function=get weather></function></tool_call>", "invalid_json", None),
        ("<tool_call>get_weather</tool_call>", "invalid_json", None),
        (  # text between parameters
            "<tool_call><function=f><parameter=a>1</parameter>and<parameter=b>2</parameter>"
            "</function></tool_call>",
            "invalid_json",
            None,
        ),
        (
            block("get_weather", city="a").replace("</function>", "</function>x"),
            "invalid_json",
            None,
        ),
        (  # a key given twice has no single meaning
            "<tool_call><function=f><parameter=a>1</parameter><parameter=a>2</parameter>"
            "</function></tool_call>",
            "invalid_json",
            None,
        ),
        # syntax before shape: a broken block refuses even after a mistyped one
        (block("get_weather", days="x") + "<tool_call><function=f>", "invalid_json", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_qwen3_xml(text, TOOLS)
    assert (result.status, result.calls) == (status, calls)


def test_without_tools_every_value_is_a_string() -> None:
    result = decode_qwen3_xml(block("get_weather", city="Paris", days="3"))
    assert result.calls == ({"name": "get_weather", "arguments": {"city": "Paris", "days": "3"}},)


def test_the_openai_tool_shape_types_values_too() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
            },
        }
    ]
    assert decode_qwen3_xml(block("f", n="5"), tools).calls == (
        {"name": "f", "arguments": {"n": 5}},
    )


@pytest.mark.parametrize(
    ("text", "status", "in_reasoning"),
    [
        # Qwen3.5 writes calls inside <think>: they are not the answer, but are counted
        ("<think>" + block("get_weather", city="Paris") + "</think>I will not.", "no_json", True),
        (  # the template opened the thought in the prompt
            "maybe " + block("get_weather", city="Paris") + "</think>\n\nNo call.",
            "no_json",
            True,
        ),
        ("<think>hmm</think>" + block("get_weather", city="Paris"), "ok", False),
        (
            "<think>" + block("get_weather", city="Oslo") + "</think>" + block("get_weather"),
            "ok",
            False,
        ),
        ("<think>no tools</think>Hello", "no_json", False),
        ("<think>never finished " + block("get_weather"), "invalid_json", False),
    ],
)
def test_thoughts_are_removed_and_calls_in_them_counted(
    text: str, status: str, in_reasoning: bool
) -> None:
    result = decode_qwen3_xml(text, TOOLS)
    assert (result.status, result.calls_in_reasoning) == (status, in_reasoning)
    if status == "ok":
        assert result.calls is not None and result.calls[0]["name"] == "get_weather"
