from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls import (
    METRIC_NAMES,
    MetricValue,
    compute_metrics,
    metrics_from_scores,
    parse_tool_call,
    score_records,
)

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "reference-golden"


def _record(raw_text: str, gold: dict[str, Any]) -> dict[str, Any]:
    parsed = parse_tool_call(raw_text)
    return {"parse_status": parsed.status, "parsed_call": parsed.call, "gold_call": gold}


def _call(name: str, **arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def test_metric_names_in_spec_order() -> None:
    assert METRIC_NAMES == (
        "valid_json_rate",
        "function_name_accuracy",
        "argument_exact_match",
        "argument_f1",
        "full_call_exact_match",
    )


def test_spec_worked_example() -> None:
    def gold(city: str) -> dict[str, Any]:
        return {"name": "get_weather", "arguments": {"city": city, "units": "celsius"}}

    records = [
        _record(_call("get_weather", city="Paris", units="celsius"), gold("Paris")),
        _record(_call("get_weather", city="Paris", units="kelvin"), gold("Paris")),
        _record(_call("fetch_weather", city="Oslo", units="celsius"), gold("Oslo")),
        _record("The weather in Rome is sunny.", gold("Rome")),
    ]
    assert records[3]["parse_status"] == "no_json"
    metrics = {name: value.to_dict() for name, value in compute_metrics(records).items()}
    assert metrics == {
        "valid_json_rate": {"value": 0.75, "numerator": 3, "denominator": 4},
        "function_name_accuracy": {"value": 0.5, "numerator": 2, "denominator": 4},
        "argument_exact_match": {"value": 0.5, "numerator": 2, "denominator": 4},
        "argument_f1": {"value": 10 / 14, "numerator": 10, "denominator": 14},
        "full_call_exact_match": {"value": 0.25, "numerator": 1, "denominator": 4},
    }
    assert round(metrics["argument_f1"]["value"], 4) == 0.7143


def test_reference_golden_metrics_reproduced_exactly() -> None:
    raw = [json.loads(line) for line in (GOLDEN / "raw_generations.jsonl").read_text().splitlines()]
    records = [_record(row["raw_text"], row["gold_call"]) for row in raw]
    expected = json.loads((GOLDEN / "golden_metrics.json").read_text())
    got = {name: value.to_dict() for name, value in compute_metrics(records).items()}
    assert got == expected


def test_empty_corpus_reports_zero_over_zero() -> None:
    metrics = compute_metrics([])
    assert all(
        value.to_dict() == {"value": 0.0, "numerator": 0, "denominator": 0}
        for value in metrics.values()
    )


def test_failed_parse_keeps_gold_pairs_in_f1_denominator() -> None:
    gold = {"name": "f", "arguments": {}}
    (score,) = score_records([_record("nothing", gold)])
    assert score.numerators == (0, 0, 0, 0, 0)
    assert score.denominators == (1, 1, 1, 1, 1)  # <root>: {} is one gold pair


def test_malformed_records_are_refused() -> None:
    gold = {"name": "f", "arguments": {}}
    with pytest.raises(InputError, match="parse_status"):
        compute_metrics([{"parse_status": "weird", "parsed_call": None, "gold_call": gold}])
    with pytest.raises(InputError, match="parsed_call"):
        compute_metrics([{"parse_status": "ok", "parsed_call": None, "gold_call": gold}])
    with pytest.raises(InputError, match="gold call"):
        compute_metrics(
            [{"parse_status": "no_json", "parsed_call": None, "gold_call": {"name": "f"}}]
        )
    with pytest.raises(InputError, match="gold_call"):
        compute_metrics([{"parse_status": "no_json"}])


def test_metric_value_round_trip_and_checks() -> None:
    value = MetricValue(3, 4)
    assert MetricValue.from_dict(value.to_dict()) == value
    with pytest.raises(InputError):
        MetricValue(5, 4)
    with pytest.raises(InputError):
        MetricValue.from_dict({"value": 0.5, "numerator": 3, "denominator": 4})
    with pytest.raises(InputError):
        MetricValue.from_dict({"numerator": 3.0, "denominator": 4})


_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["a", "b", "1"])
_values = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["k", "m", "n"]), children, max_size=3)
    ),
    max_leaves=6,
)
_arguments = st.dictionaries(st.sampled_from(["x", "y", "z"]), _values, max_size=3)
_calls = st.builds(
    lambda n, a: {"name": n, "arguments": a}, st.sampled_from(["f", "g"]), _arguments
)
_outputs = _calls.map(json.dumps) | st.sampled_from(["", "no call", "{broken", '{"name": "f"}'])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_outputs, _calls), max_size=12))
def test_components_sum_to_corpus_metrics(rows: list[tuple[str, dict[str, Any]]]) -> None:
    records = [_record(text, gold) for text, gold in rows]
    scores = score_records(records)
    corpus = compute_metrics(records)
    for index, name in enumerate(METRIC_NAMES):
        assert sum(s.numerators[index] for s in scores) == corpus[name].numerator
        assert sum(s.denominators[index] for s in scores) == corpus[name].denominator
    assert metrics_from_scores(scores) == corpus
    # Full-call credit implies name and argument credit, and each 0/1 metric has den 1.
    for score in scores:
        assert score.numerators[4] <= min(score.numerators[1], score.numerators[2])
        assert score.numerators[:3] <= (1, 1, 1)
        if score.numerators[2] == 1:
            assert score.numerators[3] == score.denominators[3]


@pytest.mark.parametrize("depth", [100, 300, 1000])
def test_deeply_nested_model_output_is_scored_not_raised(depth: int) -> None:
    # orjson parses up to 1024 levels but serialises only 254; scoring must
    # cover the whole range the parser accepts.
    arguments_text = '{"x":' * depth + "[1]" + "}" * depth
    text = '{"name": "f", "arguments": ' + arguments_text + "}"
    parsed = parse_tool_call(text)
    assert parsed.status == "ok"
    gold = {"name": "f", "arguments": {"x": 1}}
    (score,) = score_records(
        [{"parse_status": "ok", "parsed_call": parsed.call, "gold_call": gold}]
    )
    assert score.numerators == (1, 1, 0, 0, 0)
    assert score.denominators == (1, 1, 1, 2, 1)
    (same,) = score_records([_record(text, parsed.call or {})])
    assert same.numerators == (1, 1, 1, 2, 1)
