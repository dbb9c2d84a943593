from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_xlam import decode_xlam

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD", "when": {"day": [1, 2]}}}


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (json.dumps([W]), "ok", (W,)),
        (json.dumps([W, T]), "ok", (W, T)),  # parallel calls, nested arguments
        ("\n " + json.dumps([W], indent=2) + "\n", "ok", (W,)),
        ("[]", "ok", ()),  # an explicit empty list
        (
            '[{"name": "f", "arguments": {"n": 123456789012345678901234567890}}]',
            "ok",
            ({"name": "f", "arguments": {"n": 123456789012345678901234567890}},),
        ),
        ("<think>I'll help.</think>" + json.dumps([W]), "ok", (W,)),  # as vLLM's test
        ("I can only help with the weather.", "no_json", None),
        ("", "no_json", None),
        ("Sure: " + json.dumps([W]), "invalid_json", None),  # prose around the list
        ("```json\n" + json.dumps([W]) + "\n```", "invalid_json", None),  # a code fence
        ("[TOOL_CALLS]" + json.dumps([W]), "invalid_json", None),  # another format's marker
        (json.dumps([W])[:-3], "invalid_json", None),  # cut off
        ('[{"name": "f", "arguments": {"a": 1, "a": 2}}]', "invalid_json", None),
        ("<think>" + json.dumps([W]), "invalid_json", None),  # a thought never closed
        ("I think (maybe) [not]", "invalid_json", None),
        (json.dumps(W), "invalid_shape", None),  # one call, not a list of calls
        (json.dumps([W, {"name": "x"}]), "invalid_shape", None),
        (json.dumps([{"name": "f", "parameters": {}}]), "invalid_shape", None),
        (json.dumps([{"name": "f", "arguments": "{}"}]), "invalid_shape", None),
        (json.dumps([[W]]), "invalid_shape", None),
        (json.dumps({"tool_calls": [W]}), "invalid_shape", None),  # xLAM-1's object
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_xlam(text)
    assert (result.status, result.calls) == (status, calls)


@pytest.mark.parametrize(
    ("text", "status", "in_reasoning"),
    [
        ("<think>" + json.dumps([W]) + "</think>I can't help.", "no_json", True),
        ("<think>call " + json.dumps(W) + " maybe</think>", "no_json", True),  # one call object
        ("the prompt opened it " + json.dumps([W]) + "</think>No.", "no_json", True),
        ("<think>" + json.dumps([T]) + "</think>" + json.dumps([W]), "ok", False),
        ("<think>no tools {at all}</think>Hello", "no_json", False),  # braces, no call
        ("<think>[]</think>Hello", "no_json", False),  # an empty list calls nothing
        ("<think>" + json.dumps([W]), "invalid_json", False),  # never closed
    ],
)
def test_thoughts_are_removed_and_calls_in_them_counted(
    text: str, status: str, in_reasoning: bool
) -> None:
    result = decode_xlam(text)
    assert (result.status, result.calls_in_reasoning) == (status, in_reasoning)
