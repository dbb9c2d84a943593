"""The Gemma family's two formats: gemma4 and functiongemma share one syntax."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.toolcalls import CallsParseResult, output_format
from sommelier_mlflow.toolcalls._decode_functiongemma import decode_functiongemma
from sommelier_mlflow.toolcalls._decode_gemma4 import (
    _object_at,
    _Unreadable,
    decode_gemma4,
    plain_object,
)

Q = "\x00Q\x00"  # stands for the format's string delimiter in the cases below

FORMATS: dict[str, tuple[Callable[[str], CallsParseResult], str, str, str]] = {
    "gemma4": (decode_gemma4, "<|tool_call>", "<tool_call|>", '<|"|>'),
    "functiongemma": (
        decode_functiongemma,
        "<start_function_call>",
        "<end_function_call>",
        "<escape>",
    ),
}


def written(name: str, body: str) -> str:
    """``body`` with the ``name`` format's tokens: ``<<`` opens a block, ``>>`` closes it."""
    _, open_tag, close_tag, quote = FORMATS[name]
    return body.replace("<<", open_tag).replace(">>", close_tag).replace(Q, quote)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_each_registered_format_is_its_decoder_at_its_version(name: str) -> None:
    registered = output_format(name)
    assert (registered.decode, registered.version, registered.special_tokens) == (
        FORMATS[name][0],
        f"{name}.v1",
        True,
    )


W = {"name": "get_weather", "arguments": {"city": "Paris, FR"}}


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize(
    ("body", "status", "calls"),
    [
        (f"<<call:get_weather{{city:{Q}Paris, FR{Q}}}>>", "ok", (W,)),
        (
            f"Sure!<<call:a{{x:1}}>> <<call:b{{y:{Q}v{Q}}}>>",
            "ok",
            ({"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {"y": "v"}}),
        ),
        (
            f"<<call:f{{flag:true,n:-3,r:2.5e1,s:{Q}hi{Q},z:false,none:null}}>>",
            "ok",
            (
                {
                    "name": "f",
                    "arguments": {
                        "flag": True,
                        "n": -3,
                        "r": 25.0,
                        "s": "hi",
                        "z": False,
                        "none": None,
                    },
                },
            ),
        ),
        (
            f"<<call:g{{a:{{x:1,y:{Q}q{Q}}},xs:[1,2,3],ss:[{Q}a{Q},{Q}b{Q}],e:[],o:{{}}}}>>",
            "ok",
            (
                {
                    "name": "g",
                    "arguments": {
                        "a": {"x": 1, "y": "q"},
                        "xs": [1, 2, 3],
                        "ss": ["a", "b"],
                        "e": [],
                        "o": {},
                    },
                },
            ),
        ),
        # a delimited string is taken exactly: braces, commas and colons inside are text
        (
            f"<<call:h{{q:{Q}a{{b}},c[d]: x{Q}}}>>",
            "ok",
            ({"name": "h", "arguments": {"q": "a{b},c[d]: x"}},),
        ),
        (" << call:ping { } >> ", "ok", ({"name": "ping", "arguments": {}},)),
        ("<<call:pkg.get-x{}>>", "ok", ({"name": "pkg.get-x", "arguments": {}},)),
        ("I cannot help with that.", "no_json", None),
        ('{"name": "f", "arguments": {}}', "no_json", None),
        ("<<call:a{x:1}", "invalid_json", None),  # never closed
        ("<<call:a{x:1}>><<call:b{y:2}", "invalid_json", None),
        ("<<call:get_wea>>", "invalid_json", None),
        ("<<call:bad{x:1>>", "invalid_json", None),
        (f"<<call:bad{{x:{Q}unterminated}}>>", "invalid_json", None),
        ("<<call:bad{xs:[1,2}>>", "invalid_json", None),
        ("<<call:bad{xs:[1,]}>>", "invalid_json", None),
        ("<<call:bad{x:1,}>>", "invalid_json", None),  # trailing comma
        ("<<call:bad{,}>>", "invalid_json", None),
        ("<<call:bad{x:Paris}>>", "invalid_json", None),  # a bare word is not a value
        ('<<call:bad{x:"Paris"}>>', "invalid_json", None),  # nor a JSON-quoted string
        ("<<call:bad{x:1e999}>>", "invalid_json", None),
        ("<<call:bad{x:" + "7" * 309 + "}>>", "invalid_json", None),
        ("<<call:bad{x:1,x:2}>>", "invalid_json", None),  # a key given twice
        ("<<call:bad{x 1}>>", "invalid_json", None),
        ("<<get_weather{x:1}>>", "invalid_json", None),  # no call: prefix
        ("<<call:{x:1}>>", "invalid_json", None),
        ("<<call:a{x:1} trailing>>", "invalid_json", None),
        ("<<call:a{x:1}}>>", "invalid_json", None),
    ],
)
def test_statuses(name: str, body: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = FORMATS[name][0](written(name, body))
    assert (result.status, result.calls) == (status, calls)


@pytest.mark.parametrize(
    ("text", "status", "in_reasoning"),
    [
        (
            "<|channel>thought\nI could call <|tool_call>call:f{}<tool_call|><channel|>No.",
            "no_json",
            True,
        ),
        ("<|channel>thought\nplan<channel|><|tool_call>call:f{}<tool_call|>", "ok", False),
        ("<|channel>thought\nno tools<channel|>Hello.", "no_json", False),
        ("<|channel>thought\nunfinished <|tool_call>call:f{}<tool_call|>", "invalid_json", False),
    ],
)
def test_gemma4_thoughts_are_removed_and_calls_in_them_counted(
    text: str, status: str, in_reasoning: bool
) -> None:
    result = decode_gemma4(text)
    assert (result.status, result.calls_in_reasoning) == (status, in_reasoning)


def test_each_format_reads_only_its_own_tokens() -> None:
    gemma = '<|tool_call>call:f{x:<|"|>a<|"|>}<tool_call|>'
    assert decode_functiongemma(gemma).status == "no_json"
    function_gemma = "<start_function_call>call:f{x:<escape>a<escape>}<end_function_call>"
    assert decode_gemma4(function_gemma).status == "no_json"
    assert decode_gemma4("<|tool_call>call:f{x:<escape>a<escape>}<tool_call|>").status == (
        "invalid_json"
    )


# --- the shortcut agrees with the reader ---------------------------------------------

_QUOTE = '<|"|>'
_keys = st.sampled_from(
    ["a", "b", "city", "max_price", "x.y", "a-b", "_k"] * 3 + ["1a", "true", "é"]
)
_readable = ["1", "-0", "2.5e3", "true", "false", "null"]  # mostly these, so the shortcut reads
_scalars = st.sampled_from(_readable * 6 + ["1e999", "+1", "01", "x", '"s"', "7" * 309])
_strings = st.text(max_size=6).map(lambda text: f"{_QUOTE}{text}{_QUOTE}")
_spaces = st.sampled_from(["", "", " ", "\n", "\t "])
_before_colon = st.sampled_from(["", "", "", "", " "])  # a space there is left to the reader


_values = st.recursive(
    _scalars | _strings,
    lambda inner: (
        st.lists(st.tuples(_spaces, inner, _spaces), max_size=3).map(
            lambda items: "[" + ",".join(f"{a}{v}{b}" for a, v, b in items) + "]"
        )
        | st.lists(
            st.tuples(_spaces, _keys, _before_colon, inner),
            max_size=3,
            unique_by=lambda item: item[1],
        ).map(lambda items: "{" + ",".join(f"{a}{k}{b}:{v}" for a, k, b, v in items) + "}")
    ),
    max_leaves=8,
)
_objects = st.lists(
    st.tuples(_keys, _before_colon, _values), max_size=4, unique_by=lambda item: item[0]
).map(lambda items: "{" + ",".join(f"{k}{s}:{v}" for k, s, v in items) + "}")
_noise = st.sampled_from(["", ",", ":", "}", "{", "[", _QUOTE, "\x01", "\ud800", " ", "a:"])


@settings(max_examples=400, deadline=None)
@given(_objects, _noise, st.integers(0, 40))
def test_the_json_shortcut_reads_what_the_reader_reads(body: str, noise: str, at: int) -> None:
    # as the decoder hands it over: from the arguments' "{" to the closing tag, trimmed
    segment = (body[:at] + noise + body[at:]).rstrip(" \t\n\r")
    if not segment.startswith("{"):
        return
    shortcut = plain_object(segment, _QUOTE)
    if shortcut is None:
        return  # the reader decides alone
    try:
        value, end = _object_at(segment, 0, _QUOTE)
    except _Unreadable:
        pytest.fail(f"the shortcut read {segment!r}, which the reader refuses")
    assert end == len(segment)
    assert canonical_json(shortcut) == canonical_json(value)


def test_the_shortcut_reads_common_blocks_and_leaves_the_rest_to_the_reader() -> None:
    common = '{city:<|"|>Paris "centre"<|"|>,filters:{max:3,tags:[<|"|>a<|"|>]},ok:true}'
    assert plain_object(common, _QUOTE) == {
        "city": 'Paris "centre"',
        "filters": {"max": 3, "tags": ["a"]},
        "ok": True,
    }
    for other in ("{a :1}", "{a:1,b c:2}", "{a:x}", "{1a:1}", '{a:<|"|>\ud800<|"|>}', "{a:1,a:2}"):
        assert plain_object(other, _QUOTE) is None, other
    assert decode_gemma4("<|tool_call>call:f{a :1}<tool_call|>").calls == (
        {"name": "f", "arguments": {"a": 1}},
    )
