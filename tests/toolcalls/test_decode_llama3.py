from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_llama3 import decode_llama3_json

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}
W_LLAMA = json.dumps({"name": "get_weather", "parameters": {"city": "Paris"}})
T_LLAMA = json.dumps({"name": "convert", "parameters": {"amount": 10, "to": "USD"}})


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (W_LLAMA, "ok", (W,)),
        ("<|python_tag|>" + W_LLAMA, "ok", (W,)),
        ("\n <|python_tag|>" + W_LLAMA + "\n", "ok", (W,)),
        (json.dumps(W), "ok", (W,)),  # "arguments" is accepted as well
        (W_LLAMA + "; " + T_LLAMA, "ok", (W, T)),
        (W_LLAMA + ";" + T_LLAMA, "ok", (W, T)),
        (
            '{"name": "f", "parameters": {"q": "a;b"}};' + T_LLAMA,
            "ok",
            ({"name": "f", "arguments": {"q": "a;b"}}, T),
        ),  # a ; inside a string does not split
        ("The weather in Paris is sunny.", "no_json", None),  # prose only: zero calls
        ("", "no_json", None),
        ("[1, 2]", "no_json", None),  # no "{" at all
        ("<|python_tag|>", "invalid_json", None),  # the tag announces a call
        ("<|python_tag|>brave_search.call(query='x')", "invalid_json", None),
        ("Sure! " + W_LLAMA, "invalid_json", None),  # prose around the object
        (W_LLAMA + " Done.", "invalid_json", None),
        (W_LLAMA + ";", "invalid_json", None),  # an empty value
        (W_LLAMA + ";;" + T_LLAMA, "invalid_json", None),
        (W_LLAMA[:-2], "invalid_json", None),
        ('{"name": "f", "parameters": {"a": 1, "a": 2}}', "invalid_json", None),
        ("[" + W_LLAMA + "]", "invalid_shape", None),  # an array is not an object
        ('{"name": "f", "parameters": {}, "arguments": {}}', "invalid_shape", None),
        ('{"name": "f"}', "invalid_shape", None),
        ('{"name": "", "parameters": {}}', "invalid_shape", None),
        ('{"name": "f", "parameters": []}', "invalid_shape", None),
        ('{"function": "f", "parameters": {}}', "invalid_shape", None),
        (W_LLAMA + '; {"name": "g"}', "invalid_shape", None),
        (W_LLAMA + '; {"name": "g"}; {', "invalid_json", None),  # syntax before shape
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_llama3_json(text)
    assert (result.status, result.calls) == (status, calls)
