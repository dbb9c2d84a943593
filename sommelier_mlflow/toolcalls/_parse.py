"""The conservative tool-call parser, ``sommelier.parser.v1``.

The parser takes the first balanced ``{...}`` or ``[...]`` span of a model's
output and accepts it only if it is, verbatim, one strict-JSON tool call. It
repairs nothing and never looks for a second span: a model that wraps a broken
call in prose must not be rescued by a lenient scorer, or base and adapter
would be compared on the parser's generosity instead of their behaviour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeGuard

# The project's strict loader: orjson, plus exact integers beyond 64 bits (which
# orjson alone reads as floats, so 2**64 + 1 would match 2**64 and 2**64.0).
from sommelier_mlflow._json import JSONDecodeError
from sommelier_mlflow._json import loads_small as loads

__all__ = [
    "PARSER_VERSION",
    "ParseStatus",
    "PARSE_STATUSES",
    "ParseResult",
    "balanced_span_end",
    "is_tool_call",
    "NO_BRACKET",
    "NOT_JSON",
    "parse_tool_call",
]

PARSER_VERSION: Final = "sommelier.parser.v1"

ParseStatus = Literal["ok", "no_json", "invalid_json", "invalid_shape"]
PARSE_STATUSES: Final[tuple[ParseStatus, ...]] = ("ok", "no_json", "invalid_json", "invalid_shape")

_OPENERS = re.compile(r"[{\[]")
# Outside a string only brackets and quotes change state. Jumping between
# those characters with a regex, and over each string literal in one match,
# keeps the scan linear while running Python code once per structural token.
_STRUCTURAL = re.compile(r'[{}\[\]"]')
# A whole string literal in one C-level match. The unrolled form has no
# overlapping alternatives, so a failed match (unterminated string) is linear.
_STRING_REST = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


@dataclass(frozen=True, slots=True)
class ParseResult:
    """What the parser concluded about one completion.

    Attributes:
        status: One of ``ok``, ``no_json``, ``invalid_json``, ``invalid_shape``.
        call: ``{"name": str, "arguments": dict}`` when ``status == "ok"``,
            otherwise ``None``.
    """

    status: ParseStatus
    call: dict[str, Any] | None = None


_NO_JSON: Final = ParseResult("no_json")
_INVALID_JSON: Final = ParseResult("invalid_json")
_INVALID_SHAPE: Final = ParseResult("invalid_shape")


def balanced_span_end(text: str, start: int) -> int | None:
    """Return the index just past the span opened at ``start``, or None if it never closes.

    Brackets are counted by depth regardless of kind: a mismatched closer can
    only end a span that is not valid JSON anyway, so the status is the same
    as a kind-aware scan would give, at a fraction of the bookkeeping.
    """
    depth = 0
    pos = start
    structural = _STRUCTURAL.search
    string_rest = _STRING_REST.match
    while True:
        match = structural(text, pos)
        if match is None:
            return None
        char = match.group()
        pos = match.end()
        if char == '"':
            literal = string_rest(text, pos)
            if literal is None:
                return None
            pos = literal.end()
        elif char in "{[":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return pos


def is_tool_call(value: object) -> TypeGuard[dict[str, Any]]:
    """Whether ``value`` is exactly ``{"name": <non-empty str>, "arguments": <object>}``."""
    return (
        isinstance(value, dict)
        and len(value) == 2
        and "name" in value
        and "arguments" in value
        and isinstance(value["name"], str)
        and value["name"] != ""
        and isinstance(value["arguments"], dict)
    )


#: Returned by :func:`first_json_span` when the text holds no ``{`` or ``[`` at all.
NO_BRACKET: Final = object()
#: Returned by :func:`first_json_span` when the first span never closes or is not JSON.
NOT_JSON: Final = object()


def first_json_span(text: str) -> Any:
    """Decode the first balanced ``{...}``/``[...]`` span of ``text``, repairing nothing.

    This is the part every parser version shares (the single-call parser and
    ``sommelier.calls_parser.v1``): they differ only in which decoded values
    they accept as calls, so the scanning rules cannot drift apart.

    Returns:
        The decoded JSON value, or the sentinel :data:`NO_BRACKET` (no opening
        bracket anywhere) or :data:`NOT_JSON` (a bracket, but no balanced span
        or a span that is not strict JSON). Sentinels rather than exceptions
        keep the hot path free of try/except for the common failures.
    """
    if text[:1] in ("{", "["):
        start = 0  # the common case: the completion is the JSON, no search needed
    else:
        opener = _OPENERS.search(text)
        if opener is None:
            return NO_BRACKET
        start = opener.start()
    # Fast path: one attempt at the span up to the last matching closer, which
    # is the whole completion when it is bare JSON and the call when prose wraps it.
    value = _last_closer_value(text, start)
    if value is not None:
        return value
    end = balanced_span_end(text, start)
    if end is None:
        return NOT_JSON
    try:
        return loads(text[start:end])
    except JSONDecodeError:
        return NOT_JSON


def parse_tool_call(text: str) -> ParseResult:
    """Parse one completion into a tool call, conservatively.

    Never raises for any ``str``: deep nesting, lone surrogates, NUL bytes and
    very long inputs all end in a status, and the scan is linear in the input.

    Args:
        text: The raw completion exactly as the model produced it.

    Returns:
        The :class:`ParseResult`; ``call`` is set only for status ``ok``.
    """
    value = first_json_span(text)
    if value is NO_BRACKET:
        return _NO_JSON
    if value is NOT_JSON:
        return _INVALID_JSON
    return _as_result(value)


def _as_result(value: object) -> ParseResult:
    """The status of a parsed span: one call (or a one-element list of one) is ``ok``."""
    if isinstance(value, list):
        if len(value) != 1:
            return _INVALID_SHAPE
        value = value[0]
    if not is_tool_call(value):
        return _INVALID_SHAPE
    return ParseResult("ok", value)


def _last_closer_value(text: str, start: int) -> object | None:
    """Parse the span from ``start`` to the last matching closer, if that is one JSON value.

    It covers both common shapes in one attempt: a bare JSON completion (the
    last closer ends it) and a call wrapped in prose (``Sure! {...} Done.``).
    If ``text[start:end]`` is one valid JSON
    value, its brackets nest properly, so the depth scan would also first
    return to zero exactly at ``end``: the span found here *is* the first
    balanced span, and the bracket scan can be skipped. Anything else (a
    second closer later on, truncated JSON) returns ``None`` and the caller
    scans, so the result never differs from the scan's.
    """
    closer = "}" if text[start] == "{" else "]"
    end = text.rfind(closer) + 1
    if end <= start:
        return None
    try:
        value: object = loads(text[start:end])
    except JSONDecodeError:
        return None
    # Only objects and arrays start with an opener, so a parsed value is never None here.
    return value
