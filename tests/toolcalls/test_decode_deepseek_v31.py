from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_deepseek_v31 import decode_deepseek_v31

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}
# DeepSeek's tokens: U+FF5C for the bars, U+2581 for the spaces.
BEGIN, END = "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581calls\u2581end\uff5c>"
CALL, SEP = "<\uff5ctool\u2581call\u2581begin\uff5c>", "<\uff5ctool\u2581sep\uff5c>"
CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
EOS = "<\uff5cend\u2581of\u2581sentence\uff5c>"


def call(c: dict[str, object]) -> str:
    return f"{CALL}{c['name']}{SEP}{json.dumps(c['arguments'])}{CALL_END}"


def section(*calls: str) -> str:
    return BEGIN + "".join(calls) + END


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (section(call(W)), "ok", (W,)),
        (section(call(W), call(T)), "ok", (W, T)),  # parallel calls, in output order
        ("normal text" + section(call(W)) + " some suffix text", "ok", (W,)),  # as in vLLM's test
        (section(call(W)) + EOS, "ok", (W,)),  # the end-of-sentence token is outside
        (section(call(W), "\n", call(T)), "ok", (W, T)),
        (
            section(f'{CALL}f{SEP}{{"q": "{END}"}}{CALL_END}'),
            "invalid_json",  # a section ends at the first end token, as a hermes block does
            None,
        ),
        (
            section(f'{CALL}f{SEP}{{"q": "{SEP}"}}{CALL_END}'),
            "ok",
            ({"name": "f", "arguments": {"q": SEP}},),
        ),
        ("Paris is mild today.", "no_json", None),
        ("", "no_json", None),
        (json.dumps(W), "no_json", None),
        (BEGIN + call(W), "invalid_json", None),  # never closed
        (call(W), "invalid_json", None),  # a call outside any section
        (section(), "invalid_json", None),
        (section(f"{CALL}{SEP}{{}}{CALL_END}"), "invalid_json", None),  # no name
        (section(f"{CALL}get weather{SEP}{{}}{CALL_END}"), "invalid_json", None),
        (section(f"{CALL}f{{}}{CALL_END}"), "invalid_json", None),  # no separator
        (section(f'{CALL}f{SEP}{{"x": 1,}}{CALL_END}'), "invalid_json", None),
        # DeepSeek-V3's older form: "function" as the head, fenced JSON after the name
        (
            section(f'{CALL}function{SEP}get_weather\n```json\n{{"city": "Paris"}}\n```{CALL_END}'),
            "invalid_json",
            None,
        ),
        (section(f"{CALL}f{SEP}[]{CALL_END}"), "invalid_shape", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_deepseek_v31(text)
    assert (result.status, result.calls) == (status, calls)


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        # thinking mode: the prompt ends with <think>, the output closes it
        ("Paris, so get_weather " + section(call(T)) + "</think>" + section(call(W)), "ok", (W,)),
        ("<think>" + section(call(T)) + "</think>No call.", "no_json", None),
        ("<think>unfinished " + section(call(W)), "invalid_json", None),
    ],
)
def test_thoughts_are_not_answers(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_deepseek_v31(text)
    assert (result.status, result.calls) == (status, calls)


@pytest.mark.parametrize(
    ("text", "status", "in_reasoning"),
    [
        ("<think>" + section(call(T)) + "</think>No call.", "no_json", True),
        # thinking mode: the prompt opened the thought, the output closes it
        ("Paris, so " + section(call(T)) + "</think>No call.", "no_json", True),
        ("Paris, so " + section(call(T)) + "</think>" + section(call(W)), "ok", False),
        ("<think>no tools</think>Hello", "no_json", False),
        ("<think>unfinished " + section(call(W)), "invalid_json", False),
    ],
)
def test_thoughts_are_removed_and_calls_in_them_counted(
    text: str, status: str, in_reasoning: bool
) -> None:
    result = decode_deepseek_v31(text)
    assert (result.status, result.calls_in_reasoning) == (status, in_reasoning)
