from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.toolcalls import output_format_hint_order
from sommelier_mlflow.toolcalls._decode_llama4 import decode_llama4_pythonic
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from tests.support.decoder_texts import texts

LA = {"name": "get_weather", "arguments": {"city": "LA", "metric": "C"}}
DOE = {"name": "register_user", "arguments": {"name": "Doe", "age": 9}}
START, END = "<|python_start|>", "<|python_end|>"


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        ("[get_weather(city='LA', metric='C')]", "ok", (LA,)),
        (f"{START}[get_weather(city='LA', metric='C')]{END}", "ok", (LA,)),
        # the end token is missing when generation stops at <|eom|> (vLLM's test has it so)
        (
            f"{START}[get_weather(city='LA', metric='C'), register_user(name='Doe', age=9)]",
            "ok",
            (
                LA,
                DOE,
            ),
        ),
        (f"\n{START}[get_weather(city='LA', metric='C')]{END}\n", "ok", (LA,)),
        (f"[get_weather(city='LA', metric='C')]{END}", "ok", (LA,)),
        ("How can I help you today?", "no_json", None),
        (f"{START}{END}", "no_json", None),  # read as pythonic reads an empty output
        (f"Sure: {START}[get_weather(city='LA')]{END}", "invalid_json", None),
        (f"{START}[get_weather(city='LA')]{END}{END}", "invalid_json", None),
        (f"{START}{START}[get_weather(city='LA')]", "invalid_json", None),
        (f"{START}[get_weather(city='LA'", "invalid_json", None),  # cut off
        (f"{START}[get_weather('LA')]{END}", "invalid_shape", None),  # positional
        (
            f"{START}[__import__(name='os')]{END}",
            "ok",
            ({"name": "__import__", "arguments": {"name": "os"}},),
        ),  # read, never run
        (f"{START}[f(a=__import__('os').sep)]{END}", "invalid_shape", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_llama4_pythonic(text)
    assert (result.status, result.calls) == (status, calls)


@settings(max_examples=200, deadline=None)
@given(texts)
def test_without_the_code_tokens_it_reads_exactly_as_pythonic(text: str) -> None:
    if START not in text and END not in text:
        assert decode_llama4_pythonic(text) == decode_pythonic(text)


@settings(max_examples=300, deadline=None)
@given(texts, st.integers(1, len(END) - 1))
def test_an_output_cut_inside_the_end_token_reads_as_pythonic_reads_it(text: str, cut: int) -> None:
    body = text.strip()
    cut_output = f"{START}{body}{END[:cut]}"
    expected = decode_pythonic(body + END[:cut])  # the one start token prepended is removed
    assert decode_llama4_pythonic(cut_output) == expected
    for plain in ("[f(a=1)]", "[f(a='<|x')]", "[f(a=1)] # "):
        assert decode_llama4_pythonic(START + plain + END[:cut]) == decode_pythonic(
            plain + END[:cut]
        )


def test_the_hint_names_pythonic_when_both_read_the_same_outputs() -> None:
    order = output_format_hint_order()
    assert order.index("pythonic") < order.index("llama4_pythonic")
    assert sorted(order) == sorted(set(order))
