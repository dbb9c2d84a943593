from __future__ import annotations

import dataclasses
import hashlib
import math
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from sommelier_mlflow._json import canonical_json, loads
from sommelier_mlflow.errors import ConfigError, InputError, InvariantViolationError
from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import (
    BOOTSTRAP_METHOD,
    MCNEMAR_METHOD,
    QUANTILE_METHOD,
    McNemarResult,
    PairedBootstrapResult,
    mcnemar_exact,
    mcnemar_from_outcomes,
    paired_bootstrap,
)

NAMES = ("m0", "m1", "m2")
IntArray = NDArray[np.int64]


def _binary_arm(rng: np.random.Generator, n: int, m: int, p: float) -> tuple[IntArray, IntArray]:
    num = (rng.random((n, m)) < p).astype(np.int64)
    return num, np.ones((n, m), dtype=np.int64)


def _reference_bootstrap(
    num_a: IntArray,
    den_a: IntArray,
    num_b: IntArray,
    den_b: IntArray,
    *,
    resamples: int,
    seed: int,
    confidence: float,
) -> tuple[list[float], NDArray[np.float64]]:
    """Loop implementation over the same documented index stream, in Python ints."""
    n, m = num_a.shape
    rng = np.random.Generator(np.random.PCG64(seed))
    indices = rng.integers(0, n, size=(resamples, n), dtype=np.int64)
    rows = [
        [(int(num_a[i, j]), int(den_a[i, j]), int(num_b[i, j]), int(den_b[i, j])) for j in range(m)]
        for i in range(n)
    ]

    def ratio(num: int, den: int) -> float:
        return num / den if den else 0.0

    diffs = np.empty((resamples, m))
    for r in range(resamples):
        for j in range(m):
            s = [0, 0, 0, 0]
            for i in indices[r]:
                for k in range(4):
                    s[k] += rows[i][j][k]
            diffs[r, j] = ratio(s[2], s[3]) - ratio(s[0], s[1])
    alpha = (1.0 - confidence) / 2.0
    bounds = np.quantile(diffs, [alpha, 1.0 - alpha], axis=0, method="linear")
    totals = [[sum(row[j][k] for row in rows) for k in range(4)] for j in range(m)]
    estimates = [ratio(t[2], t[3]) - ratio(t[0], t[1]) for t in totals]
    return estimates, bounds


# --------------------------------------------------------------------------- derive_seed


def test_derive_seed_is_sha256_of_base_and_label_truncated_to_63_bits() -> None:
    expected = int.from_bytes(hashlib.sha256(b"7:delta/overall").digest()[:8], "big") >> 1
    assert derive_seed(7, "delta/overall") == expected
    assert derive_seed(7, "delta/overall") == derive_seed(7, "delta/overall")


def test_derive_seed_separates_labels_and_base_seeds() -> None:
    labels = ["delta/overall", "delta/fr", "gap/base/fr", "gap/adapter/fr", "gap/adapter/de"]
    seeds = {derive_seed(0, label) for label in labels}
    assert len(seeds) == len(labels)
    assert derive_seed(0, "delta/overall") != derive_seed(1, "delta/overall")
    assert all(0 <= seed < 2**63 for seed in seeds)


@pytest.mark.parametrize(("base", "label"), [(True, "x"), (1.0, "x"), ("1", "x"), (1, "")])
def test_derive_seed_refuses_bad_arguments(base: object, label: str) -> None:
    with pytest.raises(ConfigError):
        derive_seed(base, label)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- bootstrap


def test_bootstrap_is_deterministic_for_a_seed_and_moves_with_it() -> None:
    rng = np.random.default_rng(11)
    num_a, den_a = _binary_arm(rng, 200, 3, 0.5)
    num_b, den_b = _binary_arm(rng, 200, 3, 0.6)
    kwargs = {"resamples": 300, "metric_names": NAMES}
    first = paired_bootstrap(num_a, den_a, num_b, den_b, seed=5, **kwargs)  # type: ignore[arg-type]
    again = paired_bootstrap(num_a, den_a, num_b, den_b, seed=5, **kwargs)  # type: ignore[arg-type]
    other = paired_bootstrap(num_a, den_a, num_b, den_b, seed=6, **kwargs)  # type: ignore[arg-type]
    assert first == again
    assert canonical_json(first.to_dict()) == canonical_json(again.to_dict())
    assert [i.estimate for i in first.intervals] == [i.estimate for i in other.intervals]
    assert [(i.lower, i.upper) for i in first.intervals] != [
        (i.lower, i.upper) for i in other.intervals
    ]


def test_bootstrap_results_do_not_depend_on_chunking() -> None:
    rng = np.random.default_rng(3)
    num_a, den_a = _binary_arm(rng, 57, 3, 0.4)
    num_b, den_b = _binary_arm(rng, 57, 3, 0.7)
    whole = paired_bootstrap(num_a, den_a, num_b, den_b, seed=9, resamples=101, metric_names=NAMES)
    for cells in (1, 57 * 10, 57 * 33 + 5):
        chunked = paired_bootstrap(
            num_a,
            den_a,
            num_b,
            den_b,
            seed=9,
            resamples=101,
            metric_names=NAMES,
            _chunk_cells=cells,
        )
        assert chunked == whole


def test_bootstrap_matches_a_loop_over_the_same_resamples_exactly() -> None:
    rng = np.random.default_rng(21)
    n = 23
    num_a, den_a = _binary_arm(rng, n, 2, 0.5)
    num_b, den_b = _binary_arm(rng, n, 2, 0.6)
    # An F1-like third column: den = predicted + gold pairs, num = 2 * matched.
    den_a = np.column_stack([den_a, rng.integers(0, 6, n)])
    den_b = np.column_stack([den_b, rng.integers(0, 6, n)])
    num_a = np.column_stack([num_a, 2 * (rng.integers(0, 4, n) * den_a[:, 2] // 8)])
    num_b = np.column_stack([num_b, 2 * (rng.integers(0, 4, n) * den_b[:, 2] // 8)])
    result = paired_bootstrap(
        num_a, den_a, num_b, den_b, seed=4, resamples=150, confidence=0.9, metric_names=NAMES
    )
    estimates, bounds = _reference_bootstrap(
        num_a, den_a, num_b, den_b, resamples=150, seed=4, confidence=0.9
    )
    assert [i.estimate for i in result.intervals] == estimates
    assert [i.lower for i in result.intervals] == bounds[0].tolist()
    assert [i.upper for i in result.intervals] == bounds[1].tolist()


def test_equal_arms_give_exactly_zero_interval() -> None:
    rng = np.random.default_rng(0)
    num, den = _binary_arm(rng, 150, 3, 0.55)
    den[:, 2] = rng.integers(0, 5, 150)
    num[:, 2] = den[:, 2] // 2
    result = paired_bootstrap(num, den, num.copy(), den.copy(), seed=1, metric_names=NAMES)
    for interval in result.intervals:
        assert (interval.estimate, interval.lower, interval.upper) == (0.0, 0.0, 0.0)
        assert interval.value_a == interval.value_b


def test_clear_improvement_gives_interval_above_zero_containing_the_estimate() -> None:
    rng = np.random.default_rng(8)
    n = 400
    num_a, den_a = _binary_arm(rng, n, 3, 0.5)
    num_b = num_a.copy()
    improved = rng.random((n, 3)) < 0.3
    num_b[improved] = 1  # b is never worse and strictly better on some rows
    result = paired_bootstrap(
        num_a, den_a, num_b, den_a.copy(), seed=derive_seed(0, "delta/overall"), metric_names=NAMES
    )
    for j, interval in enumerate(result.intervals):
        exact = Fraction(int(num_b[:, j].sum()), n) - Fraction(int(num_a[:, j].sum()), n)
        assert exact > 0
        assert interval.estimate == pytest.approx(float(exact), abs=1e-15)
        assert 0.0 < interval.lower <= interval.estimate <= interval.upper


def test_point_estimate_is_ratio_of_sums_not_mean_of_row_ratios() -> None:
    # Micro F1 over two rows: (2 matched of 1+1) and (0 matched of 5+5).
    num_a = np.array([[2], [0]])
    den_a = np.array([[2], [10]])
    num_b = np.array([[2], [6]])
    den_b = np.array([[2], [10]])
    result = paired_bootstrap(
        num_a, den_a, num_b, den_b, seed=0, resamples=50, metric_names=["argument_f1"]
    )
    interval = result.interval("argument_f1")
    assert interval.value_a == 2 / 12
    assert interval.value_b == 8 / 12
    assert interval.value_a != (2 / 2 + 0 / 10) / 2
    assert interval.estimate == 8 / 12 - 2 / 12


def test_zero_denominator_sums_give_zero_values() -> None:
    num = np.zeros((4, 2), dtype=np.int64)
    den = np.zeros((4, 2), dtype=np.int64)
    den_b = den.copy()
    num_b = num.copy()
    den_b[0, 1] = 2
    num_b[0, 1] = 2
    result = paired_bootstrap(
        num, den, num_b, den_b, seed=3, resamples=200, metric_names=["a", "b"]
    )
    empty, partial = result.intervals
    assert (empty.value_a, empty.value_b, empty.estimate, empty.lower, empty.upper) == (0,) * 5
    # Resamples that miss row 0 have a zero denominator sum in arm b: value 0.0, not NaN.
    assert partial.estimate == 1.0
    assert partial.lower == 0.0
    assert partial.upper == 1.0


def test_wider_confidence_nests_the_narrower_interval() -> None:
    rng = np.random.default_rng(2)
    num_a, den_a = _binary_arm(rng, 120, 3, 0.5)
    num_b, den_b = _binary_arm(rng, 120, 3, 0.5)
    narrow = paired_bootstrap(
        num_a, den_a, num_b, den_b, seed=1, confidence=0.5, metric_names=NAMES
    )
    wide = paired_bootstrap(num_a, den_a, num_b, den_b, seed=1, confidence=0.99, metric_names=NAMES)
    for small, big in zip(narrow.intervals, wide.intervals, strict=True):
        assert big.lower <= small.lower <= small.upper <= big.upper
        assert big.lower < big.upper


def test_result_records_provenance_and_serialises_to_plain_json() -> None:
    num = np.array([[1, 0], [0, 1], [1, 1]], dtype=np.int32)
    den = np.ones((3, 2), dtype=np.uint8)
    result = paired_bootstrap(
        num,
        den,
        num[::-1].copy(),
        den,
        seed=np.int64(12),  # type: ignore[arg-type]
        resamples=40,
        metric_names=["x", "y"],
    )
    assert isinstance(result, PairedBootstrapResult)
    assert (result.method, result.quantile_method) == (BOOTSTRAP_METHOD, QUANTILE_METHOD)
    assert (result.seed, result.resamples, result.confidence, result.n) == (12, 40, 0.95, 3)
    assert type(result.seed) is int
    assert result.metric_names == ("x", "y")
    data = result.to_dict()
    assert loads(canonical_json(data)) == data
    assert data["method"] == "paired_percentile_bootstrap"
    metrics = data["metrics"]
    assert isinstance(metrics, dict)
    assert set(metrics) == {"x", "y"}
    assert all(type(value) is float for metric in metrics.values() for value in metric.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.seed = 1  # type: ignore[misc]
    with pytest.raises(KeyError, match="nope"):
        result.interval("nope")


def test_bool_components_are_counted_as_zero_or_one() -> None:
    correct_a = np.array([[True], [False], [True], [False]])
    correct_b = np.array([[True], [True], [True], [False]])
    ones = np.ones((4, 1), dtype=np.int64)
    result = paired_bootstrap(
        correct_a, ones, correct_b, ones, seed=0, resamples=20, metric_names=["hit"]
    )
    assert result.interval("hit").estimate == 0.75 - 0.5


def test_twenty_thousand_pairs_stay_well_under_the_memory_budget() -> None:
    rng = np.random.default_rng(5)
    num_a, den_a = _binary_arm(rng, 20_000, 5, 0.7)
    num_b, den_b = _binary_arm(rng, 20_000, 5, 0.8)
    tracemalloc.start()
    try:
        paired_bootstrap(
            num_a, den_a, num_b, den_b, seed=0, resamples=300, metric_names=list("abcde")
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 2**20


# --------------------------------------------------------------------------- refusals


def _arm(n: int = 4, m: int = 3) -> IntArray:
    return np.ones((n, m), dtype=np.int64)


@pytest.mark.parametrize(
    "arrays",
    [
        (_arm(4), _arm(4), _arm(5), _arm(5)),  # different cohorts
        (_arm(4), _arm(4), _arm(4), _arm(4, 2)),  # different metric columns
        (np.ones(4, dtype=np.int64), _arm(), _arm(), _arm()),  # not 2-D
        (_arm(4, 2), _arm(4, 2), _arm(4, 2), _arm(4, 2)),  # columns != names
    ],
)
def test_misaligned_arrays_are_an_invariant_violation(arrays: tuple[IntArray, ...]) -> None:
    with pytest.raises(InvariantViolationError):
        paired_bootstrap(*arrays, seed=0, metric_names=NAMES)


@pytest.mark.parametrize(
    "arrays",
    [
        (_arm(0), _arm(0), _arm(0), _arm(0)),  # empty cohort
        (_arm().astype(np.float64), _arm(), _arm(), _arm()),  # inexact counts
        (-_arm(), _arm(), _arm(), _arm()),  # negative counts
        (_arm() * 2**51, _arm(), _arm(), _arm()),  # resampled sums could pass 2**53
        (np.array([["1"] * 3] * 4), _arm(), _arm(), _arm()),  # not numbers
    ],
)
def test_bad_components_are_input_errors(arrays: tuple[IntArray, ...]) -> None:
    with pytest.raises(InputError):
        paired_bootstrap(*arrays, seed=0, metric_names=NAMES)


@pytest.mark.parametrize(
    "options",
    [
        {"resamples": 0},
        {"resamples": 2.0},
        {"resamples": True},
        {"confidence": 0.0},
        {"confidence": 1.0},
        {"confidence": 1.5},
        {"confidence": math.nan},
        {"seed": -1},
        {"seed": 1.5},
        {"metric_names": ("m0", "m0", "m1")},
        {"metric_names": ()},
        {"metric_names": "m0m"},
    ],
)
def test_bad_settings_are_config_errors(options: dict[str, object]) -> None:
    kwargs: dict[str, object] = {"seed": 0, "metric_names": NAMES, **options}
    with pytest.raises(ConfigError):
        paired_bootstrap(_arm(), _arm(), _arm(), _arm(), **kwargs)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- properties


@st.composite
def _paired_components(draw: st.DrawFn) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    n = draw(st.integers(1, 8))
    m = draw(st.integers(1, 3))
    cells = st.lists(st.integers(0, 6), min_size=n * m, max_size=n * m)
    den_a = np.array(draw(cells), dtype=np.int64).reshape(n, m)
    den_b = np.array(draw(cells), dtype=np.int64).reshape(n, m)
    frac_a = np.array(draw(cells), dtype=np.int64).reshape(n, m)
    frac_b = np.array(draw(cells), dtype=np.int64).reshape(n, m)
    return den_a * frac_a // 6, den_a, den_b * frac_b // 6, den_b


@settings(max_examples=60, deadline=None)
@given(_paired_components(), st.integers(0, 2**63 - 1), st.floats(0.5, 0.99))
def test_interval_bounds_are_ordered_and_degenerate_for_one_pair(
    arrays: tuple[IntArray, IntArray, IntArray, IntArray], seed: int, confidence: float
) -> None:
    n, m = arrays[0].shape
    names = [f"m{j}" for j in range(m)]
    result = paired_bootstrap(
        *arrays, seed=seed, resamples=64, confidence=confidence, metric_names=names
    )
    for interval in result.intervals:
        assert interval.lower <= interval.upper
        assert interval.lower >= -1.0
        assert interval.upper <= 1.0
        if n == 1:
            assert interval.lower == interval.estimate == interval.upper


# --------------------------------------------------------------------------- McNemar


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 5, 0.0625),
        (5, 0, 0.0625),
        (0, 0, 1.0),
        (7, 7, 1.0),
        (1, 9, 0.021484375),  # 2 * (1 + 10) / 1024
        (0, 1, 1.0),
        (3, 4, 1.0),
    ],
)
def test_mcnemar_exact_hand_values(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == expected


def test_mcnemar_exact_handles_large_counts_without_overflow() -> None:
    p = mcnemar_exact(600, 700)
    assert 0.0 < p < 1.0
    assert p == mcnemar_exact(700, 600)
    # Normal approximation with continuity correction as a loose cross-check.
    z = (abs(600 - 700) - 1) / math.sqrt(1300)
    assert p == pytest.approx(math.erfc(z / math.sqrt(2)), rel=0.05)
    assert mcnemar_exact(np.int64(600), np.int64(700)) == p  # type: ignore[arg-type]


@pytest.mark.parametrize(("b", "c"), [(-1, 3), (3, -1), (True, 2), (1.0, 2), ("1", 2)])
def test_mcnemar_exact_refuses_bad_counts(b: object, c: object) -> None:
    with pytest.raises(InputError):
        mcnemar_exact(b, c)  # type: ignore[arg-type]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60))
def test_mcnemar_exact_matches_binomial_tail_and_is_symmetric(b: int, c: int) -> None:
    total = b + c
    tail = sum(Fraction(math.comb(total, k), 2**total) for k in range(min(b, c) + 1))
    assert mcnemar_exact(b, c) == float(min(Fraction(1), 2 * tail))
    assert mcnemar_exact(b, c) == mcnemar_exact(c, b)
    assert 0.0 < mcnemar_exact(b, c) <= 1.0


def test_mcnemar_from_outcomes_counts_discordant_pairs() -> None:
    correct_a = [True, True, False, False, True, False, True]
    correct_b = [True, False, True, True, True, False, True]
    result = mcnemar_from_outcomes(correct_a, correct_b)
    assert result == McNemarResult(b=1, c=2, n=7, p_value=1.0, method=MCNEMAR_METHOD)
    assert result.method == "exact_binomial_two_sided"
    assert result.to_dict() == {
        "method": "exact_binomial_two_sided",
        "n": 7,
        "b": 1,
        "c": 2,
        "p_value": 1.0,
    }
    assert loads(canonical_json(result.to_dict())) == result.to_dict()


def test_mcnemar_from_outcomes_all_improvements() -> None:
    result = mcnemar_from_outcomes(np.zeros(5, dtype=bool), np.ones(5, dtype=bool))
    assert (result.b, result.c, result.p_value) == (0, 5, 0.0625)


@pytest.mark.parametrize(
    ("a", "b", "error"),
    [
        ([True, False], [True], InvariantViolationError),
        ([[True]], [[True]], InvariantViolationError),
        ([], [], InputError),
        ([1, 0], [0, 1], InputError),
    ],
)
def test_mcnemar_from_outcomes_refusals(a: object, b: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        mcnemar_from_outcomes(a, b)  # type: ignore[arg-type]
