"""MLflow keys and evaluator output of the pinned report fixtures stay exactly as written.

The fixtures (``tests/fixtures/reports``) were produced by the code before the
metric registry existed; the key scheme and the evaluator's report, table and
keys are contracts, so they must come out identical.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import dumps_pretty, loads
from sommelier_mlflow.errors import DataError, InvariantViolationError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    EvaluationReport,
    PredictionsReport,
    read_predictions_report,
    write_predictions_report,
)
from sommelier_mlflow.integration import (
    comparison_metric_keys,
    evaluation_metric_keys,
    score_predictions,
)

LEGACY_COLUMNS = (
    "example_id",
    "language",
    "parse_status",
    "name_correct",
    "arguments_correct",
    "full_call_correct",
    "argument_f1_numerator",
    "argument_f1_denominator",
    "raw_text",
)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reports"


def _load(name: str) -> Any:
    return loads((FIXTURES / name).read_bytes())


def test_arm_report_keys_are_unchanged() -> None:
    report = EvaluationReport.from_json(_load("base_evaluation_report.json"))
    assert evaluation_metric_keys(report) == _load("base_metric_keys.json")


def test_comparison_keys_are_unchanged() -> None:
    report = ComparisonReport.from_json(_load("comparison_report.json"))
    assert comparison_metric_keys(report) == _load("comparison_metric_keys.json")


def test_evaluator_output_is_unchanged() -> None:
    inputs = _load("evaluator_inputs.json")
    scores = score_predictions(
        inputs["outputs"],
        inputs["gold_calls"],
        example_ids=inputs["example_ids"],
        languages=inputs["languages"],
        source_example_ids=inputs["source_example_ids"],
        resamples=inputs["resamples"],
    )
    expected = _load("evaluator_report.json")
    assert scores.report.to_json() == expected["report"]
    assert scores.table_rows == expected["table_rows"]
    # The column order of the per-example table, as the pre-registry code wrote it.
    assert all(list(row) == list(LEGACY_COLUMNS) for row in scores.table_rows)
    assert scores.metrics == expected["metrics"]


def test_evaluator_report_reads_and_rewrites_the_fixture_byte_for_byte(tmp_path: Path) -> None:
    document = _load("evaluator_report.json")["report"]
    report = PredictionsReport.from_json(document)
    assert report.to_json() == document
    path = write_predictions_report(tmp_path / "evaluator_report.json", report)
    assert path.read_bytes() == dumps_pretty(document)
    assert read_predictions_report(path).to_json() == document


@pytest.mark.parametrize(
    ("edit", "error", "message"),
    [
        (
            lambda doc: doc["slices"]["en"]["metrics"]["valid_json_rate"].update(
                numerator=4, value=1.0
            ),
            InvariantViolationError,
            "metrics.valid_json_rate",
        ),
        (
            lambda doc: doc["slices"]["en"].update(examples=5),
            InvariantViolationError,
            "do not add up",
        ),
        (
            lambda doc: doc["paired_slices"]["fr"]["gaps"]["argument_f1"].update(value=0.5),
            InvariantViolationError,
            "target minus root",
        ),
        (lambda doc: doc["paired_slices"]["fr"].update(pairs=3), DataError, "4 listed pairs"),
        (lambda doc: doc.pop("bootstrap"), DataError, "missing ['bootstrap']"),
        (lambda doc: doc.update(schema_version="other"), DataError, "schema_version"),
    ],
)
def test_evaluator_report_reader_refuses_an_edited_document(
    edit: Any, error: type[Exception], message: str
) -> None:
    document = _load("evaluator_report.json")["report"]
    edit(document)
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        PredictionsReport.from_json(document)
