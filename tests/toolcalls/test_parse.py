from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.toolcalls import PARSE_STATUSES, PARSER_VERSION, parse_tool_call

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "reference-golden"


def test_parser_version_is_pinned() -> None:
    assert PARSER_VERSION == "sommelier.parser.v1"


def _golden_pairs() -> list[tuple[dict[str, object], dict[str, object]]]:
    raw = [json.loads(line) for line in (GOLDEN / "raw_generations.jsonl").read_text().splitlines()]
    scored = [
        json.loads(line)
        for line in (GOLDEN / "golden_scored_records.jsonl").read_text().splitlines()
    ]
    assert len(raw) == len(scored) == 14
    return list(zip(raw, scored, strict=True))


@pytest.mark.parametrize(
    ("raw", "expected"), _golden_pairs(), ids=lambda v: v.get("fixture_id", "")
)
def test_reference_golden_statuses_and_calls(
    raw: dict[str, object], expected: dict[str, object]
) -> None:
    assert raw["fixture_id"] == expected["example_id"]
    result = parse_tool_call(str(raw["raw_text"]))
    assert result.status == expected["parse_status"]
    assert result.call == expected["parsed_call"]


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("", "no_json"),
        ("no brackets at all (only parens)", "no_json"),
        ('{"name": "f", "arguments": {}}', "ok"),
        ('prose {"name": "f", "arguments": {"q": "a}b{c"}} more prose', "ok"),
        ('{"name": "f", "arguments": {"q": "say \\"}\\" now"}}', "ok"),
        ('[{"name": "f", "arguments": {"x": [1, 2]}}]', "ok"),
        ('{"name": "f", "arguments": {}', "invalid_json"),
        ('{"name": "f", "arguments": {},}', "invalid_json"),
        ('{"name": "f", "arguments": {"x": NaN}}', "invalid_json"),
        ('{"name": "f", "arguments": {"x": 1}} // comment', "ok"),
        ('{"name": "f", /* c */ "arguments": {}}', "invalid_json"),
        ('{"name": "f", "arguments": [1]}', "invalid_shape"),
        ('{"name": "", "arguments": {}}', "invalid_shape"),
        ('{"name": 3, "arguments": {}}', "invalid_shape"),
        ("[]", "invalid_shape"),
        ("[1]", "invalid_shape"),
        ('{"function": "f", "arguments": {}}', "invalid_shape"),
        ("{]", "invalid_json"),
        ("text [unterminated", "invalid_json"),
        ('{"name": "f", "arguments": "{}"}', "invalid_shape"),
    ],
)
def test_statuses(text: str, status: str) -> None:
    assert parse_tool_call(text).status == status


def test_first_span_only_no_second_hunt() -> None:
    # The first balanced span is broken JSON; a valid call after it must not rescue it.
    text = '{oops} then {"name": "f", "arguments": {}}'
    assert parse_tool_call(text).status == "invalid_json"
    # The first span is valid JSON of the wrong shape; the later call is ignored too.
    assert parse_tool_call('[1, 2] {"name": "f", "arguments": {}}').status == "invalid_shape"


def test_nothing_is_repaired() -> None:
    assert parse_tool_call("{'name': 'f', 'arguments': {}}").status == "invalid_json"
    assert parse_tool_call('```json\n{"name": "f", "arguments": {}}\n```').status == "ok"


def test_pathological_inputs_end_in_a_status() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_tool_call(deep).status == "invalid_json"
    assert parse_tool_call("{" * 100_000).status == "invalid_json"
    assert parse_tool_call('{"name": "\ud800", "arguments": {}}').status == "invalid_json"
    assert parse_tool_call('{"name": "f\x00", "arguments": {}}').status == "invalid_json"
    assert parse_tool_call('{"name": "f\\u0000", "arguments": {}}').status == "ok"
    big = "x" * 3_000_000 + '{"name": "f", "arguments": {"q": "' + "y" * 1_000_000 + '"}}'
    assert parse_tool_call(big).status == "ok"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_any_text(text: str) -> None:
    result = parse_tool_call(text)
    assert result.status in PARSE_STATUSES
    assert (result.call is not None) == (result.status == "ok")


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(min_size=1, max_size=10),
    arguments=st.dictionaries(st.text(max_size=5), _json_values, max_size=4),
    prefix=st.text(alphabet=st.characters(blacklist_characters="{["), max_size=20),
    suffix=st.text(max_size=20),
)
def test_any_embedded_call_round_trips(
    name: str, arguments: dict[str, object], prefix: str, suffix: str
) -> None:
    call = {"name": name, "arguments": arguments}
    result = parse_tool_call(prefix + json.dumps(call) + suffix)
    assert result.status == "ok"
    assert result.call == call
