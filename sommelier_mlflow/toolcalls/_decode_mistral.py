"""The ``mistral`` output format (both Mistral tokenizer generations), decoder ``mistral.v2``.

Models with the v3 tokenizer answer ``[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]``;
models with tokenizer v11 and later answer one segment per call,
``[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]...``, which a
server that skips special tokens returns without ``[ARGS]``:
``[TOOL_CALLS]get_weather{"city": "Paris"}``.

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
   or ``[`` (JSON whitespace may precede and follow it). The name is
   non-empty, with no whitespace, brackets, braces or quotes, and ends where
   ``[ARGS]`` starts. ``[ARGS]`` may be missing (the v11 form with special
   tokens skipped): the name then ends where the value (or the whitespace
   before it) starts. A marker inside a JSON string does not end a segment.
4. Broken syntax (a bad name, a name not followed by ``[ARGS]`` or a value,
   JSON that is not strict, text after the last value) is ``invalid_json``;
   JSON that is not a call (an element that is not one, arguments that are
   not an object) is ``invalid_shape``.

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


def _past_args(text: str, pos: int) -> int:
    """Where a segment's value starts once its name ends at ``pos``: after ``[ARGS]`` if there.

    The name's characters exclude ``[``, so ``[ARGS]`` right after a name is
    never part of it, and a JSON value never starts with ``[A``: with or
    without the token, a segment has one reading.
    """
    return pos + len(_ARGS) if text.startswith(_ARGS, pos) else pos


def _segments_fast(rest: str) -> list[tuple[str, Any]] | None:
    """``(name, arguments)`` per segment when every split segment reads; ``None`` means "scan".

    A segment whose JSON was cut by a marker inside a string does not parse,
    so whenever every piece parses the split was the true one.
    """
    segments: list[tuple[str, Any]] = []
    for piece in rest.split(_MARKER):
        name = _NAME.match(piece)
        if name is None:
            return None
        arguments = piece[_past_args(piece, name.end()) :]
        if arguments.lstrip(JSON_WHITESPACE)[:1] not in ("{", "["):
            return None
        value = strict_json(arguments)
        if value is NOT_JSON:
            return None
        segments.append((name.group(), value))
    return segments


def _segment_at(rest: str, pos: int) -> tuple[tuple[str, Any], int] | None:
    """One ``name[ARGS]value`` segment (``[ARGS]`` optional) at ``pos``, its value cut balanced."""
    name = _NAME.match(rest, pos)
    if name is None:
        return None
    found = json_value_at(rest, _past_args(rest, name.end()))
    if found is None:
        return None
    value, end = found
    return (name.group(), value), end


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
        "[TOOL_CALLS]name[ARGS]{...} segments (tokenizer v11+; [ARGS] may be skipped).",
        decode=decode_mistral,
        version="mistral.v2",
        special_tokens=True,
    )
)
