"""BFCL's overall score: BFCL's group weights and rules, renormalised to the categories present."""

from __future__ import annotations

from fractions import Fraction

from sommelier_mlflow.toolcalls import (
    BFCL_WEIGHTED_OVERALL,
    MetricValue,
    bfcl_aggregate,
    bfcl_overall_weights,
)

SINGLE_TURN = {"simple_python": 40, "multiple": 20, "parallel": 20, "parallel_multiple": 20}


class _Slice:
    def __init__(self, passed: int, total: int) -> None:
        self.metrics = {"bfcl_ast_accuracy": MetricValue(passed, total)}


def test_non_live_alone_is_the_unweighted_mean_todays_aggregate_gives() -> None:
    counts = {"simple_python": (30, 40), "multiple": (10, 20), "parallel": (5, 20)}
    counts["parallel_multiple"] = (20, 20)
    weights, left_out = bfcl_overall_weights({name: total for name, (_, total) in counts.items()})
    assert weights == dict.fromkeys(counts, Fraction(1, 4)) and not left_out
    slices = {f"category:{name}": _Slice(*value) for name, value in counts.items()}
    figure = BFCL_WEIGHTED_OVERALL.figure(slices)
    assert figure is not None
    assert figure.value == bfcl_aggregate(counts).overall == Fraction(5, 8)


def test_groups_are_weighted_10_10_10_30_renormalised_to_those_present() -> None:
    sizes = {**SINGLE_TURN, "irrelevance": 40, "multi_turn_base": 5, "multi_turn_miss_func": 5}
    weights, left_out = bfcl_overall_weights(sizes)
    # non-live 10, irrelevance 10, multi-turn 30 of 50; agentic (40) is never present.
    assert weights["irrelevance"] == Fraction(10, 50)
    assert weights["simple_python"] == Fraction(10, 50) / 4
    assert weights["multi_turn_base"] == weights["multi_turn_miss_func"] == Fraction(30, 50) / 2
    assert sum(weights.values()) == 1 and not left_out


def test_each_group_averages_as_bfcl_does_and_unknown_categories_are_left_out() -> None:
    sizes = {
        "simple_python": 10,
        "simple_java": 30,  # simple is the unweighted mean of its languages
        "multiple": 10,
        "live_simple": 30,  # live is weighted by size
        "live_multiple": 10,
        "irrelevance": 5,
        "live_irrelevance": 95,  # irrelevance: each category once
        "live_relevance": 7,
        "multi_turn_long_context": 3,
    }
    weights, left_out = bfcl_overall_weights(sizes)
    assert weights["simple_python"] == weights["simple_java"] == Fraction(10, 60) / 2 / 2
    assert weights["multiple"] == Fraction(10, 60) / 2
    assert weights["live_simple"] == Fraction(10, 60) * Fraction(3, 4)
    assert weights["irrelevance"] == weights["live_irrelevance"] == Fraction(10, 60) / 2
    assert weights["multi_turn_long_context"] == Fraction(30, 60)
    assert left_out == {"live_relevance": "not part of BFCL's overall score"}
    assert sum(weights.values()) == 1
    assert bfcl_overall_weights({"live_relevance": 3}) == ({}, left_out)  # nothing counts
