"""A scoring mode's own summary, registered from this module, reaches ``score`` and the Markdown.

BFCL's leaderboard aggregation used to be printed by code that named the
mode; now any mode may sum up its results with ``summary_lines`` (the
console, after an arm's metrics) and ``markdown_lines`` (a section of
``comparison_report.md``). The ``tally`` mode here is the ``single`` mode
under another name with one metric and both hooks; nothing else changes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.toolcalls import (
    ArmResults,
    ComparisonResults,
    markdown_table,
    register_scoring_metric,
    register_scoring_mode,
    scoring_metric_names,
    scoring_metrics,
    scoring_mode,
)
from tests.cli.cli_helpers import compare_args, score_args, write_fixture

NAME = "tally"
METRIC = "tally_exact"


def _summary(arm: ArmResults) -> list[str]:
    value = arm.metrics[METRIC]
    return [f"tally: {value.numerator} of {value.denominator} outputs are the gold call"]


def _markdown(report: ComparisonResults) -> list[str]:
    rows = [
        [kind, str(getattr(report.slices["overall"], kind)[METRIC].numerator)]
        for kind in ("base", "adapter")
    ]
    return ["## Tally", "", *markdown_table(["arm", "exact calls"], rows), ""]


@pytest.fixture(scope="module")
def tally() -> str:
    single = scoring_mode("single")
    mode = dataclasses.replace(single, name=NAME, summary_lines=_summary, markdown_lines=_markdown)
    register_scoring_mode(mode)
    if METRIC not in scoring_metric_names(NAME):  # registered once per test session
        exact = next(m for m in scoring_metrics("single") if m.name == "full_call_exact_match")
        register_scoring_metric(
            dataclasses.replace(exact, name=METRIC, table_column=None), mode=NAME
        )
    return NAME


def test_a_modes_summary_lines_follow_its_metrics_in_score_and_its_section_in_the_markdown(
    tally: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_fixture(tmp_path)
    for kind in ("base", "adapter"):
        assert main([*score_args(files, kind, tmp_path / kind), "--scoring", tally]) == 0
    printed = capsys.readouterr().out.splitlines()
    # Base: Paris is exact in both languages; the adapter is exact everywhere.
    assert "  tally_exact              0.2500 (2/8)" in printed
    assert "  tally: 2 of 8 outputs are the gold call" in printed
    assert printed.index("  tally: 2 of 8 outputs are the gold call") == (
        printed.index("  tally_exact              0.2500 (2/8)") + 1
    )
    assert "  tally: 8 of 8 outputs are the gold call" in printed

    assert main(compare_args(tmp_path / "base", tmp_path / "adapter", tmp_path / "cmp")) == 0
    markdown = (tmp_path / "cmp" / "comparison" / "comparison_report.md").read_text()
    section = "## Tally\n\n| arm | exact calls |\n|---|---:|\n| base | 2 |\n| adapter | 8 |\n"
    assert section in markdown
    # The section follows the per-slice tables and precedes the language gaps.
    assert markdown.index("## Adapter minus base, per slice") < markdown.index(section)
    assert markdown.index(section) < markdown.index("## Language gaps - primary")
    assert "BFCL" not in markdown
