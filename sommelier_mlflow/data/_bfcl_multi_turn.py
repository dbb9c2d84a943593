"""BFCL's multi-turn questions as split rows: the checks that need none of BFCL's classes.

A BFCL v4 multi-turn question (``BFCL_v4_multi_turn_<kind>.json``) holds an
``id``, the user's turns (``question``: one list of messages per turn; in
``miss_func`` one turn is ``[]``, the turn where held-back functions
arrive), the environment (``initial_config``: class name -> scenario, and
``involved_classes``), ``excluded_function`` (names never offered) and, in
``miss_func``, ``missed_function`` (turn index -> names held back until
then). Its possible answer holds, per turn, the expected calls as Python
call text (``"cd(folder='document')"``, sometimes positional:
``"sort('final_report.pdf')"``), ``[]`` where the model must not call.

The functions come from BFCL's ``multi_turn_func_doc/<file>.json``, one
file per class (:data:`BFCL_MULTI_TURN_FUNC_DOCS`), rewritten as JSON Schema
by :func:`~sommelier_mlflow.data._bfcl.bfcl_json_schema` like every other
BFCL doc. A question offers, from its first turn, its classes' functions
minus ``excluded_function`` minus the held-back ones, which join at their
turn (``multi_turn.added_tools``).

A question that cannot be played is skipped and counted with one reason
(:data:`BFCL_MULTI_TURN_DROP_REASONS`), in the order the checks run:

- ``unreadable_question``: turns that are not lists of user messages, an
  empty turn where no held-back function arrives (or a message in one where
  some do: BFCL's runner refuses both), an environment of the wrong shape;
- ``unknown_class``: an involved class with no function doc in the mapping;
- ``turn_count_mismatch``: the answer has another number of turns;
- ``unknown_held_back_function``: ``missed_function`` names a function its
  classes do not have (or an excluded one), or a turn the question does not have;
- ``unparsable_ground_truth``: an expected call that is not exactly one call
  of a function of the involved classes, with literal arguments, each keyword
  a parameter of that function, at most once (whether it is offered at that
  turn is not checked: BFCL's ``multi_turn_miss_func_49`` expects ``tail`` a
  turn before it is added, and stays in the split as BFCL scores it);
- ``initial_config_does_not_load`` and ``ground_truth_does_not_execute``:
  only with an execution check (``import_bfcl(check_multi_turn=...)``), which
  builds BFCL's classes and runs the ground truth: this module never does.

The text is parsed with :mod:`ast` and literals read with
:func:`ast.literal_eval`; nothing is evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sommelier_mlflow.data._multi_turn import multi_turn_problem, turn_index
from sommelier_mlflow.data._schemas import TEST_EXAMPLE_SCHEMA
from sommelier_mlflow.errors import DataError
from sommelier_mlflow.toolcalls import (
    BFCL_ERROR_PREFIX,
    BfclSandbox,
    gold_call_parts,
    parse_gold_call,
)

__all__ = [
    "BFCL_MULTI_TURN_CATEGORIES",
    "BFCL_MULTI_TURN_FUNC_DOCS",
    "BFCL_EXECUTION_DROP_REASONS",
    "BFCL_MULTI_TURN_DROP_REASONS",
    "MultiTurnProblem",
    "MultiTurnCheck",
    "execution_check",
    "multi_turn_row",
]

#: BFCL v4's multi-turn categories (200 questions each).
BFCL_MULTI_TURN_CATEGORIES: Final = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
#: Each multi-turn class and the file of its function docs under ``multi_turn_func_doc/``.
BFCL_MULTI_TURN_FUNC_DOCS: Final = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}
#: The reasons an execution check (``check_multi_turn``) may give.
BFCL_EXECUTION_DROP_REASONS: Final = (
    "initial_config_does_not_load",
    "ground_truth_does_not_execute",
)
#: Why a multi-turn question was skipped, in the order the checks run.
BFCL_MULTI_TURN_DROP_REASONS: Final = (
    "unreadable_question",
    "unknown_class",
    "turn_count_mismatch",
    "unknown_held_back_function",
    "unparsable_ground_truth",
    *BFCL_EXECUTION_DROP_REASONS,
)
_LONG_CONTEXT: Final = "multi_turn_long_context"


@dataclass(frozen=True, slots=True)
class MultiTurnProblem:
    """Why a multi-turn question is skipped.

    Attributes:
        reason: One of :data:`BFCL_MULTI_TURN_DROP_REASONS` (counted in the drop summary).
        detail: What exactly is wrong (named in the drop summary, and by ``--strict``).
    """

    reason: str
    detail: str


#: An execution check: the row ``import-bfcl`` built -> ``None``, or why it cannot be played
#: (a :class:`MultiTurnProblem` with a reason from :data:`BFCL_EXECUTION_DROP_REASONS`).
MultiTurnCheck = Callable[[Mapping[str, Any]], MultiTurnProblem | None]


def execution_check(sandbox: BfclSandbox) -> MultiTurnCheck:
    """The import's execution check: build each question's classes and play its ground truth.

    A question whose ``initial_config`` BFCL's classes refuse, or whose
    ground truth fails (a call the classes cannot run, or one that ends in an
    error result), would score every model as failing it; it is skipped and
    named instead. Each question gets fresh instances in ``sandbox``,
    discarded after the check.
    """

    def check(row: Mapping[str, Any]) -> MultiTurnProblem | None:
        task, key = row["multi_turn"], f"import:{row['example_id']}"
        environment = task["environment"]
        try:
            sandbox.open(key, environment)
        except DataError as exc:
            return MultiTurnProblem("initial_config_does_not_load", str(exc))
        try:
            for turn, texts in enumerate(task["gold_turns"]):
                try:
                    calls = [parse_gold_call(text, environment) for text in texts]
                except DataError as exc:
                    return MultiTurnProblem("ground_truth_does_not_execute", f"turn {turn}: {exc}")
                for text, result in zip(texts, sandbox.execute(key, calls), strict=True):
                    if result.startswith(BFCL_ERROR_PREFIX):
                        return MultiTurnProblem(
                            "ground_truth_does_not_execute", f"turn {turn}: {text} -> {result}"
                        )
        finally:
            sandbox.discard(key)
        return None

    return check


def _gold_call_problem(text: str, offered: Mapping[str, Mapping[str, Any]]) -> str | None:
    """What keeps ``text`` from being one call of an offered function with literal arguments."""
    parts = gold_call_parts(text)
    if isinstance(parts, str):
        return parts
    name, positional, keywords = parts
    if name not in offered:
        return f"calls {name!r}, which none of the involved classes has"
    properties = offered[name].get("parameters", {}).get("properties", {})
    if len(positional) > len(properties):
        return f"passes {len(positional)} positional arguments; {name!r} has {len(properties)}"
    unknown = next((keyword for keyword in keywords if keyword not in properties), None)
    if unknown is not None:
        return f"passes {unknown!r}, which is not a parameter of {name!r}"
    return None


def _names(value: object) -> list[str] | None:
    """A list of non-empty strings, or ``None`` when ``value`` is not one."""
    if isinstance(value, list) and all(isinstance(item, str) and item for item in value):
        return value
    return None


def _held_back(
    question: Mapping[str, Any], turns: int, docs: Mapping[str, Any], excluded: list[str]
) -> dict[str, list[str]] | MultiTurnProblem:
    """``missed_function`` checked: turn index -> names of functions the classes have."""
    missed = question.get("missed_function", {})
    if not isinstance(missed, dict):
        return MultiTurnProblem("unreadable_question", "'missed_function' is not an object")
    held: dict[str, list[str]] = {}
    for key, value in missed.items():
        names = _names(value)
        if names is None:
            return MultiTurnProblem(
                "unreadable_question", f"missed_function[{key!r}] is not a list of names"
            )
        if not turn_index(key, turns):  # None, or 0: the first turn holds nothing back
            return MultiTurnProblem(
                "unknown_held_back_function",
                f"missed_function holds back {names} until turn {key!r}, which is not a later "
                f"turn of the question (1 to {turns - 1})",
            )
        for name in names:
            if name not in docs or name in excluded:
                return MultiTurnProblem(
                    "unknown_held_back_function",
                    f"missed_function[{key!r}] names {name!r}, which "
                    + ("is excluded" if name in excluded else "no involved class has"),
                )
        held[key] = names
    return held


def multi_turn_row(
    question: Mapping[str, Any],
    ground_truth: object,
    category: str,
    docs: Callable[[str], Sequence[dict[str, Any]] | None],
) -> dict[str, Any] | MultiTurnProblem:
    """One multi-turn question and its answer as a split row, or why it is skipped.

    Args:
        question: The question line (its ``id`` already checked).
        ground_truth: The answer line's ``ground_truth``.
        category: Its category (``multi_turn_long_context`` sets ``long_context``).
        docs: A class name -> its functions as JSON-Schema tools, or ``None``
            for a class without a function-doc file in the mapping.

    Returns:
        The row (``sommelier_mlflow.test_example.v1`` with ``multi_turn``), or
        the first problem found (see the module docstring for the order).
    """
    turns = question.get("question")
    classes = _names(question.get("involved_classes"))
    excluded = _names(question.get("excluded_function", []))
    if not isinstance(turns, list) or not turns or not all(isinstance(t, list) for t in turns):
        return MultiTurnProblem("unreadable_question", "'question' is not a list of turns")
    if not classes or excluded is None:
        return MultiTurnProblem(
            "unreadable_question",
            "'involved_classes' and 'excluded_function' must be lists of names",
        )
    functions: dict[str, dict[str, Any]] = {}
    for name in classes:
        found = docs(name)
        if found is None:
            return MultiTurnProblem(
                "unknown_class",
                f"involved class {name!r} has no function docs (known: "
                f"{', '.join(BFCL_MULTI_TURN_FUNC_DOCS)})",
            )
        functions.update((tool["name"], tool) for tool in found)
    if not isinstance(ground_truth, list) or len(ground_truth) != len(turns):
        count = len(ground_truth) if isinstance(ground_truth, list) else "no list of"
        return MultiTurnProblem(
            "turn_count_mismatch",
            f"the question has {len(turns)} turns and its ground truth {count} turns",
        )
    held = _held_back(question, len(turns), functions, excluded)
    if isinstance(held, MultiTurnProblem):
        return held
    for index, turn in enumerate(turns):
        # BFCL's runner speaks for the user only where functions arrive, and only there.
        if (turn == []) != (str(index) in held):
            return MultiTurnProblem(
                "unreadable_question",
                f"turn {index} is {'empty' if turn == [] else 'not empty'} but "
                f"{'adds no function' if turn == [] else 'is where held-back functions arrive'}; "
                "only the turn where held-back functions arrive has no user message",
            )
    later = {name for names in held.values() for name in names}
    tools = [tool for name, tool in functions.items() if name not in excluded and name not in later]
    added = {
        key: [functions[name] for name in names]
        for key, names in sorted(held.items(), key=lambda item: int(item[0]))
    }
    row = {
        "schema_version": TEST_EXAMPLE_SCHEMA,
        "example_id": question["id"],
        "language": "en",
        "source_example_id": None,
        "category": category,
        "messages": turns[0],
        "tools": tools,
        "gold_calls": [],
        "multi_turn": {
            "user_turns": turns,
            "added_tools": added,
            "gold_turns": ground_truth,
            "environment": {
                "initial_config": question.get("initial_config"),
                "involved_classes": classes,
                "long_context": category == _LONG_CONTEXT,
            },
        },
    }
    problem = multi_turn_problem(row["multi_turn"], messages=turns[0], tools=tools, gold_calls=0)
    if problem is not None:
        return MultiTurnProblem("unreadable_question", problem)
    for index, calls in enumerate(ground_truth):
        for call in calls:
            problem = _gold_call_problem(call, functions)
            if problem is not None:
                return MultiTurnProblem(
                    "unparsable_ground_truth", f"turn {index}: {call!r} {problem}"
                )
    return row
