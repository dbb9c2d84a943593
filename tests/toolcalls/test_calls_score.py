from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls import (
    CALLS_METRIC_NAMES,
    GoldCalls,
    compute_calls_metrics,
    flatten_arguments,
    matched_argument_pairs,
    parse_tool_calls,
    score_calls_example,
)

W = {"name": "get_weather", "arguments": {"city": "Paris", "units": "celsius"}}
W_KELVIN = {"name": "get_weather", "arguments": {"city": "Paris", "units": "kelvin"}}
T = {"name": "convert", "arguments": {"amount": 10, "from": "EUR", "to": "USD"}}

# (gold calls, model output). W flattens to 2 pairs, T to 3.
WORKED: list[tuple[list[dict[str, Any]], str]] = [
    ([W, T], json.dumps([T, W])),  # 1 reordered parallel calls: exact
    ([W], json.dumps([W, W])),  # 2 a duplicate too many
    ([W, W], json.dumps(W)),  # 3 a duplicate too few (single object form)
    ([W, T], json.dumps([T, W_KELVIN])),  # 4 one call right, one argument wrong
    ([], "[]"),  # 5 abstention example, explicit empty array
    ([], "Nothing here needs a tool."),  # 6 abstention example, prose only
    ([], json.dumps([W])),  # 7 abstention example, the model called anyway
    ([], '[{"name": "get_weather"'),  # 8 abstention example, broken JSON
    ([W], "It is sunny in Paris."),  # 9 prose where a call was due
]


def _records() -> list[dict[str, Any]]:
    records = []
    for gold, text in WORKED:
        parsed = parse_tool_calls(text)
        records.append(
            {"parse_status": parsed.status, "parsed_calls": parsed.calls, "gold_calls": gold}
        )
    return records


def test_worked_example_totals() -> None:
    metrics = compute_calls_metrics(_records())
    counts = {name: (m.numerator, m.denominator) for name, m in metrics.items()}
    assert list(counts) == list(CALLS_METRIC_NAMES)
    assert counts == {
        # examples 1, 5, 6
        "call_set_exact_match": (3, 9),
        # matched calls 2+1+1+1; predicted 2+2+1+2, +1 for the call in 7, +1 for the failure in 8
        "call_precision": (5, 9),
        # gold calls 2+1+2+2+1
        "call_recall": (5, 8),
        "call_f1": (10, 17),
        # matched pairs 5+2+2+(3+1); predicted 5+4+2+5+2+1, gold 5+2+4+5+2
        "call_argument_f1": (26, 37),
        # four abstention examples; 5 and 6 abstained, 7 called, 8 failed (neither)
        "abstention_accuracy": (2, 4),
        "false_call_rate": (1, 4),
    }
    assert metrics["call_f1"].value == pytest.approx(10 / 17)


@pytest.mark.parametrize(
    ("index", "numerators", "denominators"),
    [
        (0, (1, 2, 2, 4, 10, 0, 0), (1, 2, 2, 4, 10, 0, 0)),
        (1, (0, 1, 1, 2, 4, 0, 0), (1, 2, 1, 3, 6, 0, 0)),
        (2, (0, 1, 1, 2, 4, 0, 0), (1, 1, 2, 3, 6, 0, 0)),
        (3, (0, 1, 1, 2, 8, 0, 0), (1, 2, 2, 4, 10, 0, 0)),
        (4, (1, 0, 0, 0, 0, 1, 0), (1, 0, 0, 0, 0, 1, 1)),
        (5, (1, 0, 0, 0, 0, 1, 0), (1, 0, 0, 0, 0, 1, 1)),
        (6, (0, 0, 0, 0, 0, 0, 1), (1, 1, 0, 1, 2, 1, 1)),
        (7, (0, 0, 0, 0, 0, 0, 0), (1, 1, 0, 1, 1, 1, 1)),
        (8, (0, 0, 0, 0, 0, 0, 0), (1, 0, 1, 1, 2, 0, 0)),
    ],
)
def test_worked_example_per_example_components(
    index: int, numerators: tuple[int, ...], denominators: tuple[int, ...]
) -> None:
    record = _records()[index]
    score = score_calls_example(
        record["parse_status"], record["parsed_calls"], record["gold_calls"]
    )
    assert score.numerators == numerators
    assert score.denominators == denominators
    assert score.correct("call_set_exact_match") == (numerators[0] == 1)


def test_duplicates_count_both_ways() -> None:
    too_many = score_calls_example("ok", [W, W], [W])
    too_few = score_calls_example("ok", [W], [W, W])
    assert not too_many.correct("call_set_exact_match") and not too_few.correct(
        "call_set_exact_match"
    )
    assert (too_many.numerators[1], too_many.denominators[1]) == (1, 2)  # precision 1/2
    assert (too_few.numerators[2], too_few.denominators[2]) == (1, 2)  # recall 1/2


def test_an_empty_array_on_a_call_example_is_a_miss_not_a_failure() -> None:
    score = score_calls_example("ok", [], [W])
    assert score.numerators == (0, 0, 0, 0, 0, 0, 0)
    assert score.denominators == (1, 0, 1, 1, 2, 0, 0)


def test_names_do_not_enter_argument_pairs_but_do_enter_call_matching() -> None:
    renamed = {"name": "weather", "arguments": W["arguments"]}
    score = score_calls_example("ok", [renamed], [W])
    assert score.numerators[:4] == (0, 0, 0, 0)
    assert (score.numerators[4], score.denominators[4]) == (4, 4)


def test_argument_f1_takes_the_best_assignment_not_the_output_order() -> None:
    gold = [
        {"name": "f", "arguments": {"a": 1, "b": 2}},
        {"name": "f", "arguments": {"a": 1}},
    ]
    # Pairing in output order matches 1 + 1 pairs; the optimum pairs the first
    # prediction with the second gold call and matches 1 + 2.
    predicted = [
        {"name": "f", "arguments": {"a": 1, "z": 0}},
        {"name": "g", "arguments": {"a": 1, "b": 2}},
    ]
    assert matched_argument_pairs(predicted, gold) == 3
    assert matched_argument_pairs(predicted[::-1], gold[::-1]) == 3
    score = score_calls_example("ok", predicted, gold)
    assert (score.numerators[4], score.denominators[4]) == (6, 7)


def test_unknown_status_and_malformed_inputs_are_refused() -> None:
    with pytest.raises(InputError, match="unknown parse_status"):
        score_calls_example("fine", None, [W])
    with pytest.raises(InputError, match="parsed_calls"):
        score_calls_example("ok", None, [W])
    with pytest.raises(InputError, match="gold call 0"):
        score_calls_example("ok", [], [{"name": "x"}])
    with pytest.raises(InputError, match="list of calls"):
        GoldCalls(W)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="lacks field"):
        compute_calls_metrics([{"parse_status": "ok"}])


def test_an_all_abstaining_split_reports_zero_over_zero_rates() -> None:
    metrics = compute_calls_metrics(
        [{"parse_status": "no_json", "parsed_calls": None, "gold_calls": []}] * 3
    )
    assert (metrics["call_recall"].numerator, metrics["call_recall"].denominator) == (0, 0)
    assert metrics["call_recall"].value == 0.0
    assert metrics["abstention_accuracy"].value == 1.0


# --- properties -------------------------------------------------------------------

_names = st.sampled_from(["f", "g", "h"])
_values = st.one_of(
    st.integers(0, 2), st.sampled_from(["x", "y"]), st.lists(st.integers(0, 1), max_size=2)
)
_calls = st.fixed_dictionaries(
    {"name": _names, "arguments": st.dictionaries(st.sampled_from("abcd"), _values, max_size=3)}
)


def _brute_force_pairs(predicted: list[dict[str, Any]], gold: list[dict[str, Any]]) -> int:
    pred = [flatten_arguments(call["arguments"]) for call in predicted]
    gold_pairs = [flatten_arguments(call["arguments"]) for call in gold]

    def overlap(i: int, j: int) -> int:
        return sum(1 for path, value in pred[i].items() if gold_pairs[j].get(path) == value)

    small, large = (pred, gold_pairs) if len(pred) <= len(gold_pairs) else (gold_pairs, pred)
    best = 0
    for chosen in itertools.permutations(range(len(large)), len(small)):
        if small is pred:
            total = sum(overlap(i, j) for i, j in enumerate(chosen))
        else:
            total = sum(overlap(j, i) for i, j in enumerate(chosen))
        best = max(best, total)
    return best


@settings(max_examples=300, deadline=None)
@given(st.lists(_calls, max_size=4), st.lists(_calls, max_size=4))
def test_assignment_is_optimal(predicted: list[dict[str, Any]], gold: list[dict[str, Any]]) -> None:
    assert matched_argument_pairs(predicted, gold) == _brute_force_pairs(predicted, gold)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_calls, max_size=4), st.lists(_calls, max_size=4), st.randoms(use_true_random=False)
)
def test_scores_ignore_call_order(
    predicted: list[dict[str, Any]], gold: list[dict[str, Any]], rng: Any
) -> None:
    shuffled_pred, shuffled_gold = predicted[:], gold[:]
    rng.shuffle(shuffled_pred)
    rng.shuffle(shuffled_gold)
    assert score_calls_example("ok", predicted, gold) == score_calls_example(
        "ok", shuffled_pred, shuffled_gold
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(_calls, max_size=4), st.lists(_calls, max_size=4))
def test_components_are_consistent(
    predicted: list[dict[str, Any]], gold: list[dict[str, Any]]
) -> None:
    score = score_calls_example("ok", predicted, gold)
    for numerator, denominator in zip(score.numerators, score.denominators, strict=True):
        assert 0 <= numerator <= denominator
    perfect = score_calls_example("ok", gold, gold)
    assert perfect.correct("call_set_exact_match")
    assert perfect.numerators[1:5] == perfect.denominators[1:5]
    if score.correct("call_set_exact_match") and gold:
        assert score == perfect


@settings(max_examples=100, deadline=None)
@given(st.lists(_calls, max_size=3), st.sampled_from(["no_json", "invalid_json", "invalid_shape"]))
def test_a_non_ok_parse_never_earns_call_credit(gold: list[dict[str, Any]], status: str) -> None:
    score = score_calls_example(status, None, gold)
    assert score.numerators[1:5] == (0, 0, 0, 0)
    assert score.correct("call_set_exact_match") == (status == "no_json" and not gold)
    if status != "no_json":
        assert score.denominators[1] == 1  # a failure counts as one wrong predicted call
