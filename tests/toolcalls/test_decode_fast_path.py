"""The decoders' fast path for one call per block reads exactly what the general path reads.

``plain_calls`` lets a decoder skip the general duplicate-key and
big-integer checks when two cheap facts prove them (see its docstring).
These tests generate call texts built to break that proof (duplicate keys,
some spelled with escapes, colons and escaped colons inside strings and
between blocks, integers beyond 64 bits, huge floats, nested objects and
lists) and compare the result, or the refusal, with the general reader:
``loads(..., reject_duplicate_keys=True)`` followed by the call-shape test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow._json import JSONDecodeError, canonical_json, loads
from sommelier_mlflow.toolcalls import _decode_hermes
from sommelier_mlflow.toolcalls._decode import (
    checked_call,
    parse_piece,
    plain_calls,
    without_thoughts,
)
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._parse import is_tool_call
from tests.support.decoder_texts import texts

_KEYS = st.sampled_from(["a", "b", "\\u0061", "c:d", "name", "arguments", ""])
_STRINGS = st.sampled_from(['"x"', '"12:30"', '"\\u003a"', '"a\\"b"', '""', '"e+5"'])
_NUMBERS = st.sampled_from(
    [
        "0",
        "-0",
        "7",
        "1.5",
        "1e16",
        "-3e300",
        "9223372036854775807",
        "-9223372036854775808",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "123456789012345678901234567890",
        "1.8e19",
        "-9.3e18",
    ]
)
_SCALARS = _STRINGS | _NUMBERS | st.sampled_from(["true", "false", "null"])
_SPACE = st.sampled_from(["", " ", "\n", "\t "])


def _object(pairs: list[tuple[str, str]], space: str) -> str:
    return "{" + ",".join(f'{space}"{key}"{space}:{space}{value}' for key, value in pairs) + "}"


_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]")
        | st.builds(_object, st.lists(st.tuples(_KEYS, inner), max_size=3), _SPACE)
    ),
    max_leaves=6,
)

_NAMES = st.sampled_from(['"f"'] * 6 + ['""', '"get:weather"', "1", "null", '"\\u0066"'])


@st.composite
def _call_texts(draw: st.DrawFn) -> str:
    """A text shaped like one call, with every field open to trouble.

    Most are calls with unique keys (what the fast path reads), the rest
    break one rule (a duplicate key, an extra key, a bad name or arguments).
    """
    space = draw(_SPACE)
    unique = draw(st.sampled_from([True, True, True, False]))
    pairs = draw(
        st.lists(
            st.tuples(_KEYS, _VALUES), max_size=4, unique_by=(lambda kv: kv[0]) if unique else None
        )
    )
    arguments = draw(st.sampled_from([_object(pairs, space)] * 5 + ["[]"]))
    top = [("name", draw(_NAMES)), ("arguments", arguments)]
    if not draw(st.sampled_from([True, True, True, False])):
        top.append((draw(_KEYS), draw(_SCALARS)))  # an extra or a duplicate key
    return space + _object(draw(st.permutations(top)), space) + space


def _general(text: str) -> Any:
    """The general path: the strict reader, then the call-shape test."""
    value = loads(text, reject_duplicate_keys=True)
    return value if is_tool_call(value) else None


def _fast(text: str) -> Any:
    """One piece read as a decoder reads it: vouched for by ``plain_calls``, else checked."""
    value = parse_piece(text)
    return value if plain_calls(text, [value]) else checked_call(text, value)


def _same_reading(text: str) -> None:
    try:
        expected = _general(text)
    except JSONDecodeError:
        with pytest.raises(JSONDecodeError):
            _fast(text)
        return
    got = _fast(text)
    assert (got is None) == (expected is None)
    if expected is not None:
        # canonical_json tells 1 from 1.0 and an exact big integer from its float.
        assert canonical_json(got) == canonical_json(expected)


@settings(max_examples=500, deadline=None)
@given(_call_texts())
def test_a_piece_is_read_as_the_general_path_reads_it(text: str) -> None:
    _same_reading(text)


@settings(max_examples=500, deadline=None)
@given(_call_texts())
def test_plain_calls_vouches_only_for_the_general_reading(text: str) -> None:
    try:
        value = parse_piece(text)
    except JSONDecodeError:
        return
    if plain_calls(text, [value]):
        assert canonical_json(value) == canonical_json(_general(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "f", "arguments": {"a": 1, "a": 2}}',
        '{"name": "f", "arguments": {"a": 1, "\\u0061": 2}}',
        '{"name": "f", "name": "g", "arguments": {}}',
        '{"name": "f", "arguments": {"a": "x:y", "a": 2}}',  # the colon in a string hides no key
        '{"name": "f", "arguments": {"a": "\\u003a", "a": 2}}',
        '{"name": "f", "arguments": {"a": {"b": 1, "b": 2}}}',
        '{"name": "f", "arguments": {"a": [{"b": 1, "b": 2}]}}',
    ],
)
def test_every_duplicate_key_is_refused(text: str) -> None:
    with pytest.raises(JSONDecodeError, match="duplicate key"):
        _fast(text)
    # Colons between the blocks must not hide one either.
    ok = '{"name": "g", "arguments": {"x": 1}}'
    hidden = f"<tool_call>{text}</tool_call> : <tool_call>{ok}</tool_call>"
    assert decode_hermes(hidden).status == "invalid_json"


@pytest.mark.parametrize(
    "number", ["18446744073709551616", "-9223372036854775809", "123456789012345678901234567890"]
)
def test_integers_beyond_64_bits_stay_exact(number: str) -> None:
    for value in (number, f"[1, {number}]", f'{{"m": {number}}}'):
        result = decode_hermes(
            f'<tool_call>{{"name": "f", "arguments": {{"n": {value}}}}}</tool_call>'
        )
        assert result.status == "ok"
        assert str(int(number)) in canonical_json(list(result.calls or ()))


def _hermes_general(text: str) -> tuple[str, Any]:
    """``decode_hermes`` as its docstring specifies it, on the general reader (no fast path)."""
    if "think>" in text:
        answer = without_thoughts(text)
        if answer is None:
            return "invalid_json", None
        text = answer
    calls: list[Any] = []
    all_calls = True
    start = text.find("<tool_call>")
    if start < 0:
        return "no_json", None
    while start >= 0:
        end = text.find("</tool_call>", start + len("<tool_call>"))
        if end < 0:
            return "invalid_json", None
        try:
            call = _general(text[start + len("<tool_call>") : end])
        except JSONDecodeError:
            return "invalid_json", None
        all_calls = all_calls and call is not None
        calls.append(call)
        start = text.find("<tool_call>", end + len("</tool_call>"))
    return ("ok", canonical_json(calls)) if all_calls else ("invalid_shape", None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_call_texts().map(lambda body: f"<tool_call>\n{body}\n</tool_call>"), max_size=3)
    | texts.map(lambda text: [text]),
    st.sampled_from(["\n", " : ", "a:b\n", ""]),
)
def test_decode_hermes_reads_as_the_general_path_does(blocks: list[str], between: str) -> None:
    text = between.join(blocks)
    result = decode_hermes(text)
    calls = canonical_json(list(result.calls)) if result.calls is not None else None
    assert (result.status, calls) == _hermes_general(text)


def test_a_plain_output_is_read_without_the_general_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fast path exists (so the comparisons above exercise it): calls of
    # scalars and lists of scalars never reach the general checks.
    def general_checks(*args: object, **kwargs: object) -> None:
        raise AssertionError("the general checks ran")

    monkeypatch.setattr(_decode_hermes, "checked_call", general_checks)
    calls = [
        {"name": "f", "arguments": {"a": 1, "b": [1.5, "x"], "c": True}},
        {"name": "g", "arguments": {}},
    ]
    text = "\n".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in calls)
    assert decode_hermes(text).calls == tuple(calls)


def _list_general(body: str, read: Any) -> tuple[str, Any]:
    """A JSON list of calls read as ``xlam`` and ``phi4_mini_json`` specify it, no shortcut."""
    try:
        value = loads(body, reject_duplicate_keys=True)
    except JSONDecodeError:
        return "invalid_json", None
    if type(value) is not list:
        return "invalid_shape", None
    calls = [read(element) for element in value]
    if any(call is None for call in calls):
        return "invalid_shape", None
    return "ok", canonical_json(calls)


@settings(max_examples=300, deadline=None)
@given(st.lists(_call_texts(), max_size=3), st.sampled_from([", ", ",\n", ","]))
def test_the_list_formats_read_as_the_general_path_reads(calls: list[str], joiner: str) -> None:
    from sommelier_mlflow.toolcalls._decode import llama_call
    from sommelier_mlflow.toolcalls._decode_phi4_mini import decode_phi4_mini_json
    from sommelier_mlflow.toolcalls._decode_xlam import decode_xlam

    body = "[" + joiner.join(calls) + "]"
    for decode, text, read in (
        (decode_xlam, body, lambda value: value if is_tool_call(value) else None),
        (decode_phi4_mini_json, "functools" + body, llama_call),
    ):
        result = decode(text)
        got = (result.status, None if result.calls is None else canonical_json(list(result.calls)))
        assert got == _list_general(body, read)


# --- pythonic: the translation to JSON reads exactly what the ast path reads ----------

_PY_NAMES = st.sampled_from(
    ["f", "g.h", "a.b.c", "class", "x.if", "true", "a..b", "1f", ".f", "f."]
)
_PY_KEYS = st.sampled_from(["a", "b", "a.b", "def", "True", "1a", "a"])
_PY_VALUES = st.sampled_from(
    [
        '"x"',
        "'y'",
        "1",
        "-2.5",
        "True",
        "None",
        "[1, 2]",
        '{"k": 1}',
        '{"k": 1, "k": 2}',
        "[a=1]",
        "{b=2}",
        "g(c=3)",
        "(1, 2)",
        "18446744073709551616",
        "x",
        '"a=b(c)"',
    ]
)
_PY_GAPS = st.sampled_from(["", " ", "\n"])


@st.composite
def _pythonic_calls(draw: st.DrawFn) -> str:
    """Lists of calls whose names, keywords, values and spacing probe every translation step."""
    calls = []
    for _ in range(draw(st.integers(1, 3))):
        gap = draw(_PY_GAPS)
        pairs = [
            f"{draw(_PY_KEYS)}{gap}={gap}{draw(_PY_VALUES)}" for _ in range(draw(st.integers(0, 3)))
        ]
        calls.append(f"{draw(_PY_NAMES)}{draw(_PY_GAPS)}({', '.join(pairs)})")
    return "[" + ", ".join(calls) + "]"


@settings(max_examples=500, deadline=None)
@given(_pythonic_calls())
def test_pythonic_shortcut_reads_as_the_ast_path_reads(text: str) -> None:
    from sommelier_mlflow.toolcalls._decode_pythonic import _decode_with_ast, decode_pythonic

    assert decode_pythonic(text) == _decode_with_ast(text)
