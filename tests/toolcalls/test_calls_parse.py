from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.toolcalls import (
    CALLS_PARSER_VERSION,
    PARSE_STATUSES,
    parse_tool_call,
    parse_tool_calls,
)

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}


def test_version_is_pinned_and_distinct_from_the_single_call_parser() -> None:
    assert CALLS_PARSER_VERSION == "sommelier.calls_parser.v1"


@pytest.mark.parametrize(
    ("text", "status", "calls"),
    [
        (json.dumps(W), "ok", (W,)),
        (json.dumps([W]), "ok", (W,)),
        (json.dumps([W, T]), "ok", (W, T)),
        (json.dumps([T, W, W]), "ok", (T, W, W)),
        ("[]", "ok", ()),
        ("Sure: [] (no tool applies)", "ok", ()),
        ("Calling " + json.dumps([W, T]) + " now. " + json.dumps(T), "ok", (W, T)),
        ("I cannot help with that.", "no_json", None),
        ("", "no_json", None),
        ("[W, T]", "invalid_json", None),
        ('[{"name": "get_weather", "arguments": {}}', "invalid_json", None),
        ('[{"name": "a", "arguments": {},}]', "invalid_json", None),
        (json.dumps([W, 3]), "invalid_shape", None),
        (json.dumps([W, {"name": "x"}]), "invalid_shape", None),
        (json.dumps([[W]]), "invalid_shape", None),
        (json.dumps({"name": "", "arguments": {}}), "invalid_shape", None),
        (json.dumps({"name": "a", "arguments": {}, "id": 1}), "invalid_shape", None),
        ("{}", "invalid_shape", None),
    ],
)
def test_statuses(text: str, status: str, calls: tuple[object, ...] | None) -> None:
    result = parse_tool_calls(text)
    assert result.status == status
    assert result.calls == calls


def test_only_an_explicit_empty_array_or_no_bracket_abstains() -> None:
    assert parse_tool_calls("[]").abstained
    assert parse_tool_calls("No tool fits this request.").abstained
    assert not parse_tool_calls(json.dumps(W)).abstained
    assert not parse_tool_calls("[").abstained  # broken JSON is a failure
    assert not parse_tool_calls("[1]").abstained  # a wrong shape is a failure
    assert not parse_tool_calls("{}").abstained
    assert parse_tool_calls("[").predicted_calls == ()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | json_values.map(json.dumps))
def test_agrees_with_the_single_call_parser_wherever_that_one_succeeds(text: str) -> None:
    single = parse_tool_call(text)
    calls = parse_tool_calls(text)
    assert calls.status in PARSE_STATUSES
    # The shared scanner: both see the same span, so brackets and JSON validity agree.
    assert (single.status == "no_json") == (calls.status == "no_json")
    assert (single.status == "invalid_json") == (calls.status == "invalid_json")
    if single.status == "ok":
        assert calls.status == "ok"
        assert calls.calls == (single.call,)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "name": st.text(min_size=1, max_size=4),
                "arguments": st.dictionaries(st.text(max_size=3), json_values, max_size=3),
            }
        ),
        max_size=4,
    ),
    st.text(max_size=10).filter(lambda s: "[" not in s and "{" not in s),
)
def test_any_array_of_calls_round_trips_behind_prose(
    calls: list[dict[str, object]], prose: str
) -> None:
    result = parse_tool_calls(prose + json.dumps(calls) + prose)
    assert result.status == "ok"
    assert result.calls == tuple(calls)
