"""The ``glm45`` output format (GLM-4.5, GLM-4.6, GLM-4.7), decoder ``glm45.v1``.

These models answer with one block per call, the name first and each
argument as a key/value pair of bare text::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    </tool_call>

(GLM-4.7 writes the same without the newlines.) What the decoder accepts,
exactly:

1. Thoughts are removed first, as ``hermes`` does: each ``<think>`` up to the
   first ``</think>`` after it, and everything up to a first ``</think>`` that
   comes before any ``<think>`` (GLM's templates open the thought in the
   prompt). A ``<think>`` that never closes is ``invalid_json``.
2. Zero or more ``<tool_call>…</tool_call>`` blocks, in output order; a block
   ends at the first ``</tool_call>`` after it, and text outside blocks is
   ignored. No block is ``no_json`` (flagged ``calls_in_reasoning`` when a
   thought held one).
3. Each block is the name, then zero or more
   ``<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>`` pairs, with JSON
   whitespace allowed around the name and between tags. The name is the text
   before the first ``<arg_key>`` (or the whole block), trimmed: non-empty,
   without whitespace, brackets, braces, parentheses, quotes, ``<``, ``>``,
   ``=``, ``,`` or ``;``. KEY is the text between its tags,
   exactly: non-empty, without ``<``; a KEY given twice is refused. VALUE is
   the text up to the first ``</arg_value>``, exactly (the template pads
   nothing).
4. Each VALUE is typed by the tool's schema, as in ``qwen3_xml``
   (:mod:`~sommelier_mlflow.toolcalls._tool_types`): a string parameter keeps
   the text, an integer one must read as a JSON integer, and so on, else the
   call is ``invalid_shape``. Without tools every value is a string.
5. Anything else (text between pairs, a missing closing tag, an unclosed
   ``<tool_call>``) is ``invalid_json``.

The tags are special tokens in GLM's tokenizer, so outputs must be decoded
with special tokens kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    CALL_NAME,
    INVALID_JSON,
    JSON_WHITESPACE,
    NO_JSON,
    NO_JSON_CALLS_IN_REASONING,
    skip_whitespace,
    split_thoughts,
)
from sommelier_mlflow.toolcalls._decode_qwen3_xml import RawCall, typed_calls
from sommelier_mlflow.toolcalls._modes import OutputFormat, register_output_format

__all__ = ["decode_glm45"]

_OPEN: Final = "<tool_call>"
_CLOSE: Final = "</tool_call>"
_KEY: Final = "<arg_key>"
_KEY_END: Final = "</arg_key>"
_VALUE: Final = "<arg_value>"
_VALUE_END: Final = "</arg_value>"
_THINK: Final = "<think>"
_UNTHINK: Final = "</think>"


def _read_block(body: str) -> RawCall | None:
    """One block's call, its values untyped, or ``None`` when it does not read."""
    first_key = body.find(_KEY)
    name = (body if first_key < 0 else body[:first_key]).strip(JSON_WHITESPACE)
    if CALL_NAME.fullmatch(name) is None:
        return None
    arguments: list[tuple[str, str]] = []
    seen: set[str] = set()
    pos = len(body) if first_key < 0 else first_key
    while pos < len(body):
        if not body.startswith(_KEY, pos):
            return None
        key_at = pos + len(_KEY)
        key_end = body.find(_KEY_END, key_at)
        if key_end <= key_at:
            return None
        key = body[key_at:key_end]
        if "<" in key or key in seen:
            return None
        seen.add(key)
        pos = skip_whitespace(body, key_end + len(_KEY_END))
        if not body.startswith(_VALUE, pos):
            return None
        value_at = pos + len(_VALUE)
        value_end = body.find(_VALUE_END, value_at)
        if value_end < 0:
            return None
        arguments.append((key, body[value_at:value_end]))
        pos = skip_whitespace(body, value_end + len(_VALUE_END))
    return name, arguments


def decode_glm45(text: str, tools: Sequence[Mapping[str, Any]] | None = None) -> CallsParseResult:
    """Decode one completion in the ``glm45`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept.
        tools: The example's tools, which type each value; ``None``: every
            value is a string.

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``, and never evaluates any of it.
    """
    thought_call = False
    if "think>" in text:
        split = split_thoughts(text, _THINK, _UNTHINK)
        if split is None:
            return INVALID_JSON
        text, thoughts = split
        thought_call = _OPEN in thoughts
    start = text.find(_OPEN)
    if start < 0:
        return NO_JSON_CALLS_IN_REASONING if thought_call else NO_JSON
    raw_calls: list[RawCall] = []
    while start >= 0:
        body = start + len(_OPEN)
        end = text.find(_CLOSE, body)
        if end < 0:
            return INVALID_JSON
        call = _read_block(text[body:end])
        if call is None:
            return INVALID_JSON
        raw_calls.append(call)
        start = text.find(_OPEN, end + len(_CLOSE))
    return typed_calls(raw_calls, tools)


register_output_format(
    OutputFormat(
        "glm45",
        "GLM-4.5 to 4.7: <tool_call>NAME<arg_key>KEY</arg_key><arg_value>value</arg_value>"
        "</tool_call> blocks, values typed by the tool's schema; thoughts removed.",
        decode=decode_glm45,
        version="glm45.v1",
        special_tokens=True,
    )
)
