"""BFCL's multi-turn questions and its own multi-turn checker (test code only).

The product runs BFCL's API classes from the installed ``bfcl-eval`` and
re-implements the checking rules; these helpers give tests the questions as
the product's ``multi_turn`` examples, trajectories derived from the ground
truth (the ground truth itself and the mistakes a checker must catch), and
BFCL's own verdict on them: its ``multi_turn_checker`` and
``multi_turn_irrelevance_checker``, which ``eval`` call strings (fine here:
the strings are made by :func:`call_text` from literal values).
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.bfcl_reference import read_bfcl_category
from tests.support.programs import require

MULTI_TURN_CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)

Call = dict[str, Any]
Trajectory = list[list[list[Call]]]

# A call per class that reads and changes nothing BFCL compares or draws on.
READ_ONLY_CALLS: dict[str, Call] = {
    "GorillaFileSystem": {"name": "pwd", "arguments": {}},
    "MathAPI": {"name": "absolute_value", "arguments": {"number": -2.0}},
    "MessageAPI": {"name": "list_users", "arguments": {}},
    "TwitterAPI": {"name": "posting_get_login_status", "arguments": {}},
    "TicketAPI": {"name": "ticket_get_login_status", "arguments": {}},
    "TradingBot": {"name": "trading_get_login_status", "arguments": {}},
    "TravelAPI": {"name": "travel_get_login_status", "arguments": {}},
    "VehicleControlAPI": {"name": "gallon_to_liter", "arguments": {"gallon": 1.0}},
}


def require_bfcl() -> None:
    """Skip (fail under CI) when BFCL's package is not installed."""
    require(
        importlib.util.find_spec("bfcl_eval") is not None
        and importlib.util.find_spec("mpmath") is not None,
        "BFCL's package (`pip install --no-deps bfcl-eval==2026.3.23 mpmath`)",
    )


def bfcl_data_dir() -> Path:
    """The installed package's data folder."""
    spec = importlib.util.find_spec("bfcl_eval")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "data"


@dataclass(frozen=True)
class MultiTurnQuestion:
    """A BFCL multi-turn question in the shape the checker reads (``multi_turn`` as imported).

    ``added_tools`` is left empty: the checker does not read it.
    """

    example_id: str
    category: str
    multi_turn: Mapping[str, Any]
    question: Mapping[str, Any]
    ground_truth: list[list[str]]


def multi_turn_questions(category: str) -> list[MultiTurnQuestion]:
    """Every question of one multi-turn category with its ground truth."""
    out = []
    for question, ground_truth in read_bfcl_category(bfcl_data_dir(), category):
        environment = {
            "initial_config": question["initial_config"],
            "involved_classes": question["involved_classes"],
            "long_context": category == "multi_turn_long_context",
        }
        multi_turn = {
            "user_turns": question["question"],
            "added_tools": {},
            "gold_turns": ground_truth,
            "environment": environment,
        }
        out.append(MultiTurnQuestion(question["id"], category, multi_turn, question, ground_truth))
    return out


def call_text(call: Mapping[str, Any]) -> str:
    """A decoded call as the Python call string BFCL's checker evaluates."""
    arguments = ", ".join(f"{key}={value!r}" for key, value in call["arguments"].items())
    return f"{call['name']}({arguments})"


class BfclMultiTurnReference:
    """BFCL's own multi-turn checker, each verdict in fresh instances."""

    def __init__(self) -> None:
        package = "bfcl_eval.eval_checker.multi_turn_eval"
        self.checker = importlib.import_module(f"{package}.multi_turn_checker")
        self.utils = importlib.import_module(f"{package}.multi_turn_utils")
        self._names = itertools.count()

    def verdict(self, question: MultiTurnQuestion, turns: Trajectory) -> tuple[bool, bool]:
        """``(multi_turn_checker valid, multi_turn_irrelevance_checker valid)``.

        As BFCL's ``eval_runner`` does: steps without calls are dropped, and a
        trajectory with fewer turns than the question fails (force-terminated).
        """
        decoded = [[[call_text(c) for c in step] for step in turn if step] for turn in turns]
        if len(decoded) != len(question.ground_truth):
            return False, False
        # BFCL caches instances in module globals by model name and id: a fresh name each time.
        name = f"sommelier_agreement_{next(self._names)}"
        try:
            valid = self.checker.multi_turn_checker(
                decoded, question.ground_truth, dict(question.question), question.category, name
            )["valid"]
            relevant = self.checker.multi_turn_irrelevance_checker(decoded, question.ground_truth)[
                "valid"
            ]
        finally:
            cached = self.utils.__dict__
            for key in [key for key in cached if key.startswith(name)]:
                del cached[key]
        return bool(valid), bool(relevant)


def _wrong(value: Any) -> Any:
    if type(value) is bool:
        return not value
    if type(value) in (int, float):
        return value + 1
    if type(value) is str:
        return value + "_x"
    if type(value) is list:
        return [*value, value[0] if value else "x"]
    return "x"


def _first_busy_turn(gold: Sequence[Sequence[Call]], size: int = 1) -> int | None:
    return next((index for index, turn in enumerate(gold) if len(turn) >= size), None)


def _steps(turns: Sequence[Sequence[Call]]) -> Trajectory:
    """Each turn's calls one per step (all in one step where that would pass BFCL's step limit)."""
    from sommelier_mlflow.toolcalls import BFCL_STEP_LIMIT

    return [
        [[dict(call)] for call in turn] if len(turn) <= BFCL_STEP_LIMIT else [list(turn)]
        for turn in turns
    ]


def _class_of(name: str, question: MultiTurnQuestion) -> str:
    from sommelier_mlflow.toolcalls import BFCL_CLASS_MODULES

    for class_name in reversed(question.question["involved_classes"]):
        module = importlib.import_module(BFCL_CLASS_MODULES[class_name])
        if callable(getattr(getattr(module, class_name), name, None)):
            return str(class_name)
    return ""


def derived_trajectories(
    question: MultiTurnQuestion, gold: Sequence[Sequence[Call]]
) -> Iterator[tuple[str, Trajectory]]:
    """Named trajectories derived from the ground truth ``gold`` (decoded, per turn).

    Each turn's calls are made one per step (all in one step for the few turns
    with more calls than BFCL's step limit). Variants that do not apply to a
    question (no turn with two calls, no turn expecting none, no function held
    back or excluded) are left out.
    """

    def changed(turn: int, calls: list[Call]) -> Trajectory:
        turns = [list(calls_of_turn) for calls_of_turn in gold]
        turns[turn] = calls
        return _steps(turns)

    yield "ground_truth", _steps(gold)
    busy = _first_busy_turn(gold)
    if busy is not None:
        calls = list(gold[busy])
        yield "call_dropped", changed(busy, calls[: len(calls) // 2] + calls[len(calls) // 2 + 1 :])
        read_only = READ_ONLY_CALLS[question.question["involved_classes"][0]]
        yield "extra_read_only_call", changed(busy, [read_only, *calls])
        target = next((index for index, call in enumerate(calls) if call["arguments"]), None)
        if target is not None:
            arguments = dict(calls[target]["arguments"])
            key = next(iter(arguments))
            arguments[key] = _wrong(arguments[key])
            wrong = list(calls)
            wrong[target] = {"name": calls[target]["name"], "arguments": arguments}
            yield "wrong_argument", changed(busy, wrong)
    pair = _first_independent_pair(question, gold)
    if pair is not None:
        turn, index = pair
        swapped = list(gold[turn])
        swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
        yield "independent_calls_reordered", changed(turn, swapped)
    long = _first_busy_turn(gold, 2)
    if long is not None:
        yield "turn_ended_early", changed(long, list(gold[long][:1]))
    empty = next((index for index, turn in enumerate(gold) if not turn), None)
    if empty is not None:
        later = next((turn for turn in gold[empty:] if turn), None)
        call = later[0] if later else READ_ONLY_CALLS[question.question["involved_classes"][0]]
        yield "call_where_none_expected", changed(empty, [call])
    missed = question.question.get("missed_function") or {}
    excluded = question.question.get("excluded_function") or []
    if missed:
        (added_at, names), *_ = missed.items()
        later_calls = [c for turn in gold[int(added_at) :] for c in turn if c["name"] in names]
        call = later_calls[0] if later_calls else {"name": names[0], "arguments": {}}
        early = max(int(added_at) - 1, 0)
        yield "call_not_yet_offered", changed(early, [*gold[early], call])
    elif excluded:
        yield "call_not_yet_offered", changed(0, [*gold[0], {"name": excluded[0], "arguments": {}}])


def _first_independent_pair(
    question: MultiTurnQuestion, gold: Sequence[Sequence[Call]]
) -> tuple[int, int] | None:
    """The first adjacent pair of ground-truth calls to two different classes."""
    for turn_index, turn in enumerate(gold):
        for index in range(len(turn) - 1):
            first, second = turn[index]["name"], turn[index + 1]["name"]
            if _class_of(first, question) != _class_of(second, question):
                return turn_index, index
    return None
