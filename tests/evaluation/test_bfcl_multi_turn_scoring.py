"""Scoring BFCL multi-turn questions: trajectories decoded, executed and counted exactly.

Each trajectory is written by hand from BFCL's ground truth: each call in a
step of its own as the product's JSON, and prose that ends the turn. The
metrics are per-question counts (``bfcl_multi_turn_accuracy``, the
leaderboard's verdict), per-turn counts (``bfcl_turn_accuracy``) and the step
diagnostic; single-turn rows of the same split count in none of them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from sommelier_mlflow.evaluation import AnsweredExample, BootstrapSettings
from sommelier_mlflow.evaluation._scoring import score_completions
from sommelier_mlflow.toolcalls import BFCL_METRIC_NAMES, BFCL_MULTI_TURN_METRIC_NAMES
from sommelier_mlflow.toolcalls import gold_turn_calls as gold_of
from tests.support.bfcl_multi_turn import (
    READ_ONLY_CALLS,
    MultiTurnQuestion,
    multi_turn_questions,
    require_bfcl,
)

SETTINGS = BootstrapSettings(seed=0, resamples=50, confidence=0.95)
ANSWER = "Done."  # prose: no call, the turn ends
KEY = {
    "name": "get_weather",
    "arguments": {"city": {"acceptable": ["Paris"], "bfcl_type": ["string"], "required": True}},
}


@pytest.fixture(scope="module", autouse=True)
def _bfcl() -> None:
    require_bfcl()


def _texts(turns: Sequence[Sequence[Mapping[str, Any]]]) -> tuple[tuple[str, ...], ...]:
    return tuple((*(json.dumps([call]) for call in turn), ANSWER) for turn in turns)


def _row(question: MultiTurnQuestion, turns: tuple[tuple[str, ...], ...]) -> AnsweredExample:
    return AnsweredExample(
        example_id=question.example_id,
        language="en",
        source_example_id=None,
        gold_call=None,
        raw_text="\n".join(text for turn in turns for text in turn),
        gold_calls=(),
        slice_values=(("category", question.category),),
        multi_turn=question.multi_turn,
        turns=turns,
    )


def _scores(rows: Sequence[AnsweredExample]) -> dict[str, dict[str, tuple[int, int]]]:
    scored = score_completions(
        rows, bootstrap=SETTINGS, gap_scope="base", scoring="bfcl", slice_by=("category",)
    )
    return {
        example.example_id: {name: example.score.component(name) for name in scored.metric_names}
        for example in scored.examples
    }


def _question(category: str, wanted: Any) -> MultiTurnQuestion:
    return next(q for q in multi_turn_questions(category) if wanted(gold_of(q)))


def test_the_ground_truth_passes_every_turn_and_a_last_turn_mistake_fails_only_that_turn() -> None:
    question = _question("multi_turn_base", lambda gold: len(gold) >= 2 and all(gold))
    gold = [list(turn) for turn in gold_of(question)]
    wrong = [list(turn) for turn in gold]
    last = wrong[-1][-1]
    key = next(iter(last["arguments"]))
    wrong[-1][-1] = {"name": last["name"], "arguments": {**last["arguments"], key: "nowhere_x"}}
    right, mistaken = (
        _scores([_row(question, _texts(turns))])[question.example_id] for turns in (gold, wrong)
    )
    turns, steps = len(gold), sum(len(turn) + 1 for turn in gold)
    assert right == {
        "bfcl_ast_accuracy": (1, 1),  # the question's pass, McNemar's outcome
        "bfcl_decode_rate": (1, 1),
        "bfcl_leaderboard_accuracy": (1, 1),
        "bfcl_multi_turn_accuracy": (1, 1),
        "bfcl_turn_accuracy": (turns, turns),
        "bfcl_multi_turn_leaderboard_accuracy": (1, 1),
        "bfcl_step_budget_used": (steps, 21 * turns),
    }
    assert mistaken["bfcl_multi_turn_accuracy"] == (0, 1)
    assert mistaken["bfcl_multi_turn_leaderboard_accuracy"] == (0, 1)
    assert mistaken["bfcl_ast_accuracy"] == (0, 1)
    assert mistaken["bfcl_turn_accuracy"] == (turns - 1, turns)


def test_a_call_where_the_ground_truth_makes_none_fails_here_but_not_on_the_leaderboard() -> None:
    question = _question("multi_turn_miss_param", lambda gold: any(not turn for turn in gold))
    gold = [list(turn) for turn in gold_of(question)]
    empty = next(index for index, turn in enumerate(gold) if not turn)
    gold[empty] = [READ_ONLY_CALLS[question.multi_turn["environment"]["involved_classes"][0]]]
    scores = _scores([_row(question, _texts(gold))])[question.example_id]
    assert scores["bfcl_multi_turn_accuracy"] == (0, 1)
    assert scores["bfcl_multi_turn_leaderboard_accuracy"] == (1, 1)
    assert scores["bfcl_leaderboard_accuracy"] == (1, 1)
    turns = len(gold)
    assert scores["bfcl_turn_accuracy"] == (turns - 1, turns)


def test_an_undecodable_step_and_a_cut_short_trajectory_are_scored_as_they_stand() -> None:
    question = _question("multi_turn_base", lambda gold: len(gold) >= 2 and all(gold))
    texts = _texts(gold_of(question))
    broken = (('[{"name": ', *texts[0]), *texts[1:])  # a step that fails to decode first
    cut = texts[:1]  # the loop's forced quit: later turns never happen
    scores = _scores([_row(question, broken)])[question.example_id]
    assert scores["bfcl_decode_rate"] == (0, 1)
    assert scores["bfcl_multi_turn_accuracy"] == (1, 1)  # BFCL skips a step that did not decode
    turns = len(texts)
    cut_scores = _scores([_row(question, cut)])[question.example_id]
    assert cut_scores["bfcl_turn_accuracy"] == (1, turns)
    assert cut_scores["bfcl_multi_turn_accuracy"] == (0, 1)
    assert cut_scores["bfcl_step_budget_used"] == (len(texts[0]), 21 * turns)


def test_a_mixed_split_counts_single_turn_rows_in_no_multi_turn_metric() -> None:
    question = _question("multi_turn_base", all)
    single = AnsweredExample(
        example_id="simple_python_0",
        language="en",
        source_example_id=None,
        gold_call=None,
        raw_text='[{"name": "get_weather", "arguments": {"city": "Paris"}}]',
        gold_calls=(KEY,),
        slice_values=(("category", "simple_python"),),
    )
    multi = _row(question, _texts(gold_of(question)))
    scores = _scores([single, multi])
    assert all(scores["simple_python_0"][name] == (0, 0) for name in BFCL_MULTI_TURN_METRIC_NAMES)
    assert all(scores["simple_python_0"][name] == (1, 1) for name in BFCL_METRIC_NAMES)
    alone = score_completions([single], bootstrap=SETTINGS, gap_scope="base", scoring="bfcl")
    assert alone.metric_names == BFCL_METRIC_NAMES  # no multi-turn row: the report is as before


def test_a_multi_turn_row_without_a_trajectory_or_in_another_mode_is_refused() -> None:
    question = _question("multi_turn_base", all)
    row = _row(question, _texts(gold_of(question)))
    with pytest.raises(Exception, match="one text; score a trajectory"):
        _scores([AnsweredExample(**{**_fields(row), "turns": None})])
    with pytest.raises(Exception, match="cannot score; score them with --scoring bfcl"):
        score_completions([row], bootstrap=SETTINGS, gap_scope="base", scoring="calls")


def _fields(row: AnsweredExample) -> dict[str, Any]:
    return {name: getattr(row, name) for name in AnsweredExample.__slots__}
