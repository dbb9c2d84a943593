from __future__ import annotations

import json
from pathlib import Path

import pytest

from sommelier_mlflow.errors import InputError, MetricConfigError
from sommelier_mlflow.metrics import CompositeMeasure, CountsMeasure, MeasureSpec, get_measure
from sommelier_mlflow.metrics.builtin import ToolCallMeasure
from sommelier_mlflow.toolcalls import METRIC_NAMES, compute_metrics, parse_tool_call

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "reference-golden"


def test_all_five_metrics_are_in_the_catalog() -> None:
    for name in METRIC_NAMES:
        metric_class = get_measure(name)
        assert issubclass(metric_class, ToolCallMeasure)
        assert metric_class.accepts_reference


def test_catalog_metrics_reproduce_the_golden_corpus_values() -> None:
    rows = [
        json.loads(line) for line in (GOLDEN / "raw_generations.jsonl").read_text().splitlines()
    ]
    expected = json.loads((GOLDEN / "golden_metrics.json").read_text())
    for name in METRIC_NAMES:
        metric = MeasureSpec(name=name).build()
        per_row = [
            metric.score(row["raw_text"], reference=json.dumps(row["gold_call"]))[name]
            for row in rows
        ]
        assert ToolCallMeasure.aggregate(per_row).to_dict() == expected[name]
    records = []
    for row in rows:
        parsed = parse_tool_call(row["raw_text"])
        records.append(
            {
                "parse_status": parsed.status,
                "parsed_call": parsed.call,
                "gold_call": row["gold_call"],
            }
        )
    assert {k: v.to_dict() for k, v in compute_metrics(records).items()} == expected


def test_reference_metrics_mix_with_per_text_metrics_in_a_tree() -> None:
    tree = CompositeMeasure(MeasureSpec(name="full_call_exact_match").build(), CountsMeasure())
    text = '{"name": "f", "arguments": {}}'
    result = tree.evaluate(text, reference={"name": "f", "arguments": {}})
    assert result == {
        "full_call_exact_match": {"value": 1.0, "numerator": 1, "denominator": 1},
        "CountsMetric": len(text),
    }


def test_missing_or_broken_reference_is_a_clear_error() -> None:
    metric = MeasureSpec(name="valid_json_rate").build()
    with pytest.raises(InputError, match="gold call"):
        metric.score("{}")
    with pytest.raises(InputError, match="not valid JSON"):
        metric.score("{}", reference="{nope")
    with pytest.raises(InputError, match="gold call must be"):
        metric.score("{}", reference={"name": "f"})


def test_mode_and_format_are_configuration_defaulting_to_single_and_json() -> None:
    assert get_measure("full_call_exact_match")().config == {
        "scoring": "single",
        "output_format": "json",
    }
    # A calls-mode metric defaults to its own mode; Hermes outputs are read when configured.
    metric = get_measure("call_f1").from_config('{"output_format": "hermes"}')
    assert metric.config == {"scoring": "calls", "output_format": "hermes"}
    same = get_measure("call_f1").from_config(scoring="calls", output_format="hermes")
    gold = [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]
    text = "".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>\n" for call in gold)
    both = {"value": 1.0, "numerator": 4, "denominator": 4}  # 2 of 2 predicted, 2 of 2 gold
    assert metric.score(text, reference=gold) == {"call_f1": both}
    assert same.score(text, reference=gold) == {"call_f1": both}
    # Read as json (the default), only the first balanced {...} span is a call.
    first = {"value": 2 / 3, "numerator": 2, "denominator": 3}  # 1 of 1 predicted, 1 of 2 gold
    assert get_measure("call_f1")().score(text, reference=gold) == {"call_f1": first}


def test_a_mode_without_the_metric_or_an_unknown_format_is_refused() -> None:
    with pytest.raises(MetricConfigError, match="scoring mode 'calls' has no metric"):
        get_measure("full_call_exact_match").from_config(scoring="calls")
    with pytest.raises(MetricConfigError, match="unknown output format 'nope'"):
        get_measure("full_call_exact_match").from_config(output_format="nope")
    with pytest.raises(MetricConfigError, match="unknown scoring mode 'nope'"):
        get_measure("call_f1").from_config(scoring="nope")
