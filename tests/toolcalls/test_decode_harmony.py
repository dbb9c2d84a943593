from __future__ import annotations

import json

import pytest

from sommelier_mlflow.toolcalls._decode_harmony import decode_harmony

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "get_time", "arguments": {"zone": "CET"}}
THINK = "<|channel|>analysis<|message|>The user wants the weather in Paris.<|end|>"


def call(c: dict[str, object], *, start: bool = True, end: str = "<|call|>") -> str:
    """A call as gpt-oss writes it (``start``: after another message, not first)."""
    head = "<|start|>assistant" if start else ""
    return (
        f"{head}<|channel|>commentary to=functions.{c['name']} <|constrain|>json"
        f"<|message|>{json.dumps(c['arguments'])}{end}"
    )


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (THINK + call(W), "ok", (W,)),
        (call(W, start=False), "ok", (W,)),  # no reasoning: the prompt opened the message
        (THINK + call(W, end=""), "ok", (W,)),  # the backend cut the end-of-sequence token
        (THINK + call(W) + call(T), "ok", (W, T)),  # parallel calls, in output order
        (  # the recipient in the role part, the content type without <|constrain|>
            "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>"
            '{"city": "Paris"}<|call|>',
            "ok",
            (W,),
        ),
        (
            '<|channel|>commentary to=functions.get_weather<|message|> {"city": "Paris"}\n',
            "ok",
            (W,),
        ),
        (  # a preamble to the user, then the call
            "<|channel|>commentary<|message|>Let me check.<|end|>" + call(W),
            "ok",
            (W,),
        ),
        ("The weather in Paris is mild.", "no_json", None),  # no harmony token at all
        (
            THINK + "<|start|>assistant<|channel|>final<|message|>It is mild.<|return|>",
            "no_json",
            None,
        ),
        # syntax
        ("<|channel|>commentary to=functions.f<|message|>{'a': 1}<|call|>", "invalid_json", None),
        ('<|channel|>commentary to=functions.f<|message|>{"a": 1,}', "invalid_json", None),
        ("<|channel|>commentary to=functions.f", "invalid_json", None),  # header never ends
        ("<|channel|>thinking<|message|>x<|end|>", "invalid_json", None),  # unknown channel
        ("<|message|>x<|end|>", "invalid_json", None),  # no channel
        (THINK + "<|channel|>final<|message|>x", "invalid_json", None),  # no <|start|>
        (THINK + "<|start|><|channel|>final<|message|>x", "invalid_json", None),  # no role
        (THINK + "<|start|>user<|channel|>final<|message|>x", "invalid_json", None),
        (THINK + "junk" + call(W), "invalid_json", None),  # text between messages
        ("<|channel|>analysis<|message|>cut<|start|>assistant", "invalid_json", None),
        (
            "<|start|>assistant to=functions.f<|channel|>commentary to=functions.g"
            "<|message|>{}<|call|>",
            "invalid_json",
            None,
        ),
        (
            "<|channel|>commentary to=functions.f <|constrain|>text<|message|>{}<|call|>",
            "invalid_json",
            None,
        ),
        ('<|channel|>commentary to=functions.f<|message|>{"a": 1, "a": 2}', "invalid_json", None),
        # shape
        ("<|channel|>commentary to=functions.f<|message|>[1]<|call|>", "invalid_shape", None),
        ("<|channel|>commentary to=functions.<|message|>{}<|call|>", "invalid_shape", None),
        ("<|channel|>commentary to=browser.search<|message|>{}<|call|>", "invalid_shape", None),
        ("<|channel|>final to=functions.f<|message|>{}<|return|>", "invalid_shape", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_harmony(text)
    assert (result.status, result.calls) == (status, calls)


@pytest.mark.parametrize(
    ("text", "status", "in_reasoning"),
    [
        # a call written on the analysis channel is reasoning, never the answer
        (
            "<|channel|>analysis to=functions.get_weather<|message|>{}<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Done.<|return|>",
            "no_json",
            True,
        ),
        (
            "<|channel|>analysis to=functions.get_weather<|message|>{}<|end|>" + call(W),
            "ok",
            False,
        ),
        (  # built-in tools (browsing) are called while reasoning: not a function call
            "<|channel|>analysis to=browser.search<|message|>{}<|end|>"
            "<|start|>assistant<|channel|>final<|message|>Done.",
            "no_json",
            False,
        ),
        (THINK + "<|start|>assistant<|channel|>final<|message|>No tool.", "no_json", False),
    ],
)
def test_the_analysis_channel_is_reasoning_and_counted(
    text: str, status: str, in_reasoning: bool
) -> None:
    result = decode_harmony(text)
    assert (result.status, result.calls_in_reasoning) == (status, in_reasoning)
