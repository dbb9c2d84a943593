"""``score --scoring bfcl --precomputed trajectories.jsonl`` and ``compare`` on BFCL multi-turn.

The bundled example's multi-turn questions (two of each multi-turn category)
with two arms' trajectories: the adapter follows the ground truth but for a
wrong argument in one last turn; the base model also calls where the ground
truth makes none (which BFCL's leaderboard does not check), gets arguments
wrong and writes a step of broken JSON. Each step is decoded, run against
fresh instances of BFCL's classes and checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.evaluation import read_comparison_report, read_evaluation_report
from sommelier_mlflow.integration import comparison_metric_keys, evaluation_metric_keys
from tests.cli.cli_helpers import bfcl_example_score_args, bfcl_example_split, compare_args
from tests.support.bfcl_multi_turn import MULTI_TURN_CATEGORIES, require_bfcl


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both arms scored from their trajectories and compared (in process)."""
    require_bfcl()
    root = tmp_path_factory.mktemp("bfcl_multi_turn")
    split = bfcl_example_split(root, MULTI_TURN_CATEGORIES)
    for kind in ("base", "adapter"):
        assert main(bfcl_example_score_args(split, kind, "trajectories", root / kind)) == 0
    assert (
        main(compare_args(root / "base", root / "adapter", root / "cmp", "--resamples", "300")) == 0
    )
    return root


def _counts(root: Path, kind: str) -> dict[str, tuple[int, int]]:
    report = read_evaluation_report(root / kind / "evaluation_report.json")
    return {name: (value.numerator, value.denominator) for name, value in report.metrics.items()}


def test_each_arm_is_scored_per_question_and_per_turn_with_the_leaderboards_verdict(
    scored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, adapter = _counts(scored, "base"), _counts(scored, "adapter")
    assert base["bfcl_multi_turn_accuracy"] == (3, 8)
    # One base question calls where none is expected: BFCL's leaderboard passes it.
    assert base["bfcl_multi_turn_leaderboard_accuracy"] == (4, 8)
    assert base["bfcl_turn_accuracy"] == (30, 36)
    assert base["bfcl_decode_rate"] == (7, 8)  # the broken step, in a question that passes
    assert base["bfcl_ast_accuracy"] == base["bfcl_multi_turn_accuracy"]  # McNemar's outcome
    assert adapter["bfcl_multi_turn_accuracy"] == adapter["bfcl_leaderboard_accuracy"] == (7, 8)
    assert adapter["bfcl_turn_accuracy"] == (35, 36)
    assert base["bfcl_step_budget_used"] == (103, 21 * 36)
    report = read_evaluation_report(scored / "base" / "evaluation_report.json")
    keys = evaluation_metric_keys(report, scoring="bfcl")
    assert keys["overall/bfcl_overall"] == pytest.approx(3 / 8)  # four categories, 1/4 each
    assert keys["category:multi_turn_miss_func/counts/bfcl_multi_turn_accuracy.numerator"] == 1
    # A question's first user turn is no conversation turn: no turn:1 / after:user slice.
    assert all(name.startswith("category:") for name in report.field_slices)


def test_the_comparison_tests_questions_and_gives_bfcls_table_for_both_arms(
    scored: Path,
) -> None:
    report = read_comparison_report(scored / "cmp" / "comparison" / "comparison_report.json")
    overall = report.slices["overall"]
    assert overall.mcnemar_metric == "bfcl_ast_accuracy"
    assert (overall.mcnemar.b, overall.mcnemar.c) == (0, 4)  # questions only one arm passes
    keys = comparison_metric_keys(report)
    assert keys["delta/overall/bfcl_overall"] == pytest.approx(0.5)
    assert keys["delta/overall/ci95/bfcl_overall.lower"] > 0.0
    markdown = (scored / "cmp" / "comparison" / "comparison_report.md").read_text("utf-8")
    row = "| multi_turn_miss_func (weight 0.2500) | 0.5000 (1/2) | 1.0000 (2/2) |"
    assert row in markdown
    assert "| **overall** | **0.3750** | **0.5000** | **0.8750** | **0.8750** |" in markdown
    assert "| bfcl_overall | 0.3750 | 0.8750 | +0.5000 |" in markdown
