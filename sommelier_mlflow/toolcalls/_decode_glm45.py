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

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    CALL_NAME,
    JSON_WHITESPACE,
)
from sommelier_mlflow.toolcalls._decode_qwen3_xml import Call, read_blocks
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._tool_types import (
    BAD_VALUE,
    LONG_INTEGER,
    parameter_specs,
    typed_argument,
)

__all__ = ["decode_glm45"]

_KEY: Final = "<arg_key>"
_PAIR: Final = re.compile(
    r"<arg_key>([^<]+)</arg_key>[ \t\n\r]*<arg_value>(.*?)</arg_value>[ \t\n\r]*", re.DOTALL
)


def _read_block(body: str, tools: Sequence[Mapping[str, Any]] | None) -> Call | object | None:
    """One block's call, typed by ``tools``: as ``qwen3_xml``'s reader, for GLM's tags.

    Linear: each pair is matched where the previous one ended.
    """
    first_key = body.find(_KEY)
    name = (body if first_key < 0 else body[:first_key]).strip(JSON_WHITESPACE)
    if CALL_NAME.fullmatch(name) is None:
        return None
    specs = parameter_specs(tools, name) if tools else None
    arguments: dict[str, Any] = {}
    mistyped = False
    pos = len(body) if first_key < 0 else first_key
    while pos < len(body):
        pair = _PAIR.match(body, pos)
        if pair is None:
            return None
        key: str = pair.group(1)
        value: object = pair.group(2)
        if key in arguments:
            return None
        if specs:
            value = typed_argument(pair.group(2), specs.get(key))
            if value is LONG_INTEGER:
                return LONG_INTEGER
            if value is BAD_VALUE:
                mistyped = True
        arguments[key] = value
        pos = pair.end()
    return name, arguments, mistyped


def decode_glm45(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``glm45`` format (see the module docstring).

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
        "glm45",
        "GLM-4.5 to 4.7: <tool_call>NAME<arg_key>KEY</arg_key><arg_value>value</arg_value>"
        "</tool_call> blocks, values typed by the tool's schema; thoughts removed.",
        decode=decode_glm45,
        version="glm45.v1",
        special_tokens=True,
    )
)
