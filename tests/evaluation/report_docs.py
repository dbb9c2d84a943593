"""Test helpers: report JSON documents in, through the one reader, typed reports to the API.

Many tests edit a report document (to break one field, or to build a second
arm that differs in one place) and then compare or render it. These helpers
send such documents through the readers, exactly as a file from disk would go.
"""

from __future__ import annotations

from typing import Any

from sommelier_mlflow.evaluation import (
    ComparisonReport,
    EvaluationReport,
    ScoredRun,
    check_comparable,
    compare_reports,
    render_comparison_markdown,
)


def doc(run: ScoredRun) -> dict[str, Any]:
    """The ``evaluation_report.json`` document of a scored run."""
    return EvaluationReport.from_run(run).to_json()


def typed(document: dict[str, Any], source: str = "evaluation report") -> EvaluationReport:
    """Read a document with the evaluation-report reader."""
    return EvaluationReport.from_json(document, source=source)


def compare_docs(base: dict[str, Any], adapter: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Compare two report documents and return the comparison document."""
    report = compare_reports(
        typed(base, "base report"), typed(adapter, "adapter report"), **options
    )
    return report.to_json()


def check_docs(base: dict[str, Any], adapter: dict[str, Any]) -> None:
    """Run the gate on two report documents."""
    check_comparable(typed(base, "base report"), typed(adapter, "adapter report"))


def markdown_of(comparison: dict[str, Any]) -> str:
    """Render a comparison document (read back through the comparison reader)."""
    return render_comparison_markdown(ComparisonReport.from_json(comparison))
