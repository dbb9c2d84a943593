"""Argument flattening: an arguments object as a set of path/value pairs.

``argument_f1`` gives partial credit per argument value, so both the gold and
the predicted arguments are flattened into ``path -> canonical value`` pairs.
Object keys extend the path with ``.key`` and list elements with ``[i]``;
leaves (and empty containers) are stored as canonical JSON, so each value has
exactly one spelling.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from sommelier_mlflow._json import canonical_json

__all__ = [
    "ROOT_PATH",
    "count_pairs",
    "count_matched_pairs",
    "flatten_arguments",
]

ROOT_PATH: Final = "<root>"

# Keys free of path syntax are written bare as the spec shows
# (``filters.max_price``). Any other key is written as a bracketed JSON string
# (``["a.b"]``), which no bare key or list index can spell; without this
# ``{"a.b": 1}`` and ``{"a": {"b": 1}}`` would flatten to the same pair and
# inflate argument_f1.
_PATH_SYNTAX = re.compile(r'[.\[\]"\\]')


def _key_segment(prefix: str, key: str) -> str:
    if key and key != ROOT_PATH and _PATH_SYNTAX.search(key) is None:
        return f"{prefix}.{key}" if prefix else key
    return f"{prefix}[{canonical_json(key)}]"


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def _count_stack(arguments: Mapping[str, Any]) -> int:
    stack: list[Any] = [arguments]
    pop, push = stack.pop, stack.extend
    count = 0
    while stack:
        value = pop()
        if value and isinstance(value, dict):
            push(value.values())
        elif value and isinstance(value, list):
            push(value)
        else:
            count += 1
    return count


def _count(value: Any) -> int:
    # ``value`` is a non-empty dict or list; scalars are counted inline, which
    # is where almost all of the calls a naive recursion would make go.
    count = 0
    for child in value.values() if type(value) is dict else value:
        kind = type(child)
        if kind in _SCALARS or not child:
            count += 1
        elif kind is dict or kind is list or isinstance(child, (dict, list)):
            count += _count(child)
        else:
            count += 1
    return count


def count_pairs(arguments: Mapping[str, Any]) -> int:
    """How many pairs :func:`flatten_arguments` would return, without building them.

    A prediction whose arguments equal the gold's canonically needs only the
    count, which is the common case for a good model. The walk recurses (fast)
    and falls back to an explicit stack for nesting deeper than Python allows.
    """
    if not arguments:
        return 1
    try:
        return _count(arguments)
    except RecursionError:
        return _count_stack(arguments)


def _same_leaf(left: Any, right: Any) -> bool:
    """Canonical-JSON equality of two leaves (scalars or empty containers)."""
    kind = type(left)
    if kind is not type(right):
        return kind not in _SCALARS and canonical_json(left) == canonical_json(right)
    if kind is float:
        # 0.0 == -0.0 in Python but not in canonical JSON.
        return bool(left == right) and repr(left) == repr(right)
    return bool(left == right)


def _matched(predicted: Any, gold: Any) -> int:
    # Both are non-empty containers of the same kind at the same path.
    count = 0
    if type(predicted) is dict:
        for key, child in predicted.items():
            if key not in gold:
                continue
            count += _matched_child(child, gold[key])
    else:
        for child, expected in zip(predicted, gold, strict=False):
            count += _matched_child(child, expected)
    return count


def _matched_child(child: Any, expected: Any) -> int:
    child_leaf = not child or not isinstance(child, (dict, list))
    expected_leaf = not expected or not isinstance(expected, (dict, list))
    if child_leaf or expected_leaf:
        return int(child_leaf and expected_leaf and _same_leaf(child, expected))
    if isinstance(child, dict) != isinstance(expected, dict):
        return 0
    return _matched(child, expected)


def count_matched_pairs(predicted: Mapping[str, Any], gold: Mapping[str, Any]) -> int:
    """How many of ``flatten_arguments(predicted)`` pairs also occur in ``flatten_arguments(gold)``.

    Paths encode the key/index sequence one-to-one (see :func:`_key_segment`),
    so a pair matches exactly when walking both objects along the same keys and
    indices reaches a leaf on both sides with the same canonical value. Walking
    in parallel finds that without building either set of path strings.
    """
    if not predicted or not gold:
        return int(not predicted and not gold)
    try:
        return _matched(predicted, gold)
    except RecursionError:
        gold_pairs = flatten_arguments(gold)
        pairs = flatten_arguments(predicted)
        return sum(1 for path, value in pairs.items() if gold_pairs.get(path) == value)


def flatten_arguments(arguments: Mapping[str, Any]) -> dict[str, str]:
    r"""Flatten an arguments object into ``path -> canonical JSON value``.

    Empty objects and arrays are leaves, and an empty arguments object yields
    the single pair ``<root>: {}`` so a call without arguments still counts in
    the F1 denominator. The walk uses an explicit stack: model output may nest
    as deep as the JSON parser allows, deeper than Python's recursion limit.

    Args:
        arguments: A JSON object (as parsed), e.g. a tool call's ``arguments``.

    Returns:
        A dict whose keys are paths such as ``filters.tags[0]`` and whose values
        are canonical JSON strings such as ``"\"romantic\""``.
    """
    out: dict[str, str] = {}
    stack: list[tuple[Any, str]] = [(dict(arguments), "")]
    while stack:
        value, path = stack.pop()
        if value and isinstance(value, dict):
            stack.extend((child, _key_segment(path, key)) for key, child in value.items())
        elif value and isinstance(value, list):
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(value))
        else:
            out[path or ROOT_PATH] = canonical_json(value)
    return out
