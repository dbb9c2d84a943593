"""The ``bfcl`` scoring mode: a split from ``import-bfcl``, judged by BFCL's AST rules.

The output is decoded by the chosen ``--output-format`` (the default ``json``
reads it with ``sommelier.calls_parser.v1``) into zero or more calls; each
example then passes or fails by :func:`~sommelier_mlflow.toolcalls._bfcl.check_bfcl`
against its answer key (the gold calls ``import-bfcl`` writes). An output
that fails to decode (``invalid_json``/``invalid_shape``) fails, also on
``irrelevance``; prose without a call (``no_json``) is zero calls.

Metrics, each a per-example 0/1 with exact counts:

- ``bfcl_ast_accuracy``: passed by this mode's rules (McNemar's outcome);
- ``bfcl_decode_rate``: the output decoded (zero calls included);
- ``bfcl_leaderboard_accuracy``: what BFCL's own checker concludes on the same
  decoded calls (an undecodable ``irrelevance`` output counts as correct, and
  parallel calls are paired greedily), so the examples where this mode
  deliberately differs from the leaderboard are counted, per slice, as the
  difference of the two numerators.

The ``category`` slice (BFCL's category, a field of every imported row) is on
by default. :func:`bfcl_aggregate` gives BFCL's own aggregation of the
per-category results: the unweighted mean over the call categories, with
irrelevance on its own line; the mode's summary hooks print it after an
arm's metrics and add it to ``comparison_report.md``, and mark the
irrelevance categories not meaningful when the format read almost no call.
The mode is registered last, once its hooks are defined.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from operator import attrgetter
from typing import Any, Final

from sommelier_mlflow._deprecation import deprecated_aliases
from sommelier_mlflow.errors import DataError, InputError
from sommelier_mlflow.toolcalls._bfcl import BfclGold, BfclVerdict, check_bfcl
from sommelier_mlflow.toolcalls._bfcl_exec import BFCL_STEP_LIMIT
from sommelier_mlflow.toolcalls._bfcl_overall import (
    BFCL_LEFT_OUT_GROUP,
    BFCL_OVERALL,
    bfcl_group_of,
    bfcl_overall_weights,
)
from sommelier_mlflow.toolcalls._bfcl_trajectories import BFCL_TRAJECTORIES, NOT_MULTI_TURN
from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._modes import (
    Parsed,
    WeightedFigure,
    WeightedOverall,
    calls_mode,
    register_builtin_mode,
)
from sommelier_mlflow.toolcalls._normalise import gold_calls_of
from sommelier_mlflow.toolcalls._registry import ScoringMetric
from sommelier_mlflow.toolcalls._summary import (
    ArmResults,
    ComparisonResults,
    markdown_table,
)

__all__ = [
    "BFCL_MODE",
    "BFCL_CATEGORY_FIELD",
    "BfclMatch",
    "BFCL_METRIC_NAMES",
    "BfclAggregate",
    "is_irrelevance_category",
    "bfcl_aggregate",
    "category_counts",
    "BFCL_WEIGHTED_OVERALL",
]

BFCL_MODE: Final = "bfcl"
#: The row field (and default slice) naming an imported question's BFCL category.
BFCL_CATEGORY_FIELD: Final = "category"
_FAILED: Final = frozenset({"invalid_json", "invalid_shape"})


_DECODED_COMPONENT: Final = {True: (1, 1), False: (0, 1)}


class BfclMatch:
    """One output decoded and judged against its question's answer key.

    Attributes:
        decoded: The output decoded (to zero or more calls).
        decoded_component: ``decoded`` as a metric component, ``(0 or 1, 1)``.
        verdict: The AST rules' verdict, with BFCL's own conclusion beside it.
    """

    __slots__ = ("decoded", "decoded_component", "verdict")

    # A single-turn question adds nothing to the multi-turn metrics of a mixed split.
    multi_turn_component = NOT_MULTI_TURN
    turn_component = NOT_MULTI_TURN
    multi_turn_leaderboard_component = NOT_MULTI_TURN
    steps_component = NOT_MULTI_TURN

    def __init__(self, parsed: Parsed, gold: BfclGold) -> None:
        self.decoded = decoded = parsed.status not in _FAILED
        self.decoded_component = _DECODED_COMPONENT[decoded]
        calls = (parsed.calls or ()) if decoded and isinstance(parsed, CallsParseResult) else None
        self.verdict: BfclVerdict = check_bfcl(calls, gold)


# The components are attributes already built (read in C, with no Python call per
# example and metric): scoring reads three per output.
_accuracy: Final = attrgetter("verdict.passed_component")
_decoded: Final = attrgetter("decoded_component")
_leaderboard: Final = attrgetter("verdict.bfcl_passed_component")


def _read_gold(value: object, where: str) -> tuple[dict[str, Any], ...]:
    calls = tuple(gold_calls_of(value, where=where))
    try:
        BfclGold(calls)
    except InputError as exc:
        raise DataError(f"{where}: {exc}; --scoring bfcl reads splits from import-bfcl") from exc
    return calls


#: The ``bfcl``-mode metric names, in report order.
BFCL_METRIC_NAMES: Final = ("bfcl_ast_accuracy", "bfcl_decode_rate", "bfcl_leaderboard_accuracy")


@dataclass(frozen=True, slots=True)
class BfclAggregate:
    """BFCL's own aggregation of per-category results (exact counts kept).

    Attributes:
        categories: ``(passed, total)`` per category, in the order given.
        call_categories: The categories that expect calls (no ``irrelevance`` in the name).
        overall: Unweighted mean of the call categories' accuracies, as BFCL
            averages them (each category counts once, whatever its size);
            ``None`` without call categories.
        irrelevance: ``(passed, total)`` per irrelevance category, reported
            on its own line as BFCL does.
    """

    categories: Mapping[str, tuple[int, int]]
    call_categories: tuple[str, ...]
    overall: Fraction | None
    irrelevance: Mapping[str, tuple[int, int]]

    def lines(self, metric: str, *, irrelevance_note: str | None = None) -> list[str]:
        """Plain-text lines, labelled as BFCL's aggregation of ``metric``.

        Args:
            metric: The metric aggregated, named in the first line.
            irrelevance_note: Appended to each irrelevance line (the format
                warning marks them not meaningful when no output could read
                as a call).
        """
        out = [f"BFCL's aggregation of {metric} (unweighted mean over call categories):"]
        if self.overall is not None:
            names = ", ".join(self.call_categories)
            out.append(f"  overall AST accuracy  {float(self.overall):.4f}  (mean of {names})")
        for name, (passed, total) in self.categories.items():
            out.append(f"  {name:<22} {passed / total:.4f}  ({passed}/{total})")
        note = f"  {irrelevance_note}" if irrelevance_note else ""
        for name, (passed, total) in self.irrelevance.items():
            out.append(f"  {name} (own line)  {passed / total:.4f}  ({passed}/{total}){note}")
        return out


def is_irrelevance_category(name: str) -> bool:
    """Whether BFCL category ``name`` expects no call (``irrelevance``, ``live_irrelevance``).

    Only a model that makes no call passes one, so its score is the first to
    mislead when the output format reads no call from anything.
    """
    return "irrelevance" in name


def bfcl_aggregate(counts: Mapping[str, tuple[int, int]]) -> BfclAggregate:
    """BFCL's aggregation of ``{category: (passed, total)}`` (categories with examples only).

    Raises:
        ValueError: A category with no example (a total of zero).
    """
    calls: dict[str, tuple[int, int]] = {}
    irrelevance: dict[str, tuple[int, int]] = {}
    for name, (passed, total) in counts.items():
        if total <= 0:
            raise ValueError(f"category {name!r} has no example")
        (irrelevance if is_irrelevance_category(name) else calls)[name] = (passed, total)
    overall = (
        sum((Fraction(p, t) for p, t in calls.values()), Fraction(0)) / len(calls)
        if calls
        else None
    )
    return BfclAggregate(
        categories=calls, call_categories=tuple(calls), overall=overall, irrelevance=irrelevance
    )


def category_counts(field_slices: Mapping[str, Any], metric: str) -> dict[str, tuple[int, int]]:
    """``{category: (numerator, denominator)}`` of ``metric`` from ``category:`` slices."""
    prefix = f"{BFCL_CATEGORY_FIELD}:"
    out: dict[str, tuple[int, int]] = {}
    for name, entry in field_slices.items():
        if name.startswith(prefix) and metric in entry.metrics:
            value = entry.metrics[metric]
            out[name[len(prefix) :]] = (value.numerator, value.denominator)
    return out


#: BFCL's overall over the categories present (see ``_bfcl_overall``): a weighted
#: figure of the per-question pass outcome, logged as a value with its interval.
BFCL_WEIGHTED_OVERALL: Final = WeightedOverall(
    name=BFCL_OVERALL,
    metric="bfcl_ast_accuracy",
    field=BFCL_CATEGORY_FIELD,
    weights=bfcl_overall_weights,
    note=(
        "BFCL's group weights (non-live 10, live 10, irrelevance 10, multi-turn 30) "
        "renormalised to the groups present; " + BFCL_LEFT_OUT_GROUP
    ),
)

# The leaderboard's own way of summing up, beside this product's per-example counts.
_AGGREGATED: Final = ("bfcl_ast_accuracy", "bfcl_leaderboard_accuracy")


def _single_turn(counts: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """The single-turn categories of ``counts`` (multi-turn ones have BFCL's own group)."""
    return {name: value for name, value in counts.items() if bfcl_group_of(name) != "multi_turn"}


def _summary_lines(arm: ArmResults) -> list[str]:
    """BFCL's aggregation of one arm, from its ``category:`` slices (the console summary)."""
    mismatch = arm.format_mismatch
    note = None if mismatch is None else f"{mismatch.not_meaningful} (see WARNING)"
    lines: list[str] = []
    for metric in _AGGREGATED:
        counts = _single_turn(category_counts(arm.field_slices, metric))
        if counts:
            lines += bfcl_aggregate(counts).lines(metric, irrelevance_note=note)
    figure = BFCL_WEIGHTED_OVERALL.figure(arm.field_slices)
    if figure is not None:
        board = BFCL_WEIGHTED_OVERALL.figure(arm.field_slices, "bfcl_leaderboard_accuracy")
        weights = ", ".join(f"{name} {float(w):.4f}" for name, w in figure.weights.items())
        lines.append(
            f"{BFCL_OVERALL} {float(figure.value):.4f} (leaderboard verdicts: "
            f"{float(board.value) if board else 0.0:.4f}); weights: {weights}"
        )
        lines += [f"  left out: {BFCL_LEFT_OUT_GROUP}"] + [
            f"  left out: {name} ({why})" for name, why in figure.left_out.items()
        ]
    steps = arm.metrics.get("bfcl_step_budget_used")
    if steps is not None and steps.denominator:
        turns = steps.denominator // (BFCL_STEP_LIMIT + 1)  # the most steps a turn takes
        lines.append(
            f"mean steps per turn {steps.numerator / turns:.2f} ({steps.numerator} steps, "
            f"{turns} turns)"
        )
    return lines


def _ratio(counts: tuple[int, int]) -> str:
    return f"{counts[0] / counts[1]:.4f} ({counts[0]}/{counts[1]})"


def _markdown_lines(report: ComparisonResults) -> list[str]:
    """BFCL's own aggregation of both arms, from the ``category:`` slices' exact counts."""
    prefix = f"{BFCL_CATEGORY_FIELD}:"
    categories = [
        name
        for name in report.slices
        if name.startswith(prefix) and bfcl_group_of(name[len(prefix) :]) != "multi_turn"
    ]
    if not categories:
        return _overall_lines(report)
    lines = [
        "## BFCL's own aggregation",
        "",
        "As the leaderboard sums up: the unweighted mean of the call categories' accuracies "
        "(each category counts once, whatever its size), irrelevance on its own line. "
        "`bfcl_leaderboard_accuracy` is what BFCL's own checker concludes on the same outputs.",
        "",
    ]
    for metric in _AGGREGATED:
        arms = []
        for kind in ("base", "adapter"):
            per_category: dict[str, tuple[int, int]] = {}
            for name in categories:
                entry = report.slices[name]
                value = (entry.base if kind == "base" else entry.adapter)[metric]
                per_category[name[len(prefix) :]] = (value.numerator, value.denominator)
            arms.append(bfcl_aggregate(per_category))
        base, adapter = arms
        rows = []
        if base.overall is not None and adapter.overall is not None:
            overall = [f"{float(base.overall):.4f}", f"{float(adapter.overall):.4f}"]
            rows.append(["overall: mean of call categories", *overall])
        for name, counts in base.categories.items():
            rows.append([name, _ratio(counts), _ratio(adapter.categories[name])])
        for name, counts in base.irrelevance.items():
            marks = report.not_meaningful(f"{prefix}{name}")
            cells = [
                _ratio(value) + (", not meaningful" if kind in marks else "")
                for kind, value in (("base", counts), ("adapter", adapter.irrelevance[name]))
            ]
            rows.append([f"{name} (own line)", *cells])
        header = ["BFCL category", "base", "adapter"]
        lines += [f"### {metric}", "", *markdown_table(header, rows), ""]
    return lines + _overall_lines(report)


def _group_values(figure: WeightedFigure) -> dict[str, Fraction]:
    """Each BFCL group's score: its categories' weighted mean, by BFCL's rule inside it."""
    totals: dict[str, tuple[Fraction, Fraction]] = {}
    for name, weight in figure.weights.items():
        group = bfcl_group_of(name) or name
        value, mass = totals.get(group, (Fraction(0), Fraction(0)))
        totals[group] = (value + weight * Fraction(*figure.counts[name]), mass + weight)
    return {group: value / mass for group, (value, mass) in totals.items()}


def _overall_lines(report: ComparisonResults) -> list[str]:
    """BFCL's own table for both arms: each group's score and the overall, both verdicts."""
    figures = {
        (kind, metric): BFCL_WEIGHTED_OVERALL.compared(report, kind, metric)
        for kind in ("base", "adapter")
        for metric in _AGGREGATED
    }
    base = figures["base", _AGGREGATED[0]]
    if base is None:
        return []
    shown = [figure for figure in figures.values() if figure is not None]
    values = [_group_values(figure) for figure in shown]
    rows: list[list[str]] = []
    for group in values[0]:
        for name, weight in base.weights.items():
            if (bfcl_group_of(name) or name) == group:
                cells = (_ratio(figure.counts[name]) for figure in shown)
                rows.append([f"{name} (weight {float(weight):.4f})", *cells])
        rows.append([f"**{group}**", *(f"**{float(value[group]):.4f}**" for value in values)])
    rows.append(["**overall**", *(f"**{float(figure.value):.4f}**" for figure in shown)])
    header = ["BFCL category / group", *(f"{kind}, {metric}" for kind, metric in figures)]
    left = "; ".join([BFCL_LEFT_OUT_GROUP, *(f"{n}: {why}" for n, why in base.left_out.items())])
    return [
        "## BFCL's overall",
        "",
        "BFCL's table: its group weights (non-live 10, live 10, irrelevance 10, multi-turn 30, "
        "agentic 40) renormalised to the groups present, each group averaged as BFCL does "
        "(non-live and irrelevance: each category once; live: by size); a category's weight is "
        f"its share of `{BFCL_OVERALL}`. `bfcl_ast_accuracy` is this product's verdict per "
        "question (multi-turn: with the irrelevance rule), `bfcl_leaderboard_accuracy` BFCL's "
        f"own. Left out: {left}.",
        "",
        *markdown_table(header, rows),
        "",
    ]


def _no_call_slice(slice_name: str) -> bool:
    """Whether the slice is an irrelevance category, which only no call passes."""
    prefix = f"{BFCL_CATEGORY_FIELD}:"
    return slice_name.startswith(prefix) and is_irrelevance_category(slice_name[len(prefix) :])


register_builtin_mode(
    calls_mode(
        BFCL_MODE,
        "BFCL's AST rules against the possible answers of a split from import-bfcl.",
        read_gold=_read_gold,
        make_gold=BfclGold,
        match=BfclMatch,
        default_slices=(BFCL_CATEGORY_FIELD,),
        summary_lines=_summary_lines,
        markdown_lines=_markdown_lines,
        no_call_slice=_no_call_slice,
        trajectories=BFCL_TRAJECTORIES,
        weighted_overall=BFCL_WEIGHTED_OVERALL,
    ),
    (
        ScoringMetric(
            "bfcl_ast_accuracy",
            "Examples passing BFCL's AST rules (possible-answer matching; an undecodable "
            "output fails, parallel calls may pair in any complete one-to-one way).",
            _accuracy,
            binary=True,
            mcnemar=True,
            table_column="bfcl_passed",
        ),
        ScoringMetric(
            "bfcl_decode_rate",
            "Outputs the output format decoded into zero or more calls.",
            _decoded,
            binary=True,
            table_column="bfcl_decoded",
        ),
        ScoringMetric(
            "bfcl_leaderboard_accuracy",
            "Examples BFCL's own checker passes: as bfcl_ast_accuracy, except that an "
            "undecodable irrelevance output counts as correct and parallel calls pair greedily.",
            _leaderboard,
            binary=True,
            table_column="bfcl_leaderboard_passed",
        ),
    ),
)

#: Names before issue 31's one vocabulary; each works, warning, until the next release.
__getattr__ = deprecated_aliases(__name__, globals())
