"""What every output-format decoder shares: its results, strict JSON and a span scanner.

A decoder turns one completion written in a model family's own tool-call
format into a :class:`CallsParseResult`. The rules every decoder follows, so
that no format is more generous than another:

- it repairs nothing and never raises for any ``str`` (deep nesting, lone
  surrogates and NUL bytes end in a status);
- JSON is strict RFC 8259 through the package's own loader, with duplicate
  keys refused (``{"a": 1, "a": 2}`` has no single meaning);
- syntax before shape: the output is ``invalid_json`` when any part breaks the
  format's syntax (a marker, a tag, JSON, Python), otherwise
  ``invalid_shape`` when any decoded value is not a call;
- the format's way of making no call at all (prose with no block or marker)
  is ``no_json``; an explicit empty list is ``ok`` with zero calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import orjson

from sommelier_mlflow._json import (
    EXACT_INT_FLOAT_MAX,
    EXACT_INT_FLOAT_MIN,
    JSONDecodeError,
    checked_small,
    loads_small,
)
from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, ok_calls
from sommelier_mlflow.toolcalls._parse import NOT_JSON, balanced_span_end, is_tool_call

__all__ = [
    "parse_piece",
    "NO_JSON",
    "INVALID_JSON",
    "INVALID_SHAPE",
    "NO_CALL",
    "NO_JSON_CALLS_IN_REASONING",
    "JSON_WHITESPACE",
    "strict_json",
    "plain_calls",
    "checked_call",
    "json_call_list",
    "answer_and_thoughts",
    "answer_blocks",
    "tag_blocks",
    "json_value_at",
    "skip_whitespace",
    "separated_items",
    "json_values_between",
    "THINK",
    "UNTHINK",
    "split_thoughts",
    "without_thoughts",
    "llama_call",
    "CALL_NAME",
]

T = TypeVar("T")

#: orjson's parse of one piece of a completion: strict RFC 8259, but its value is
#: only the strict reading once :func:`plain_calls` or :func:`checked_call` vouches.
parse_piece: Final = orjson.loads
NO_JSON: Final = CallsParseResult("no_json")
INVALID_JSON: Final = CallsParseResult("invalid_json")
INVALID_SHAPE: Final = CallsParseResult("invalid_shape")
NO_CALL: Final = CallsParseResult("ok", ())
#: No call in the answer, but the format's call syntax inside the reasoning.
NO_JSON_CALLS_IN_REASONING: Final = CallsParseResult("no_json", calls_in_reasoning=True)

#: A function name where a format writes one as bare text (``<function=NAME>``, GLM's
#: ``<tool_call>NAME``): no whitespace, brackets, braces, parentheses, quotes, ``<``,
#: ``>``, ``=``, ``,`` or ``;`` (text holding them is JSON or code, not a name).
CALL_NAME: Final = re.compile(r"""[^\s\[\]{}()<>"'=,;]+""")

#: The four characters RFC 8259 calls whitespace; "trimmed" means these only.
JSON_WHITESPACE: Final = " \t\n\r"


def strict_json(text: str) -> Any:
    """Decode ``text`` as one strict JSON value with unique keys, or return :data:`NOT_JSON`.

    Surrounding JSON whitespace is allowed (RFC 8259 allows it around a value).
    """
    try:
        return loads_small(text, reject_duplicate_keys=True)
    except JSONDecodeError:
        return NOT_JSON


def plain_calls(text: str, values: Sequence[Any]) -> bool:
    """Whether ``values``, orjson's parses of disjoint pieces of ``text``, are calls read exactly.

    Exactly: as :func:`strict_json` would read each piece (unique keys,
    integers beyond 64 bits kept exact). For calls whose arguments are
    scalars or lists of scalars (most calls) two cheap facts prove it, in
    place of the general checks of :func:`~sommelier_mlflow._json.checked_small`:

    - every float is too small to be an integer beyond 64 bits that orjson
      read as a float, so every integer was read exactly;
    - ``text`` holds exactly as many colons as the values hold keys (two per
      call plus one per argument). Every key of a piece is followed by its
      own colon, so the pieces name at most that many keys between them; a
      dropped duplicate would leave its value with fewer keys than its
      piece, so none was dropped.

    ``False`` (a value that is not such a call, colons inside strings or
    between the pieces, a huge float) only means "read each piece the
    general way"; ``tests/toolcalls/test_decode_fast_path.py`` checks that
    the two readings agree on generated texts.
    """
    keys = 0
    for value in values:
        # is_tool_call's test, on the exact types orjson builds (a call per block: hot).
        try:
            name, arguments = value["name"], value["arguments"]
        except (KeyError, TypeError):  # not an object, or not both keys
            return False
        if len(value) != 2 or type(name) is not str or not name or type(arguments) is not dict:
            return False
        keys += 2 + len(arguments)
        for item in arguments.values():
            kind = type(item)
            if kind is float:
                if not EXACT_INT_FLOAT_MIN < item < EXACT_INT_FLOAT_MAX:
                    return False
            elif kind is list:
                for inner in item:
                    kind = type(inner)
                    if kind is dict or kind is list:
                        return False
                    if kind is float and not EXACT_INT_FLOAT_MIN < inner < EXACT_INT_FLOAT_MAX:
                        return False
            elif kind is dict:
                return False
    return text.count(":") == keys


def checked_call(piece: str, value: Any) -> dict[str, Any] | None:
    """The call ``piece`` holds, given ``value``, orjson's parse of it; ``None`` when not a call.

    The general reading (:func:`strict_json`, then the call-shape test) for
    the pieces :func:`plain_calls` cannot vouch for.

    Raises:
        JSONDecodeError: A duplicate key.
    """
    value = checked_small(piece, value, reject_duplicate_keys=True)
    return value if is_tool_call(value) else None


def json_call_list(body: str, call_of: Callable[[Any], dict[str, Any] | None]) -> CallsParseResult:
    """``body``, one strict JSON array of calls, each element read by ``call_of``.

    The formats whose whole answer is a JSON list (``xlam``, ``phi4_mini_json``)
    read it alike: the orjson parse proved exact by :func:`plain_calls` for
    the common case, else the general strict reading. Not JSON (or JSON
    followed by text) is ``invalid_json``; JSON that is not a list, or an
    element ``call_of`` refuses (``None``), is ``invalid_shape``.
    """
    try:
        value = parse_piece(body)
    except JSONDecodeError:
        return INVALID_JSON
    if type(value) is list and plain_calls(body, value):  # the common case, at once
        return ok_calls(tuple(value))
    value = strict_json(body)
    if value is NOT_JSON:
        return INVALID_JSON
    if type(value) is not list:
        return INVALID_SHAPE
    calls = [call_of(element) for element in value]
    if None in calls:
        return INVALID_SHAPE
    return ok_calls(tuple(call for call in calls if call is not None))


def json_value_at(text: str, pos: int) -> tuple[Any, int] | None:
    """The bracketed JSON value at ``pos`` (after JSON whitespace) and its end, or ``None``.

    The value must open with ``{`` or ``[`` and is cut at its balanced end
    (so a separator or marker inside a string does not cut it short) before
    the strict loader reads it. Linear, and free of recursion at any depth.
    """
    pos = skip_whitespace(text, pos)
    if pos == len(text) or text[pos] not in "{[":
        return None
    end = balanced_span_end(text, pos)
    if end is None:
        return None
    value = strict_json(text[pos:end])
    if value is NOT_JSON:
        return None
    return value, end


def skip_whitespace(text: str, pos: int) -> int:
    """The first position at or after ``pos`` that is not JSON whitespace."""
    size = len(text)
    while pos < size and text[pos] in JSON_WHITESPACE:
        pos += 1
    return pos


def separated_items(
    text: str, separator: str, read: Callable[[str, int], tuple[T, int] | None]
) -> list[T] | None:
    """Read items joined by ``separator`` over the whole of ``text``, or ``None``.

    ``read(text, pos)`` returns one item starting at ``pos`` and the position
    after it, or ``None``; JSON whitespace may follow an item, and an empty
    item (a trailing or doubled separator) is not one. Formats that chain
    values share this loop and differ only in how one item reads.
    """
    items: list[T] = []
    pos = 0
    while True:
        found = read(text, pos)
        if found is None:
            return None
        item, pos = found
        items.append(item)
        pos = skip_whitespace(text, pos)
        if pos == len(text):
            return items
        if not text.startswith(separator, pos):
            return None
        pos += len(separator)


def json_values_between(text: str, separator: str) -> list[Any] | None:
    """Decode ``text`` as bracketed JSON values joined by ``separator``, or ``None``.

    The reference reading for formats that chain values (``{...}; {...}``):
    each value is read by :func:`json_value_at`; JSON whitespace may surround
    values and separators; an empty value (``{...};`` or ``;;``) is not one.
    """
    return separated_items(text, separator, json_value_at)


THINK: Final = "<think>"
UNTHINK: Final = "</think>"


def split_thoughts(text: str, open_tag: str, close_tag: str) -> tuple[str, str] | None:
    """``text`` without its thoughts, and the thoughts; ``None`` when a thought never closes.

    A thought is every ``open_tag`` up to the first ``close_tag`` after it;
    when the first ``close_tag`` comes before any ``open_tag``, everything up
    to it is one too (a thought the chat template opened in the prompt, as
    Qwen3's and GLM's thinking models do). Formats remove thoughts before
    decoding because a call written while thinking is not the answer; the
    thoughts are returned so a decoder can tell whether they held a call.
    Linear: each search starts where the previous one ended.
    """
    answer: list[str] = []
    thoughts: list[str] = []
    first_close = text.find(close_tag)
    first_open = text.find(open_tag)
    pos = 0
    if first_close >= 0 and (first_open < 0 or first_close < first_open):
        thoughts.append(text[:first_close])
        pos = first_close + len(close_tag)
    while (start := text.find(open_tag, pos)) >= 0:
        end = text.find(close_tag, start + len(open_tag))
        if end < 0:
            return None
        answer.append(text[pos:start])
        thoughts.append(text[start + len(open_tag) : end])
        pos = end + len(close_tag)
    answer.append(text[pos:])
    return "".join(answer), "".join(thoughts)


def answer_and_thoughts(
    text: str, open_tag: str = THINK, close_tag: str = UNTHINK, marker: str = "think>"
) -> tuple[str, str] | None:
    """:func:`split_thoughts`, skipped for the common output that holds no thought at all.

    ``marker`` is a text both tags contain: an output without it has no
    thought, and one ``in`` test says so without the splitting's searches.
    Every decoder of a reasoning model starts here, so they agree on thoughts.

    Returns:
        ``(answer, thoughts)``; ``None`` when a thought never closes, which
        refuses the output (``invalid_json``).
    """
    if marker not in text:
        return text, ""
    return split_thoughts(text, open_tag, close_tag)


def tag_blocks(text: str, open_tag: str, close_tag: str) -> list[str] | None:
    """The body of every ``open_tag``…``close_tag`` block of ``text``, in order.

    A block ends at the first ``close_tag`` after its opening tag; text
    between blocks is skipped. ``None`` when a block never closes (the output
    is then ``invalid_json``); ``[]`` when there is no block. Linear: each
    search starts where the previous one ended.
    """
    bodies: list[str] = []
    start = text.find(open_tag)
    while start >= 0:
        body = start + len(open_tag)
        end = text.find(close_tag, body)
        if end < 0:
            return None
        bodies.append(text[body:end])
        start = text.find(open_tag, end + len(close_tag))
    return bodies


def answer_blocks(
    text: str, open_tag: str, close_tag: str
) -> tuple[str, list[str]] | CallsParseResult:
    """The answer (thoughts removed) and its tag blocks' bodies, or the status that ends reading.

    ``hermes``, ``qwen3_xml`` and ``glm45`` write calls in the same blocks and
    differ only inside them. The status is ``invalid_json`` for a thought or
    a block that never closes, and ``no_json`` (flagged ``calls_in_reasoning``
    when a thought opens a block) for an answer without blocks.
    """
    split = answer_and_thoughts(text)
    if split is None:
        return INVALID_JSON
    answer, thoughts = split
    bodies = tag_blocks(answer, open_tag, close_tag)
    if bodies is None:
        return INVALID_JSON
    if not bodies:
        return NO_JSON_CALLS_IN_REASONING if open_tag in thoughts else NO_JSON
    return answer, bodies


def without_thoughts(text: str) -> str | None:
    """``text`` with every thought removed, or ``None`` when a thought never closes.

    A call written while thinking is not the answer, so formats of models that
    reason read only what is left: every ``<think>`` up to the first
    ``</think>`` after it and, when the first ``</think>`` comes before any
    ``<think>``, everything up to it (a thought the chat template opened in
    the prompt, as Qwen3's and DeepSeek-V3.1's thinking modes do). Linear.
    """
    split = split_thoughts(text, THINK, UNTHINK)
    return None if split is None else split[0]


def llama_call(value: Any) -> dict[str, Any] | None:
    """``{"name", "arguments"}`` from a Llama-style call object, or ``None`` when it is not one.

    Exactly two keys: ``name`` (a non-empty string) and one of ``parameters``
    / ``arguments`` (an object). Llama 3 and Phi-4-mini write either key, so
    both formats share this one reading.
    """
    if type(value) is not dict or len(value) != 2:
        return None
    name = value.get("name")
    arguments = value.get("parameters", value.get("arguments"))
    if type(name) is not str or not name or type(arguments) is not dict:
        return None
    if "parameters" in value and "arguments" in value:
        return None
    return {"name": name, "arguments": arguments}
