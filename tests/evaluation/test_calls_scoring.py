"""calls scoring through the evaluation layer: slices, report round trip, keys, comparison."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.data import Decoding, GenerationRecord, TestExample, TestSplit
from sommelier_mlflow.errors import ComparisonRefusedError, ConfigError, DataError, InputError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    EvaluationReport,
    compare_reports,
    read_evaluation_report,
    render_comparison_markdown,
    score_run,
    write_evaluation_report,
)
from sommelier_mlflow.integration import comparison_metric_keys, evaluation_metric_keys
from sommelier_mlflow.toolcalls import CALLS_METRIC_NAMES, CALLS_PARSER_VERSION
from tests.support.examples import formatted_example
from tests.support.generation_records import parsed_generation

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
W2 = {"name": "get_weather", "arguments": {"city": "Oslo"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}
DECODING = Decoding(max_new_tokens=64, batch_size=4)


def _example(example_id: str, gold: list[dict[str, Any]], **extra: Any) -> TestExample:
    prompt = f"<user>{example_id}</user>"
    return formatted_example(example_id, prompt=prompt, gold_calls=gold, **extra)


def calls_split() -> TestSplit:
    rows = [
        _example("a1", [W, T], slice_values={"topic": "weather"}),
        _example("a2", [W], slice_values={"topic": "weather"}),
        _example("a3", [], slice_values={"topic": "small talk"}),
        _example("a4", [T, T, W2], slice_values={"topic": "money"}),
        _example(
            "b1", [W, T], language="fr", source="a1", slice_values={"topic": "weather"}
        ),
        _example(
            "b3", [], language="fr", source="a3", slice_values={"topic": "small talk"}
        ),
    ]
    return TestSplit(path="calls.jsonl", sha256="6" * 64, examples=tuple(rows))


BASE = {
    "a1": json.dumps([W]),
    "a2": json.dumps(W),
    "a3": json.dumps([W]),
    "a4": "No idea.",
    "b1": json.dumps([T, W]),
    "b3": "[",
}
ADAPTER = {
    "a1": json.dumps([T, W]),
    "a2": json.dumps([W]),
    "a3": "[]",
    "a4": json.dumps([W2, T, T]),
    "b1": json.dumps([T, W]),
    "b3": "Nothing to call here.",
}


def _records(split: TestSplit, texts: dict[str, str], kind: str) -> list[GenerationRecord]:
    decoding = DECODING.to_dict()
    return [  # records store the v1 parse
        parsed_generation(example, texts[example.example_id], model_kind=kind, decoding=decoding)
        for example in split.examples
    ]


def _score(kind: str, texts: dict[str, str], **options: Any) -> Any:
    from sommelier_mlflow.data import ModelIdentity

    split = options.pop("split", calls_split())
    return score_run(
        split,
        _records(split, texts, kind),
        model_kind=kind,  # type: ignore[arg-type]
        model_identity=ModelIdentity("tiny/base", None, "tiny/base", None),
        adapter={"source": "a", "sha256": "b" * 64} if kind == "adapter" else None,
        decoding=DECODING,
        resamples=50,
        scoring=options.pop("scoring", "calls"),
        slice_by=options.pop("slice_by", ["topic"]),
        **options,
    )


def test_single_scoring_refuses_the_split_naming_the_line() -> None:
    with pytest.raises(
        DataError, match=r"calls\.jsonl:1: .*'a1' has 2 gold calls.*--scoring calls"
    ):
        _score("base", BASE, scoring="single", slice_by=[])


def test_calls_report_identity_slices_and_counts() -> None:
    run = _score("adapter", ADAPTER)
    report = EvaluationReport.from_run(run).to_json()
    assert report["identity"]["parser_version"] == CALLS_PARSER_VERSION
    assert report["identity"]["scoring"] == "calls"
    assert report["identity"]["slice_by"] == ["calls", "topic"]
    assert report["metric_names"] == list(CALLS_METRIC_NAMES)
    assert list(report["field_slices"]) == [
        "calls:0",
        "calls:1",
        "calls:2+",
        "topic:money",
        "topic:small talk",
        "topic:weather",
    ]
    assert report["field_slices"]["calls:2+"]["examples"] == 3
    # The adapter gets every call set right: all six examples, both abstentions.
    assert report["metrics"]["call_set_exact_match"] == {
        "value": 1.0,
        "numerator": 6,
        "denominator": 6,
    }
    assert report["metrics"]["abstention_accuracy"]["denominator"] == 2
    assert report["per_example"][0]["slice_values"] == {"calls": "2+", "topic": "weather"}
    # The French pair joined to its roots: gaps stay language-specific.
    assert report["paired_slices"]["fr"]["pairs"] == 2


def test_base_counts_failures_and_false_calls() -> None:
    metrics = EvaluationReport.from_run(_score("base", BASE)).to_json()["metrics"]
    # a3: called on an abstention example; b3: broken JSON (neither abstains nor calls).
    assert (
        metrics["abstention_accuracy"]["numerator"],
        metrics["false_call_rate"]["numerator"],
    ) == (0, 1)
    # a2 (one object for one call) and b1 (reordered parallel calls) are exact sets.
    assert metrics["call_set_exact_match"]["numerator"] == 2
    # predicted: a1 1, a2 1, a3 1, b1 2, b3 1 (failure); matched: a1 1, a2 1, b1 2.
    assert (metrics["call_precision"]["numerator"], metrics["call_precision"]["denominator"]) == (
        4,
        6,
    )


def test_report_round_trips_and_rejects_tampering(tmp_path: Path) -> None:
    run = _score("base", BASE)
    path = write_evaluation_report(tmp_path / "evaluation_report.json", run)
    arm = read_evaluation_report(path)
    assert arm.identity.scoring == "calls" and arm.identity.slice_by == ("calls", "topic")
    assert list(arm.field_slices) == list(run.scored.field_slices)
    assert arm.to_json() == EvaluationReport.from_run(run).to_json()
    assert path.read_bytes() == write_evaluation_report(tmp_path / "again.json", arm).read_bytes()
    document = json.loads(path.read_text())
    document["per_example"][0]["slice_values"]["topic"] = "money"
    with pytest.raises(Exception, match="field_slices"):
        EvaluationReport.from_json(document)
    document = json.loads(path.read_text())
    document["identity"]["slice_by"] = ["topic"]
    with pytest.raises(DataError, match=r"identity\.slice_by.*\['calls', 'topic'\]"):
        EvaluationReport.from_json(document)


def test_metric_keys_use_sanitised_slice_sections() -> None:
    keys = evaluation_metric_keys(EvaluationReport.from_run(_score("base", BASE)))
    assert "calls:2.2b/call_f1" in keys
    assert "calls:2.2b/counts/call_f1.denominator" in keys
    assert "topic:small.20talk/abstention_accuracy" in keys
    assert "en/call_set_exact_match" in keys and "gap/fr/call_set_exact_match" in keys
    assert not any("+" in key or " " in key for key in keys)


def test_comparison_tests_call_sets_and_deltas_field_slices(tmp_path: Path) -> None:
    base = EvaluationReport.from_run(_score("base", BASE))
    adapter = EvaluationReport.from_run(_score("adapter", ADAPTER))
    report = compare_reports(base, adapter, resamples=50)
    document = report.to_json()
    assert document["identity"]["scoring"] == "calls"
    assert document["identity"]["field_slices"][:3] == ["calls:0", "calls:1", "calls:2+"]
    assert report.mcnemar_metric == "call_set_exact_match"
    assert report.slices["calls:0"].examples == 2
    assert report.slices["calls:0"].delta.interval("abstention_accuracy").estimate == 1.0
    assert ComparisonReport.from_json(document).to_json() == document
    keys = comparison_metric_keys(report)
    assert "delta/calls:2.2b/call_f1" in keys and "mcnemar/calls:0/p_value" in keys
    markdown = render_comparison_markdown(report)
    assert "Scoring: `calls`" in markdown and "calls:2+" in markdown


def test_gate_refuses_a_single_scored_arm_against_a_calls_arm() -> None:
    single_split = TestSplit(
        path="calls.jsonl",
        sha256="6" * 64,
        examples=tuple(replace(example, gold_call=W) for example in calls_split().examples),
    )
    base = EvaluationReport.from_run(
        _score("base", BASE, split=single_split, scoring="single", slice_by=[])
    )
    adapter = EvaluationReport.from_run(_score("adapter", ADAPTER, split=single_split))
    with pytest.raises(ComparisonRefusedError) as info:
        compare_reports(base, adapter, resamples=50)
    assert info.value.field == "scoring"


def test_missing_slice_values_and_bad_fields_are_refused() -> None:
    split = calls_split()
    bare = TestSplit(
        path="calls.jsonl",
        sha256="6" * 64,
        examples=tuple(replace(example, slice_values=()) for example in split.examples),
    )
    with pytest.raises(InputError, match="no value for slice field 'topic'"):
        _score("base", BASE, split=bare)
    with pytest.raises(ConfigError, match="reserved"):
        _score("base", BASE, slice_by=["query"])
    with pytest.raises(ConfigError, match="only with --scoring calls"):
        _score("base", BASE, scoring="single", slice_by=["calls"], split=split)
