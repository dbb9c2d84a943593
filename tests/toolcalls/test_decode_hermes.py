from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}


def block(call: object) -> str:
    return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (block(W), "ok", (W,)),
        (block(W) + "\n" + block(T), "ok", (W, T)),  # parallel calls, in output order
        ("Let me check.\n" + block(W) + "\nDone.", "ok", (W,)),  # text outside is ignored
        (f"<tool_call>{json.dumps(W)}</tool_call>", "ok", (W,)),  # no whitespace needed
        ("I cannot help with that.", "no_json", None),  # no block: zero calls
        ("Here: " + json.dumps(W), "no_json", None),  # bare JSON is not this format
        ("", "no_json", None),
        ("<tool_call>" + json.dumps(W), "invalid_json", None),  # never closed
        (block(W) + "<tool_call>" + json.dumps(T), "invalid_json", None),
        ("<tool_call>{'name': 'f'}</tool_call>", "invalid_json", None),
        ('<tool_call>{"name": "f", "arguments": {},}</tool_call>', "invalid_json", None),
        (
            '<tool_call>{"name": "f", "arguments": {"a": 1, "a": 2}}</tool_call>',
            "invalid_json",
            None,
        ),
        (
            "<tool_call>\u00a0" + json.dumps(W) + "</tool_call>",
            "invalid_json",
            None,
        ),  # not JSON space
        (block([W, T]), "invalid_shape", None),  # a block holds exactly one call
        (block({"name": "f"}), "invalid_shape", None),
        (block({"name": "", "arguments": {}}), "invalid_shape", None),
        (block({"name": "f", "arguments": "{}"}), "invalid_shape", None),
        (block(W) + block({"name": "f", "arguments": {}, "id": 1}), "invalid_shape", None),
        # syntax before shape: a broken block refuses even after a wrong-shaped one
        (block([W]) + "<tool_call>{", "invalid_json", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_hermes(text)
    assert (result.status, result.calls) == (status, calls)


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        ("<think>maybe " + block(T) + "?</think>" + block(W), "ok", (W,)),
        ("<think>" + block(T) + "</think>no call needed", "no_json", None),
        # a thought the prompt opened: only its closing tag is in the output
        ("I should use " + block(T) + " here</think>\n\n" + block(W), "ok", (W,)),
        ("<think>a</think>" + block(W) + "<think>b " + block(T) + "</think>", "ok", (W,)),
        ("<think>still thinking " + block(W), "invalid_json", None),  # never finished
        ("<think></think>" + block(W), "ok", (W,)),
    ],
)
def test_thoughts_are_not_answers(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_hermes(text)
    assert (result.status, result.calls) == (status, calls)


def test_deep_nesting_is_a_status_not_a_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert decode_hermes(f"<tool_call>{deep}</tool_call>").status == "invalid_json"
    deep_call = {"name": "f", "arguments": {"a": json.loads("[" * 500 + "]" * 500)}}
    assert decode_hermes(block(deep_call)).status == "ok"


@pytest.mark.parametrize(
    ("text", "in_reasoning"),
    [
        ("<think>" + block(T) + "</think>no call needed", True),
        ("I should use " + block(T) + "</think>\n\nno", True),  # thought opened by the prompt
        ("<think>no tools</think>Hello", False),
        ("Hello", False),
        ("<think>" + block(T) + "</think>" + block(W), False),  # the answer calls: not counted
    ],
)
def test_an_output_whose_only_call_was_thought_is_flagged(text: str, in_reasoning: bool) -> None:
    result = decode_hermes(text)
    assert result.calls_in_reasoning is in_reasoning
    assert result.status == ("ok" if text.endswith(block(W)) else "no_json")
