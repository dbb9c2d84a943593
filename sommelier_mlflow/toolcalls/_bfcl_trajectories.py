"""Scoring BFCL's multi-turn questions: each trajectory decoded, executed and checked.

A multi-turn row (``import-bfcl --category multi_turn_*``) is answered by a
trajectory: per user turn, the model's raw output at each step. Scoring
decodes every step with the run's output format, offering the tools the
question offers at that turn (the row's tools plus those ``added_tools``
brings at or before it), and hands the decoded calls to BFCL's rules
(:func:`~sommelier_mlflow.toolcalls._bfcl_multi_turn.check_trajectory`), which
run them, and the ground truth, against fresh instances of BFCL's classes in
one sandbox worker. A step that fails to decode makes no call (BFCL skips such
a step too) and fails the question's ``bfcl_decode_rate``; a turn whose steps
ran out while the last step still called is judged as it stands.

The metrics, exact counts, ``(0, 0)`` on a single-turn row:

- ``bfcl_multi_turn_accuracy``: the question passed, BFCL's rules plus the
  irrelevance rule (a turn whose ground truth is empty must make no call);
- ``bfcl_turn_accuracy``: turns passed, out of the question's turns;
- ``bfcl_multi_turn_leaderboard_accuracy``: what BFCL 2026.3.23's leaderboard
  concludes (without the irrelevance rule), so the difference is counted;
- ``bfcl_step_budget_used``: steps taken out of the step limit of every turn
  (value x 20 is the mean steps per turn: a diagnostic, not a score).

On a multi-turn row ``bfcl_ast_accuracy`` (the mode's per-question pass, and
McNemar's outcome) and ``bfcl_leaderboard_accuracy`` take the question's two
verdicts, so the exact test compares questions, single- and multi-turn alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import attrgetter
from typing import Any, Final

from sommelier_mlflow.errors import InputError
from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._modes import (
    Parsed,
    Tools,
    TrajectoryJudge,
    TrajectoryRow,
    TrajectoryScoring,
)
from sommelier_mlflow.toolcalls._registry import ScoringMetric

__all__ = [
    "BFCL_MULTI_TURN_METRIC_NAMES",
    "NOT_MULTI_TURN",
    "BfclTrajectoryComparison",
    "step_limit",
    "decode_trajectory",
    "BFCL_TRAJECTORIES",
]

#: The metrics a split with multi-turn rows adds, in report order.
BFCL_MULTI_TURN_METRIC_NAMES: Final = (
    "bfcl_multi_turn_accuracy",
    "bfcl_turn_accuracy",
    "bfcl_multi_turn_leaderboard_accuracy",
    "bfcl_step_budget_used",
)
#: A multi-turn metric's component on a row it does not apply to.
NOT_MULTI_TURN: Final = (0, 0)
_FAILED: Final = frozenset({"invalid_json", "invalid_shape"})
_PASS: Final = {True: (1, 1), False: (0, 1)}


def step_limit() -> int:
    """BFCL's step limit per turn (``MAXIMUM_STEP_LIMIT``), from the execution core."""
    from sommelier_mlflow.toolcalls._bfcl_exec import BFCL_STEP_LIMIT

    return int(BFCL_STEP_LIMIT)


class _Outcome:
    """A question's two verdicts where the single-turn metrics read them (``verdict.*``)."""

    __slots__ = ("bfcl_passed_component", "passed_component")

    def __init__(self, passed: bool, leaderboard: bool) -> None:
        self.passed_component = _PASS[passed]
        self.bfcl_passed_component = _PASS[leaderboard]


def decode_trajectory(
    row: TrajectoryRow, read: Callable[[str, Tools], Parsed], step_limit: int
) -> tuple[CallsParseResult, list[list[tuple[dict[str, Any], ...]]], int]:
    """Decode every step of a row's trajectory with the tools offered at its turn.

    Returns:
        The row's parse (``ok`` with every call in order, or the first failing
        step's status), the decoded calls per turn and step, and the step count.

    Raises:
        InputError: No trajectory, a turn count other than the question's, or
            a turn of more steps than the step limit (exit 2).
    """
    multi = row.multi_turn or {}
    turns = row.turns
    user_turns = multi.get("user_turns", ())
    if turns is None:
        raise InputError(
            f"example {row.example_id!r} is a multi-turn question but its output is one text; "
            "score a trajectory: generate it with the execution loop or give "
            '{"example_id", "turns": [[step texts], ...]} rows to score --precomputed'
        )
    if len(turns) != len(user_turns):
        raise InputError(
            f"example {row.example_id!r}: the trajectory has {len(turns)} turn(s) but the "
            f"question has {len(user_turns)} user turns; give one list of step outputs per turn"
        )
    added: Mapping[str, Sequence[Mapping[str, Any]]] = multi.get("added_tools", {})
    tools: list[Mapping[str, Any]] = list(row.tools)
    failed: str | None = None
    every: list[dict[str, Any]] = []
    decoded: list[list[tuple[dict[str, Any], ...]]] = []
    steps = 0
    for index, texts in enumerate(turns):
        tools += added.get(str(index), ())
        if len(texts) > step_limit:
            raise InputError(
                f"example {row.example_id!r}: turn {index} has {len(texts)} steps, more than "
                f"BFCL's step limit ({step_limit}); the execution loop ends a turn there"
            )
        steps += len(texts)
        turn: list[tuple[dict[str, Any], ...]] = []
        for text in texts:
            parsed = read(text, tools)
            calls = parsed.calls if isinstance(parsed, CallsParseResult) else None
            if parsed.status in _FAILED:
                failed = failed or parsed.status
            calls = tuple(calls or ())
            every.extend(calls)
            turn.append(calls)
        decoded.append(turn)
    parse = CallsParseResult(failed) if failed else CallsParseResult("ok", tuple(every))
    return parse, decoded, steps


class BfclTrajectoryComparison:
    """One multi-turn question judged: every component its metrics read.

    Attributes:
        decoded_component: ``(1, 1)`` when every step decoded, else ``(0, 1)``.
        verdict: The question's verdicts where ``bfcl_ast_accuracy`` and
            ``bfcl_leaderboard_accuracy`` read them.
        multi_turn_component: The question passed (irrelevance rule included).
        turn_component: ``(turns passed, turns)``.
        multi_turn_leaderboard_component: BFCL's leaderboard verdict.
        steps_component: ``(steps, step limit x turns)``.
        failure: The first failing rule and turn, ``None`` when it passed.
    """

    __slots__ = (
        "decoded_component",
        "failure",
        "multi_turn_component",
        "multi_turn_leaderboard_component",
        "steps_component",
        "turn_component",
        "verdict",
    )

    def __init__(self, verdict: Any, decoded: bool, steps: int, step_limit: int) -> None:
        turns: tuple[bool, ...] = tuple(verdict.turns_passed)
        self.decoded_component = _PASS[decoded]
        self.verdict = _Outcome(bool(verdict.passed), bool(verdict.leaderboard_passed))
        self.multi_turn_component = _PASS[bool(verdict.passed)]
        self.turn_component = (sum(turns), len(turns))
        self.multi_turn_leaderboard_component = _PASS[bool(verdict.leaderboard_passed)]
        self.steps_component = (steps, step_limit * len(turns))
        self.failure: str | None = verdict.failure


@contextmanager
def _open_sandbox() -> Iterator[TrajectoryJudge]:
    """One sandbox worker for one scoring call; the judge runs every row in it."""
    from sommelier_mlflow.toolcalls._bfcl_exec import BfclSandbox
    from sommelier_mlflow.toolcalls._bfcl_multi_turn import check_trajectory

    limit = step_limit()

    def judge(
        row: TrajectoryRow, read: Callable[[str, Tools], Parsed]
    ) -> tuple[Parsed, BfclTrajectoryComparison]:
        parse, decoded, steps = decode_trajectory(row, read, limit)
        verdict = check_trajectory(sandbox, row, decoded)
        comparison = BfclTrajectoryComparison(verdict, parse.status == "ok", steps, limit)
        return parse, comparison

    with BfclSandbox() as sandbox:
        yield judge


#: How the ``bfcl`` mode scores multi-turn rows (see the module docstring).
BFCL_TRAJECTORIES: Final = TrajectoryScoring(
    metrics=(
        ScoringMetric(
            "bfcl_multi_turn_accuracy",
            "Multi-turn questions passed by BFCL's rules, executed, plus the irrelevance rule "
            "(a turn whose ground truth makes no call must make none).",
            attrgetter("multi_turn_component"),
        ),
        ScoringMetric(
            "bfcl_turn_accuracy",
            "Turns of multi-turn questions passed (state, response and irrelevance checks).",
            attrgetter("turn_component"),
        ),
        ScoringMetric(
            "bfcl_multi_turn_leaderboard_accuracy",
            "Multi-turn questions BFCL 2026.3.23's leaderboard passes (its rules without the "
            "irrelevance rule).",
            attrgetter("multi_turn_leaderboard_component"),
        ),
        ScoringMetric(
            "bfcl_step_budget_used",
            "Steps taken out of BFCL's step limit for every turn (value x the limit is the "
            "mean steps per turn; a diagnostic, not a score).",
            attrgetter("steps_component"),
        ),
    ),
    open=_open_sandbox,
)
