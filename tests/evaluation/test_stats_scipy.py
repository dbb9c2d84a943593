"""The exact McNemar p-value against an independent implementation (scipy)."""

from __future__ import annotations

import pytest

from sommelier_mlflow.evaluation import mcnemar_exact

scipy_stats = pytest.importorskip("scipy.stats")

SMALL = range(0, 31)
LARGE = [(500, 500), (600, 700), (4_900, 5_100), (10_000, 10_400), (0, 5_000), (3, 2_000)]


def _scipy_mcnemar(b: int, c: int) -> float:
    # Under the null each discordant pair favours either arm with probability 1/2.
    return float(scipy_stats.binomtest(b, b + c, 0.5, alternative="two-sided").pvalue)


def test_no_discordant_pairs_is_p_one() -> None:
    # scipy refuses n = 0 trials; with no discordant pair there is no evidence
    # either way, so the only coherent p-value is 1.
    assert mcnemar_exact(0, 0) == 1.0
    with pytest.raises(ValueError):
        scipy_stats.binomtest(0, 0, 0.5)


@pytest.mark.parametrize("b", SMALL)
def test_equals_scipy_on_a_grid_of_small_counts(b: int) -> None:
    for c in SMALL:
        if b + c == 0:
            continue
        assert mcnemar_exact(b, c) == pytest.approx(_scipy_mcnemar(b, c), rel=0, abs=1e-12)


@pytest.mark.parametrize(("b", "c"), LARGE + [(c, b) for b, c in LARGE])
def test_equals_scipy_on_large_counts(b: int, c: int) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(_scipy_mcnemar(b, c), rel=0, abs=1e-12)
