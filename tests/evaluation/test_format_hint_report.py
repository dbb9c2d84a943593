"""The wrong-output-format hint: computed while scoring, kept by the report, scores untouched."""

from __future__ import annotations

import json
from pathlib import Path

from sommelier_mlflow.evaluation import (
    EvaluationReport,
    read_evaluation_report,
    write_evaluation_report,
)
from tests.evaluation.test_calls_scoring import ADAPTER, _score

PYTHONIC = {
    "a1": "[get_weather(city='Paris'), convert(amount=10, to='USD')]",
    "a2": "[get_weather(city='Paris')]",
    "a3": "No tool applies.",
    "a4": "[convert(amount=10, to='USD'), convert(amount=10, to='USD'), get_weather(city='Oslo')]",
    "b1": "[convert(amount=10, to='USD'), get_weather(city='Paris')]",
    "b3": "Nothing to call here.",
}


def test_pythonic_outputs_scored_as_json_get_a_hint_and_the_same_scores(tmp_path: Path) -> None:
    as_json = _score("adapter", PYTHONIC)
    hint = as_json.scored.format_hint
    assert hint is not None and (hint.suggested, hint.decoded, hint.outputs) == ("pythonic", 4, 6)
    path = write_evaluation_report(tmp_path / "evaluation_report.json", as_json)
    document = json.loads(path.read_text())
    assert document["format_hint"] == (
        "4 of 6 outputs decode as pythonic; did you mean --output-format pythonic?"
    )
    arm = read_evaluation_report(path)
    assert arm.format_hint == document["format_hint"]
    assert path.read_bytes() == write_evaluation_report(tmp_path / "again.json", arm).read_bytes()
    # A diagnostic only: the scores are json's, every pythonic answer a failure.
    assert as_json.scored.metrics["call_set_exact_match"].numerator == 2  # the two abstentions
    as_pythonic = _score("adapter", PYTHONIC, output_format="pythonic")
    assert as_pythonic.scored.format_hint is None
    assert as_pythonic.scored.metrics["call_set_exact_match"].numerator == 6


def test_no_hint_no_field(tmp_path: Path) -> None:
    run = _score("adapter", ADAPTER)
    assert run.scored.format_hint is None
    assert "format_hint" not in EvaluationReport.from_run(run).to_json()
