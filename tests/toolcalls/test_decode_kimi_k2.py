from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_kimi_k2 import decode_kimi_k2

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}
BEGIN, END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL, ARGS, CALL_END = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"


def call(c: dict[str, object], index: int = 0, prefix: str = "functions.") -> str:
    return f"{CALL}{prefix}{c['name']}:{index}{ARGS}{json.dumps(c['arguments'])}{CALL_END}"


def section(*calls: str) -> str:
    return BEGIN + "".join(calls) + END


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (section(call(W)), "ok", (W,)),
        (section(call(W), call(T, 1)), "ok", (W, T)),  # parallel calls, in output order
        ("I'll check. " + section(call(W)) + "<|im_end|>", "ok", (W,)),  # content is ignored
        # vLLM's test spacing: whitespace and newlines around the id and the arguments
        (
            f"{BEGIN} {CALL}\nfunctions.get_weather:0 {ARGS} "
            '{"city": "Paris"} ' + f"{CALL_END} {END}",
            "ok",
            (W,),
        ),
        (section(call(W, 7, prefix="")), "ok", (W,)),  # an id without "functions."
        (
            section(call({"name": "pkg.get_weather", "arguments": {}})),
            "ok",
            ({"name": "pkg.get_weather", "arguments": {}},),
        ),
        (section(call(W)) + " then " + section(call(T, 1)), "ok", (W, T)),
        (
            section(f'{CALL}functions.f:0{ARGS}{{"html": "<div>{CALL}</div>"}}{CALL_END}'),
            "ok",
            ({"name": "f", "arguments": {"html": f"<div>{CALL}</div>"}},),
        ),
        ("The weather in Paris is mild.", "no_json", None),
        (json.dumps([W]), "no_json", None),  # bare JSON is not this format
        ("", "no_json", None),
        (BEGIN + call(W), "invalid_json", None),  # the section never closes
        (call(W), "invalid_json", None),  # a call outside any section
        (section(call(W)) + CALL_END, "invalid_json", None),
        (section(), "invalid_json", None),  # a section announces calls
        (section(call(W)[: -len(CALL_END)]), "invalid_json", None),  # a call never ends
        (section(f"{CALL}functions.get_weather.0{ARGS}{{}}{CALL_END}"), "invalid_json", None),
        (section(f"{CALL}functions.get_weather:x{ARGS}{{}}{CALL_END}"), "invalid_json", None),
        (section(f"{CALL}functions.:0{ARGS}{{}}{CALL_END}"), "invalid_json", None),
        (section(f"{CALL}functions.get weather:0{ARGS}{{}}{CALL_END}"), "invalid_json", None),
        (section(f"{CALL}functions.f:0{{}}{CALL_END}"), "invalid_json", None),  # no separator
        (section(call(W), "and", call(T, 1)), "invalid_json", None),  # text between calls
        (section(f'{CALL}functions.f:0{ARGS}{{"city": "Paris"{CALL_END}'), "invalid_json", None),
        (section(f'{CALL}functions.f:0{ARGS}{{"a": 1, "a": 2}}{CALL_END}'), "invalid_json", None),
        (BEGIN + section(call(W)), "invalid_json", None),  # a section inside a section
        # vLLM's singular variant is no token of Kimi's: its calls are outside any section
        (
            "<|tool_call_section_begin|>" + call(W) + "<|tool_call_section_end|>",
            "invalid_json",
            None,
        ),
        (section(f"{CALL}functions.f:0{ARGS}[1]{CALL_END}"), "invalid_shape", None),
        (section(call(W), f'{CALL}functions.g:1{ARGS}"x"{CALL_END}'), "invalid_shape", None),
        # syntax before shape
        (section(f"{CALL}functions.f:0{ARGS}[1]{CALL_END}") + BEGIN, "invalid_json", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_kimi_k2(text)
    assert (result.status, result.calls) == (status, calls)


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        ("<think>maybe " + section(call(T)) + "</think>" + section(call(W)), "ok", (W,)),
        ("<think>" + section(call(T)) + "</think>No call is needed.", "no_json", None),
        ("the prompt opened it " + section(call(T)) + "</think>" + section(call(W)), "ok", (W,)),
        ("<think>still thinking " + section(call(W)), "invalid_json", None),
    ],
)
def test_thoughts_are_not_answers(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_kimi_k2(text)
    assert (result.status, result.calls) == (status, calls)


def test_the_tools_change_nothing() -> None:
    text = section(call(W))
    tools = [{"name": "get_weather", "parameters": {"city": {"type": "str"}}}]
    assert decode_kimi_k2(text, tools) == decode_kimi_k2(text)


@pytest.mark.parametrize(
    ("text", "status", "in_reasoning"),
    [
        ("<think>" + section(call(T)) + "</think>No call is needed.", "no_json", True),
        ("the prompt opened it " + section(call(T)) + "</think>No call.", "no_json", True),
        ("<think>maybe " + section(call(T)) + "</think>" + section(call(W)), "ok", False),
        ("<think>no tools</think>Hello", "no_json", False),
        ("<think>still thinking " + section(call(W)), "invalid_json", False),
    ],
)
def test_thoughts_are_removed_and_calls_in_them_counted(
    text: str, status: str, in_reasoning: bool
) -> None:
    result = decode_kimi_k2(text)
    assert (result.status, result.calls_in_reasoning) == (status, in_reasoning)
