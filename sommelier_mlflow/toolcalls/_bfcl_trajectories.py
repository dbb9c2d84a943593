"""Scoring BFCL's multi-turn questions: each trajectory decoded, executed and checked.

A multi-turn row (``import-bfcl --category multi_turn_*``) is answered by a
trajectory: per user turn, the model's raw output at each step. Scoring
decodes every step with the run's output format, offering the tools the
question offers at that turn (the row's tools plus those ``added_tools``
brings at or before it), and hands the decoded calls to BFCL's rules
(:func:`~sommelier_mlflow.toolcalls._bfcl_multi_turn.check_trajectory`), which
run them, and the ground truth, against fresh instances of BFCL's classes in
one sandbox worker. A step that fails to decode makes no call (BFCL skips such
a step too) and fails the question's ``bfcl_decode_rate`` (a question decodes
when every step does); a turn whose steps ran out while the last step still
called is judged as it stands, and a trajectory that stops before the last
turn (the loop's forced quit) fails the turns it never reached.

The metrics, exact counts, ``(0, 0)`` on a single-turn row:

- ``bfcl_multi_turn_accuracy``: the question passed, BFCL's rules plus the
  irrelevance rule (a turn whose ground truth is empty must make no call);
- ``bfcl_turn_accuracy``: turns passed, out of the question's turns (a turn
  the trajectory never reached fails);
- ``bfcl_multi_turn_leaderboard_accuracy``: what BFCL 2026.3.23's leaderboard
  concludes (without the irrelevance rule), so the difference is counted;
- ``bfcl_step_budget_used``: steps taken out of the most a turn can take
  (BFCL's 20 calling steps and the one that ends the turn, 21; steps past it
  are not counted), so value x 21 is the mean steps per turn over the
  question's turns: a diagnostic, not a score.

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
from sommelier_mlflow.toolcalls._bfcl_exec import BFCL_STEP_LIMIT, BfclSandbox
from sommelier_mlflow.toolcalls._bfcl_multi_turn import MultiTurnVerdict, Step, check_trajectory
from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._modes import (
    Parsed,
    Tools,
    TrajectoryJudge,
    TrajectoryRow,
    TrajectoryScoring,
)
from sommelier_mlflow.toolcalls._parse import ParseStatus
from sommelier_mlflow.toolcalls._registry import ScoringMetric

__all__ = [
    "BFCL_MULTI_TURN_METRIC_NAMES",
    "NOT_MULTI_TURN",
    "BfclTrajectoryMatch",
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


class _Outcome:
    """A question's two verdicts where the single-turn metrics read them (``verdict.*``)."""

    __slots__ = ("bfcl_passed_component", "passed_component")

    def __init__(self, passed: bool, leaderboard: bool) -> None:
        self.passed_component = _PASS[passed]
        self.bfcl_passed_component = _PASS[leaderboard]


def decode_trajectory(
    row: TrajectoryRow, read: Callable[[str, Tools], Parsed]
) -> tuple[CallsParseResult, list[list[Step]]]:
    """Decode every step of a row's trajectory with the tools offered at its turn.

    The tools of turn ``i`` are the row's plus every ``added_tools`` entry up
    to ``i``, as the execution loop offers them.

    Returns:
        The row's parse (``ok`` with every call in order, or the first failing
        step's status) and, per turn and step, the decoded calls (``None``
        for a step that did not decode), as the checker reads them.

    Raises:
        InputError: The row has no trajectory (exit 2).
    """
    turns = row.turns
    if turns is None:
        raise InputError(
            f"example {row.example_id!r} is a multi-turn question but its output is one text; "
            "score a trajectory: generate it with the execution loop or give "
            '{"example_id", "turns": [[step texts], ...]} rows to score --precomputed'
        )
    added: Mapping[str, Sequence[Mapping[str, Any]]] = (row.multi_turn or {}).get("added_tools", {})
    tools: list[Mapping[str, Any]] = list(row.tools)
    failed: ParseStatus | None = None
    every: list[dict[str, Any]] = []
    decoded: list[list[Step]] = []
    for index, texts in enumerate(turns):
        tools += added.get(str(index), ())
        turn: list[Step] = []
        for text in texts:
            parsed = read(text, tools)
            if parsed.status in _FAILED:
                failed = failed or parsed.status
                turn.append(None)
                continue
            calls = tuple(parsed.calls or ()) if isinstance(parsed, CallsParseResult) else ()
            every.extend(calls)
            turn.append(calls)
        decoded.append(turn)
    parse = CallsParseResult(failed) if failed else CallsParseResult("ok", tuple(every))
    return parse, decoded


class BfclTrajectoryMatch:
    """One multi-turn question judged: every component its metrics read.

    Attributes:
        decoded_component: ``(1, 1)`` when every step decoded, else ``(0, 1)``.
        verdict: The question's verdicts where ``bfcl_ast_accuracy`` and
            ``bfcl_leaderboard_accuracy`` read them.
        multi_turn_component: The question passed (irrelevance rule included).
        turn_component: ``(turns passed, turns)``.
        multi_turn_leaderboard_component: BFCL's leaderboard verdict.
        steps_component: ``(steps, (step limit + 1) x turns)``, steps past
            the most a turn can take not counted.
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

    def __init__(self, verdict: MultiTurnVerdict, steps: Sequence[int], step_limit: int) -> None:
        turns = verdict.turns_passed
        most = step_limit + 1  # the loop's calling steps, then the step that ends the turn
        self.decoded_component = _PASS[verdict.decoded_steps == verdict.steps]
        self.verdict = _Outcome(bool(verdict.passed), bool(verdict.leaderboard_passed))
        self.multi_turn_component = _PASS[bool(verdict.passed)]
        self.turn_component = (sum(turns), len(turns))
        self.multi_turn_leaderboard_component = _PASS[bool(verdict.leaderboard_passed)]
        self.steps_component = (sum(min(count, most) for count in steps), most * len(turns))
        self.failure: str | None = verdict.failure


@contextmanager
def _open_sandbox() -> Iterator[TrajectoryJudge]:
    """One sandbox worker for one scoring call; the judge runs every row in it."""
    limit = BFCL_STEP_LIMIT

    def judge(
        row: TrajectoryRow, read: Callable[[str, Tools], Parsed]
    ) -> tuple[Parsed, BfclTrajectoryMatch]:
        parse, decoded = decode_trajectory(row, read)
        verdict = check_trajectory(sandbox, row, decoded)
        steps = [len(turn) for turn in decoded]
        return parse, BfclTrajectoryMatch(verdict, steps, limit)

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
            "Steps taken out of the most a turn can take, BFCL's step limit plus the answer "
            "(value x 21 is the mean steps per turn; a diagnostic, not a score).",
            attrgetter("steps_component"),
        ),
    ),
    open=_open_sandbox,
)
