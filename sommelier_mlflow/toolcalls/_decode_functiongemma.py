"""The ``functiongemma`` output format (FunctionGemma), decoder ``functiongemma.v1``.

FunctionGemma (a Gemma 3 270M tuned for function calling) answers with one
block per call, strings wrapped in its ``<escape>`` token::

    <start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}<end_function_call>

The syntax inside a block is Gemma 4's (see
:mod:`~sommelier_mlflow.toolcalls._decode_gemma4`, rules 2 to 5), with
``<start_function_call>``/``<end_function_call>`` as the block's tags and
``<escape>`` as the string delimiter: zero or more blocks in output order,
text outside them ignored, each exactly ``call:NAME{KEY:VALUE,...}`` whose
values are ``<escape>``-delimited strings, objects, lists, or bare JSON
numbers, ``true``, ``false`` and ``null``. No block is ``no_json``; a block
that breaks the syntax or never closes is ``invalid_json``. The model does
not reason, so nothing is removed first.

The tags and ``<escape>`` are special tokens, so outputs must be decoded with
special tokens kept.
"""

from __future__ import annotations

from typing import Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode_gemma4 import decode_call_blocks
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format

__all__ = ["decode_functiongemma"]

_OPEN: Final = "<start_function_call>"
_CLOSE: Final = "<end_function_call>"
_QUOTE: Final = "<escape>"


def decode_functiongemma(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``functiongemma`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept.
        tools: Unused: the syntax types every value (the output-format seam
            passes the example's tools to every format).

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``, and never evaluates any of it.
    """
    del tools
    return decode_call_blocks(text, _OPEN, _CLOSE, _QUOTE)


register_output_format(
    OutputFormat(
        "functiongemma",
        "FunctionGemma: <start_function_call>call:NAME{key:<escape>text<escape>,n:3}"
        "<end_function_call> blocks.",
        decode=decode_functiongemma,
        version="functiongemma.v1",
        special_tokens=True,
    )
)
