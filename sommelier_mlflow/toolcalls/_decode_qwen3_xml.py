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
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, ok_calls
from sommelier_mlflow.toolcalls._decode import (
    CALL_NAME,
    INVALID_JSON,
    INVALID_SHAPE,
    NO_JSON,
    NO_JSON_CALLS_IN_REASONING,
    split_thoughts,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._tool_types import (
    BAD_VALUE,
    LONG_INTEGER,
    parameter_specs,
    typed_argument,
)

__all__ = ["decode_qwen3_xml"]

_OPEN: Final = "<tool_call>"
_CLOSE: Final = "</tool_call>"
_HEAD: Final = re.compile(rf"[ \t\n\r]*<function=({CALL_NAME.pattern})>")
#: One parameter; its value is the text up to the first ``</parameter>``, less one
#: newline after the opening tag and one before the closing tag (the template's).
_PARAMETER: Final = re.compile(
    r"[ \t\n\r]*<parameter=([^\s<>=]+)>\n?(.*?)\n?</parameter>", re.DOTALL
)
_TAIL: Final = re.compile(r"[ \t\n\r]*</function>[ \t\n\r]*")
_THINK: Final = "<think>"
_UNTHINK: Final = "</think>"

#: One block's call: its name, its typed arguments, and whether a value did not read as its type.
Call = tuple[str, dict[str, Any], bool]


def _read_block(body: str, tools: Sequence[Mapping[str, Any]] | None) -> Call | object | None:
    """One block's ``<function=…>`` call, typed by ``tools``.

    Returns:
        The call; ``None`` when the block does not read; :data:`LONG_INTEGER`
        when a value holds an integer of more than 308 digits. Each regular
        expression is anchored where the previous one ended and every
        repetition in them is of characters that cannot start the next token,
        so reading is linear in the block.
    """
    head = _HEAD.match(body)
    if head is None:
        return None
    name: str = head.group(1)
    specs = parameter_specs(tools, name) if tools else None
    arguments: dict[str, Any] = {}
    mistyped = False
    pos = head.end()
    while (parameter := _PARAMETER.match(body, pos)) is not None:
        key: str = parameter.group(1)
        if key in arguments:
            return None
        value: object = parameter.group(2)
        if specs:
            value = typed_argument(parameter.group(2), specs.get(key))
            if value is LONG_INTEGER:
                return LONG_INTEGER
            if value is BAD_VALUE:
                mistyped = True
        arguments[key] = value
        pos = parameter.end()
    if _TAIL.fullmatch(body, pos) is None:
        return None
    return name, arguments, mistyped


def read_blocks(
    text: str,
    read: Callable[[str, Sequence[Mapping[str, Any]] | None], Call | object | None],
    tools: Sequence[Mapping[str, Any]] | None,
) -> CallsParseResult:
    """Every ``<tool_call>…</tool_call>`` block of ``text`` (thoughts removed) read by ``read``.

    Shared with ``glm45``: the blocks, thoughts and statuses are the same, the
    inside of a block differs. Syntax before shape: a mistyped value refuses
    the output as ``invalid_shape`` only once every block has read.
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
    calls: list[dict[str, Any]] = []
    mistyped = False
    while start >= 0:
        body = start + len(_OPEN)
        end = text.find(_CLOSE, body)
        if end < 0:
            return INVALID_JSON
        call = read(text[body:end], tools)
        if type(call) is not tuple:  # None or LONG_INTEGER
            return INVALID_JSON
        name, arguments, wrong = call
        mistyped = mistyped or wrong
        calls.append({"name": name, "arguments": arguments})
        start = text.find(_OPEN, end + len(_CLOSE))
    if mistyped:
        return INVALID_SHAPE
    return ok_calls(tuple(calls))


def decode_qwen3_xml(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``qwen3_xml`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept.
        tools: The example's tools, which type each value; ``None``: every
            value is a string.

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``, and never evaluates any of it.
    """
    return read_blocks(text, _read_block, tools)


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
