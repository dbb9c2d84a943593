from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from sommelier_mlflow.errors import MetricConfigError, MetricTypeError, UnknownMetricError
from sommelier_mlflow.metrics import (
    BaseMeasure,
    CountsMeasure,
    JsonFormatMeasure,
    MeasureResults,
    MeasureSpec,
    count_characters,
    count_tokens,
    evaluate_measures,
)


class EqualsGold(BaseMeasure[bool]):
    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, bool]:
        return self.result(text == reference)


def test_metric_spec_builds_from_the_catalog() -> None:
    spec = MeasureSpec(name="CountsMetric", config={"segments": "tokens"}, result_key="words")
    metric = spec.build()
    assert isinstance(metric, CountsMeasure)
    assert metric.result_key == "words"
    assert metric.config["segmentation"] == "whitespace"
    assert metric.score("one two three") == {"words": 3}
    assert isinstance(MeasureSpec(name="CountsMetric").build(), CountsMeasure)


def test_metric_spec_round_trips_through_json() -> None:
    spec = MeasureSpec(
        name="JsonFormatMetric",
        config={"expected_schema": '{"type": "object", "properties": {"a": {"type": "integer"}}}'},
    )
    again = MeasureSpec.model_validate_json(spec.model_dump_json())
    assert again == spec
    assert isinstance(again.build(), JsonFormatMeasure)


def test_metric_spec_is_strict_and_closed() -> None:
    with pytest.raises(ValidationError):
        MeasureSpec(name="CountsMetric", params={})  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        MeasureSpec(name=3)  # type: ignore[arg-type]


def test_metric_spec_build_errors() -> None:
    with pytest.raises(UnknownMetricError, match="Did you mean 'CountsMetric'"):
        MeasureSpec(name="CountMetric").build()
    with pytest.raises(MetricConfigError, match="segments"):
        MeasureSpec(name="CountsMetric", config={"segments": "bytes"}).build()
    with pytest.raises(MetricConfigError, match="result_key"):
        MeasureSpec(name="CountsMetric", result_key="a/b").build()


def test_metric_spec_masks_secrets_in_repr_and_redacted() -> None:
    spec = MeasureSpec(
        name="CountsMetric",
        config={"segments": "encodings", "segmentation": "x/y", "hf_token": "hf_SECRET"},
    )
    assert "hf_SECRET" not in repr(spec)
    assert "hf_SECRET" not in str(spec)
    assert spec.redacted()["config"]["hf_token"] == "**********"
    assert spec.redacted()["config"]["segmentation"] == "x/y"
    assert spec.config["hf_token"] == "hf_SECRET"  # the data itself stays usable
    unknown = MeasureSpec(name="Plugin", config={"api_key": "k1", "access_token": "t1", "n": 1})
    assert unknown.redacted()["config"] == {
        "api_key": "**********",
        "access_token": "**********",
        "n": 1,
    }


def test_evaluation_result_holds_json_only() -> None:
    assert MeasureResults(results={"a": 1, "b": {"c": [True, None]}}).results["a"] == 1
    with pytest.raises(ValidationError):
        MeasureResults(results={"a": float("nan")})
    with pytest.raises(ValidationError):
        MeasureResults(results={"a": object()})


def test_evaluate_metrics_mixes_specs_and_instances() -> None:
    tokens = MeasureSpec(name="CountsMetric", config={"segments": "tokens"}, result_key="tokens")
    gold = EqualsGold()
    result = evaluate_measures("a b", [CountsMeasure(), tokens, gold], reference="a b")
    assert result == MeasureResults(results={"CountsMetric": 3, "tokens": 2, "EqualsGold": True})
    assert gold.parent is None


def test_evaluate_metrics_refuses_duplicates_and_junk() -> None:
    with pytest.raises(MetricConfigError, match="distinct result_key"):
        evaluate_measures("x", [CountsMeasure(), CountsMeasure()])
    with pytest.raises(MetricTypeError, match="measures or MeasureSpecs"):
        evaluate_measures("x", ["CountsMetric"])  # type: ignore[list-item]


def test_count_helpers() -> None:
    assert count_characters("  héllo wörld \n") == 11
    assert count_characters(" \t\n") == 0
    assert count_tokens("Hello,   world!  ") == 2
    assert count_tokens("Hello, world!", segmentation="wordpunct") == 4
    assert count_tokens("") == 0
    with pytest.raises(MetricConfigError, match="segmentation"):
        count_tokens("x", segmentation="bpe")
    with pytest.raises(MetricTypeError):
        count_characters(None)  # type: ignore[arg-type]
