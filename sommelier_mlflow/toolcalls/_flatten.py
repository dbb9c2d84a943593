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


def count_pairs(arguments: Mapping[str, Any]) -> int:
    """How many pairs :func:`flatten_arguments` would return, without building them.

    A prediction whose arguments equal the gold's canonically needs only the
    count, which is the common case for a good model.
    """
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
