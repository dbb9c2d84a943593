"""A weighted overall figure (BFCL's overall) in a comparison: the difference and its interval.

The figure is ``sum(weight * passed / total)`` over the values of one slice
field (BFCL's categories), with weights fixed by which values are present, so
it is not a count: an arm logs its value, and a comparison logs the
adapter-minus-base difference with a paired-bootstrap interval that resamples
questions *within each slice value*, so every resample keeps the categories'
sizes and weights.

The figure averages a binary per-question outcome, which is McNemar's outcome
(the mode flags the same metric), and each category slice of a comparison
keeps that outcome's 2x2 table: ``b`` questions only the base passes, ``c``
only the adapter, the rest alike. Resampling a category's ``n`` question pairs
with replacement changes its difference only through how many of each kind
are drawn, a multinomial draw of ``n`` over those three kinds, so the interval
is computed from the tables the comparison already holds and reads the same
from a comparison read back from its JSON. Category ``k`` (sorted) draws its
``(resamples, 3)`` counts from ``Generator(PCG64(derive_seed(seed,
"delta/<figure>")))`` in turn; the bounds are the percentile quantiles of the
weighted differences, as every other interval of the report.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from sommelier_mlflow.evaluation._comparison_report import ComparisonReport
from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import QUANTILE_METHOD
from sommelier_mlflow.toolcalls import WeightedFigure, WeightedOverall, find_scoring_mode

__all__ = [
    "WeightedDelta",
    "weighted_overall_of",
    "weighted_overall_delta",
    "weighted_markdown_lines",
]


@dataclass(frozen=True, slots=True)
class WeightedDelta:
    """Adapter minus base on a mode's weighted overall figure, with its interval.

    Attributes:
        name: The figure (``bfcl_overall``).
        base: The base arm's figure.
        adapter: The adapter arm's figure.
        estimate: ``adapter.value - base.value``.
        lower: Lower percentile bound of the within-slice paired bootstrap.
        upper: Upper bound.
        confidence: Nominal coverage.
        seed: The seed of the draws (derived from the comparison's seed).
        resamples: How many resamples.
    """

    name: str
    base: WeightedFigure
    adapter: WeightedFigure
    estimate: float
    lower: float
    upper: float
    confidence: float
    seed: int
    resamples: int


def weighted_overall_of(scoring: str) -> WeightedOverall | None:
    """The weighted overall figure of scoring mode ``scoring``, if it has one (and is installed)."""
    mode = find_scoring_mode(scoring)
    return None if mode is None else mode.weighted_overall


def weighted_overall_delta(report: ComparisonReport) -> WeightedDelta | None:
    """The figure's adapter-minus-base difference and interval (module docstring).

    Returns:
        ``None`` when the mode has no such figure, no slice value is weighted,
        the figure's metric is not the comparison's McNemar outcome, or the
        rows were clustered (conversations), where a question is no longer
        the resampling unit.
    """
    spec = weighted_overall_of(report.identity.scoring)
    if spec is None:
        return None
    base, adapter = spec.compared(report, "base"), spec.compared(report, "adapter")
    if base is None or adapter is None:
        return None
    settings = report.bootstrap
    seed = derive_seed(settings.seed, f"delta/{spec.name}")
    rng = np.random.Generator(np.random.PCG64(seed))
    differences = np.zeros(settings.resamples, dtype=np.float64)
    for value in sorted(base.weights):
        entry = report.slices[f"{spec.field}:{value}"]
        table = entry.mcnemar
        if entry.mcnemar_metric != spec.metric or table.clusters is not None:
            return None
        n = entry.examples
        draws = rng.multinomial(
            n, [table.b / n, table.c / n, (n - table.b - table.c) / n], size=settings.resamples
        )
        weight = float(base.weights[value])
        differences += weight * (draws[:, 1] - draws[:, 0]) / n
    alpha = (1.0 - settings.confidence) / 2.0
    lower, upper = np.quantile(differences, [alpha, 1.0 - alpha], method=QUANTILE_METHOD)
    return WeightedDelta(
        name=spec.name,
        base=base,
        adapter=adapter,
        estimate=float(adapter.value - base.value),
        lower=float(lower),
        upper=float(upper),
        confidence=settings.confidence,
        seed=seed,
        resamples=settings.resamples,
    )


def weighted_markdown_lines(report: ComparisonReport) -> list[str]:
    """The figure's section of ``comparison_report.md`` (none when there is no figure)."""
    delta = weighted_overall_delta(report)
    if delta is None:
        return []
    spec = weighted_overall_of(report.identity.scoring)
    percent = f"{delta.confidence * 100:g}%"
    return [
        f"## {delta.name}: adapter minus base",
        "",
        f"{spec.note if spec else ''}. The interval is a paired bootstrap that resamples "
        f"questions within each category ({delta.resamples} resamples, seed {delta.seed}).",
        "",
        f"| figure | base | adapter | delta | {percent} interval |",
        "|---|---:|---:|---:|---:|",
        f"| {delta.name} | {_fraction(delta.base.value)} | {_fraction(delta.adapter.value)} "
        f"| {delta.estimate:+.4f} | [{delta.lower:+.4f}, {delta.upper:+.4f}] |",
        "",
    ]


def _fraction(value: Fraction) -> str:
    return f"{float(value):.4f}"
