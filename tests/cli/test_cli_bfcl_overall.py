"""BFCL's overall score with an interval, through ``score`` and ``compare`` on the bundled example.

The single-turn example has BFCL's non-live categories and ``irrelevance``:
its ``bfcl_overall`` weighs the non-live group (the unweighted mean of its
four categories) and the irrelevance group equally, BFCL's 10 and 10
renormalised; the adapter-minus-base difference gets a paired bootstrap
interval that resamples questions within each category.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.evaluation import (
    read_comparison_report,
    read_evaluation_report,
    weighted_overall_delta,
)
from sommelier_mlflow.integration import comparison_metric_keys, evaluation_metric_keys
from tests.cli.cli_helpers import bfcl_example_score_args, bfcl_example_split, compare_args

NON_LIVE = ("multiple", "parallel", "parallel_multiple", "simple_python")


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both arms of the single-turn example scored in BFCL mode and compared (in process)."""
    root = tmp_path_factory.mktemp("bfcl_overall")
    split = bfcl_example_split(root)
    for kind in ("base", "adapter"):
        assert main(bfcl_example_score_args(split, kind, "outputs", root / kind)) == 0
    assert (
        main(compare_args(root / "base", root / "adapter", root / "cmp", "--resamples", "300")) == 0
    )
    return root


def _accuracy(report_path: Path, category: str) -> Fraction:
    report = read_evaluation_report(report_path)
    value = report.field_slices[f"category:{category}"].metrics["bfcl_ast_accuracy"]
    return Fraction(value.numerator, value.denominator)


def _expected_overall(report_path: Path) -> Fraction:
    non_live = sum(_accuracy(report_path, name) for name in NON_LIVE) / 4
    return (non_live + _accuracy(report_path, "irrelevance")) / 2


def test_each_arm_logs_bfcl_overall_as_a_value_and_prints_it(compared: Path) -> None:
    for kind in ("base", "adapter"):
        path = compared / kind / "evaluation_report.json"
        report = read_evaluation_report(path)
        keys = evaluation_metric_keys(report, scoring="bfcl")
        assert keys["overall/bfcl_overall"] == pytest.approx(float(_expected_overall(path)))
        assert not any("counts/bfcl_overall" in key for key in keys)  # a weighted figure
        # Without the mode named (an older caller), the keys are exactly as before.
        assert set(evaluation_metric_keys(report)) == set(keys) - {"overall/bfcl_overall"}


def test_the_comparison_logs_the_difference_with_a_reproducible_interval(compared: Path) -> None:
    report = read_comparison_report(compared / "cmp" / "comparison" / "comparison_report.json")
    delta = weighted_overall_delta(report)
    assert delta is not None
    base = _expected_overall(compared / "base" / "evaluation_report.json")
    adapter = _expected_overall(compared / "adapter" / "evaluation_report.json")
    assert (delta.base.value, delta.adapter.value) == (base, adapter)
    assert delta.estimate == pytest.approx(float(adapter - base))
    assert delta.lower <= delta.estimate <= delta.upper and delta.lower < delta.upper
    assert weighted_overall_delta(report) == delta  # the seed fixes every draw
    keys = comparison_metric_keys(report)
    assert keys["delta/overall/bfcl_overall"] == pytest.approx(delta.estimate)
    assert keys["delta/overall/ci95/bfcl_overall.lower"] == delta.lower
    assert keys["delta/overall/ci95/bfcl_overall.upper"] == delta.upper
    markdown = (compared / "cmp" / "comparison" / "comparison_report.md").read_text(
        encoding="utf-8"
    )
    assert "## BFCL's overall" in markdown and "## bfcl_overall: adapter minus base" in markdown
    assert f"| {delta.estimate:+.4f} | [{delta.lower:+.4f}, {delta.upper:+.4f}] |" in markdown
    assert f"| **overall** | **{float(base):.4f}** |" in markdown and "agentic (40%" in markdown


def test_the_interval_resamples_questions_within_each_category(compared: Path) -> None:
    # A plain row-level stratified bootstrap of the same per-question outcomes,
    # drawn independently: its percentiles match the interval's closely.
    report = read_comparison_report(compared / "cmp" / "comparison" / "comparison_report.json")
    delta = weighted_overall_delta(report)
    assert delta is not None
    arms = {
        kind: read_evaluation_report(compared / kind / "evaluation_report.json")
        for kind in ("base", "adapter")
    }
    column = arms["base"].metric_names.index("bfcl_ast_accuracy")
    rng = np.random.default_rng(7)
    draws = np.zeros(20_000)
    for category, weight in delta.base.weights.items():
        members = arms["base"].field_slice_rows[f"category:{category}"]
        passed = {kind: arm.numerators[members, column] for kind, arm in arms.items()}
        picks = rng.integers(0, len(members), size=(draws.size, len(members)))
        draws += float(weight) * (passed["adapter"][picks] - passed["base"][picks]).mean(axis=1)
    lower, upper = np.quantile(draws, [0.025, 0.975])
    assert delta.lower == pytest.approx(lower, abs=0.03)
    assert delta.upper == pytest.approx(upper, abs=0.03)
