"""BFCL's multi-turn checking rules, re-implemented on executed trajectories.

A trajectory is what the model did in each user turn: a list of steps, each
the calls decoded from one output. The model's calls and the ground truth's
run in two environments of a :class:`~sommelier_mlflow.toolcalls._bfcl_exec.BfclSandbox`
built from the same initial configuration, turn after turn, and each turn is
judged by BFCL's rules (``multi_turn_checker`` of bfcl-eval 2026.3.23; this
module never imports it):

- steps that decoded to no call (or did not decode) do not count; a turn
  whose steps made no call is *empty*;
- a turn with ground-truth calls fails when the model's turn is empty
  (``empty_turn``); otherwise when any involved instance's public state (its
  attributes not starting with ``_``, compared with ``==``) differs from the
  ground truth's after the turn (``state_mismatch``); otherwise when some
  result of the turn's ground-truth calls is missing from the model's results
  of every turn so far (``missing_results``: a multiset, each ground-truth
  result taking one model result, in any order);
- a turn whose ground truth is empty (``miss_param``, ``miss_func``: the
  model should see it cannot act) is not checked by BFCL's leaderboard; this
  product also fails it when the model made any call (``irrelevance``, BFCL's
  ``multi_turn_irrelevance_checker``, which BFCL 2026.3.23's ``eval_runner``
  imports but never calls). The model's calls there still run, so later
  turns see their effects;
- every turn the trajectory does not reach fails (``force_terminated``:
  BFCL's runner stops a question once a turn has made calls in more than
  ``BFCL_STEP_LIMIT`` steps);
- this product also fails a turn where the model made calls in more than
  ``BFCL_STEP_LIMIT`` steps (``step_limit``). BFCL's leaderboard does not:
  when its runner stops the *last* turn there, every turn is present and it
  checks them as usual.

The question passes when every turn passes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from sommelier_mlflow.errors import DataError
from sommelier_mlflow.toolcalls._bfcl_exec import BFCL_STEP_LIMIT, BfclSandbox, parse_gold_call

__all__ = [
    "MULTI_TURN_FAILURE_RULES",
    "MultiTurnExample",
    "MultiTurnVerdict",
    "gold_turn_calls",
    "check_trajectory",
]

#: Why a turn fails, in the order the rules are applied within a turn.
MULTI_TURN_FAILURE_RULES: Final = (
    "force_terminated",
    "step_limit",
    "empty_turn",
    "state_mismatch",
    "missing_results",
    "irrelevance",
)
# Rules BFCL's leaderboard applies.
_LEADERBOARD_RULES: Final = frozenset(MULTI_TURN_FAILURE_RULES) - {"irrelevance", "step_limit"}

#: One step: the calls decoded from one output, ``None`` when it did not decode.
Step = Sequence[Mapping[str, Any]] | None


class MultiTurnExample(Protocol):
    """What the checker reads of a test example (a ``TestExample`` with ``multi_turn``)."""

    @property
    def example_id(self) -> str:
        """The question's id."""

    @property
    def multi_turn(self) -> Mapping[str, Any] | None:
        """``user_turns``, ``added_tools``, ``gold_turns`` and ``environment``."""


@dataclass(frozen=True)
class MultiTurnVerdict:
    """One trajectory judged turn by turn.

    Attributes:
        passed: Every turn passed, the irrelevance rule included (this
            product's ``bfcl_multi_turn_accuracy``).
        leaderboard_passed: Every turn passed BFCL's leaderboard rules (all
            but ``irrelevance`` and ``step_limit``), as BFCL 2026.3.23's
            ``eval_runner`` scores.
        turns_passed: Per turn of the question, whether that turn's own checks
            passed (the irrelevance rule included), given everything the model
            and the ground truth did before it: the states carry over, and the
            results the model gathered so far count. A turn after a failed one
            is still judged (usually failing, as the states have diverged); a
            turn the trajectory does not reach fails. ``sum / len`` is the
            turn accuracy.
        failure: The first failing turn and rule, with a detail
            (``"turn 2: state_mismatch (GorillaFileSystem.root)"``); ``None``
            when ``passed``.
        failure_rule: That rule alone (one of :data:`MULTI_TURN_FAILURE_RULES`).
        steps: The model's steps over all turns (outputs produced).
        decoded_steps: Those whose output decoded (to calls or to none):
            ``decoded_steps / steps`` is the decode rate, ``steps`` over the
            turns reached the mean steps per turn.
    """

    passed: bool
    leaderboard_passed: bool
    turns_passed: tuple[bool, ...]
    failure: str | None
    failure_rule: str | None
    steps: int
    decoded_steps: int


def _multi_turn(example: MultiTurnExample) -> Mapping[str, Any]:
    multi_turn = example.multi_turn
    if not isinstance(multi_turn, Mapping) or not isinstance(
        multi_turn.get("environment"), Mapping
    ):
        raise DataError(
            f"example {example.example_id!r} is not a BFCL multi-turn question "
            "(no 'multi_turn' with an 'environment'); import it with "
            "`sommelier-mlflow import-bfcl --category multi_turn_*`"
        )
    return multi_turn


def gold_turn_calls(example: MultiTurnExample) -> tuple[tuple[dict[str, Any], ...], ...]:
    """The example's ground truth, per turn, as decoded calls (see ``parse_gold_call``).

    Raises:
        DataError: The example has no multi-turn ground truth, or a string of
            it is not a literal call of an involved class's method.
    """
    multi_turn = _multi_turn(example)
    turns = multi_turn.get("gold_turns")
    if not isinstance(turns, list) or not all(isinstance(turn, list) for turn in turns):
        raise DataError(f"example {example.example_id!r}: 'gold_turns' must be a list of lists")
    environment = multi_turn["environment"]
    try:
        return tuple(tuple(parse_gold_call(text, environment) for text in turn) for turn in turns)
    except DataError as exc:
        raise DataError(f"example {example.example_id!r}: {exc}") from exc


def _missing(expected: Sequence[str], gathered: Counter[str]) -> list[str]:
    left = Counter(gathered)
    missing = []
    for result in expected:
        if left[result]:
            left[result] -= 1
        else:
            missing.append(result)
    return missing


def check_trajectory(
    sandbox: BfclSandbox,
    example: MultiTurnExample,
    model_turns: Sequence[Sequence[Step]],
) -> MultiTurnVerdict:
    """Judge a model's trajectory on one multi-turn question by BFCL's rules (module doc).

    The model's calls run once, in their own environment; the ground truth in
    another; both are discarded at the end.

    Args:
        sandbox: An open sandbox.
        example: The question (its ``multi_turn`` field, as ``import-bfcl`` writes it).
        model_turns: ``model_turns[turn][step]``: the calls decoded from that
            step's output (``{"name", "arguments"}``), ``None`` if it did not
            decode. Fewer turns than the question has: the run was cut short.

    Raises:
        DataError: More turns than the question has, or a malformed example.
    """
    gold = gold_turn_calls(example)
    environment = _multi_turn(example)["environment"]
    if len(model_turns) > len(gold):
        raise DataError(
            f"example {example.example_id!r}: the trajectory has {len(model_turns)} turns, "
            f"the question {len(gold)}"
        )
    model_key = f"check/{example.example_id}/model"
    gold_key = f"check/{example.example_id}/gold"
    gathered: Counter[str] = Counter()
    failures: list[list[tuple[str, str]]] = []  # per turn: (rule, detail) of each broken rule
    steps = decoded = 0
    try:
        sandbox.open(model_key, environment)
        sandbox.open(gold_key, environment)
        for index, gold_calls in enumerate(gold):
            if index >= len(model_turns):
                failures.append([("force_terminated", "the trajectory stops before this turn")])
                continue
            calling = 0
            for step in model_turns[index]:
                steps += 1
                decoded += step is not None
                if step:
                    calling += 1
                    gathered.update(sandbox.execute(model_key, step))
            expected = sandbox.execute(gold_key, gold_calls)
            failures.append(
                _turn_failures(
                    sandbox, (model_key, gold_key), gold_calls, calling, expected, gathered
                )
            )
    finally:
        sandbox.discard(model_key)
        sandbox.discard(gold_key)
    first = next(((index, *broken[0]) for index, broken in enumerate(failures) if broken), None)
    return MultiTurnVerdict(
        passed=first is None,
        leaderboard_passed=not any(
            rule in _LEADERBOARD_RULES for broken in failures for rule, _ in broken
        ),
        turns_passed=tuple(not broken for broken in failures),
        failure=None if first is None else f"turn {first[0]}: {first[1]} ({first[2]})",
        failure_rule=None if first is None else first[1],
        steps=steps,
        decoded_steps=decoded,
    )


def _turn_failures(
    sandbox: BfclSandbox,
    keys: tuple[str, str],
    gold_calls: Sequence[Mapping[str, Any]],
    calling_steps: int,
    expected: Sequence[str],
    gathered: Counter[str],
) -> list[tuple[str, str]]:
    """The rules one turn breaks, each with a detail, in rule order (BFCL's: the first only)."""
    broken = []
    if calling_steps > BFCL_STEP_LIMIT:
        broken.append(("step_limit", f"calls in {calling_steps} steps, over {BFCL_STEP_LIMIT}"))
    if not gold_calls:
        if calling_steps:
            broken.append(("irrelevance", "calls where the ground truth makes none"))
        return broken
    if not calling_steps:
        broken.append(("empty_turn", "no call where the ground truth makes some"))
        return broken
    difference = sandbox.state_difference(*keys)
    if difference is not None:
        broken.append(("state_mismatch", difference))
        return broken
    missing = _missing(expected, gathered)
    if missing:
        broken.append(("missing_results", f"{len(missing)} ground-truth result(s) never produced"))
    return broken
