from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_phi4_mini import decode_phi4_mini_json

W = {"name": "get_weather", "arguments": {"city": "Tokyo"}}
T = {"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        ("functools" + json.dumps([W]), "ok", (W,)),
        ("functools" + json.dumps([W, T], indent=2) + "\n", "ok", (W, T)),  # parallel calls
        (
            'functools[{"name": "get_weather", "parameters": {"city": "Tokyo"}}]',
            "ok",
            (W,),
        ),
        (
            'functools[{"name": "refresh", "arguments": {}}]',
            "ok",
            ({"name": "refresh", "arguments": {}},),
        ),
        ("functools[]", "ok", ()),
        ("This is a regular response without any tool calls.", "no_json", None),
        ("Use functools.partial for that.", "no_json", None),  # the word, no call
        ("", "no_json", None),
        # vLLM's malformed inputs: none reads as a call
        ('functools[{"name": "func", "arguments": {', "invalid_json", None),
        ('functools{"name": "func"}', "invalid_json", None),  # no brackets
        ("functools[] This is just text", "invalid_json", None),
        ("functools[ This is just text ]", "invalid_json", None),
        ('functools[{"name": "func", "arguments": "not a dict"}]', "invalid_shape", None),
        ('functools[{"name": "func"}]', "invalid_shape", None),
        # strictness: the call starts the answer, and functools comes first
        ("Let me check.\nfunctools" + json.dumps([W]), "invalid_json", None),
        (json.dumps([W]), "invalid_json", None),
        ("functools " + json.dumps([W]), "invalid_json", None),
        ('functools[{"name": "f", "arguments": {}, "parameters": {}}]', "invalid_shape", None),
        ('functools[{"name": "f", "arguments": {"a": 1, "a": 2}}]', "invalid_json", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_phi4_mini_json(text)
    assert (result.status, result.calls) == (status, calls)
