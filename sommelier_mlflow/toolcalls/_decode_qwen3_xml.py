"""The ``qwen3_xml`` output format (Qwen3-Coder, Qwen3.5, Qwen3.6), decoder ``qwen3_xml.v1``.

These models answer with one XML-style block per call, each value as bare text::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

What the decoder accepts, exactly:

1. Thoughts are removed first, as ``hermes`` does (a call written while
   thinking is not the answer; Qwen3.5 is reported to write ``<tool_call>``
   inside ``<think>``): each ``<think>`` up to the first ``</think>`` after it,
   and everything up to a first ``</think>`` that comes before any
   ``<think>``. A ``<think>`` that never closes is ``invalid_json``.
2. Zero or more ``<tool_call>…</tool_call>`` blocks, in output order; a block
   ends at the first ``</tool_call>`` after it, and text outside blocks is
   ignored. No block is ``no_json`` (flagged ``calls_in_reasoning`` when a
   thought held one).
3. Each block, less surrounding JSON whitespace, is exactly
   ``<function=NAME>``, zero or more ``<parameter=KEY>VALUE</parameter>``
   (JSON whitespace between them), and ``</function>``. NAME is non-empty,
   without whitespace, brackets, braces, parentheses, quotes, ``<``, ``>``,
   ``=``, ``,`` or ``;``; KEY is non-empty, without whitespace, ``<``, ``>``
   or ``=``; a KEY given twice is refused. VALUE is the text up to the first
   ``</parameter>``, less one newline right after the opening tag and one
   right before the closing tag (the chat template writes both).
4. Each VALUE is typed by the tool's schema
   (:mod:`~sommelier_mlflow.toolcalls._tool_types`): a string parameter keeps
   the text; an integer parameter must read as a JSON integer, and so on,
   else the call is ``invalid_shape``. Without tools every value is a string.
5. Anything else in a block (a missing ``</function>`` or ``</parameter>``,
   text between parameters, an unclosed ``<tool_call>``) is ``invalid_json``.

The tags ``<tool_call>`` and ``</tool_call>`` (and ``<think>``) are special
tokens in these tokenizers, so outputs must be decoded with special tokens kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    CALL_NAME,
    INVALID_JSON,
    INVALID_SHAPE,
    NO_JSON,
    NO_JSON_CALLS_IN_REASONING,
    skip_whitespace,
    split_thoughts,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, register_output_format
from sommelier_mlflow.toolcalls._tool_types import (
    BAD_VALUE,
    LONG_INTEGER,
    parameter_types,
    typed_value,
)

__all__ = ["decode_qwen3_xml"]

_OPEN: Final = "<tool_call>"
_CLOSE: Final = "</tool_call>"
_FUNCTION: Final = "<function="
_FUNCTION_END: Final = "</function>"
_PARAMETER: Final = "<parameter="
_PARAMETER_END: Final = "</parameter>"
_THINK: Final = "<think>"
_UNTHINK: Final = "</think>"
_KEY: Final = re.compile(r"[^\s<>=]+")

#: One block's call before typing: the name and each parameter's raw text.
RawCall = tuple[str, list[tuple[str, str]]]


def _name_at(body: str, pos: int, rule: re.Pattern[str]) -> tuple[str, int] | None:
    """The ``NAME>`` at ``pos`` (matching ``rule``) and the position after ``>``, or ``None``."""
    name = rule.match(body, pos)
    if name is None or not body.startswith(">", name.end()):
        return None
    return name.group(), name.end() + 1


def _read_block(body: str) -> RawCall | None:
    """One block's ``<function=…>`` call, its values untyped, or ``None`` when it does not read."""
    pos = skip_whitespace(body, 0)
    if not body.startswith(_FUNCTION, pos):
        return None
    found = _name_at(body, pos + len(_FUNCTION), CALL_NAME)
    if found is None:
        return None
    name, pos = found
    parameters: list[tuple[str, str]] = []
    seen: set[str] = set()
    while True:
        pos = skip_whitespace(body, pos)
        if body.startswith(_FUNCTION_END, pos):
            rest = pos + len(_FUNCTION_END)
            return (name, parameters) if skip_whitespace(body, rest) == len(body) else None
        if not body.startswith(_PARAMETER, pos):
            return None
        found = _name_at(body, pos + len(_PARAMETER), _KEY)
        if found is None:
            return None
        key, start = found
        end = body.find(_PARAMETER_END, start)
        if end < 0 or key in seen:
            return None
        seen.add(key)
        value = body[start:end]
        if value.startswith("\n"):
            value = value[1:]
        if value.endswith("\n"):
            value = value[:-1]
        parameters.append((key, value))
        pos = end + len(_PARAMETER_END)


def typed_calls(
    raw_calls: Sequence[RawCall], tools: Sequence[Mapping[str, Any]] | None
) -> CallsParseResult:
    """``ok`` with the calls, their values typed by each tool's schema, or the refusal.

    Shared with ``glm45``, whose values are bare text too. Every call is typed
    before a shape failure is reported, so a longer-than-308-digit integer
    anywhere (``invalid_json``) wins over a mistyped value (``invalid_shape``).
    """
    calls: list[dict[str, Any]] = []
    mistyped = False
    for name, parameters in raw_calls:
        types = parameter_types(tools, name) if tools else {}
        arguments: dict[str, Any] = {}
        for key, text in parameters:
            value = typed_value(text, types.get(key, ()))
            if value is LONG_INTEGER:
                return INVALID_JSON
            if value is BAD_VALUE:
                mistyped = True
            arguments[key] = value
        calls.append({"name": name, "arguments": arguments})
    if mistyped:
        return INVALID_SHAPE
    return CallsParseResult("ok", tuple(calls))


def decode_qwen3_xml(
    text: str, tools: Sequence[Mapping[str, Any]] | None = None
) -> CallsParseResult:
    """Decode one completion in the ``qwen3_xml`` format (see the module docstring).

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
        "qwen3_xml",
        "Qwen3-Coder and Qwen3.5: <tool_call><function=NAME><parameter=KEY>value</parameter>"
        "</function></tool_call> blocks, values typed by the tool's schema; thoughts removed.",
        decode=decode_qwen3_xml,
        version="qwen3_xml.v1",
        special_tokens=True,
    )
)
