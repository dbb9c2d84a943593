"""The comparison charts: a forest plot of the deltas, and each model's language gaps.

People read a comparison for two answers: where is the adapter better (and is
the interval clear of zero), and did the gap between languages close. A grid
of small bar panels answers neither at a glance, so both charts here are
forest plots, the form clinical and A/B reports use for exactly that:

* ``comparison.png``: one row per slice x metric, the adapter - base delta as a
  point with its paired-bootstrap interval as a bar, a zero line, and rows
  whose interval excludes zero drawn solid and starred; the right margin
  prints base -> adapter and the delta with its interval as numbers.
* ``leaderboard.png``: one base, many adapters: the select metric's delta of
  each adapter against its checkpoint step (or run order), with intervals;
  adapters the family test calls "better" solid, the best one ringed.
* ``gaps.png``: per translated language and metric, each model's matched-pair
  gap (target - root) with its interval, base and adapter on adjacent rows.

Sizes are chosen for a 1200-pixel-wide image (12 in at 100 dpi) with every
label at 11 pt or more. Figures are built on a bare
``matplotlib.figure.Figure`` (rendered by the Agg canvas), never through
``pyplot``, so drawing needs no display and leaves global state alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from sommelier_mlflow.data import OVERALL
from sommelier_mlflow.errors import DataError
from sommelier_mlflow.evaluation import ComparisonReport, Leaderboard, MetricInterval

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "FIGURE_WIDTH_IN",
    "FIGURE_DPI",
    "MIN_FONT_PT",
    "comparison_figure",
    "gaps_figure",
    "leaderboard_figure",
]

#: Figures are 12 in x 100 dpi = 1200 px wide: readable in the MLflow artifact view.
FIGURE_WIDTH_IN: Final = 12.0
FIGURE_DPI: Final = 100
#: No text in either chart is smaller than this.
MIN_FONT_PT: Final = 11.0
_LABEL_PT: Final = 12.0
_TITLE_PT: Final = 15.0
_ROW_IN: Final = 0.42
_BASE_COLOUR: Final = "#6b6b6b"
_ADAPTER_COLOUR: Final = "#1f5fa8"
_CLEAR_COLOUR: Final = "#1f5fa8"
_UNCLEAR_COLOUR: Final = "#9a9a9a"


@dataclass(frozen=True)
class _Row:
    """One drawn row: a point and its interval, a label on the left, a note on the right.

    Both charts draw an interval and print it the same way, so every row is
    made from one by :meth:`of`.
    """

    label: str
    value: float
    lower: float
    upper: float
    note: str
    colour: str

    @classmethod
    def of(
        cls, interval: MetricInterval, label: str, colour: str, before: str = "", after: str = ""
    ) -> _Row:
        """A row for ``interval``, noted as ``before``, the estimate and bounds, ``after``.

        The bounds become plain floats with ``-0.0`` folded, so a note never
        prints ``-0``.
        """
        value, lower, upper = (
            float(x) + 0.0 for x in (interval.estimate, interval.lower, interval.upper)
        )
        note = f"{before}{value:+.3f} [{lower:+.3f}, {upper:+.3f}]{after}"
        return cls(label, value, lower, upper, note, colour)

    @property
    def solid(self) -> bool:
        """Whether the interval excludes zero (a difference the data show): drawn solid."""
        return self.lower > 0.0 or self.upper < 0.0


def _slices(report: ComparisonReport) -> list[str]:
    if OVERALL not in report.slices:
        raise DataError("comparison report has no 'overall' slice; cannot draw the comparison")
    return [OVERALL, *(name for name in report.slices if name != OVERALL)]


def _forest(
    axes: Axes, rows: Sequence[_Row], groups: Sequence[int], xlabel: str, header: str
) -> None:
    """Draw rows top to bottom with whiskers, a zero line and group separators."""
    positions = list(range(len(rows)))[::-1]
    for y, row in zip(positions, rows, strict=True):
        axes.plot([row.lower, row.upper], [y, y], color=row.colour, linewidth=2.6)
        axes.plot(
            [row.value],
            [y],
            marker="o",
            markersize=9,
            markerfacecolor=row.colour if row.solid else "white",
            markeredgecolor=row.colour,
            markeredgewidth=2,
            linestyle="none",
        )
    axes.axvline(0.0, color="black", linewidth=1.2)
    for boundary in groups:
        axes.axhline(len(rows) - boundary - 0.5, color="#cccccc", linewidth=1)
    axes.set_yticks(positions, [row.label for row in rows], fontsize=_LABEL_PT)
    for tick, row in zip(axes.get_yticklabels(), rows, strict=True):
        tick.set_fontweight("bold" if row.solid else "normal")
    axes.set_ylim(-0.6, len(rows) - 0.4)
    low = min(min(row.lower for row in rows), 0.0)
    high = max(max(row.upper for row in rows), 0.0)
    pad = max(0.05, 0.08 * (high - low))
    axes.set_xlim(low - pad, high + pad)
    axes.set_xlabel(xlabel, fontsize=_LABEL_PT)
    axes.tick_params(axis="x", labelsize=MIN_FONT_PT)
    axes.grid(axis="x", alpha=0.3)
    for spine in ("top", "right"):
        axes.spines[spine].set_visible(False)
    notes = axes.secondary_yaxis("right")
    notes.set_yticks(
        positions, [row.note for row in rows], fontsize=MIN_FONT_PT, family="monospace"
    )
    notes.tick_params(length=0)
    notes.spines["right"].set_visible(False)
    axes.text(
        1.0,
        1.0,
        header,
        transform=axes.transAxes,
        ha="left",
        va="bottom",
        fontsize=MIN_FONT_PT,
        family="monospace",
        fontweight="bold",
    )


def _forest_figure(
    rows: Sequence[_Row], groups: Sequence[int], xlabel: str, header: str, title: str
) -> Figure:
    """A figure as tall as its rows, holding one titled forest plot."""
    from matplotlib.figure import Figure

    height = max(3.5, 1.9 + _ROW_IN * len(rows))
    figure = Figure(figsize=(FIGURE_WIDTH_IN, height), dpi=FIGURE_DPI, layout="constrained")
    _forest(figure.subplots(), rows, groups, xlabel, header)
    figure.suptitle(title, fontsize=_TITLE_PT)
    return figure


def _percent(report: ComparisonReport) -> str:
    return f"{float(report.bootstrap.confidence) * 100:g}%"


def comparison_figure(report: ComparisonReport, metrics: Sequence[str] | None = None) -> Figure:
    """Forest plot of adapter - base per slice and metric, with the intervals.

    Args:
        report: The comparison report.
        metrics: Metrics to draw (default: all of the report's, in its order).

    Returns:
        A matplotlib figure, 1200 px wide at :data:`FIGURE_DPI`; the caller saves or logs it.

    Raises:
        DataError: If the report lacks the slices, values or intervals to draw.
    """
    names = list(metrics) if metrics is not None else list(report.metric_names)
    rows: list[_Row] = []
    groups: list[int] = []
    for slice_name in _slices(report):
        entry = report.slices[slice_name]
        if rows:
            groups.append(len(rows))
        for name in names:
            base, tuned = entry.base[name].value, entry.adapter[name].value
            row = _Row.of(
                entry.delta.interval(name),
                f"{slice_name} · {name}",
                _UNCLEAR_COLOUR,
                before=f"{base:.3f}→{tuned:.3f}  ",
            )
            # A delta the data show is starred and coloured, so it stands out.
            rows.append(
                replace(row, label=f"* {row.label}", colour=_CLEAR_COLOUR) if row.solid else row
            )
    percent = _percent(report)
    return _forest_figure(
        rows,
        groups,
        f"adapter - base ({percent} paired-bootstrap interval)",
        f"  base→adapter  delta [{percent} CI]",
        f"Adapter vs base: * and solid = the {percent} interval excludes 0",
    )


def gaps_figure(report: ComparisonReport, metrics: Sequence[str] | None = None) -> Figure:
    """Forest plot of each model's matched-pair language gap (target - root).

    A gap near zero with a tight interval means the languages are served
    equally; the base and adapter rows of a language and metric sit together
    so the change is visible.

    Raises:
        DataError: If the report has no matched-pair gaps to draw.
    """
    gaps = report.gaps
    names = list(metrics) if metrics is not None else list(report.metric_names)
    languages = sorted({lang for kind in ("base", "adapter") for lang in gaps.get(kind, {})})
    if not languages:
        raise DataError("comparison report has no matched-pair gaps; cannot draw gaps.png")
    rows: list[_Row] = []
    groups: list[int] = []
    for language in languages:
        for name in names:
            if rows:
                groups.append(len(rows))
            for kind, colour in (("base", _BASE_COLOUR), ("adapter", _ADAPTER_COLOUR)):
                paired = gaps.get(kind, {}).get(language)
                if paired is None:
                    raise DataError(f"comparison report lacks the {kind} gap of {language!r}")
                rows.append(
                    _Row.of(
                        paired.bootstrap.interval(name),
                        f"{language}-{paired.root_language} · {name} · {kind}",
                        colour,
                        after=f"  {paired.pairs}",
                    )
                )
    percent = _percent(report)
    return _forest_figure(
        rows,
        groups,
        f"target - root language, matched pairs ({percent} interval)",
        f"  gap [{percent} CI]  pairs",
        "Language gap per model (grey: base, blue: adapter; solid = interval excludes 0)",
    )


def leaderboard_figure(board: Leaderboard) -> Figure:
    """The select metric's delta per adapter against its step (or run order), with intervals.

    Returns:
        A matplotlib figure, 1200 px wide at :data:`FIGURE_DPI`.
    """
    from matplotlib.figure import Figure

    metric = board.select_metric
    steps = [row.arm.step for row in board.rows]
    by_step = all(step is not None for step in steps) and len(set(steps)) == len(steps)
    xs = [
        float(step) if by_step and step is not None else float(i + 1)
        for i, step in enumerate(steps)
    ]
    figure = Figure(figsize=(FIGURE_WIDTH_IN, 5.5), dpi=FIGURE_DPI, layout="constrained")
    axes = figure.subplots()
    axes.axhline(0.0, color=_BASE_COLOUR, linewidth=1.2, linestyle="--", label="base")
    for x, row in zip(xs, board.rows, strict=True):
        interval = row.comparison.slices[OVERALL].delta.interval(metric)
        colour = _CLEAR_COLOUR if row.better else _UNCLEAR_COLOUR
        axes.errorbar(
            [x],
            [interval.estimate],
            yerr=[[interval.estimate - interval.lower], [interval.upper - interval.estimate]],
            fmt="o",
            color=colour,
            capsize=5,
            markersize=8,
        )
    best = board.best_row.comparison.slices[OVERALL].delta.interval(metric)
    axes.plot(
        [xs[board.best]], [best.estimate], "o", markersize=16, fillstyle="none", color="#c0392b"
    )
    axes.plot(
        xs,
        [r.comparison.slices[OVERALL].delta.interval(metric).estimate for r in board.rows],
        color=_ADAPTER_COLOUR,
        linewidth=1.0,
        alpha=0.5,
    )
    axes.set_xticks(xs, [row.arm.label if not by_step else str(row.arm.step) for row in board.rows])
    axes.set_xlabel("checkpoint step" if by_step else "adapter (run order)", fontsize=_LABEL_PT)
    axes.set_ylabel(f"adapter - base: {metric}", fontsize=_LABEL_PT)
    axes.tick_params(labelsize=MIN_FONT_PT)
    figure.suptitle(
        f"{metric}: delta vs base with 95% intervals; solid = better after Holm at "
        f"{board.alpha:g}, ringed = best",
        fontsize=_TITLE_PT,
    )
    return figure
