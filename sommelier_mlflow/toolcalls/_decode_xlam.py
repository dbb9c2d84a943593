"""The ``xlam`` output format (Salesforce xLAM-2), decoder ``xlam.v1``.

xLAM models answer a call with a JSON list of calls and nothing else::

    [{"name": "get_weather", "arguments": {"city": "Paris"}}]

What the decoder accepts, exactly:

1. Thoughts are removed first, as in ``hermes`` (a call written while
   thinking is not the answer); a ``<think>`` that never closes refuses the
   output (``invalid_json``).
2. After trimming JSON whitespace, text without any ``{`` or ``[`` is zero
   calls (``no_json``): the model answered in prose. It is flagged
   ``calls_in_reasoning`` when the thoughts' first bracketed JSON value is a
   call or a list of calls (read as the ``calls`` parser reads an output).
3. Any other text must be, as a whole, one strict JSON array (``invalid_json``
   if not: prose around it, a code fence, a cut-off array); ``[]`` is ``ok``
   with zero calls.
4. Every element is exactly ``{"name": <non-empty str>, "arguments": <object>}``;
   anything else, a single call object not in a list included, is
   ``invalid_shape``.
"""

from __future__ import annotations

from typing import Any

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult, parse_tool_calls
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    JSON_WHITESPACE,
    NO_JSON,
    NO_JSON_CALLS_IN_REASONING,
    answer_and_thoughts,
    json_call_list,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._parse import is_tool_call

__all__ = ["decode_xlam"]


def decode_xlam(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``xlam`` format (see the module docstring).

    Args:
        text: The raw completion.
        tools: The example's tools; unused, the arguments are JSON already.

    Returns:
        The calls in list order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools
    split = answer_and_thoughts(text)
    if split is None:
        return INVALID_JSON
    text, thoughts = split
    body = text.strip(JSON_WHITESPACE)
    if "[" not in body and "{" not in body:
        return NO_JSON_CALLS_IN_REASONING if _calls_in(thoughts) else NO_JSON
    return json_call_list(body, _plain_call)


def _plain_call(value: object) -> dict[str, Any] | None:
    """An element of the list, which must be a call exactly (``{"name", "arguments"}``)."""
    return value if is_tool_call(value) else None


def _calls_in(thoughts: str) -> bool:
    """Whether ``thoughts`` hold a call: their first bracketed JSON value is one, or a list."""
    if "{" not in thoughts:  # a call is an object
        return False
    return bool(parse_tool_calls(thoughts).calls)


register_output_format(
    OutputFormat(
        "xlam",
        'xLAM: the whole answer is one JSON list of {"name", "arguments"} calls; '
        "thoughts in <think> removed first.",
        decode=decode_xlam,
        version="xlam.v1",
        special_tokens=False,
    )
)
