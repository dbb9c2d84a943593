"""The ``mistral`` output format (both Mistral tokenizer generations), decoder ``mistral.v1``.

Models with the v3 tokenizer answer ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]``;
models with tokenizer v11 and later answer one segment per call,
``[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]...``.

What the decoder accepts, exactly (after trimming JSON whitespace):

1. Text without ``[TOOL_CALLS]`` and without any ``{`` or ``[`` is zero calls
   (``no_json``). Any other text must start with ``[TOOL_CALLS]``; JSON without
   the marker, or prose before it, is refused (``invalid_json``).
2. Array form: when the marker is followed (after JSON whitespace) by ``[``,
   the whole rest is one strict JSON array whose every element is exactly
   ``{"name": <non-empty str>, "arguments": <object>}``; ``[]`` is ``ok`` with
   zero calls.
3. Segment form: otherwise the text is one or more segments, each
   ``[TOOL_CALLS]`` + a name + ``[ARGS]`` + one JSON value opening with ``{``
   or ``[`` (JSON whitespace may follow it). The name is the text up to the
   first ``[ARGS]``: non-empty, with no whitespace, brackets, braces or
   quotes. A marker inside a JSON string does not end a segment.
4. Broken syntax (a missing ``[ARGS]``, a bad name, JSON that is not strict,
   text after the last value) is ``invalid_json``; JSON that is not a call
   (an element that is not one, arguments that are not an object) is
   ``invalid_shape``.

``[TOOL_CALLS]`` and ``[ARGS]`` are control tokens in these tokenizers, so
outputs must be decoded with special tokens kept.
"""

from __future__ import annotations

import re
from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    JSON_WHITESPACE,
    NO_JSON,
    json_value_at,
    separated_items,
    strict_json,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._parse import NOT_JSON, is_tool_call

__all__ = ["decode_mistral"]

_MARKER: Final = "[TOOL_CALLS]"
_ARGS: Final = "[ARGS]"
_NAME: Final = re.compile(r'[^\s\[\]{}"]+')


def _array_form(rest: str) -> CallsParseResult:
    value = strict_json(rest)
    if value is NOT_JSON:
        return INVALID_JSON
    if type(value) is not list or not all(is_tool_call(element) for element in value):
        return INVALID_SHAPE
    return CallsParseResult("ok", tuple(value))


def _segments_fast(rest: str) -> list[tuple[str, Any]] | None:
    """``(name, arguments)`` per segment when every split segment reads; ``None`` means "scan".

    A segment whose JSON was cut by a marker inside a string does not parse,
    so whenever every piece parses the split was the true one.
    """
    segments: list[tuple[str, Any]] = []
    for piece in rest.split(_MARKER):
        name, found, arguments = piece.partition(_ARGS)
        if not found or _NAME.fullmatch(name) is None:
            return None
        if arguments.lstrip(JSON_WHITESPACE)[:1] not in ("{", "["):
            return None
        value = strict_json(arguments)
        if value is NOT_JSON:
            return None
        segments.append((name, value))
    return segments


def _segment_at(rest: str, pos: int) -> tuple[tuple[str, Any], int] | None:
    """One ``name[ARGS]value`` segment starting at ``pos``, its value cut at its balanced end."""
    args_at = rest.find(_ARGS, pos)
    if args_at < 0:
        return None
    name = rest[pos:args_at]
    if _NAME.fullmatch(name) is None:
        return None
    found = json_value_at(rest, args_at + len(_ARGS))
    if found is None:
        return None
    value, end = found
    return (name, value), end


def _segments_scanned(rest: str) -> list[tuple[str, Any]] | None:
    """The reference reading of the segment form: segments joined by the marker."""
    return separated_items(rest, _MARKER, _segment_at)


def decode_mistral(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``mistral`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept: without the
            ``[TOOL_CALLS]`` control token, the output is refused.
        tools: The example's tools; not read, since this format's values are
            typed already.

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools  # typed values: the schemas add nothing
    body = text.strip(JSON_WHITESPACE)
    if not body.startswith(_MARKER):
        if "{" in body or "[" in body:
            return INVALID_JSON
        return NO_JSON
    rest = body[len(_MARKER) :]
    if rest.lstrip(JSON_WHITESPACE)[:1] == "[":
        return _array_form(rest)
    segments = _segments_fast(rest)
    if segments is None:
        segments = _segments_scanned(rest)
        if segments is None:
            return INVALID_JSON
    if not all(type(arguments) is dict for _, arguments in segments):
        return INVALID_SHAPE
    return CallsParseResult(
        "ok", tuple({"name": name, "arguments": arguments} for name, arguments in segments)
    )


register_output_format(
    OutputFormat(
        "mistral",
        "Mistral: [TOOL_CALLS] and a JSON array of calls (tokenizer v3), or "
        "[TOOL_CALLS]name[ARGS]{...} segments (tokenizer v11+).",
        decode=decode_mistral,
        version="mistral.v1",
        special_tokens=True,
    )
)
