"""The MLflow metric-key scheme, as pure functions of the report documents.

The MLflow UI groups a run's metrics into chart sections by everything before
the last ``/`` and titles each chart with the last segment. Keys are built so
that the last segment is always the metric name and exact counts and interval
bounds sit one section below the value they qualify::

    overall/full_call_exact_match
    overall/counts/full_call_exact_match.numerator
    fr/counts/argument_f1.denominator
    gap/fr/ci95/argument_f1.lower
    delta/overall/full_call_exact_match
    mcnemar/fr/p_value

These functions import nothing from MLflow, so the scheme can be tested and
used (for example by the CLI to print a summary) without the tracking client.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Final, Protocol

from sommelier_mlflow.data import OVERALL, slice_sections
from sommelier_mlflow.errors import DataError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    LanguageGap,
    PairedBootstrapResult,
    PairedSlice,
    SliceResult,
    weighted_overall_delta,
    weighted_overall_of,
)
from sommelier_mlflow.toolcalls import MetricValue

__all__ = [
    "OVERALL",
    "SlicedScores",
    "interval_label",
    "evaluation_metric_keys",
    "comparison_metric_keys",
]

_DEFAULT_CONFIDENCE: Final = 0.95


class SlicedScores(Protocol):
    """What the arm keys are made of: an ``EvaluationReport`` or a ``ScoredExamples``."""

    @property
    def metric_names(self) -> tuple[str, ...]:
        """The metrics, in column order."""
        ...

    @property
    def metrics(self) -> Mapping[str, MetricValue]:
        """Overall metrics."""
        ...

    @property
    def slices(self) -> Mapping[str, SliceResult]:
        """Per-language metrics."""
        ...

    @property
    def paired_slices(self) -> Mapping[str, PairedSlice]:
        """Matched-pair gaps per target language."""
        ...

    @property
    def field_slices(self) -> Mapping[str, SliceResult]:
        """Metrics per field slice ``F:V`` (empty when only language is sliced)."""
        ...


def _clean(value: float) -> float:
    return float(value) + 0.0


def interval_label(confidence: object) -> str:
    """The key section of an interval: ``ci95`` for 95 % (``ci90``, ``ci99.5`` otherwise).

    The contract names the 95 % intervals ``ci95``; deriving the label from the
    recorded confidence keeps a key from claiming a coverage it does not have.

    Raises:
        DataError: If the confidence is not a number strictly between 0 and 1.
    """
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)):
        raise DataError(f"bootstrap.confidence must be a number, got {confidence!r}")
    level = float(confidence)
    if not math.isfinite(level) or not 0.0 < level < 1.0:
        raise DataError(f"bootstrap.confidence must be strictly between 0 and 1, got {level}")
    percent = level * 100.0
    if abs(percent - round(percent)) < 1e-9:
        return f"ci{round(percent)}"
    return f"ci{percent:g}"


def _counted(
    keys: dict[str, float], section: str, metrics: Mapping[str, MetricValue], names: Iterable[str]
) -> None:
    for name in names:
        metric = metrics[name]
        keys[f"{section}/{name}"] = metric.value
        keys[f"{section}/counts/{name}.numerator"] = float(metric.numerator)
        keys[f"{section}/counts/{name}.denominator"] = float(metric.denominator)


def _intervals(
    keys: dict[str, float], section: str, result: PairedBootstrapResult, names: Iterable[str]
) -> None:
    label = interval_label(result.confidence)
    for name in names:
        interval = result.interval(name)
        keys[f"{section}/{name}"] = _clean(interval.estimate)
        keys[f"{section}/{label}/{name}.lower"] = _clean(interval.lower)
        keys[f"{section}/{label}/{name}.upper"] = _clean(interval.upper)


def evaluation_metric_keys(report: SlicedScores, *, scoring: str | None = None) -> dict[str, float]:
    """Flatten one arm's report (or the evaluator's scores) into metric keys.

    Keys: ``overall/<metric>``, ``overall/counts/<metric>.numerator|.denominator``,
    the same under ``<language>/`` for each slice and under ``F:<encoded V>/``
    for each field slice ``F:V`` (``calls:2+`` is logged as ``calls:2.2b/...``;
    see ``sommelier_mlflow.data.encode_slice_value``), and for each translated
    language ``gap/<language>/<metric>``, ``gap/<language>/ci95/<metric>.lower|.upper``
    and ``gap/<language>/pairs``. Counts are logged as floats, which is exact
    below 2**53. With ``scoring`` naming a mode that has a weighted overall
    figure (BFCL's ``bfcl_overall``), ``overall/<figure>`` holds its value: a
    weighted mean of slices, not a count, so it has no ``counts`` keys.
    """
    names = report.metric_names
    keys: dict[str, float] = {}
    _counted(keys, OVERALL, report.metrics, names)
    for language in sorted(report.slices):
        _counted(keys, language, report.slices[language].metrics, names)
    for name, section in slice_sections(report.field_slices).items():
        _counted(keys, section, report.field_slices[name].metrics, names)
    for language in sorted(report.paired_slices):
        paired = report.paired_slices[language]
        _intervals(keys, f"gap/{language}", paired.bootstrap, names)
        keys[f"gap/{language}/pairs"] = float(len(paired.pairs))
    spec = None if scoring is None else weighted_overall_of(scoring)
    figure = None if spec is None else spec.figure(report.field_slices)
    if spec is not None and figure is not None:
        keys[f"{OVERALL}/{spec.name}"] = float(figure.value)
    return keys


def _gap_keys(
    keys: dict[str, float], kind: str, gaps: Mapping[str, LanguageGap], names: Iterable[str]
) -> None:
    for language in sorted(gaps):
        _intervals(keys, f"gap/{kind}/{language}", gaps[language].bootstrap, names)


def comparison_metric_keys(report: ComparisonReport) -> dict[str, float]:
    """Flatten a comparison report into metric keys.

    Keys: ``delta/<slice>/<metric>`` with ``delta/<slice>/ci95/<metric>.lower|.upper``
    and ``mcnemar/<slice>/p_value`` for ``overall``, every language and every
    field slice (under its encoded section, as in :func:`evaluation_metric_keys`);
    ``gap/<model_kind>/<language>/<metric>`` (+ ``ci95`` bounds) for the
    matched-pair gaps of both models; ``marginal_gap/<model_kind>/<language>/<metric>``
    for the descriptive full-slice gaps; and for a mode with a weighted
    overall figure, ``delta/overall/<figure>`` with its ``ci95`` bounds
    (resampled within each slice value: see ``evaluation/_weighted.py``).
    """
    names = report.metric_names
    keys: dict[str, float] = {}
    sections = slice_sections(report.identity.field_slices)
    for slice_name in (OVERALL, *sorted(name for name in report.slices if name != OVERALL)):
        entry = report.slices[slice_name]
        section = sections.get(slice_name, slice_name)
        _intervals(keys, f"delta/{section}", entry.delta, names)
        keys[f"mcnemar/{section}/p_value"] = entry.mcnemar.p_value
    for kind in sorted(report.gaps):
        _gap_keys(keys, kind, report.gaps[kind], names)
    for kind in sorted(report.marginal):
        for language, gap in sorted(report.marginal[kind].items()):
            for name in names:
                keys[f"marginal_gap/{kind}/{language}/{name}"] = gap.value(name)
    weighted = weighted_overall_delta(report)
    if weighted is not None:
        label = interval_label(weighted.confidence)
        keys[f"delta/{OVERALL}/{weighted.name}"] = _clean(weighted.estimate)
        keys[f"delta/{OVERALL}/{label}/{weighted.name}.lower"] = _clean(weighted.lower)
        keys[f"delta/{OVERALL}/{label}/{weighted.name}.upper"] = _clean(weighted.upper)
    return keys
