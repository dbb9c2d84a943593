"""Paired bootstrap intervals and the exact McNemar test.

Every metric is a ratio of integer sums (``sum(num) / sum(den)``), so the
bootstrap resamples *examples* and recomputes each ratio from resampled sums.
Averaging per-example ratios would be wrong for micro F1, whose denominator
varies per example.

The bootstrap is vectorised: each resample is a vector of draw counts per
example (how often row ``i`` was drawn), and all resampled sums of a chunk of
resamples are one matrix product ``counts @ components``. Chunks bound memory
whatever the cohort size. The products run in float64, which is exact here
because every term and every partial sum is an integer below ``2**53``; the
function checks that bound before it starts and refuses inputs that could
break it.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final, ParamSpec

import numpy as np
from numpy.typing import ArrayLike, NDArray

from sommelier_mlflow._json import field_dict
from sommelier_mlflow.errors import ConfigError, InputError, InvariantViolationError

_P = ParamSpec("_P")

__all__ = [
    "BOOTSTRAP_METHOD",
    "QUANTILE_METHOD",
    "MCNEMAR_METHOD",
    "CLUSTER_RESAMPLING",
    "CLUSTER_TEST_METHOD",
    "MetricInterval",
    "PairedBootstrapResult",
    "BootstrapDraws",
    "McNemarResult",
    "cluster_indices",
    "paired_bootstrap_draws",
    "paired_bootstrap",
    "mcnemar_exact",
    "mcnemar_one_sided",
    "mcnemar_from_outcomes",
    "sign_flip_p_values",
    "cluster_test_from_outcomes",
]

BOOTSTRAP_METHOD: Final = "paired_percentile_bootstrap"
"""Name recorded in reports so a reader knows which interval they are looking at."""

QUANTILE_METHOD: Final = "linear"
"""numpy quantile method (Hyndman-Fan type 7, numpy's default), pinned so a
numpy default change cannot move published intervals."""

MCNEMAR_METHOD: Final = "exact_binomial_two_sided"
"""Name recorded in reports for :func:`mcnemar_exact`."""

CLUSTER_RESAMPLING: Final = "conversation"
"""Recorded (as ``resampling``) beside an interval whose resamples drew whole conversations."""

CLUSTER_TEST_METHOD: Final = "exact_sign_flip_conversations_two_sided"
"""Name recorded in reports for the cluster-level test that replaces McNemar's on
conversation splits (see :func:`cluster_test_from_outcomes`)."""

_EXACT_FLOAT_LIMIT: Final = 2**53
# Matrix cells per chunk: ~2M cells keeps each temporary (indices, counts,
# float counts) near 16 MB, so a 20,000-pair cohort stays far below 300 MB.
_DEFAULT_CHUNK_CELLS: Final = 2_000_000


@dataclass(frozen=True)
class MetricInterval:
    """One metric's paired difference and its bootstrap interval.

    Attributes:
        metric: The metric name.
        value_a: Arm a's value over the full cohort (``sum(num) / sum(den)``).
        value_b: Arm b's value over the full cohort.
        estimate: ``value_b - value_a``, the point estimate.
        lower: Lower percentile bound of the resampled differences.
        upper: Upper percentile bound of the resampled differences.
    """

    metric: str
    value_a: float
    value_b: float
    estimate: float
    lower: float
    upper: float

    def to_dict(self) -> dict[str, float]:
        """Return the JSON-safe form used under a metric name in reports."""
        return field_dict(self, skip={"metric"})


@dataclass(frozen=True)
class PairedBootstrapResult:
    """Intervals for every metric of one paired comparison, with provenance.

    The provenance fields (method, quantile method, seed, resamples,
    confidence, n) are everything needed to reproduce the numbers, so reports
    carry them next to the intervals.

    Attributes:
        method: Always :data:`BOOTSTRAP_METHOD`.
        quantile_method: Always :data:`QUANTILE_METHOD`.
        seed: The seed of the PCG64 generator that drew the resamples.
        resamples: Number of bootstrap resamples.
        confidence: Nominal coverage, e.g. ``0.95``.
        n: Number of paired rows (examples or matched pairs).
        intervals: One entry per metric, in the order of ``metric_names``.
        clusters: How many clusters (conversations) were resampled as units
            when the rows were clustered; ``None`` when rows were resampled
            one by one (every split without ``conversation_id``).
    """

    method: str
    quantile_method: str
    seed: int
    resamples: int
    confidence: float
    n: int
    intervals: tuple[MetricInterval, ...]
    clusters: int | None = None

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The metric names in input order."""
        return tuple(interval.metric for interval in self.intervals)

    def interval(self, metric: str) -> MetricInterval:
        """Look up one metric's interval by name.

        Raises:
            KeyError: If no metric of that name was bootstrapped.
        """
        for candidate in self.intervals:
            if candidate.metric == metric:
                return candidate
        raise KeyError(f"no bootstrap interval for metric {metric!r}; have {self.metric_names}")

    def to_dict(self) -> dict[str, object]:
        """Return a plain JSON-safe dict (str keys, int/float/str/dict values)."""
        return {
            **field_dict(self, skip={"intervals", "clusters"}),
            **({"clusters": self.clusters} if self.clusters is not None else {}),
            "metrics": {interval.metric: interval.to_dict() for interval in self.intervals},
        }


@dataclass(frozen=True, eq=False)
class BootstrapDraws:
    """A bootstrap result together with the resampled differences behind it.

    Decisions about preregistered claims must come from the very draws that
    produced the published intervals, not from a second resampling that could
    disagree with them; this object hands those draws out once, read-only.

    Attributes:
        result: The intervals and their provenance, exactly as
            :func:`paired_bootstrap` returns them.
        differences: Read-only float64 array of shape ``(resamples, m)``; row
            ``r`` holds every metric's ``value_b - value_a`` in resample ``r``,
            columns in the order of ``result.metric_names``.
    """

    result: PairedBootstrapResult
    differences: NDArray[np.float64]

    def column(self, metric: str) -> NDArray[np.float64]:
        """Return one metric's resampled differences (a read-only view).

        Raises:
            KeyError: If no metric of that name was bootstrapped.
        """
        names = self.result.metric_names
        if metric not in names:
            raise KeyError(f"no bootstrap draws for metric {metric!r}; have {names}")
        return self.differences[:, names.index(metric)]


@dataclass(frozen=True)
class McNemarResult:
    """Exact McNemar test on paired binary outcomes.

    Attributes:
        b: Pairs where arm a is right and arm b is wrong.
        c: Pairs where arm a is wrong and arm b is right.
        n: All pairs, concordant ones included (they carry no information
            for the test but tell the reader the cohort size).
        p_value: Two-sided exact binomial p-value on the ``b + c`` discordant pairs.
        method: Always :data:`MCNEMAR_METHOD`.
    """

    b: int
    c: int
    n: int
    p_value: float
    method: str = MCNEMAR_METHOD
    clusters: int | None = None
    differences: tuple[tuple[int, int], ...] | None = None

    def one_sided(self) -> Fraction:
        """The exact one-sided p-value that arm b is *better*, by the same test.

        McNemar's one-sided tail for unclustered rows; the sign-flip tail over
        conversations for a clustered result.
        """
        if self.differences is None:
            return mcnemar_one_sided(self.b, self.c)
        return sign_flip_p_values(self.differences)[1]

    def to_dict(self) -> dict[str, object]:
        """Return a plain JSON-safe dict for reports.

        A cluster-level result adds ``clusters`` and ``differences`` (the count
        of conversations per non-zero per-conversation difference, as
        ``[[difference, conversations], ...]``), from which a reader recomputes
        the p-value; an unclustered result keeps McNemar's five fields.
        """
        clustered: dict[str, object] = {}
        if self.differences is not None:
            clustered = {
                "clusters": self.clusters,
                "differences": [list(item) for item in self.differences],
            }
        return {
            "method": self.method,
            "n": self.n,
            "b": self.b,
            "c": self.c,
            "p_value": self.p_value,
            **clustered,
        }


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _check_config(resamples: int, seed: int, confidence: float) -> tuple[int, int, float]:
    checked_resamples = _as_int(resamples)
    if checked_resamples is None or checked_resamples < 1:
        raise ConfigError(f"resamples must be a positive integer, got {resamples!r}")
    checked_seed = _as_int(seed)
    if checked_seed is None or checked_seed < 0:
        raise ConfigError(
            f"seed must be a non-negative integer, got {seed!r}; use derive_seed() to get one"
        )
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not 0.0 < confidence < 1.0
    ):
        raise ConfigError(
            f"confidence must be a number strictly between 0 and 1, got {confidence!r}"
        )
    return checked_resamples, checked_seed, float(confidence)


def _check_metric_names(metric_names: Sequence[str]) -> tuple[str, ...]:
    if isinstance(metric_names, str):
        # A bare string is a Sequence[str] of characters: almost surely a mistake.
        raise ConfigError("metric_names must be a sequence of names, not a single string")
    names = tuple(metric_names)
    if not names:
        raise ConfigError("metric_names is empty; pass one name per component column")
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"metric names must be non-empty strings, got {name!r}")
    if len(set(names)) != len(names):
        raise ConfigError(f"metric names must be unique, got {names}")
    return names


def _as_component_matrix(label: str, values: ArrayLike) -> NDArray[np.generic]:
    array = np.asarray(values)
    if array.ndim != 2:
        raise InvariantViolationError(
            f"{label} must be a 2-D (examples x metrics) array, got shape {array.shape}"
        )
    return array


def _to_int64(label: str, array: NDArray[np.generic]) -> NDArray[np.int64]:
    if array.dtype == np.bool_:
        return array.astype(np.int64)
    if not np.issubdtype(array.dtype, np.integer):
        raise InputError(
            f"{label} must hold exact integer counts, got dtype {array.dtype}; "
            "keep numerators and denominators as ints and divide only to report"
        )
    if array.size and int(array.min()) < 0:
        raise InputError(f"{label} holds a negative count; components must be >= 0")
    if array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise InputError(f"{label} holds a count that does not fit in 64 bits")
    return array.astype(np.int64, copy=False)


def _ratio(numerator: int, denominator: int) -> float:
    # Python's int / int is correctly rounded, as is IEEE division of the
    # exactly represented float64 sums used for resamples, so a resample
    # equal to the full data gives bit-for-bit the point estimate.
    return numerator / denominator if denominator else 0.0


def _ratios(
    numerators: NDArray[np.float64], denominators: NDArray[np.float64]
) -> NDArray[np.float64]:
    out = np.zeros_like(numerators)
    np.divide(numerators, denominators, out=out, where=denominators != 0)
    return out


def _distinct_columns(
    matrix: NDArray[np.int64],
) -> tuple[NDArray[np.float64], NDArray[np.intp]]:
    """Return the distinct columns and, per original column, its distinct index."""
    distinct: dict[bytes, int] = {}
    firsts: list[int] = []
    spread = np.empty(matrix.shape[1], dtype=np.intp)
    for column in range(matrix.shape[1]):
        key = np.ascontiguousarray(matrix[:, column]).tobytes()
        if key not in distinct:
            distinct[key] = len(firsts)
            firsts.append(column)
        spread[column] = distinct[key]
    return matrix[:, firsts].astype(np.float64), spread


def _resample_counts(rng: np.random.Generator, n: int, rows: int) -> NDArray[np.float64]:
    """Draw ``rows`` resamples as per-example draw counts.

    Each resample draws ``n`` row indices uniformly with replacement; drawing
    them row-major in one call keeps the random stream identical however the
    resamples are split into chunks.
    """
    indices = rng.integers(0, n, size=(rows, n), dtype=np.int64)
    # Offset each resample's indices into its own block so one bincount
    # counts all resamples of the chunk at once.
    indices += (np.arange(rows, dtype=np.int64) * n)[:, None]
    counts = np.bincount(indices.ravel(), minlength=rows * n)
    del indices
    return counts.reshape(rows, n).astype(np.float64)


def _paired_components(arrays: Mapping[str, ArrayLike], width: int) -> dict[str, NDArray[np.int64]]:
    """Check the four component arrays of a paired bootstrap and return them as int64.

    Raises:
        InvariantViolationError: Not 2-D, not one shape, or not ``width`` columns.
        InputError: An empty cohort, bad components, or counts too large for exact sums.
    """
    raw = {label: _as_component_matrix(label, array) for label, array in arrays.items()}
    shapes = {label: array.shape for label, array in raw.items()}
    if len(set(shapes.values())) != 1:
        raise InvariantViolationError(
            f"paired arrays must share one (examples x metrics) shape, got {shapes}; "
            "rows must be aligned by example identity before bootstrapping"
        )
    n, m = raw["num_a"].shape
    if m != width:
        raise InvariantViolationError(
            f"component arrays have {m} metric columns but {width} metric names were given"
        )
    if n == 0:
        raise InputError("cannot bootstrap an empty cohort: there are no paired rows to resample")
    comps = {label: _to_int64(label, array) for label, array in raw.items()}
    largest = max(int(array.max()) for array in comps.values())
    if n * largest >= _EXACT_FLOAT_LIMIT:
        raise InputError(
            f"component counts up to {largest} over {n} rows could exceed 2**53 when "
            "resampled, beyond exact float64 sums; these are not per-example counts"
        )
    return comps


def _resampled_differences(
    comps: Mapping[str, NDArray[np.int64]], resamples: int, seed: int, chunk_cells: int
) -> NDArray[np.float64]:
    """The ``(resamples, m)`` matrix of resampled ``value_b - value_a``, chunk by chunk."""
    n, m = comps["num_a"].shape
    # One matrix of the distinct component columns, so each chunk is a single
    # matrix product; ``spread`` maps them back to the 4m (num_a, den_a,
    # num_b, den_b) columns. Rate metrics share an all-ones denominator, so
    # deduplicating typically removes a third of the product's work.
    stacked, spread = _distinct_columns(
        np.concatenate([comps["num_a"], comps["den_a"], comps["num_b"], comps["den_b"]], axis=1)
    )
    rng = np.random.Generator(np.random.PCG64(seed))
    chunk = max(1, min(resamples, chunk_cells // n))
    diffs = np.empty((resamples, m), dtype=np.float64)
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        resampled = (_resample_counts(rng, n, rows) @ stacked)[:, spread]
        va = _ratios(resampled[:, 0:m], resampled[:, m : 2 * m])
        vb = _ratios(resampled[:, 2 * m : 3 * m], resampled[:, 3 * m : 4 * m])
        diffs[start : start + rows] = vb - va

    return diffs


def cluster_indices(labels: ArrayLike, n: int) -> tuple[NDArray[np.intp], int]:
    """Each row's cluster index (clusters in sorted label order) and the cluster count.

    Raises:
        InvariantViolationError: ``labels`` is not 1-D with one label per row.
    """
    array = np.asarray(labels)
    if array.ndim != 1 or array.shape[0] != n:
        raise InvariantViolationError(
            f"clusters must hold one label per row ({n}), got shape {array.shape}"
        )
    unique, inverse = np.unique(array, return_inverse=True)
    return inverse.reshape(-1).astype(np.intp), int(unique.shape[0])


def _cluster_sums(
    comps: Mapping[str, NDArray[np.int64]], labels: ArrayLike, n: int
) -> tuple[dict[str, NDArray[np.int64]], int]:
    """Sum every component array per cluster: the units a clustered bootstrap resamples.

    Integer sums (exact); the float64 bound is checked again on the sums, which
    a resample multiplies by at most the cluster count.
    """
    index, k = cluster_indices(labels, n)
    order = np.argsort(index, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(index[order]) != 0])
    sums = {label: np.add.reduceat(array[order], starts, axis=0) for label, array in comps.items()}
    largest = max(int(array.max()) for array in sums.values())
    if k * largest >= _EXACT_FLOAT_LIMIT:
        raise InputError(
            f"cluster sums up to {largest} over {k} clusters could exceed 2**53 when "
            "resampled, beyond exact float64 sums"
        )
    return sums, k


def paired_bootstrap_draws(
    num_a: ArrayLike,
    den_a: ArrayLike,
    num_b: ArrayLike,
    den_b: ArrayLike,
    *,
    resamples: int = 2000,
    seed: int,
    confidence: float = 0.95,
    metric_names: Sequence[str],
    clusters: ArrayLike | None = None,
    _chunk_cells: int = _DEFAULT_CHUNK_CELLS,
) -> BootstrapDraws:
    """Percentile bootstrap intervals of ``value_b - value_a`` and the draws behind them.

    Row ``i`` of every array must describe the same example identity (or the
    same matched pair), because the bootstrap draws the *same* row indices for
    both arms: that pairing is what cancels the example-difficulty variance
    that an unpaired comparison would leave in the interval. Use it for
    adapter-minus-base deltas (a = base, b = adapter) and for language gaps of
    one model over matched pairs (a = root rows, b = their translations).

    Each resample recomputes every metric as the ratio of its resampled
    numerator and denominator sums (0.0 where the denominator sum is 0), so
    micro F1 is a true micro average in every resample. The point estimate is
    the plain difference of the two full-cohort values, each an exactly
    rounded ``int / int``, i.e. the same number a report gets by subtracting
    the two arms' ``MetricValue.value``. The interval bounds
    are the ``(1 - confidence) / 2`` and ``1 - (1 - confidence) / 2``
    quantiles of the resampled differences with numpy's ``"linear"`` method.
    Resample ``r`` is row ``r`` of ``integers(0, n, size=(resamples, n))``
    drawn from ``numpy.random.Generator(PCG64(seed))``, so the same inputs and
    seed give the same numbers on every run, whatever the chunking.

    Args:
        num_a: Arm a numerators, integer array of shape ``(n, m)``.
        den_a: Arm a denominators, shape ``(n, m)``.
        num_b: Arm b numerators, shape ``(n, m)``.
        den_b: Arm b denominators, shape ``(n, m)``.
        resamples: Number of bootstrap resamples (>= 1).
        seed: Non-negative seed; see :func:`derive_seed` for one per comparison.
        confidence: Nominal coverage strictly between 0 and 1.
        metric_names: One name per column, in column order.
        clusters: Optional 1-D labels, one per row (a conversation id): rows
            sharing a label are resampled together, as one unit, in both arms
            at once. Each resample then draws ``k`` clusters (``k`` distinct
            labels, in sorted label order) with replacement, and row ``r`` of
            ``integers(0, k, size=(resamples, k))`` is resample ``r``. Turns of
            one conversation are correlated, so resampling them one by one
            would make the interval too narrow. ``None`` resamples rows.
        _chunk_cells: Private memory knob (cells of the per-chunk count
            matrix); results do not depend on it.

    Returns:
        The point estimates, intervals and the settings that produced them,
        with the ``(resamples, m)`` matrix of resampled differences.

    Raises:
        ConfigError: Bad ``resamples``, ``seed``, ``confidence`` or names.
        InvariantViolationError: The four arrays are not 2-D, do not share one
            shape, or their column count differs from ``metric_names``.
        InputError: An empty cohort, non-integer or negative components, or
            counts so large that exact float64 sums cannot be guaranteed.
    """
    resamples, seed, confidence = _check_config(resamples, seed, confidence)
    names = _check_metric_names(metric_names)
    comps = _paired_components(
        {"num_a": num_a, "den_a": den_a, "num_b": num_b, "den_b": den_b}, len(names)
    )
    n, m = comps["num_a"].shape

    # Point estimates from exact Python integer sums.
    sums = {label: [int(total) for total in array.sum(axis=0)] for label, array in comps.items()}
    value_a = [_ratio(sums["num_a"][j], sums["den_a"][j]) for j in range(m)]
    value_b = [_ratio(sums["num_b"][j], sums["den_b"][j]) for j in range(m)]

    cluster_count: int | None = None
    if clusters is not None:
        comps, cluster_count = _cluster_sums(comps, clusters, n)
    diffs = _resampled_differences(comps, resamples, seed, _chunk_cells)

    alpha = (1.0 - confidence) / 2.0
    bounds = np.quantile(diffs, [alpha, 1.0 - alpha], axis=0, method=QUANTILE_METHOD)
    intervals = tuple(
        MetricInterval(
            metric=names[j],
            value_a=value_a[j],
            value_b=value_b[j],
            estimate=value_b[j] - value_a[j],
            lower=float(bounds[0, j]),
            upper=float(bounds[1, j]),
        )
        for j in range(m)
    )
    result = PairedBootstrapResult(
        method=BOOTSTRAP_METHOD,
        quantile_method=QUANTILE_METHOD,
        seed=seed,
        resamples=resamples,
        confidence=confidence,
        n=n,
        intervals=intervals,
        clusters=cluster_count,
    )
    diffs.flags.writeable = False
    return BootstrapDraws(result=result, differences=diffs)


def _intervals_only(
    draws: Callable[_P, BootstrapDraws],
) -> Callable[_P, PairedBootstrapResult]:
    """Wrap ``draws`` to return only the intervals, so its signature is declared once."""

    def paired_bootstrap(*args: _P.args, **kwargs: _P.kwargs) -> PairedBootstrapResult:
        """Percentile bootstrap interval of ``value_b - value_a`` for each metric.

        Takes the arguments of :func:`paired_bootstrap_draws` (see it for the
        method, the documented random stream and the errors), for callers that
        need only the intervals and not the draws.
        """
        return draws(*args, **kwargs).result

    # help() and inspect.signature() show the wrapped function's parameters.
    return functools.update_wrapper(paired_bootstrap, draws, assigned=(), updated=())


paired_bootstrap: Final = _intervals_only(paired_bootstrap_draws)


def _count(label: str, value: int) -> int:
    if isinstance(value, bool):
        raise InputError(f"{label} must be an integer count, got a bool")
    try:
        count = operator.index(value)
    except TypeError as exc:
        raise InputError(f"{label} must be an integer count, got {value!r}") from exc
    if count < 0:
        raise InputError(f"{label} is a count of discordant pairs and cannot be negative: {count}")
    return count


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs.

    Under the null hypothesis each discordant pair is equally likely to favour
    either arm, so ``min(b, c)`` is Binomial(``b + c``, 1/2) and the p-value
    is ``min(1, 2 * P(X <= min(b, c)))``. The tail is summed with exact
    integers and converted to float once, so large counts neither overflow
    nor accumulate rounding (a p-value below the smallest float becomes 0.0).

    Args:
        b: Pairs where arm a is right and arm b is wrong.
        c: Pairs where arm a is wrong and arm b is right.

    Returns:
        The p-value in ``[0, 1]``; 1.0 when there are no discordant pairs.

    Raises:
        InputError: If a count is negative or not an integer.
    """
    b = _count("b", b)
    c = _count("c", c)
    total = b + c
    if total == 0:
        return 1.0
    smaller = min(b, c)
    term = 1  # C(total, 0)
    tail = 1
    for k in range(smaller):
        term = term * (total - k) // (k + 1)  # C(total, k + 1), exact
        tail += term
    return float(min(Fraction(1), Fraction(2 * tail, 2**total)))


def mcnemar_one_sided(b: int, c: int) -> Fraction:
    """Exact one-sided McNemar p-value that arm b is *better*: ``P(X >= c)``, X ~ Bin(b + c, 1/2).

    Exact (and conservative, the binomial being discrete), so Holm's
    adjustment over several of these keeps the family-wise error at or under
    its level whatever the dependence between the tests. 1 without discordant pairs.

    Raises:
        InputError: If a count is negative or not an integer.
    """
    b = _count("b", b)
    c = _count("c", c)
    total = b + c
    term = 1  # C(total, total)
    tail = 1
    for k in range(total, c, -1):
        term = term * k // (total - k + 1)  # C(total, k - 1), exact
        tail += term
    return Fraction(tail, 2**total)


def mcnemar_from_outcomes(correct_a: ArrayLike, correct_b: ArrayLike) -> McNemarResult:
    """Exact McNemar test from per-pair correctness of two arms.

    Args:
        correct_a: 1-D booleans, arm a correct on pair ``i``.
        correct_b: 1-D booleans aligned with ``correct_a`` by example identity.

    Returns:
        The discordant counts, the cohort size and the exact p-value.

    Raises:
        InvariantViolationError: The arrays are not 1-D of one length.
        InputError: An empty cohort or non-boolean outcomes.
    """
    a = np.asarray(correct_a)
    b_arr = np.asarray(correct_b)
    if a.ndim != 1 or b_arr.ndim != 1 or a.shape != b_arr.shape:
        raise InvariantViolationError(
            f"paired outcomes must be 1-D arrays of one length, got {a.shape} and {b_arr.shape}; "
            "align them by example identity first"
        )
    if a.size == 0:
        raise InputError("cannot run McNemar on an empty cohort: there are no paired outcomes")
    for label, array in (("correct_a", a), ("correct_b", b_arr)):
        if array.dtype != np.bool_:
            raise InputError(f"{label} must be booleans (correct or not), got dtype {array.dtype}")
    b = int(np.count_nonzero(a & ~b_arr))
    c = int(np.count_nonzero(~a & b_arr))
    return McNemarResult(b=b, c=c, n=int(a.size), p_value=mcnemar_exact(b, c))


def _binomial_row(m: int, exact: bool) -> list[Any]:
    """``C(m, k)`` for ``k = 0..m``: ints, or each over ``2**m`` (a correctly rounded float)."""
    row: list[Any] = [1] * (m + 1)
    for k in range(1, m + 1):
        row[k] = row[k - 1] * (m - k + 1) // k
    if exact:
        return row
    scale = 2**m
    return [count / scale for count in row]


# Below this many discordant conversations the null distribution is counted in
# exact integers (object arrays, ~0.1 s at the limit); above it the same
# convolution runs in float64 (rounding ~1e-12 relative, milliseconds).
_EXACT_SIGN_FLIP_LIMIT: Final = 500


def sign_flip_p_values(differences: Sequence[tuple[int, int]]) -> tuple[float, Fraction]:
    """The paired sign-flip test on per-cluster differences, from their counts.

    Under the null hypothesis that the two arms are exchangeable within every
    conversation, each conversation's difference ``d`` (arm b's successes minus
    arm a's) is as likely to be ``-d`` as ``d``, independently across
    conversations. The statistic ``T = sum(d)`` is therefore compared with the
    distribution of ``sum(s_c * d_c)`` over all ``2**K`` sign vectors. That
    distribution depends only on how many conversations have each ``|d|``:
    it is the convolution of one scaled binomial per distinct ``|d|``,
    computed exactly (integer counts over ``2**K``) for up to
    :data:`_EXACT_SIGN_FLIP_LIMIT` discordant conversations and in float64
    above. With one turn per conversation every ``d`` is ``+-1`` and the test
    is exactly McNemar's exact test (``b + c`` discordant pairs).

    Args:
        differences: ``(d, conversations)`` per non-zero difference ``d``.

    Returns:
        The two-sided p-value ``P(|S| >= |T|)`` (a float, as McNemar's) and
        the one-sided ``P(S >= T)`` that arm b is better (a Fraction).

    Raises:
        InputError: A zero difference or a count that is not a positive integer.
    """
    groups: dict[int, int] = {}
    for difference, count in differences:
        size = _count("difference", abs(difference))
        conversations = _count("conversations", count)
        if size == 0 or conversations == 0:
            raise InputError("differences list non-zero differences with positive counts")
        groups[size] = groups.get(size, 0) + conversations
    observed = sum(d * count for d, count in differences)
    total = sum(size * count for size, count in groups.items())
    discordant = sum(groups.values())
    if discordant == 0:
        return 1.0, Fraction(1)
    exact = discordant <= _EXACT_SIGN_FLIP_LIMIT
    dtype = object if exact else np.float64
    distribution = np.ones(1, dtype=dtype)
    for size in sorted(groups):
        count = groups[size]
        row = np.zeros(size * count + 1, dtype=dtype)
        row[::size] = _binomial_row(count, exact)
        distribution = np.convolve(distribution, row)
    # distribution[w] is P(W = w) (times 2**K when exact), S = 2 W - total.
    statistic = 2 * np.arange(total + 1, dtype=np.int64) - total
    two_sided = distribution[np.abs(statistic) >= abs(observed)].sum()
    one_sided = distribution[statistic >= observed].sum()
    if exact:
        scale = 2**discordant
        return float(min(Fraction(1), Fraction(int(two_sided), scale))), Fraction(
            int(one_sided), scale
        )
    return min(1.0, float(two_sided)), min(Fraction(1), Fraction(float(one_sided)))


def cluster_test_from_outcomes(
    correct_a: ArrayLike, correct_b: ArrayLike, clusters: ArrayLike
) -> McNemarResult:
    """The cluster-level test that replaces McNemar's when rows are turns of conversations.

    Per conversation, ``d`` = arm b's right answers minus arm a's; the paired
    sign-flip test (:func:`sign_flip_p_values`) asks whether ``sum(d)`` is
    extreme among its sign flips. Turns of one conversation are flipped
    together, so their correlation cannot make the test too eager, as
    McNemar's per-turn test would be.

    Returns:
        A :class:`McNemarResult` with McNemar's ``b``/``c``/``n`` (over turns),
        ``method`` :data:`CLUSTER_TEST_METHOD`, the number of conversations and
        the counts of their non-zero differences.
    """
    counted = mcnemar_from_outcomes(correct_a, correct_b)
    a = np.asarray(correct_a)
    b_arr = np.asarray(correct_b)
    index, k = cluster_indices(clusters, int(a.size))
    difference = np.bincount(index, weights=(b_arr & ~a), minlength=k) - np.bincount(
        index, weights=(a & ~b_arr), minlength=k
    )
    values, counts = np.unique(difference.astype(np.int64), return_counts=True)
    table = tuple(
        (int(value), int(count)) for value, count in zip(values, counts, strict=True) if value
    )
    return McNemarResult(
        b=counted.b,
        c=counted.c,
        n=counted.n,
        p_value=sign_flip_p_values(table)[0],
        method=CLUSTER_TEST_METHOD,
        clusters=k,
        differences=table,
    )
