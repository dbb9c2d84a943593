"""One rule for turning user-supplied gold calls and model outputs into what scoring reads.

Gold calls and outputs reach the scorer from several doors (evaluator
columns, genai ``expectations``, catalog ``reference``); each door used to
have its own rule and its own error. Here there is one rule and one error
type, :class:`~sommelier_mlflow.errors.DataError` (exit 2), so the same value
is accepted or refused the same way wherever it comes from.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sommelier_mlflow._json import (
    MAX_INT_DIGITS,
    JSONDecodeError,
    canonical_json,
    holds_unreadable_int,
    loads,
)
from sommelier_mlflow.errors import DataError
from sommelier_mlflow.toolcalls._parse import is_tool_call

__all__ = ["is_missing", "gold_call_of", "gold_calls_of", "completion_text"]


def is_missing(value: object) -> bool:
    """Whether ``value`` is an absent cell: ``None``, a float NaN, or pandas' NA/NaT."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return type(value).__name__ in {"NAType", "NaTType"}


def gold_call_of(value: object, *, where: str = "gold call") -> dict[str, Any]:
    """The one gold call held by ``value``.

    Accepted: a ``{"name", "arguments"}`` mapping, its JSON text (``str`` or
    ``bytes``), or a one-element list of either (the ``gold_calls`` shape).

    Args:
        value: The user's gold call.
        where: What to call it in messages (e.g. ``"row 3: gold call"``).

    Raises:
        DataError: Anything that is not exactly one well-formed call.
    """
    if is_missing(value):
        raise DataError(
            f"{where} is missing; pass the expected call as a {{'name', 'arguments'}} dict "
            "or its JSON string"
        )
    candidate = _decoded(value, where)
    if holds_unreadable_int(candidate):  # checked first: repr() of such an int raises
        raise DataError(
            f"{where} holds an integer of more than {MAX_INT_DIGITS} digits, which no output "
            "format reads (an output holding it is invalid_json); write it as a string"
        )
    if isinstance(candidate, list | tuple):
        if len(candidate) != 1:
            raise DataError(f"{where} list must hold exactly one call, got {len(candidate)}")
        candidate = candidate[0]
    if isinstance(candidate, Mapping) and not isinstance(candidate, dict):
        candidate = dict(candidate)
    if not is_tool_call(candidate):
        raise DataError(
            f"{where} must be {{'name': non-empty str, 'arguments': object}} (a dict or its "
            f"JSON string), got {value!r:.200}"
        )
    return candidate


def _decoded(value: object, where: str) -> Any:
    """``value`` parsed when it is JSON text, else as given: gold answers come both ways."""
    if not isinstance(value, str | bytes):
        return value
    try:
        return loads(value)
    except JSONDecodeError as exc:
        raise DataError(f"{where} is not valid JSON ({exc}): {value!r:.200}") from exc


def gold_calls_of(value: object, *, where: str = "gold calls") -> list[dict[str, Any]]:
    """The gold calls held by ``value``, for ``calls`` scoring: zero, one or several.

    Accepted: a list of ``{"name", "arguments"}`` mappings (``[]`` for an
    abstention example), its JSON text, or one call (a mapping or its JSON),
    which is a list of one.

    Raises:
        DataError: A missing value, invalid JSON, or an element that is not a call.
    """
    if is_missing(value):
        raise DataError(f"{where} is missing; pass a list of calls ([] when no tool applies)")
    candidate = _decoded(value, where)
    if not isinstance(candidate, list | tuple):
        candidate = [candidate]
    return [gold_call_of(call, where=f"{where}[{index}]") for index, call in enumerate(candidate)]


def completion_text(value: object, *, where: str = "outputs") -> str:
    """The raw text to parse for one model output.

    A string is scored as it is. A mapping or list (an output already decoded
    from JSON) is scored as its canonical JSON, so a dict that is a call parses
    as ``ok`` and any other shape as ``invalid_shape``. An absent output
    (``None``, NaN) is an empty output: it parses as ``no_json`` and counts
    in every denominator, so a missing answer can only lower the metrics.

    Raises:
        DataError: Any other type, or a container that is not JSON.
    """
    if isinstance(value, str):
        return value
    if is_missing(value):
        return ""
    if isinstance(value, Mapping | list | tuple):
        try:
            return canonical_json(dict(value) if isinstance(value, Mapping) else list(value))
        except TypeError as exc:
            raise DataError(f"{where} is not JSON-serialisable ({exc})") from exc
    raise DataError(
        f"{where} must be the raw output text (str) or a decoded call (dict), "
        f"got {type(value).__name__}"
    )
