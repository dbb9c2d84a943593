"""The ``phi4_mini_json`` output format (Phi-4-mini), decoder ``phi4_mini_json.v1``.

Phi-4-mini answers a call with the word ``functools`` and a JSON list of
calls, each with ``arguments`` (or ``parameters``)::

    functools[{"name": "get_weather", "arguments": {"city": "Paris"}}]

What the decoder accepts, exactly (after trimming JSON whitespace):

1. Text that does not start with ``functools`` and holds no ``{`` or ``[`` is
   zero calls (``no_json``); any other text must start with ``functools``:
   JSON without it, or prose before it, is refused (``invalid_json``).
2. ``functools`` is followed at once by ``[``, and the whole rest is one
   strict JSON array (``invalid_json`` if not: text after the array, a
   cut-off array); ``functools[]`` is ``ok`` with zero calls.
3. Every element is an object with exactly ``name`` (a non-empty string) and
   one of ``arguments`` / ``parameters`` (an object), as ``llama3_json``
   reads a call; anything else is ``invalid_shape``.

``functools`` is ordinary text in Phi-4-mini's tokenizer, so no special token
needs keeping.
"""

from __future__ import annotations

from typing import Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    JSON_WHITESPACE,
    NO_JSON,
    json_call_list,
    llama_call,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format

__all__ = ["decode_phi4_mini_json"]

_MARKER: Final = "functools"


def decode_phi4_mini_json(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``phi4_mini_json`` format (see the module docstring).

    Args:
        text: The raw completion.
        tools: The example's tools; unused, the arguments are JSON already.

    Returns:
        The calls in list order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools
    body = text.strip(JSON_WHITESPACE)
    if not body.startswith(_MARKER):
        return INVALID_JSON if "[" in body or "{" in body else NO_JSON
    rest = body[len(_MARKER) :]
    if rest[:1] != "[":
        return INVALID_JSON
    return json_call_list(rest, llama_call)


register_output_format(
    OutputFormat(
        "phi4_mini_json",
        'Phi-4-mini: functools and a JSON list of {"name", "arguments" or "parameters"} '
        "calls, nothing before it.",
        decode=decode_phi4_mini_json,
        version="phi4_mini_json.v1",
        special_tokens=False,
    )
)
