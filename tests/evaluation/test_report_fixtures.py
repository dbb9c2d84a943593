"""The report JSON on disk is a contract: earlier files read and rewrite byte for byte.

The fixtures in ``tests/fixtures/reports`` were written before the metric
registry and the typed reports existed (see their README); these tests hold
every later version to the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.errors import DataError, InvariantViolationError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    EvaluationReport,
    compare_reports,
    read_comparison_report,
    read_evaluation_report,
    run_comparison,
    write_comparison_report,
    write_evaluation_report,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "reports"
ARMS = ("base", "adapter")


def test_evaluation_reports_read_and_rewrite_byte_identically(tmp_path: Path) -> None:
    for kind in ARMS:
        source = FIXTURES / f"{kind}_evaluation_report.json"
        report = read_evaluation_report(source)
        written = write_evaluation_report(tmp_path / f"{kind}.json", report)
        assert written.read_bytes() == source.read_bytes()


def test_scoring_the_golden_data_again_writes_the_same_bytes(kit: Any, tmp_path: Path) -> None:
    split = kit.golden_split()
    for kind, texts in zip(ARMS, (kit.BASE_TEXTS, kit.ADAPTER_TEXTS), strict=True):
        run = kit.score(split, texts, kind, resamples=200)
        written = write_evaluation_report(tmp_path / f"{kind}.json", run)
        assert written.read_bytes() == (FIXTURES / f"{kind}_evaluation_report.json").read_bytes()


def test_comparison_of_the_fixture_reports_writes_the_same_bytes(tmp_path: Path) -> None:
    artifacts = run_comparison(
        FIXTURES / "base_evaluation_report.json",
        FIXTURES / "adapter_evaluation_report.json",
        tmp_path,
        seed=0,
        resamples=200,
    )
    assert artifacts.json_path.read_bytes() == (FIXTURES / "comparison_report.json").read_bytes()
    assert artifacts.markdown_path.read_bytes() == (FIXTURES / "comparison_report.md").read_bytes()


def test_comparison_report_reads_and_rewrites_byte_identically(tmp_path: Path) -> None:
    report = read_comparison_report(FIXTURES / "comparison_report.json")
    artifacts = write_comparison_report(tmp_path, report)
    assert artifacts.json_path.read_bytes() == (FIXTURES / "comparison_report.json").read_bytes()
    assert artifacts.markdown_path.read_bytes() == (FIXTURES / "comparison_report.md").read_bytes()


def test_comparison_of_typed_reports_equals_the_fixture_document() -> None:
    base, adapter = (
        EvaluationReport.from_json(
            loads((FIXTURES / f"{kind}_evaluation_report.json").read_bytes())
        )
        for kind in ARMS
    )
    expected = loads((FIXTURES / "comparison_report.json").read_bytes())
    assert compare_reports(base, adapter, seed=0, resamples=200).to_json() == expected


def _comparison_document() -> dict[str, Any]:
    document: dict[str, Any] = loads((FIXTURES / "comparison_report.json").read_bytes())
    return document


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d["slices"]["fr"]["delta"]["argument_f1"].update(value=0.5), "delta"),
        (lambda d: d["slices"]["overall"]["mcnemar"].update(p_value=0.01), "p_value"),
        (lambda d: d["slices"]["en"]["base"]["valid_json_rate"].update(numerator=1), "en.base"),
        (lambda d: d["gaps"]["adapter"]["fr"]["gaps"]["argument_f1"].update(value=0.0), "gaps"),
        (
            lambda d: d["marginal_full_slices"]["base"]["fr"]["metrics"]["argument_f1"].update(
                value=0.0
            ),
            "marginal_full_slices",
        ),
    ],
)
def test_comparison_reader_refuses_a_report_that_disagrees_with_itself(
    edit: Any, field: str
) -> None:
    document = _comparison_document()
    edit(document)
    with pytest.raises((InvariantViolationError, DataError), match=field):
        ComparisonReport.from_json(document)


def test_comparison_reader_refuses_an_unknown_schema() -> None:
    document = _comparison_document()
    document["schema_version"] = "sommelier_mlflow.comparison_report.v2"
    with pytest.raises(DataError, match="schema_version"):
        ComparisonReport.from_json(document)


def test_typed_reports_are_read_only() -> None:
    report = read_evaluation_report(FIXTURES / "base_evaluation_report.json")
    with pytest.raises(ValueError, match="read-only"):
        report.numerators[0, 0] = 7
    with pytest.raises(TypeError):
        report.metrics["valid_json_rate"] = report.metrics["argument_f1"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        report.metric_names = ()  # type: ignore[misc]


_PAIRED_BOOTSTRAPS = [
    (EvaluationReport, "base_evaluation_report.json", ("paired_slices", "fr", "bootstrap")),
    (ComparisonReport, "comparison_report.json", ("slices", "overall", "bootstrap")),
    (ComparisonReport, "comparison_report.json", ("gaps", "adapter", "fr", "bootstrap")),
]


@pytest.mark.parametrize(("reader", "name", "path"), _PAIRED_BOOTSTRAPS)
@pytest.mark.parametrize(
    ("edit", "error"),
    [
        ({"method": "bca"}, DataError),
        ({"resamples": 0}, DataError),
        ({"seed": True}, DataError),
        ({"confidence": 1.5}, DataError),
        ({"n": 3}, InvariantViolationError),
    ],
)
def test_every_paired_bootstrap_is_read_by_one_rule_in_both_readers(
    reader: Any, name: str, path: tuple[str, ...], edit: dict[str, Any], error: type[Exception]
) -> None:
    document: dict[str, Any] = loads((FIXTURES / name).read_bytes())
    entry = document
    for key in path:
        entry = entry[key]
    entry.update(edit)
    with pytest.raises(error, match=r"\.".join(path)) as info:
        reader.from_json(document)
    assert type(info.value) is error
