"""The calibration benchmark, run on a reduced size: intervals cover, Holm controls the FWER."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from tests.support.scripts import load_script


def _load() -> ModuleType:
    return load_script("benchmarks/bench_calibration.py")


def test_joint_cells_have_the_requested_marginals_and_correlation() -> None:
    bench = _load()
    cells = bench.joint_cells(0.5, 0.65, 0.6)
    both, a_only, b_only, neither = cells
    assert neither >= 0
    assert cells.sum() == pytest.approx(1.0)
    assert both + a_only == pytest.approx(0.5)
    assert both + b_only == pytest.approx(0.65)
    covariance = both - 0.5 * 0.65
    assert covariance / ((0.5 * 0.5 * 0.65 * 0.35) ** 0.5) == pytest.approx(0.6)
    with pytest.raises(ValueError):
        bench.joint_cells(0.9, 0.1, 0.9)


@pytest.mark.parametrize("icc", [0.0, 0.3, 0.6])
def test_simulated_conversations_have_the_requested_within_conversation_correlation(icc):
    bench = _load()
    rng = np.random.default_rng(4)
    a, b, labels = bench.simulate_conversations(rng, 20_000, 0.0, icc)
    sizes = np.bincount(labels)
    assert sizes.min() == 2 and sizes.max() == 8
    # The first two turns of every conversation: their correlation is icc in each arm.
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for arm in (a, b):
        first, second = arm[starts].astype(float), arm[starts + 1].astype(float)
        assert np.corrcoef(first, second)[0, 1] == pytest.approx(icc, abs=0.03)
    assert a.mean() == pytest.approx(0.5, abs=0.01)


@pytest.mark.slow
def test_reduced_calibration_run() -> None:
    bench = _load()
    trials = 200
    results = bench.run(sizes=[400], trials=trials, resamples=1000, seed=1)
    assert len(results["coverage"]) == len(bench.COVERAGE_SCENARIOS) + len(bench.RARE_SCENARIOS)
    for row in results["coverage"]:
        # 200 trials: a calibrated 95% interval lands in [0.90, 0.99] with
        # overwhelming probability; a 90% or a 99% interval would not.
        assert 0.90 <= row["coverage"] <= 0.99, row
        assert row["truth_below_interval"] + row["truth_above_interval"] == pytest.approx(
            1 - row["coverage"]
        )
    (fwer,) = results["fwer"]
    # Four true nulls at the boundary: unadjusted testing makes false claims
    # far more often than alpha; Holm keeps the family at alpha (within the
    # Monte Carlo uncertainty of 200 trials).
    assert fwer["fwer_unadjusted"] > 0.10
    assert fwer["fwer_holm"] < fwer["fwer_unadjusted"]
    assert fwer["fwer_holm_mc95"][0] <= 0.05
    assert fwer["fwer_holm"] <= 0.08
