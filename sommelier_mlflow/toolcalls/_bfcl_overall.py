"""BFCL's overall score over the categories a split holds, with BFCL's weights renormalised.

BFCL (bfcl-eval 2026.3.23) sums a model up in five groups, each averaged its
own way, then weighs the groups 10 / 10 / 10 / 30 / 40:

- non-live (10): the unweighted mean of four parts, ``simple`` (itself the
  unweighted mean of ``simple_python``, ``simple_java``, ``simple_javascript``),
  ``multiple``, ``parallel`` and ``parallel_multiple``;
- live (10): ``live_simple``, ``live_multiple``, ``live_parallel`` and
  ``live_parallel_multiple`` weighted by their sizes (each question counts once);
- irrelevance (10): the unweighted mean of ``irrelevance`` and ``live_irrelevance``;
- multi-turn (30): the unweighted mean of ``multi_turn_base``,
  ``multi_turn_miss_func``, ``multi_turn_miss_param`` and ``multi_turn_long_context``;
- agentic (40): web search and memory, which need the internet or an
  embedding model: never imported here, so always left out.

BFCL scores a category it did not run as 0. A split here holds only what was
imported, so :func:`bfcl_overall_weights` keeps BFCL's rules over the
categories present: a part or group with none of its categories drops out and
the remaining weights are renormalised (BFCL's own ``calculate_percentage_
weighted_accuracy`` normalises its weights the same way). Any other category
(``live_relevance``, one this table does not know) is left out and named.
The result is one weight per category, so the overall is linear in the
categories' accuracies: ``sum(weight * passed / total)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Final

__all__ = [
    "BFCL_OVERALL",
    "BFCL_GROUP_WEIGHTS",
    "BFCL_LEFT_OUT_GROUP",
    "bfcl_group_of",
    "bfcl_overall_weights",
]

#: The figure's name: an MLflow key segment and a report label.
BFCL_OVERALL: Final = "bfcl_overall"


@dataclass(frozen=True, slots=True)
class _Group:
    """One of BFCL's summary groups: its weight, its parts, and how the parts are averaged."""

    name: str
    weight: int
    by_size: bool  # parts weighted by their sizes (live) rather than each counting once
    parts: tuple[tuple[str, ...], ...]  # a part of several categories is their unweighted mean


_GROUPS: Final = (
    _Group(
        "non_live",
        10,
        False,
        (
            ("simple_python", "simple_java", "simple_javascript"),
            ("multiple",),
            ("parallel",),
            ("parallel_multiple",),
        ),
    ),
    _Group(
        "live",
        10,
        True,
        (("live_simple",), ("live_multiple",), ("live_parallel",), ("live_parallel_multiple",)),
    ),
    _Group("irrelevance", 10, False, (("irrelevance",), ("live_irrelevance",))),
    _Group(
        "multi_turn",
        30,
        False,
        (
            ("multi_turn_base",),
            ("multi_turn_miss_func",),
            ("multi_turn_miss_param",),
            ("multi_turn_long_context",),
        ),
    ),
)
#: BFCL's group weights, the agentic group included (which is always left out here).
BFCL_GROUP_WEIGHTS: Final = {
    **{group.name: group.weight for group in _GROUPS},
    "agentic": 40,
}
#: Why the agentic group never counts.
BFCL_LEFT_OUT_GROUP: Final = (
    "agentic (40%: web search and memory) needs the internet or an embedding model, "
    "so it is left out"
)
_GROUP_OF: Final = {
    category: group.name for group in _GROUPS for part in group.parts for category in part
}


def bfcl_group_of(category: str) -> str | None:
    """The BFCL summary group of a category (``non_live``, ``live``, ...), ``None`` if none."""
    return _GROUP_OF.get(category)


def _group_weights(group: _Group, sizes: Mapping[str, int]) -> dict[str, Fraction]:
    """Each present category's weight inside its group (summing to 1), by BFCL's rule."""
    present = [[name for name in part if sizes.get(name, 0) > 0] for part in group.parts]
    present = [part for part in present if part]
    if group.by_size:
        total = sum(sizes[name] for part in present for name in part)
        return {name: Fraction(sizes[name], total) for part in present for name in part}
    return {name: Fraction(1, len(present)) / len(part) for part in present for name in part}


def bfcl_overall_weights(
    sizes: Mapping[str, int],
) -> tuple[dict[str, Fraction], dict[str, str]]:
    """BFCL's weight of each category present, renormalised to the groups present.

    Args:
        sizes: ``{category: number of questions}`` of the split (categories
            with no question are ignored).

    Returns:
        ``({category: weight}, {category: why it is left out})``; the weights
        are exact and sum to 1 when any category counts (an empty mapping
        when none does).
    """
    groups = {group.name: _group_weights(group, sizes) for group in _GROUPS}
    groups = {name: weights for name, weights in groups.items() if weights}
    total = sum(BFCL_GROUP_WEIGHTS[name] for name in groups)
    weights = {
        category: Fraction(BFCL_GROUP_WEIGHTS[name], total) * weight
        for name, inner in groups.items()
        for category, weight in inner.items()
    }
    left_out = {
        category: "not part of BFCL's overall score"
        for category, size in sizes.items()
        if size > 0 and category not in weights
    }
    return weights, left_out
