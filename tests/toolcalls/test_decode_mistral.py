from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_mistral import decode_mistral

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}


def segment(call: dict[str, object]) -> str:
    return f"[TOOL_CALLS]{call['name']}[ARGS]{json.dumps(call['arguments'])}"


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        # tokenizer v3: a JSON array after the marker
        ("[TOOL_CALLS] " + json.dumps([W, T]), "ok", (W, T)),
        ("[TOOL_CALLS]" + json.dumps([W]), "ok", (W,)),
        ("[TOOL_CALLS] []", "ok", ()),  # an explicit empty list
        # tokenizer v11+: one segment per call
        (segment(W), "ok", (W,)),
        (segment(W) + segment(T), "ok", (W, T)),
        (
            '[TOOL_CALLS]f[ARGS]{"q": "[TOOL_CALLS]g[ARGS]{}"}',
            "ok",
            ({"name": "f", "arguments": {"q": "[TOOL_CALLS]g[ARGS]{}"}},),
        ),
        (
            "[TOOL_CALLS]pkg.get-weather_2[ARGS]{}\n",
            "ok",
            ({"name": "pkg.get-weather_2", "arguments": {}},),
        ),
        ("No tool is needed here.", "no_json", None),
        ("", "no_json", None),
        (json.dumps([W]), "invalid_json", None),  # JSON without the marker
        ("Sure. [TOOL_CALLS]" + json.dumps([W]), "invalid_json", None),
        ("I think (maybe) [not]", "invalid_json", None),  # a bracket, but no marker
        ("[TOOL_CALLS]", "invalid_json", None),
        ("[TOOL_CALLS] " + json.dumps([W]) + " done", "invalid_json", None),
        ("[TOOL_CALLS] " + json.dumps([W])[:-1], "invalid_json", None),
        ("[TOOL_CALLS][ARGS]{}", "invalid_json", None),  # no name
        ("[TOOL_CALLS]{}", "invalid_json", None),  # no name, no [ARGS]
        ("[TOOL_CALLS]get_weather", "invalid_json", None),  # a name, no value
        ("[TOOL_CALLS]get weather[ARGS]{}", "invalid_json", None),
        ("[TOOL_CALLS]f[ARGS]{} and then", "invalid_json", None),
        ("[TOOL_CALLS]f[ARGS]42", "invalid_json", None),
        ('[TOOL_CALLS]f[ARGS]{"a": 1, "a": 2}', "invalid_json", None),
        ("[TOOL_CALLS] " + json.dumps([W, {"name": "x"}]), "invalid_shape", None),
        ("[TOOL_CALLS] " + json.dumps([[W]]), "invalid_shape", None),
        ("[TOOL_CALLS]f[ARGS][1]", "invalid_shape", None),
        (segment(W) + "[TOOL_CALLS]g[ARGS][]" + segment(T), "invalid_shape", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_mistral(text)
    assert (result.status, result.calls) == (status, calls)


def stripped(call: dict[str, object]) -> str:
    """The v11 segment as a server returns it with special tokens skipped: no ``[ARGS]``."""
    return f"[TOOL_CALLS]{call['name']}{json.dumps(call['arguments'])}"


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        # vLLM's reading of v11 outputs with [ARGS] stripped: [TOOL_CALLS]name{...}
        (stripped(W), "ok", (W,)),
        (stripped(W) + stripped(T), "ok", (W, T)),
        ('[TOOL_CALLS]get_weather {"city": "Paris"}', "ok", (W,)),  # whitespace as after [ARGS]
        (segment(W) + stripped(T), "ok", (W, T)),  # each segment reads on its own
        (
            '[TOOL_CALLS]f{"q": "[ARGS]x[TOOL_CALLS]g{}"}',
            "ok",
            ({"name": "f", "arguments": {"q": "[ARGS]x[TOOL_CALLS]g{}"}},),
        ),
        ("[TOOL_CALLS]get weather{}", "invalid_json", None),  # a name holds no whitespace
        ("[TOOL_CALLS]f{} and then", "invalid_json", None),
        ('[TOOL_CALLS]f{"a": 1,}', "invalid_json", None),
        ("[TOOL_CALLS]f[1]", "invalid_shape", None),
        # produced elsewhere and not cut at the end-of-sequence token: refused
        (stripped(W) + "</s>", "invalid_json", None),
        (segment(W) + "</s>", "invalid_json", None),
    ],
)
def test_the_v11_form_with_args_stripped(
    text: str, status: str, calls: tuple[object, ...] | None
) -> None:
    result = decode_mistral(text)
    assert (result.status, result.calls) == (status, calls)
