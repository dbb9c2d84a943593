from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_openai import decode_openai

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}


def item(call: dict[str, object], **extra: object) -> dict[str, object]:
    function = {"name": call["name"], "arguments": json.dumps(call["arguments"])}
    return {**extra, "function": function}


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (json.dumps({"tool_calls": [item(W, id="call_1", type="function")]}), "ok", (W,)),
        (json.dumps([item(W), item(T)]), "ok", (W, T)),  # a bare list
        (json.dumps({"tool_calls": []}), "ok", ()),
        ("[]", "ok", ()),
        ("The answer is 42.", "no_json", None),  # content only
        ("", "no_json", None),
        (json.dumps([item(W)])[:-1], "invalid_json", None),
        ('[{"function": {"name": "f", "arguments": "{\\"a\\": 1,}"}}]', "invalid_json", None),
        (
            '[{"function": {"name": "f", "arguments": "{\\"a\\": 1, \\"a\\": 2}"}}]',
            "invalid_json",
            None,
        ),
        ('{"tool_calls": [], "tool_calls": []}', "invalid_json", None),
        (json.dumps([{"function": W}]), "invalid_shape", None),  # arguments as an object
        (json.dumps({"tool_calls": [item(W)], "content": None}), "invalid_shape", None),
        (json.dumps({"calls": [item(W)]}), "invalid_shape", None),
        (json.dumps({"tool_calls": None}), "invalid_shape", None),
        (json.dumps([W]), "invalid_shape", None),  # not the endpoint's shape
        (json.dumps([item(W, type="code")]), "invalid_shape", None),
        (json.dumps([item(W, id=3)]), "invalid_shape", None),
        (json.dumps([item(W, index=0)]), "invalid_shape", None),
        (json.dumps([{"function": {"name": "f", "arguments": "[1]"}}]), "invalid_shape", None),
        (json.dumps([{"function": {"name": "", "arguments": "{}"}}]), "invalid_shape", None),
        ('{"x": 1}', "invalid_shape", None),
        ('"just a string"', "no_json", None),  # no bracket: content only
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_openai(text)
    assert (result.status, result.calls) == (status, calls)
