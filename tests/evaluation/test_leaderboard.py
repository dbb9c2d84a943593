"""The leaderboard's family test: one-sided p per adapter, Holm over the family."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.evaluation import (
    family_decisions,
    holm_adjust,
    mcnemar_from_outcomes,
    mcnemar_one_sided,
)


def null_family_rates(
    reps: int, examples: int, adapters: int, alpha: float, seed: int = 20261202
) -> tuple[float, float]:
    """How often at least one of ``adapters`` null adapters is called "better": Holm vs raw.

    Every adapter has, example by example, the base's own chance of being
    right (examples differ in difficulty, so the arms are correlated through
    it), so no adapter is truly better. The p-values are the leaderboard's:
    the one-sided McNemar test on the comparison's discordant pairs.
    """
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0.15, 0.85, size=examples)
    holm = raw = 0
    for _ in range(reps):
        base = rng.random(examples) < difficulty
        p_values = []
        for _ in range(adapters):
            test = mcnemar_from_outcomes(base, rng.random(examples) < difficulty)
            p_values.append(mcnemar_one_sided(test.b, test.c))
        _, better = family_decisions(p_values, alpha)
        holm += any(better)
        raw += any(p <= Fraction(alpha) for p in p_values)
    return holm / reps, raw / reps


def test_holm_keeps_the_chance_of_any_false_better_at_or_under_alpha() -> None:
    # 5 adapters all equal to the base, 2,000 simulated families of 150 examples.
    holm, raw = null_family_rates(reps=2000, examples=150, adapters=5, alpha=0.05)
    print(f"P(any false better): Holm {holm:.4f}, unadjusted {raw:.4f}")
    assert holm <= 0.05
    assert raw > 0.1  # without the family adjustment a false "better" is common


def test_one_sided_mcnemar_is_the_exact_upper_binomial_tail() -> None:
    assert mcnemar_one_sided(0, 0) == 1
    assert mcnemar_one_sided(0, 3) == Fraction(1, 8)
    assert mcnemar_one_sided(3, 0) == 1
    assert mcnemar_one_sided(2, 5) == Fraction(1 + 7 + 21, 128)


def test_family_decisions_are_holm_at_alpha() -> None:
    p_values = [Fraction(1, 100), Fraction(3, 100), Fraction(1, 2)]
    adjusted, better = family_decisions(p_values, 0.05)
    assert adjusted == holm_adjust(p_values) == [Fraction(3, 100), Fraction(6, 100), Fraction(1, 2)]
    assert better == [True, False, False]
    with pytest.raises(ConfigError, match="alpha"):
        family_decisions(p_values, 1.5)
