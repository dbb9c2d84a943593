"""The multi-turn checker: BFCL's rules, per-turn verdicts, and agreement with BFCL's own checker.

BFCL's ``multi_turn_checker`` (and ``multi_turn_irrelevance_checker``) are
loaded from the installed ``bfcl-eval`` in test code only
(``tests/support/bfcl_multi_turn.py``) and run on trajectories derived from
the ground truth of BFCL's questions: the ground truth itself, a call
dropped, an extra read-only call, a wrong argument, independent calls
reordered, a turn ended early, a call where the turn expects none, a call to
a function not yet offered. ``leaderboard_passed`` must equal BFCL's checker,
``passed`` its checker and its irrelevance checker together. The fast test
takes ten questions per category (40); the slow one all 800.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from sommelier_mlflow.errors import DataError
from sommelier_mlflow.toolcalls import (
    BFCL_STEP_LIMIT,
    BfclSandbox,
    MultiTurnVerdict,
    check_trajectory,
    gold_turn_calls,
)
from sommelier_mlflow.toolcalls._bfcl_multi_turn import _missing
from tests.support.bfcl_multi_turn import (
    MULTI_TURN_CATEGORIES,
    READ_ONLY_CALLS,
    BfclMultiTurnReference,
    MultiTurnQuestion,
    Trajectory,
    derived_trajectories,
    multi_turn_questions,
    require_bfcl,
)


@pytest.fixture(scope="module", autouse=True)
def _bfcl_installed() -> None:
    require_bfcl()


@pytest.fixture(scope="module")
def sandbox() -> Iterator[BfclSandbox]:
    with BfclSandbox() as opened:
        yield opened


@pytest.fixture(scope="module")
def questions() -> dict[str, list[MultiTurnQuestion]]:
    return {category: multi_turn_questions(category) for category in MULTI_TURN_CATEGORIES}


def _ground_truth(question: MultiTurnQuestion) -> Trajectory:
    return [[[call] for call in turn] for turn in gold_turn_calls(question)]


def _with_empty_turn(questions: Sequence[MultiTurnQuestion]) -> tuple[MultiTurnQuestion, int]:
    question = next(q for q in questions if any(not turn for turn in q.ground_truth))
    return question, next(i for i, turn in enumerate(question.ground_truth) if not turn)


def test_the_ground_truth_passes_every_turn(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    question = questions["multi_turn_base"][0]
    verdict = check_trajectory(sandbox, question, _ground_truth(question))
    turns = len(question.ground_truth)
    calls = sum(len(turn) for turn in question.ground_truth)
    assert verdict == MultiTurnVerdict(True, True, (True,) * turns, None, None, calls, calls)


def test_a_call_where_the_ground_truth_expects_none_fails_only_this_products_verdict(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    question, empty = _with_empty_turn(questions["multi_turn_miss_param"])
    turns = _ground_truth(question)
    turns[empty] = [[READ_ONLY_CALLS[question.question["involved_classes"][0]]]]
    verdict = check_trajectory(sandbox, question, turns)
    assert verdict.leaderboard_passed  # BFCL's eval_runner never applies its irrelevance rule
    assert not verdict.passed
    assert verdict.failure_rule == "irrelevance"
    assert verdict.failure is not None and verdict.failure.startswith(f"turn {empty}: irrelevance")
    assert [i for i, ok in enumerate(verdict.turns_passed) if not ok] == [empty]


def test_a_wrong_turn_is_named_and_later_turns_are_judged_on_the_diverged_state(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    question = questions["multi_turn_miss_func"][0]  # cd, mkdir, mv in turn 0; then grep...
    turns = _ground_truth(question)
    turns[0] = turns[0][:2]  # never moves the report
    verdict = check_trajectory(sandbox, question, turns)
    assert not verdict.passed and not verdict.leaderboard_passed
    assert verdict.failure == "turn 0: state_mismatch (GorillaFileSystem.root)"
    assert verdict.turns_passed[0] is False
    # The empty-gold turn 2 still passes on its own; the file-system turns do not.
    assert verdict.turns_passed[2] is True
    assert verdict.turns_passed[1] is False


def test_results_gathered_in_earlier_turns_count(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    # multi_turn_base_0: turn 2's ground truth is one read-only call, sort(...).
    question = questions["multi_turn_base"][0]
    turns = _ground_truth(question)
    sort = turns[2]
    pwd = [[READ_ONLY_CALLS["GorillaFileSystem"]]]
    turns[1], turns[2] = turns[1] + sort, pwd  # sorted one turn early, then only pwd
    assert check_trajectory(sandbox, question, turns).passed
    turns[1] = turns[1][:-1]  # sort's result never produced
    verdict = check_trajectory(sandbox, question, turns)
    assert verdict.failure == "turn 2: missing_results (1 ground-truth result(s) never produced)"


def test_each_ground_truth_result_takes_one_model_result() -> None:
    assert _missing(["a", "a", "b"], Counter({"a": 1, "b": 3})) == ["a"]
    assert _missing(["a", "a"], Counter({"a": 2})) == []


def test_a_trajectory_cut_short_fails_the_turns_it_never_reached(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    question = questions["multi_turn_base"][0]
    turns = _ground_truth(question)[:1]
    verdict = check_trajectory(sandbox, question, turns)
    assert verdict.turns_passed == (True,) + (False,) * (len(question.ground_truth) - 1)
    assert verdict.failure_rule == "force_terminated"
    assert not verdict.leaderboard_passed
    with pytest.raises(DataError, match="the trajectory has"):
        check_trajectory(sandbox, question, [*_ground_truth(question), []])


def test_more_calling_steps_than_bfcls_limit_fail_only_this_products_verdict(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    question = questions["multi_turn_base"][0]
    turns = _ground_truth(question)
    read_only = READ_ONLY_CALLS[question.question["involved_classes"][0]]
    turns[-1] = turns[-1] + [[read_only]] * (BFCL_STEP_LIMIT + 1 - len(turns[-1]))
    verdict = check_trajectory(sandbox, question, turns)
    assert verdict.leaderboard_passed  # BFCL checks a last turn its runner cut as usual
    assert verdict.failure_rule == "step_limit" and not verdict.passed
    turns[-1] = turns[-1][:BFCL_STEP_LIMIT]
    assert check_trajectory(sandbox, question, turns).passed


def test_steps_without_calls_are_skipped_and_counted_for_the_decode_rate(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    question = questions["multi_turn_base"][0]
    turns: list[list[Any]] = [list(turn) for turn in _ground_truth(question)]
    turns[0] = [None, [], *turns[0], None]
    verdict = check_trajectory(sandbox, question, turns)
    assert verdict.passed
    calls = sum(len(turn) for turn in question.ground_truth)
    assert (verdict.steps, verdict.decoded_steps) == (calls + 3, calls + 1)
    only_empty: list[list[Any]] = [[None, []] for _ in question.ground_truth]
    verdict = check_trajectory(sandbox, question, only_empty)
    assert verdict.failure == "turn 0: empty_turn (no call where the ground truth makes some)"


def test_an_example_without_multi_turn_data_is_refused(sandbox: BfclSandbox) -> None:
    @dataclass
    class Plain:
        example_id: str = "simple_0"
        multi_turn: Any = None

    with pytest.raises(DataError, match=r"simple_0.*not a BFCL multi-turn question"):
        check_trajectory(sandbox, Plain(), [])


def _agreement(
    sandbox: BfclSandbox, questions: Sequence[MultiTurnQuestion]
) -> tuple[Counter[str], list[str]]:
    reference = BfclMultiTurnReference()
    counts: Counter[str] = Counter()
    disagreements = []
    for question in questions:
        for variant, turns in derived_trajectories(question, gold_turn_calls(question)):
            ours = check_trajectory(sandbox, question, turns)
            leaderboard, relevant = reference.verdict(question, turns)
            counts[f"{variant} total"] += 1
            counts[f"{variant} leaderboard agrees"] += ours.leaderboard_passed == leaderboard
            counts[f"{variant} passed agrees"] += ours.passed == (leaderboard and relevant)
            counts[f"{variant} BFCL leaderboard passes"] += leaderboard
            counts[f"{variant} passed"] += ours.passed
            if ours.leaderboard_passed != leaderboard or ours.passed != (leaderboard and relevant):
                disagreements.append(
                    f"{question.example_id} {variant}: BFCL {leaderboard}/{relevant}, ours {ours}"
                )
    return counts, disagreements


def _report(counts: Counter[str]) -> str:
    variants = sorted({key.rsplit(" total", 1)[0] for key in counts if key.endswith(" total")})
    return "\n".join(
        f"{variant}: {counts[f'{variant} leaderboard agrees']}/{counts[f'{variant} total']} "
        f"leaderboard verdicts agree, {counts[f'{variant} passed agrees']} with the irrelevance "
        f"rule; BFCL passes {counts[f'{variant} BFCL leaderboard passes']}, "
        f"this product {counts[f'{variant} passed']}"
        for variant in variants
    )


def test_verdicts_agree_with_bfcls_checker_on_a_sample(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    # Every twentieth question of each category, from the second: all variants occur.
    sample = [q for category in MULTI_TURN_CATEGORIES for q in questions[category][1::20]]
    counts, disagreements = _agreement(sandbox, sample)
    print("\n" + _report(counts))
    assert disagreements == []
    assert counts["ground_truth total"] == 40
    # Every variant is exercised, and the checks are not vacuous: the ground
    # truth passes, a dropped call never does.
    assert {key.rsplit(" ", 1)[0] for key in counts if key.endswith(" total")} == {
        "ground_truth",
        "call_dropped",
        "extra_read_only_call",
        "wrong_argument",
        "independent_calls_reordered",
        "turn_ended_early",
        "call_where_none_expected",
        "call_not_yet_offered",
    }
    assert counts["ground_truth passed"] == 40 and counts["call_dropped passed"] == 0


@pytest.mark.slow
def test_verdicts_agree_with_bfcls_checker_on_all_800_questions(
    sandbox: BfclSandbox, questions: dict[str, list[MultiTurnQuestion]]
) -> None:
    every = [q for category in MULTI_TURN_CATEGORIES for q in questions[category]]
    counts, disagreements = _agreement(sandbox, every)
    print("\n" + _report(counts))
    assert disagreements == []
    assert counts["ground_truth total"] == 800
    assert sum(counts[key] for key in counts if key.endswith(" total")) == 4525
