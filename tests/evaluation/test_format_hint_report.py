"""The wrong-output-format hint: computed while scoring, kept by the report, scores untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.errors import DataError, InvariantViolationError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    EvaluationReport,
    compare_reports,
    read_evaluation_report,
    write_evaluation_report,
)
from sommelier_mlflow.toolcalls import FormatMismatch
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


def _tampered(path: Path, **changes: Any) -> Path:
    document = json.loads(path.read_text())
    document["format_mismatch"].update(changes)
    path.write_text(json.dumps(document))
    return path


def test_bare_json_scored_as_hermes_records_the_counts_and_the_reader_recounts_them(
    tmp_path: Path,
) -> None:
    # The adapter's calls written as bare JSON: hermes finds no <tool_call> in any output.
    run = _score("adapter", ADAPTER, output_format="hermes")
    assert run.scored.format_mismatch == FormatMismatch("hermes", 6, 0, "json", 4)
    path = write_evaluation_report(tmp_path / "evaluation_report.json", run)
    document = json.loads(path.read_text())
    assert document["format_mismatch"] == {
        "output_format": "hermes",
        "outputs": 6,
        "syntax_found": 0,
        "other_format": "json",
        "other_reads_calls": 4,
    }
    arm = read_evaluation_report(path)
    assert arm.format_mismatch == run.scored.format_mismatch
    assert path.read_bytes() == write_evaluation_report(tmp_path / "again.json", arm).read_bytes()
    # The scores are hermes': the two abstentions pass, the four calls read as none.
    assert run.scored.metrics["call_set_exact_match"].numerator == 2

    # The syntax count is recounted from the rows' statuses; the rest must obey the rule.
    with pytest.raises(InvariantViolationError, match=r"format_mismatch\.syntax_found.*0 rows"):
        read_evaluation_report(_tampered(tmp_path / "again.json", syntax_found=1))
    with pytest.raises(InvariantViolationError, match=r"format_mismatch\.outputs"):
        read_evaluation_report(_tampered(write_evaluation_report(path, run), outputs=7))
    with pytest.raises(InvariantViolationError, match="cannot come from the format check"):
        read_evaluation_report(_tampered(write_evaluation_report(path, run), other_reads_calls=0))
    with pytest.raises(DataError, match=r"format_mismatch\.other_format"):
        read_evaluation_report(_tampered(write_evaluation_report(path, run), other_format=""))


def test_no_mismatch_no_field() -> None:
    # Pythonic outputs scored as json: json sees its syntax ("[") in them, so no mismatch.
    run = _score("adapter", PYTHONIC)
    assert run.scored.format_hint is not None and run.scored.format_mismatch is None
    assert "format_mismatch" not in EvaluationReport.from_run(run).to_json()


def _hermes(text: str) -> str:
    """``text``'s JSON calls as Hermes blocks (prose and an empty list as they are)."""
    calls = json.loads(text) if text.startswith("[") else []
    blocks = (f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls)
    return "\n".join(blocks) or text


def test_the_comparison_report_carries_each_arms_warning_and_checks_it() -> None:
    base = EvaluationReport.from_run(_score("base", ADAPTER, output_format="hermes"))
    tagged = {example_id: _hermes(text) for example_id, text in ADAPTER.items()}
    adapter = EvaluationReport.from_run(_score("adapter", tagged, output_format="hermes"))
    assert adapter.format_mismatch is None and adapter.format_hint is None
    document = compare_reports(base, adapter, resamples=50).to_json()
    runs = document["runs"]
    assert runs["base"]["format_mismatch"] == base.format_mismatch.to_dict()  # type: ignore[union-attr]
    assert runs["base"]["format_hint"] == base.format_hint
    assert not {"format_mismatch", "format_hint"} & set(runs["adapter"])
    read = ComparisonReport.from_json(document)
    assert read.runs["base"].format_mismatch == base.format_mismatch
    assert read.to_json() == document
    runs["base"]["format_mismatch"]["outputs"] = 7  # the arm has 6 examples
    with pytest.raises(InvariantViolationError, match=r"runs\.base\.format_mismatch\.outputs"):
        ComparisonReport.from_json(document)
