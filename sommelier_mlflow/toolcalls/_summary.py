"""What a scoring mode's summary hooks read, and the one Markdown table they may write.

A mode may sum its results up in its own way beside the per-metric tables
(BFCL's leaderboard aggregation is one): :class:`~sommelier_mlflow.toolcalls.ScoringMode`
takes ``summary_lines`` (the console lines after an arm's metrics, in
``evaluate``, ``score`` and ``main``), ``markdown_lines`` (a section of
``comparison_report.md``) and ``no_call_slice`` (which slices only an output
making no call passes). The command line and the Markdown call them for
whatever mode a report names, so no caller names a mode.

The hooks receive the reports themselves, which live in a higher layer
(``evaluation``); the protocols here name the part of them a hook may read,
so this module, like the rest of the scoring core, imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from sommelier_mlflow.toolcalls._format_hint import FormatMismatch

__all__ = [
    "Counts",
    "SliceMetrics",
    "ArmResults",
    "SliceComparisonView",
    "ComparisonResults",
    "markdown_table",
]


class Counts(Protocol):
    """One metric's exact counts (a :class:`~sommelier_mlflow.toolcalls.MetricValue`).

    A protocol rather than the class: the module defining the class registers
    a scoring mode, so importing it here would close an import circle.
    """

    @property
    def numerator(self) -> int:
        """The count of successes."""
        ...

    @property
    def denominator(self) -> int:
        """The count of chances."""
        ...

    @property
    def value(self) -> float:
        """``numerator / denominator`` (0.0 on an empty denominator)."""
        ...


class SliceMetrics(Protocol):
    """One slice of an arm: its metrics by name."""

    @property
    def metrics(self) -> Mapping[str, Counts]:
        """The slice's metrics with their exact counts."""
        ...


class ArmResults(Protocol):
    """What ``summary_lines`` reads of one arm's report (an ``EvaluationReport``)."""

    @property
    def metrics(self) -> Mapping[str, Counts]:
        """The overall metrics."""
        ...

    @property
    def field_slices(self) -> Mapping[str, SliceMetrics]:
        """Each ``F:V`` slice (``category:simple``, ...), in report order."""
        ...

    @property
    def format_mismatch(self) -> FormatMismatch | None:
        """The output-format warning, when the chosen format found almost no call syntax."""
        ...


class SliceComparisonView(Protocol):
    """One slice of a comparison: both arms' metrics."""

    @property
    def base(self) -> Mapping[str, Counts]:
        """The base arm's metrics on the slice."""
        ...

    @property
    def adapter(self) -> Mapping[str, Counts]:
        """The adapter arm's metrics on the slice."""
        ...


class ComparisonResults(Protocol):
    """What ``markdown_lines`` reads of a comparison (a ``ComparisonReport``)."""

    @property
    def slices(self) -> Mapping[str, SliceComparisonView]:
        """Every slice (``overall``, languages, ``F:V``), in report order."""
        ...

    def not_meaningful(self, slice_name: str) -> Mapping[str, str]:
        """Per arm kind, why that arm's results on the slice mean nothing (usually none)."""
        ...


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table, first column left-aligned and the others right-aligned (numbers).

    Cells are written as given: a hook escapes what comes from users' data.
    """
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    lines.extend("| " + " | ".join(row) + " |" for row in rows)
    return lines
