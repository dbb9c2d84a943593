"""The report JSON on disk is a contract: earlier files read and rewrite byte for byte.

The fixtures in ``tests/fixtures/reports`` were written before the metric
registry and the typed reports existed (see their README); these tests hold
every later version to the same bytes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sommelier_mlflow._json import loads
from sommelier_mlflow.evaluation import (
    compare_reports,
    read_evaluation_report,
    run_comparison,
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
    assert (
        artifacts.markdown_path.read_bytes() == (FIXTURES / "comparison_report.md").read_bytes()
    )


def test_comparison_document_equals_the_fixture() -> None:
    base, adapter = (
        loads((FIXTURES / f"{kind}_evaluation_report.json").read_bytes()) for kind in ARMS
    )
    expected = loads((FIXTURES / "comparison_report.json").read_bytes())
    assert compare_reports(base, adapter, seed=0, resamples=200) == expected
