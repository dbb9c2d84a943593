"""A metric registered through the public API reaches every output with no other code change.

The metric is defined here, in the test module, exactly as a user would:
``argument_key_recall`` counts how many of the gold call's top-level argument
names the prediction supplies (a ratio, so it also exercises the count columns
and count scorers), and the fixture removes it again so no other test sees it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from sommelier_mlflow import (
    METRIC_NAMES,
    CallMatch,
    ScoringMetric,
    register_scoring_metric,
    scoring_metrics,
    unregister_scoring_metric,
)
from sommelier_mlflow.data import read_test_split, write_test_split
from sommelier_mlflow.evaluation import (
    EvaluationReport,
    compare_reports,
    read_evaluation_report,
    render_comparison_markdown,
    write_evaluation_report,
)
from sommelier_mlflow.integration import comparison_metric_keys, evaluation_metric_keys
from sommelier_mlflow.scorers import sommelier_scorers
from tests.integration.integration_helpers import (
    ADAPTER_OUTPUTS,
    BASE_OUTPUTS,
    GOLD,
    Store,
    evaluate_in_run,
    examples,
    score_arms,
)

SIXTH = "argument_key_recall"


def _key_recall(comparison: CallMatch) -> tuple[int, int]:
    gold = set(comparison.gold.arguments)
    if comparison.call is None:
        return 0, len(gold)
    return len(gold & set(comparison.call["arguments"])), len(gold)


@pytest.fixture
def sixth() -> Iterator[ScoringMetric[CallMatch]]:
    metric = register_scoring_metric(
        ScoringMetric(
            SIXTH,
            "Share of the gold call's top-level argument names that the prediction supplies.",
            _key_recall,
        )
    )
    try:
        yield metric
    finally:
        unregister_scoring_metric(SIXTH)
    assert SIXTH not in [registered.name for registered in scoring_metrics()]


def _expected_recall(outputs: dict[str, str]) -> tuple[int, int]:
    # By hand: every gold call here has the two arguments city and units; an
    # output that parses as a call supplies both, anything else supplies none.
    supplied = sum(2 for text in outputs.values() if text.startswith("{"))
    return supplied, 2 * len(outputs)


def test_a_sixth_metric_flows_through_reports_stats_keys_and_markdown(
    sixth: ScoringMetric[CallMatch], tmp_path: Path
) -> None:
    split = read_test_split(write_test_split(tmp_path / "test.jsonl", examples()))
    base, adapter = score_arms(split, resamples=200)

    # Evaluation report: named, summed, per slice, per pair, per example, and it round-trips.
    path = write_evaluation_report(tmp_path / "base.json", base)
    report = read_evaluation_report(path)
    document = report.to_json()
    assert report.metric_names == (*METRIC_NAMES, SIXTH)
    numerator, denominator = _expected_recall(BASE_OUTPUTS)
    assert document["metrics"][SIXTH]["numerator"] == numerator
    assert document["metrics"][SIXTH]["denominator"] == denominator
    assert set(document["slices"]) == {"en", "fr"}
    assert all(SIXTH in entry["metrics"] for entry in document["slices"].values())
    assert SIXTH in document["paired_slices"]["fr"]["gaps"]
    assert all(len(row["numerators"]) == 6 for row in document["per_example"])

    # Bootstrap deltas, MLflow keys and Markdown of the comparison.
    typed = compare_reports(report, EvaluationReport.from_run(adapter), resamples=200)
    comparison = typed.to_json()
    overall = comparison["slices"]["overall"]
    adapter_numerator, _ = _expected_recall(ADAPTER_OUTPUTS)
    assert math.isclose(
        overall["delta"][SIXTH]["value"], (adapter_numerator - numerator) / denominator
    )
    assert overall["delta"][SIXTH]["lower"] <= overall["delta"][SIXTH]["upper"]
    assert overall["mcnemar"]["metric"] == "full_call_exact_match"

    arm_keys = evaluation_metric_keys(report)
    assert arm_keys[f"overall/{SIXTH}"] == numerator / denominator
    assert arm_keys[f"overall/counts/{SIXTH}.denominator"] == denominator
    assert f"gap/fr/ci95/{SIXTH}.lower" in arm_keys
    comparison_keys = comparison_metric_keys(typed)
    assert f"delta/overall/{SIXTH}" in comparison_keys
    assert f"delta/fr/ci95/{SIXTH}.upper" in comparison_keys
    assert f"marginal_gap/adapter/fr/{SIXTH}" in comparison_keys

    markdown = render_comparison_markdown(typed)
    assert markdown.count(f"| {SIXTH} |") == len(comparison["slices"]) + 4  # slices, 2 gaps x 2


def test_a_sixth_metric_reaches_the_evaluator_and_the_scorers(
    sixth: ScoringMetric[CallMatch], store: Store
) -> None:
    ids = list(GOLD)
    data = pd.DataFrame(
        {
            "example_id": ids,
            "language": ["fr" if example_id.startswith("f") else "en" for example_id in ids],
            "output": [BASE_OUTPUTS[example_id] for example_id in ids],
            "gold": [GOLD[example_id] for example_id in ids],
        }
    )
    result, _ = evaluate_in_run(store, data)
    numerator, denominator = _expected_recall(BASE_OUTPUTS)
    assert result.metrics[f"overall/{SIXTH}"] == numerator / denominator
    assert result.metrics[f"overall/counts/{SIXTH}.numerator"] == numerator
    table = result.artifacts["sommelier_examples"].content
    assert f"{SIXTH}_numerator" in table["columns"]
    assert f"{SIXTH}_denominator" in table["columns"]

    names = [built.name for built in sommelier_scorers()]
    assert names[-3:] == [SIXTH, f"{SIXTH}_numerator", f"{SIXTH}_denominator"]
    by_name = {built.name: built for built in sommelier_scorers()}
    partial = {"outputs": BASE_OUTPUTS["e1"], "expectations": {"gold_call": GOLD["e1"]}}
    assert by_name[f"{SIXTH}_numerator"](**partial) == 2
    assert by_name[SIXTH](**partial) == 1.0
