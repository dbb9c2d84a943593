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
from typing import Any, Final

from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.errors import DataError

__all__ = [
    "OVERALL",
    "comparison_metric_keys",
    "evaluation_metric_keys",
    "interval_label",
]

_DEFAULT_CONFIDENCE: Final = 0.95


def _fail(where: str, message: str) -> DataError:
    return DataError(
        f"{where}: {message}; the report cannot be turned into MLflow metrics, "
        "regenerate it with this version of sommelier_mlflow"
    )


def _mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(where, f"expected an object, got {type(value).__name__}")
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(where, f"expected a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise _fail(where, f"expected a finite number, got {value!r}")
    return number


def interval_label(confidence: object) -> str:
    """The key section of an interval: ``ci95`` for 95 % (``ci90``, ``ci99.5`` otherwise).

    The contract names the 95 % intervals ``ci95``; deriving the label from the
    recorded confidence keeps a key from claiming a coverage it does not have.
    """
    level = _number(confidence, "bootstrap.confidence")
    if not 0.0 < level < 1.0:
        raise _fail("bootstrap.confidence", f"must be strictly between 0 and 1, got {level}")
    percent = level * 100.0
    if abs(percent - round(percent)) < 1e-9:
        return f"ci{round(percent)}"
    return f"ci{percent:g}"


def _confidence(*settings: object) -> object:
    # The interval's own provenance wins; then the report's; then the contract's 95 %.
    for candidate in settings:
        if isinstance(candidate, Mapping) and "confidence" in candidate:
            return candidate["confidence"]
    return _DEFAULT_CONFIDENCE


def _metric_names(report: Mapping[str, Any], metrics: Mapping[str, Any]) -> Iterable[str]:
    names = report.get("metric_names")
    if isinstance(names, list) and all(isinstance(name, str) for name in names):
        return names
    return list(metrics)


def _counted(
    keys: dict[str, float], section: str, metrics: Mapping[str, Any], names: Iterable[str]
) -> None:
    for name in names:
        entry = _mapping(metrics.get(name), f"{section}.{name}")
        keys[f"{section}/{name}"] = _number(entry.get("value"), f"{section}.{name}.value")
        for part in ("numerator", "denominator"):
            keys[f"{section}/counts/{name}.{part}"] = _number(
                entry.get(part), f"{section}.{name}.{part}"
            )


def _intervals(
    keys: dict[str, float],
    section: str,
    intervals: Mapping[str, Any],
    names: Iterable[str],
    label: str,
    where: str,
) -> None:
    for name in names:
        entry = _mapping(intervals.get(name), f"{where}.{name}")
        keys[f"{section}/{name}"] = _number(entry.get("value"), f"{where}.{name}.value")
        for bound in ("lower", "upper"):
            keys[f"{section}/{label}/{name}.{bound}"] = _number(
                entry.get(bound), f"{where}.{name}.{bound}"
            )


def evaluation_metric_keys(report: Mapping[str, Any]) -> dict[str, float]:
    """Flatten an evaluation report (one arm, or the evaluator's report) into metric keys.

    Keys: ``overall/<metric>``, ``overall/counts/<metric>.numerator|.denominator``,
    the same under ``<language>/`` for each slice, and for each translated
    language ``gap/<language>/<metric>``, ``gap/<language>/ci95/<metric>.lower|.upper``
    and ``gap/<language>/pairs``. Counts are logged as floats, which is exact
    below 2**53.

    Raises:
        DataError: If a field the scheme needs is missing or not a finite number.
    """
    metrics = _mapping(report.get("metrics"), "metrics")
    names = list(_metric_names(report, metrics))
    keys: dict[str, float] = {}
    _counted(keys, OVERALL, metrics, names)
    slices = _mapping(report.get("slices", {}), "slices")
    for language in sorted(slices):
        entry = _mapping(slices[language], f"slices.{language}")
        _counted(
            keys, language, _mapping(entry.get("metrics"), f"slices.{language}.metrics"), names
        )
    paired = _mapping(report.get("paired_slices", {}), "paired_slices")
    for language in sorted(paired):
        where = f"paired_slices.{language}"
        entry = _mapping(paired[language], where)
        label = interval_label(_confidence(entry.get("bootstrap"), report.get("bootstrap")))
        _intervals(
            keys,
            f"gap/{language}",
            _mapping(entry.get("gaps"), f"{where}.gaps"),
            names,
            label,
            f"{where}.gaps",
        )
        keys[f"gap/{language}/pairs"] = _number(entry.get("pairs"), f"{where}.pairs")
    return keys


def comparison_metric_keys(report: Mapping[str, Any]) -> dict[str, float]:
    """Flatten a comparison report into metric keys.

    Keys: ``delta/<slice>/<metric>`` with ``delta/<slice>/ci95/<metric>.lower|.upper``
    and ``mcnemar/<slice>/p_value`` for ``overall`` and every language;
    ``gap/<model_kind>/<language>/<metric>`` (+ ``ci95`` bounds) for the
    matched-pair gaps of both models; ``marginal_gap/<model_kind>/<language>/<metric>``
    for the descriptive full-slice gaps.

    Raises:
        DataError: If a field the scheme needs is missing or not a finite number.
    """
    identity = _mapping(report.get("identity", {}), "identity")
    raw_names = identity.get("metric_names")
    slices = _mapping(report.get("slices"), "slices")
    keys: dict[str, float] = {}
    ordered = [OVERALL, *sorted(name for name in slices if name != OVERALL)]
    for slice_name in ordered:
        if slice_name not in slices:
            raise _fail("slices", f"missing the {OVERALL!r} slice")
        where = f"slices.{slice_name}"
        entry = _mapping(slices[slice_name], where)
        delta = _mapping(entry.get("delta"), f"{where}.delta")
        names = raw_names if isinstance(raw_names, list) else list(delta)
        label = interval_label(_confidence(entry.get("bootstrap"), report.get("bootstrap")))
        _intervals(keys, f"delta/{slice_name}", delta, names, label, f"{where}.delta")
        mcnemar = _mapping(entry.get("mcnemar"), f"{where}.mcnemar")
        keys[f"mcnemar/{slice_name}/p_value"] = _number(
            mcnemar.get("p_value"), f"{where}.mcnemar.p_value"
        )
    gaps = _mapping(report.get("gaps", {}), "gaps")
    for kind in sorted(gaps):
        for language, raw in sorted(_mapping(gaps[kind], f"gaps.{kind}").items()):
            where = f"gaps.{kind}.{language}"
            entry = _mapping(raw, where)
            intervals = _mapping(entry.get("gaps"), f"{where}.gaps")
            names = raw_names if isinstance(raw_names, list) else list(intervals)
            label = interval_label(_confidence(entry.get("bootstrap"), report.get("bootstrap")))
            _intervals(keys, f"gap/{kind}/{language}", intervals, names, label, f"{where}.gaps")
    marginal = _mapping(report.get("marginal_full_slices", {}), "marginal_full_slices")
    for kind in sorted(marginal):
        if kind == "note":
            continue
        for language, raw in sorted(
            _mapping(marginal[kind], f"marginal_full_slices.{kind}").items()
        ):
            where = f"marginal_full_slices.{kind}.{language}"
            metrics = _mapping(_mapping(raw, where).get("metrics"), f"{where}.metrics")
            names = raw_names if isinstance(raw_names, list) else list(metrics)
            for name in names:
                value = _mapping(metrics.get(name), f"{where}.metrics.{name}").get("value")
                keys[f"marginal_gap/{kind}/{language}/{name}"] = _number(
                    value, f"{where}.metrics.{name}.value"
                )
    return keys
