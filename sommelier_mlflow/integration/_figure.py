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

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.evaluation import ComparisonReport

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["comparison_figure"]

_BASE_COLOUR = "#8c8c8c"
_ADAPTER_COLOUR = "#2b6cb0"


def comparison_figure(report: ComparisonReport, metrics: Sequence[str] | None = None) -> Figure:
    """Draw the comparison chart of a comparison report.

    Args:
        report: The comparison report.
        metrics: Metrics to draw, one column each (default: all of the report's).

    Returns:
        A matplotlib figure; the caller saves or logs it.
    """
    from matplotlib.figure import Figure

    slices = [OVERALL, *sorted(name for name in report.slices if name != OVERALL)]
    confidence = report.bootstrap.confidence
    names = list(metrics) if metrics is not None else list(report.metric_names)
    width = max(3.2, 0.55 * len(slices) + 1.6)
    figure = Figure(figsize=(width * len(names), 6.4), layout="constrained")
    axes = figure.subplots(2, len(names), squeeze=False, sharex="col")
    positions = list(range(len(slices)))
    bar = 0.38
    for column, name in enumerate(names):
        top, bottom = axes[0][column], axes[1][column]
        base = [report.slices[s].base[name].value for s in slices]
        adapter = [report.slices[s].adapter[name].value for s in slices]
        top.bar([p - bar / 2 for p in positions], base, bar, label="base", color=_BASE_COLOUR)
        top.bar(
            [p + bar / 2 for p in positions], adapter, bar, label="adapter", color=_ADAPTER_COLOUR
        )
        top.set_ylim(0.0, 1.05)
        top.set_title(name, fontsize=10)
        top.grid(axis="y", alpha=0.3)

        intervals = [report.slices[s].delta.interval(name) for s in slices]
        deltas = [interval.estimate for interval in intervals]
        whiskers = [
            [max(0.0, interval.estimate - interval.lower) for interval in intervals],
            [max(0.0, interval.upper - interval.estimate) for interval in intervals],
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
