"""The comparison chart: base versus adapter per slice, and the deltas with intervals.

A table of deltas answers "how much better", but a reader scanning runs in the
MLflow UI wants to see at a glance where the adapter helps and whether the
interval excludes zero. The chart has one column per metric: bars of base and
adapter per slice on top, and below them each delta (adapter minus base) with
its paired-bootstrap interval as whiskers around a zero line.

The figure is built on a bare ``matplotlib.figure.Figure`` (rendered by the Agg
canvas), never through ``pyplot``, so it neither needs a display nor touches
global plotting state of the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.errors import DataError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["comparison_figure"]

_BASE_COLOUR = "#8c8c8c"
_ADAPTER_COLOUR = "#2b6cb0"


def _slices(report: Mapping[str, Any]) -> list[str]:
    slices = report.get("slices")
    if not isinstance(slices, Mapping) or OVERALL not in slices:
        raise DataError("comparison report has no 'slices.overall'; cannot draw the comparison")
    return [OVERALL, *sorted(name for name in slices if name != OVERALL)]


def _metric_names(report: Mapping[str, Any]) -> list[str]:
    identity = report.get("identity")
    names = identity.get("metric_names") if isinstance(identity, Mapping) else None
    if isinstance(names, list) and names:
        return [str(name) for name in names]
    return list(report["slices"][OVERALL]["delta"])


def _value(entry: Mapping[str, Any], *path: str) -> float:
    current: Any = entry
    for part in path:
        if not isinstance(current, Mapping) or part not in current:
            raise DataError(f"comparison report lacks {'.'.join(path)}; cannot draw the comparison")
        current = current[part]
    if isinstance(current, bool) or not isinstance(current, (int, float)):
        raise DataError(f"comparison report field {'.'.join(path)} is not a number: {current!r}")
    return float(current)


def comparison_figure(report: Mapping[str, Any], metrics: Sequence[str] | None = None) -> Figure:
    """Draw the comparison chart of a comparison report.

    Args:
        report: A ``comparison_report.json`` document.
        metrics: Metrics to draw, one column each (default: all of the report's).

    Returns:
        A matplotlib figure; the caller saves or logs it.

    Raises:
        DataError: If the report lacks the slices, values or intervals to draw.
    """
    from matplotlib.figure import Figure

    slices = _slices(report)
    settings = report.get("bootstrap")
    confidence = settings.get("confidence", 0.95) if isinstance(settings, Mapping) else 0.95
    names = list(metrics) if metrics is not None else _metric_names(report)
    width = max(3.2, 0.55 * len(slices) + 1.6)
    figure = Figure(figsize=(width * len(names), 6.4), layout="constrained")
    axes = figure.subplots(2, len(names), squeeze=False, sharex="col")
    positions = list(range(len(slices)))
    bar = 0.38
    for column, name in enumerate(names):
        top, bottom = axes[0][column], axes[1][column]
        base = [_value(report["slices"][s], "base", name, "value") for s in slices]
        adapter = [_value(report["slices"][s], "adapter", name, "value") for s in slices]
        top.bar([p - bar / 2 for p in positions], base, bar, label="base", color=_BASE_COLOUR)
        top.bar(
            [p + bar / 2 for p in positions], adapter, bar, label="adapter", color=_ADAPTER_COLOUR
        )
        top.set_ylim(0.0, 1.05)
        top.set_title(name, fontsize=10)
        top.grid(axis="y", alpha=0.3)

        deltas = [_value(report["slices"][s], "delta", name, "value") for s in slices]
        lower = [_value(report["slices"][s], "delta", name, "lower") for s in slices]
        upper = [_value(report["slices"][s], "delta", name, "upper") for s in slices]
        whiskers = [
            [max(0.0, d - lo) for d, lo in zip(deltas, lower, strict=True)],
            [max(0.0, up - d) for d, up in zip(deltas, upper, strict=True)],
        ]
        bottom.axhline(0.0, color="black", linewidth=0.8)
        bottom.errorbar(positions, deltas, yerr=whiskers, fmt="o", color=_ADAPTER_COLOUR, capsize=4)
        bottom.set_xticks(positions, slices, rotation=45 if len(slices) > 6 else 0)
        bottom.grid(axis="y", alpha=0.3)
        if column == 0:
            top.set_ylabel("value")
            bottom.set_ylabel(f"adapter - base ({float(confidence) * 100:g}% interval)")
    axes[0][0].legend(loc="upper left", fontsize=8)
    figure.suptitle("sommelier: base vs adapter per slice", fontsize=12)
    return figure
