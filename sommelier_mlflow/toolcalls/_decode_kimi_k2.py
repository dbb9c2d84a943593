"""The ``kimi_k2`` output format (Kimi K2, Kimi K2 Thinking), decoder ``kimi_k2.v1``.

Kimi K2 writes its calls in a section of special tokens, each call named by a
call id ``functions.<name>:<index>``::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|>

What the decoder accepts is the section reading of
:mod:`~sommelier_mlflow.toolcalls._token_sections` (thoughts removed, text
outside sections ignored, one or more calls per section, strict JSON
arguments) with these tokens, and this rule for the head:

- the call id, less surrounding JSON whitespace, is an optional
  ``functions.`` prefix, the name, ``:`` and an index of ASCII digits; the
  name is everything between the prefix and the last ``:``, non-empty, with
  no whitespace, angle brackets, brackets, braces or quotes. The index is
  the call's number in the conversation and is not checked.

The tokens are special tokens of Kimi's tokenizer, so outputs must be decoded
with special tokens kept.
"""

from __future__ import annotations

import re
from typing import Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._token_sections import SectionTokens, decode_sections

__all__ = ["decode_kimi_k2"]

_PREFIX: Final = "functions."
_NAME: Final = re.compile(r'[^\s<>\[\]{}"]+')
_INDEX: Final = re.compile(r"[0-9]+")


def _name_of(call_id: str) -> str | None:
    """The name in ``functions.<name>:<index>`` (the prefix optional), or ``None``."""
    name, colon, index = call_id.rpartition(":")
    if not colon or _INDEX.fullmatch(index) is None:
        return None
    name = name.removeprefix(_PREFIX)
    return name if _NAME.fullmatch(name) is not None else None


_TOKENS: Final = SectionTokens(
    section_begin="<|tool_calls_section_begin|>",
    section_end="<|tool_calls_section_end|>",
    call_begin="<|tool_call_begin|>",
    separator="<|tool_call_argument_begin|>",
    call_end="<|tool_call_end|>",
    name_of=_name_of,
)


def decode_kimi_k2(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``kimi_k2`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept: without the
            section token, the output reads as making no call.
        tools: The example's tools; unused, the arguments are JSON already.

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools
    return decode_sections(text, _TOKENS)


register_output_format(
    OutputFormat(
        "kimi_k2",
        "Kimi K2: <|tool_calls_section_begin|> and calls <|tool_call_begin|>functions.name:0"
        "<|tool_call_argument_begin|>{...}<|tool_call_end|>; thoughts in <think> removed first.",
        decode=decode_kimi_k2,
        version="kimi_k2.v1",
        special_tokens=True,
    )
)
