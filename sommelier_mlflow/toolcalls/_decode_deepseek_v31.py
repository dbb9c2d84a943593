"""The ``deepseek_v31`` output format (DeepSeek-V3.1 and later V3.x), decoder ``deepseek_v31.v1``.

DeepSeek-V3.1 writes its calls in a section of special tokens, each call its
name, a separator token and its JSON arguments (written here with ``|`` and
``_`` where the tokens have U+FF5C FULLWIDTH VERTICAL LINE and U+2581 LOWER
ONE EIGHTH BLOCK)::

    <|tool_calls_begin|><|tool_call_begin|>get_weather<|tool_sep|>{"city": "Paris"}
    <|tool_call_end|><|tool_calls_end|>

What the decoder accepts is the section reading of
:mod:`~sommelier_mlflow.toolcalls._token_sections` (thoughts removed: in
thinking mode the prompt opens the thought and the output closes it; text
outside sections ignored; one or more calls per section; strict JSON
arguments) with these tokens, and this rule for the head:

- the name, less surrounding JSON whitespace, is non-empty, with no
  whitespace, angle brackets, brackets, braces or quotes.

DeepSeek-V3 and R1 wrote ``function<|tool_sep|>name`` and the arguments in a
fenced JSON block: that older form is not this format (its head ``function``
is followed by text that is not JSON, so it is ``invalid_json``). The tokens
are special tokens of DeepSeek's tokenizer, so outputs must be decoded with
special tokens kept.
"""

from __future__ import annotations

import re
from typing import Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._token_sections import SectionTokens, decode_sections

__all__ = ["decode_deepseek_v31"]

_NAME: Final = re.compile(r'[^\s<>\[\]{}"]+')
_BAR: Final = "\uff5c"  # the tokenizer's FULLWIDTH VERTICAL LINE
_LOW: Final = "\u2581"  # and its LOWER ONE EIGHTH BLOCK, which stands for a space


def _token(words: str) -> str:
    """The token spelled ``words`` (``"tool calls begin"``), as the tokenizer writes it."""
    return f"<{_BAR}{words.replace(' ', _LOW)}{_BAR}>"


def _name_of(head: str) -> str | None:
    return head if _NAME.fullmatch(head) is not None else None


_TOKENS: Final = SectionTokens(
    section_begin=_token("tool calls begin"),
    section_end=_token("tool calls end"),
    call_begin=_token("tool call begin"),
    separator=_token("tool sep"),
    call_end=_token("tool call end"),
    name_of=_name_of,
)


def decode_deepseek_v31(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``deepseek_v31`` format (see the module docstring).

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
        "deepseek_v31",
        f"DeepSeek-V3.1: {_TOKENS.section_begin} and calls {_TOKENS.call_begin}name"
        f"{_TOKENS.separator}{{...}}{_TOKENS.call_end}; thoughts in <think> removed first.",
        decode=decode_deepseek_v31,
        version="deepseek_v31.v1",
        special_tokens=True,
    )
)
