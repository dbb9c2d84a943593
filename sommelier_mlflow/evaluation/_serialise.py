"""The JSON pieces every report kind writes alike, and the one reader of a matched-pair gap.

The arm report, the evaluator report and the comparison report each have
exactly one writer and one reader, but they store metrics, bootstrap
settings, intervals, pair coverage and matched-pair gaps in the same shape.
Those shapes are written here once, so two reports can never spell the same
number differently (``-0.0`` is folded into ``0.0``, rates come from their
counts), and a stored gap is read back by :func:`read_gap` alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from sommelier_mlflow.evaluation._checks import ReportChecker, ReportKeys
from sommelier_mlflow.evaluation._results import (
    BootstrapSettings,
    PairCoverage,
    PairedSlice,
    SliceResult,
)
from sommelier_mlflow.evaluation._stats import (
    BOOTSTRAP_METHOD,
    CLUSTER_RESAMPLING,
    QUANTILE_METHOD,
    PairedBootstrapResult,
)
from sommelier_mlflow.toolcalls import MetricValue

__all__ = [
    "clean_float",
    "metrics_to_dict",
    "settings_to_dict",
    "bootstrap_provenance",
    "intervals_to_dict",
    "coverage_to_dict",
    "read_gap",
    "paired_to_dict",
]


def clean_float(value: float) -> float:
    """Return ``value`` as a float with ``-0.0`` folded into ``0.0``.

    A difference of equal rates can come out as ``-0.0``; it means the same
    and must not make two reports differ byte for byte or print as ``-0``.
    """
    return float(value) + 0.0


def metrics_to_dict(metrics: Mapping[str, MetricValue]) -> dict[str, dict[str, Any]]:
    """Serialise a metric mapping as ``{name: {value, numerator, denominator}}``."""
    return {name: metric.to_dict() for name, metric in metrics.items()}


def settings_to_dict(settings: BootstrapSettings) -> dict[str, Any]:
    """A run's bootstrap settings with the method names, so a reader can reproduce them."""
    return {
        "method": BOOTSTRAP_METHOD,
        "quantile_method": QUANTILE_METHOD,
        "seed": settings.seed,
        "resamples": settings.resamples,
        "confidence": float(settings.confidence),
    }


def bootstrap_provenance(result: PairedBootstrapResult) -> dict[str, Any]:
    """The settings that produced one interval set (everything but the numbers).

    A bootstrap that resampled whole conversations adds ``resampling``
    (``"conversation"``) and ``clusters`` (how many); others keep their bytes.
    """
    clustered: dict[str, Any] = {}
    if result.clusters is not None:
        clustered = {"resampling": CLUSTER_RESAMPLING, "clusters": result.clusters}
    return {
        "method": result.method,
        "quantile_method": result.quantile_method,
        "seed": result.seed,
        "resamples": result.resamples,
        "confidence": result.confidence,
        "n": result.n,
        **clustered,
    }


def intervals_to_dict(result: PairedBootstrapResult) -> dict[str, dict[str, float]]:
    """Per metric ``{value: b - a, lower, upper}`` from a paired bootstrap."""
    return {
        interval.metric: {
            "value": clean_float(interval.estimate),
            "lower": clean_float(interval.lower),
            "upper": clean_float(interval.upper),
        }
        for interval in result.intervals
    }


def coverage_to_dict(coverage: PairCoverage) -> dict[str, Any]:
    """Pair-coverage counts and the two coverage rates."""
    return {
        "target_rows": coverage.target_rows,
        "paired_targets": coverage.paired_targets,
        "target": coverage.paired_targets / coverage.target_rows,
        "root_rows": coverage.root_rows,
        "paired_roots": coverage.paired_roots,
        "root": coverage.paired_roots / coverage.root_rows,
        "unmatched_targets": coverage.unmatched_targets,
    }


def read_gap(
    check: ReportChecker,
    language: str,
    value: object,
    keys: frozenset[str],
    slices: Mapping[str, SliceResult],
    names: Sequence[str],
) -> PairedSlice:
    """Read one matched-pair gap as both report kinds store it (the one gap reader).

    The pairs must be sorted by target id, the coverage must be what the pairs
    and slice sizes say (only ``unmatched_targets`` comes from the file) and
    the gaps must be target minus root. Checking pairs and metrics against
    rows is the caller's, where it has rows; so is ``pair_set_sha256``, which
    comes back ``None``.

    Args:
        check: The report's checker.
        language: The target language (the gap's key).
        value: The stored gap.
        keys: The fields the gap must have (the evaluator report has no digest).
        slices: The report's language slices, already read.
        names: The metric names.
    """
    where = f"paired_slices.{language}"
    entry = check.mapping(value, where, keys)
    if language not in slices:
        check.fail(where, f"target language {language!r} is not among the slices")
    root_language = check.text(entry["root_language"], f"{where}.root_language")
    if root_language not in slices or root_language == language:
        check.fail(f"{where}.root_language", f"{root_language!r} is not another evaluated slice")
    pair_ids = check.array(entry["pair_ids"], f"{where}.pair_ids")
    count = check.count(entry["pairs"], f"{where}.pairs")
    if count == 0 or count != len(pair_ids):
        check.fail(f"{where}.pairs", f"{count} does not match {len(pair_ids)} listed pairs")
    pairs: list[tuple[str, str]] = []
    for index, pair in enumerate(pair_ids):
        at = f"{where}.pair_ids[{index}]"
        items = check.array(pair, at)
        if len(items) != 2:
            check.fail(at, "must be [root_id, target_id]")
        root_id = check.text(items[0], at)
        target_id = check.text(items[1], at)
        if pairs and target_id <= pairs[-1][1]:
            check.fail(at, "pairs must be sorted by target id without repeats")
        pairs.append((root_id, target_id))
    stored = check.mapping(entry["coverage"], f"{where}.coverage", ReportKeys.COVERAGE)
    coverage = PairCoverage(
        target_rows=slices[language].examples,
        paired_targets=count,
        root_rows=slices[root_language].examples,
        paired_roots=len({root for root, _ in pairs}),
        unmatched_targets=check.count(
            stored["unmatched_targets"], f"{where}.coverage.unmatched_targets"
        ),
    )
    for key, wanted in coverage_to_dict(coverage).items():
        if stored[key] != wanted:
            check.broken(f"{where}.coverage.{key}", f"is {stored[key]!r}, rows say {wanted!r}")
    root, target, bootstrap = check.paired_sides(entry, where, names, count, ReportKeys.GAP_SIDES)
    return PairedSlice(
        language=language,
        root_language=root_language,
        pairs=tuple(pairs),
        coverage=coverage,
        pair_set_sha256=None,
        root_metrics=MappingProxyType(root),
        target_metrics=MappingProxyType(target),
        bootstrap=bootstrap,
    )


def paired_to_dict(paired: PairedSlice, *, digest: bool = True) -> dict[str, Any]:
    """One matched-pair gap as both report kinds write it.

    Args:
        paired: The gap.
        digest: Write ``pair_set_sha256`` (the evaluator report has no prompts,
            so it writes no digest).
    """
    return {
        "root_language": paired.root_language,
        "pairs": len(paired.pairs),
        "pair_ids": [list(pair) for pair in paired.pairs],
        "coverage": coverage_to_dict(paired.coverage),
        **({"pair_set_sha256": paired.pair_set_sha256} if digest else {}),
        "root_metrics": metrics_to_dict(paired.root_metrics),
        "target_metrics": metrics_to_dict(paired.target_metrics),
        "gaps": intervals_to_dict(paired.bootstrap),
        "bootstrap": bootstrap_provenance(paired.bootstrap),
    }
