from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.toolcalls._decode_pythonic import (
    _decode_with_ast,
    decode_pythonic,
)
from tests.support.decoder_texts import texts
from tests.support.timing import growth_ratios

W = {"name": "get_weather", "arguments": {"city": "Paris"}}


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        ('[get_weather(city="Paris")]', "ok", (W,)),
        ("[get_weather(city='Paris')]", "ok", (W,)),
        ('  [get_weather(city="Paris")]\n', "ok", (W,)),
        (
            '[get_weather(city="Paris"), pkg.sub.g(b=[1, (2, 3)], c={"k": None}, d=True, e=-1.5)]',
            "ok",
            (
                W,
                {
                    "name": "pkg.sub.g",
                    "arguments": {"b": [1, [2, 3]], "c": {"k": None}, "d": True, "e": -1.5},
                },
            ),
        ),
        ("[f()]", "ok", ({"name": "f", "arguments": {}},)),
        ("[f(a=1,)]", "ok", ({"name": "f", "arguments": {"a": 1}},)),
        ('[f(s="it\'s \\"x\\"\\n")]', "ok", ({"name": "f", "arguments": {"s": 'it\'s "x"\n'}},)),
        (
            "[f(n=123456789012345678901234567890)]",
            "ok",
            ({"name": "f", "arguments": {"n": 123456789012345678901234567890}},),
        ),
        ("No tool applies here.", "no_json", None),
        ("[]", "no_json", None),  # no "(" at all: zero calls
        ("", "no_json", None),
        ('[get_weather(city="Paris"', "invalid_json", None),
        ('[get_weather(city="Par', "invalid_json", None),
        ("Sure: [f(a=1)]", "invalid_json", None),
        ("[f(a=1, a=2)]", "invalid_json", None),  # a keyword given twice
        ('[f(a={"k": 1, "k": 2})]', "invalid_json", None),  # a key named twice
        ("[f(a=1)] x", "invalid_json", None),
        ('[f(a="x)]', "invalid_json", None),  # a string that never closes
        ('[f(a="x"), g(b=")]', "invalid_json", None),
        ('[f(a="a\nb")]', "invalid_json", None),  # a raw newline inside a string
        ('[f(a="x")] # "', "ok", ({"name": "f", "arguments": {"a": "x"}},)),  # a comment
        (
            "[f(a=1.5e3, b=-0, c=1e-400)]",
            "ok",
            ({"name": "f", "arguments": {"a": 1500.0, "b": 0, "c": 0.0}},),
        ),
        ("f(a=1)", "invalid_shape", None),  # a call, not a list of calls
        ('[f("Paris")]', "invalid_shape", None),  # positional
        ("[f(**{'a': 1})]", "invalid_shape", None),
        ("[f(a=b)]", "invalid_shape", None),  # a name as a value
        ("[f(a=true)]", "invalid_shape", None),
        ("[f(a=g(b=1))]", "invalid_shape", None),  # a call as a value
        ("[f(a=os.sep)]", "invalid_shape", None),  # an attribute as a value
        ("[f(a={1, 2})]", "invalid_shape", None),  # a set
        ("[f(a=b'x')]", "invalid_shape", None),
        ("[f(a=1j)]", "invalid_shape", None),
        ("[f(a=1e999)]", "invalid_shape", None),  # inf is not JSON
        ("[f(a={1: 2})]", "invalid_shape", None),  # a non-string key
        ("[f(a=1), 3]", "invalid_shape", None),
        ("[f(a=1)(b=2)]", "invalid_shape", None),
        ("[True(a=1)]", "invalid_shape", None),
        ("[(lambda: 1)(a=1)]", "invalid_shape", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = decode_pythonic(text)
    assert (result.status, result.calls) == (status, calls)


def test_nothing_in_the_output_is_ever_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    for text in [
        f"[__import__('os').system('touch {marker}')]",
        f"[f(a=__import__('os').system('touch {marker}'))]",
        f"[open('{marker}', 'w').write(x='1')]",
        f"[f(a=[x for x in __import__('os').system('touch {marker}')])]",
    ]:
        assert decode_pythonic(text).status == "invalid_shape"
    assert not marker.exists()


def test_nesting_beyond_what_python_reads_is_refused_not_crashed() -> None:
    assert decode_pythonic("[f(a=" + "[" * 10_000 + "]" * 10_000 + ")]").status == "invalid_json"
    assert decode_pythonic("[f(a=" + "-" * 100_000 + "1)]").status in (
        "invalid_json",
        "invalid_shape",
    )
    ok = decode_pythonic("[f(a=" + "[" * 50 + "]" * 50 + ")]")
    assert ok.status == "ok"


# --- the plain-output shortcut reads exactly what the ast path reads ---------------

_names = st.sampled_from(["f", "get_weather", "pkg.g", "a.b.c", "true", "None", "class", "x1"])
_keys = st.sampled_from(["a", "city", "true", "null", "True", "def", "b_2", "a"])
_strings = st.text(alphabet=st.sampled_from(list("ab ;:=(),[]{}'\"\\éTrue\x7f\x01\n")), max_size=6)


@st.composite
def _python_value(draw: st.DrawFn, depth: int = 0) -> str:
    choice = draw(st.integers(0, 9 if depth < 3 else 5))
    if choice == 0:
        quote = draw(st.sampled_from(['"', "'"]))
        return quote + draw(_strings) + quote
    if choice == 1:
        return json.dumps(draw(st.text(max_size=4)))
    if choice == 2:
        return draw(st.sampled_from(["True", "False", "None", "true", "null", "x", "os.sep"]))
    if choice == 3:
        return repr(draw(st.integers(-(2**80), 2**80)))
    if choice == 4:
        number = draw(st.floats(allow_nan=True, allow_infinity=True))
        return draw(
            st.sampled_from([repr(number), json.dumps(number), "1e999", "-0", "1_0", ".5", "0x1"])
        )
    if choice == 5:
        return draw(st.sampled_from(["b'x'", "1j", "{1, 2}", "()", "(1,)", "-1", "- 1", "+1"]))
    items = draw(st.lists(_python_value(depth + 1), max_size=3))
    separator = draw(st.sampled_from([", ", ",", " , ", ",\n"]))
    if choice == 6:
        return "[" + separator.join(items) + draw(st.sampled_from(["", ","])) + "]"
    if choice == 7:
        return "(" + separator.join(items) + ("," if len(items) == 1 else "") + ")"
    if choice == 8:
        keys = draw(st.lists(_python_value(depth + 1), min_size=len(items), max_size=len(items)))
        pairs = [f"{key}: {value}" for key, value in zip(keys, items, strict=True)]
        return "{" + separator.join(pairs) + "}"
    return f"{draw(_names)}({', '.join(f'{draw(_keys)}={item}' for item in items)})"


@st.composite
def _pythonic_text(draw: st.DrawFn) -> str:
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        arguments = [
            f"{draw(_keys)}{draw(st.sampled_from(['=', ' = ', '=']))}{draw(_python_value())}"
            for _ in range(draw(st.integers(0, 3)))
        ]
        if draw(st.integers(0, 9)) == 0:
            arguments.insert(0, draw(_python_value()))  # a positional argument
        calls.append(f"{draw(_names)}({', '.join(arguments)})")
    text = "[" + ", ".join(calls) + "]"
    cut = draw(st.integers(0, 12))
    return text[: len(text) - cut] if cut < 3 else text


@settings(max_examples=300, deadline=None)
@given(_pythonic_text() | texts)
def test_the_shortcut_agrees_with_the_ast_reading(text: str) -> None:
    expected: Any = _decode_with_ast(text.strip()) if "(" in text else decode_pythonic(text)
    assert decode_pythonic(text) == expected


def test_a_long_run_of_identifier_characters_is_decoded_in_linear_time() -> None:
    # The shortcut's split into call heads and keywords restarted its scan at
    # each character of a run of identifier characters followed by neither
    # "(" nor "=": 16k characters took 15 s, and every format paid it, because
    # the format hint re-decodes outputs as pythonic. Linear work grows ~10x
    # per step here; the quadratic split grew ~100x.
    ratios = growth_ratios(
        lambda n: decode_pythonic("[f(a=" + "x" * n + ")]"),
        [1_600, 16_000, 160_000, 1_600_000],
        bound=30,
    )
    assert len(ratios) == 3
    assert decode_pythonic("[f(a=" + "x" * 160_000 + ")]").status == "invalid_shape"
