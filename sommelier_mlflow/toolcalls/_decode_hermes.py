"""The ``hermes`` output format (Hermes-2-Pro, Qwen2.5, Qwen3), decoder ``hermes.v1``.

These models answer with one block per call::

    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

What the decoder accepts, exactly:

1. Thoughts are removed first, because a call written while thinking is not
   the answer: every ``<think>`` up to the first ``</think>`` after it; and,
   when the first ``</think>`` comes before any ``<think>``, everything up to
   it (a thought the chat template opened in the prompt, as Qwen3's thinking
   models do). A ``<think>`` that never closes refuses the output
   (``invalid_json``): the model never finished thinking.
2. Zero or more ``<tool_call>…</tool_call>`` blocks follow, in output order; a
   block ends at the first ``</tool_call>`` after its opening tag. Text
   outside blocks is ignored. No block at all is zero calls (``no_json``).
3. Each block, less surrounding JSON whitespace, is exactly one strict-JSON
   ``{"name": <non-empty str>, "arguments": <object>}``.
4. An opening tag without its closing tag, or a block that is not JSON,
   refuses the whole output (``invalid_json``); otherwise a block that is JSON
   but not one call refuses it (``invalid_shape``).

The tags are special tokens in these tokenizers, so outputs must be decoded
with special tokens kept.
"""

from __future__ import annotations

from typing import Any, Final

from sommelier_mlflow._json import JSONDecodeError
from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, ok_calls
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    answer_blocks,
    checked_call,
    parse_piece,
    plain_calls,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format

__all__ = ["decode_hermes"]

_OPEN: Final = "<tool_call>"
_CLOSE: Final = "</tool_call>"


def decode_hermes(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``hermes`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept: ``<tool_call>``
            is one, and a completion decoded without it reads as ``no_json``.
        tools: The example's tools; not read, since this format's values are
            typed already.

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools  # typed values: the schemas add nothing
    read = answer_blocks(text, _OPEN, _CLOSE)
    if isinstance(read, CallsParseResult):
        return read
    text, pieces = read
    values: list[Any] = []
    for piece in pieces:
        try:
            values.append(parse_piece(piece))
        except JSONDecodeError:
            return INVALID_JSON
    if plain_calls(text, values):  # the common case, proved at once for the whole output
        return ok_calls(tuple(values))
    calls: list[dict[str, Any]] = []
    all_calls = True
    for piece, value in zip(pieces, values, strict=True):
        try:
            call = checked_call(piece, value)
        except JSONDecodeError:
            return INVALID_JSON
        if call is None:
            all_calls = False
        else:
            calls.append(call)
    if not all_calls:
        return INVALID_SHAPE
    return ok_calls(tuple(calls))


register_output_format(
    OutputFormat(
        "hermes",
        "Hermes-2-Pro and Qwen: zero or more <tool_call> blocks of one JSON call each; "
        "thoughts in <think> are removed first.",
        decode=decode_hermes,
        version="hermes.v1",
        special_tokens=True,
    )
)
