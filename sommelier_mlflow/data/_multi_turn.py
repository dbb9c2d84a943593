"""The ``multi_turn`` field of a split row: one BFCL-style question played over several turns.

A multi-turn example is not one prompt with one answer: a user speaks turn
after turn, the model may call functions several times in each turn, and
the calls run against a stateful environment. The row keeps everything the
execution loop and the checker need, in one field, so the rest of the
product (formatting, digests, slices, sampling, MLflow datasets) treats the
row like any other and only the multi-turn code reads inside it::

    "multi_turn": {
        "user_turns": [[{"role": "user", "content": "..."}], [], ...],
        "added_tools": {"3": [<tool>, ...]},
        "gold_turns": [["cd(folder='document')", ...], [], ...],
        "environment": {"initial_config": {...}, "involved_classes": [...],
                        "long_context": false}
    }

- ``user_turns``: the user's messages of each turn, in order; a turn may be
  empty (BFCL's ``miss_func`` turn where held-back functions arrive). The
  first turn is the row's ``messages``, so the existing conversation
  rendering renders the first step unchanged.
- ``added_tools``: tools that join the offered ones at a turn (keys are turn
  indexes as decimal text, ``"0"`` to the last turn's index); a tool is
  offered once, in ``tools`` or in one turn here.
- ``gold_turns``: per user turn, the expected calls as BFCL writes them
  (``"sort('final_report.pdf')"``), verbatim; ``[]`` where no call is right.
- ``environment``: what the sandbox builds the classes from.

The check returns a problem instead of raising, like the other row checks,
so the constructor and every reader raise their own kind of error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow.data._tools import tools_problem

__all__ = ["MULTI_TURN_FIELDS", "ENVIRONMENT_FIELDS", "turn_index", "multi_turn_problem"]

#: The exact keys of a row's ``multi_turn`` object.
MULTI_TURN_FIELDS: Final = frozenset({"user_turns", "added_tools", "gold_turns", "environment"})
#: The exact keys of its ``environment``.
ENVIRONMENT_FIELDS: Final = frozenset({"initial_config", "involved_classes", "long_context"})


def turn_index(key: object, turns: int) -> int | None:
    """The turn a key names (decimal text, no sign or leading zero, below ``turns``) or None."""
    if not (isinstance(key, str) and key.isascii() and key.isdigit() and str(int(key)) == key):
        return None
    index = int(key)
    return index if index < turns else None


def _turn_problem(turn: object) -> str | None:
    """What is wrong with one user turn (a list of ``{"role": "user", "content": str}``)."""
    if not isinstance(turn, list):
        return "must be a list of user messages"
    for index, message in enumerate(turn):
        if (
            not isinstance(message, dict)
            or message.keys() != {"role", "content"}
            or message["role"] != "user"
            or not isinstance(message["content"], str)
        ):
            return f"message {index} must be exactly {{'role': 'user', 'content': string}}"
    return None


def _added_tools_problem(added: object, turns: int, tools: Sequence[Any]) -> str | None:
    if not isinstance(added, dict):
        return "'multi_turn.added_tools' must be an object of turn index -> list of tools"
    offered = list(tools)
    for key, more in added.items():
        if turn_index(key, turns) is None:
            return (
                f"'multi_turn.added_tools' key {key!r} is not a turn index (decimal text, 0 to "
                f"{turns - 1})"
            )
        if not isinstance(more, list) or not more:
            return f"'multi_turn.added_tools'[{key!r}] must be a non-empty list of tools"
        offered.extend(more)
    # One list for the uniqueness check: a tool added at a turn must not shadow one offered.
    problem = tools_problem(offered)
    return None if problem is None else f"'tools' with 'multi_turn.added_tools': {problem}"


def _environment_problem(environment: object) -> str | None:
    if not isinstance(environment, dict) or environment.keys() != ENVIRONMENT_FIELDS:
        return (
            f"'multi_turn.environment' must be an object with exactly {sorted(ENVIRONMENT_FIELDS)}"
        )
    if not isinstance(environment["initial_config"], dict):
        return "'multi_turn.environment.initial_config' must be an object (class name -> scenario)"
    classes = environment["involved_classes"]
    if (
        not isinstance(classes, list)
        or not classes
        or not all(isinstance(name, str) and name for name in classes)
    ):
        return "'multi_turn.environment.involved_classes' must be a non-empty list of class names"
    if not isinstance(environment["long_context"], bool):
        return "'multi_turn.environment.long_context' must be true or false"
    return None


def multi_turn_problem(
    value: object, *, messages: Sequence[Any] | None, tools: Sequence[Any], gold_calls: int
) -> str | None:
    """What is wrong with a row's ``multi_turn`` value (module docstring); ``None`` if usable.

    Args:
        value: The ``multi_turn`` value.
        messages: The row's ``messages``: they must be the first user turn.
        tools: The row's tools (offered from the first turn on).
        gold_calls: How many gold calls the row has: none, as its answer is ``gold_turns``.
    """
    if not isinstance(value, Mapping) or value.keys() != MULTI_TURN_FIELDS:
        return f"'multi_turn' must be an object with exactly {sorted(MULTI_TURN_FIELDS)}"
    turns = value["user_turns"]
    if not isinstance(turns, list) or not turns:
        return "'multi_turn.user_turns' must be a non-empty list of turns"
    for index, turn in enumerate(turns):
        problem = _turn_problem(turn)
        if problem is not None:
            return f"'multi_turn.user_turns'[{index}] {problem}"
    if not turns[0] or messages is None or list(messages) != turns[0]:
        return (
            "'messages' must be the first user turn, 'multi_turn.user_turns'[0] (non-empty): "
            "the first step is rendered from it"
        )
    if gold_calls:
        return "a multi-turn row's answer is 'multi_turn.gold_turns'; its 'gold_calls' must be []"
    problem = _added_tools_problem(value["added_tools"], len(turns), tools)
    if problem is not None:
        return problem
    gold = value["gold_turns"]
    if (
        not isinstance(gold, list)
        or len(gold) != len(turns)
        or not all(isinstance(t, list) and all(isinstance(c, str) for c in t) for t in gold)
    ):
        return (
            f"'multi_turn.gold_turns' must hold one list of call strings per user turn "
            f"({len(turns)})"
        )
    return _environment_problem(value["environment"])
