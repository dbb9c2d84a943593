"""The ``llama3_json`` output format (Llama 3.1/3.2 JSON calls), decoder ``llama3_json.v1``.

Llama 3.1 and 3.2 answer with a JSON object per call, often after the
``<|python_tag|>`` token, several calls joined by ``;``::

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": ...}

What the decoder accepts, exactly:

1. The text is trimmed of JSON whitespace, then one leading
   ``<|python_tag|>`` is removed if present.
2. Text with no ``{`` left is zero calls (``no_json``), unless it started with
   ``<|python_tag|>``: the tag announces a call, so a tag with no JSON object
   after it is refused (``invalid_json``).
3. Otherwise the whole rest must be one or more JSON values, each opening with
   ``{`` or ``[``, separated by ``;`` (JSON whitespace allowed around each).
   A ``;`` inside a JSON string does not separate. Anything else, including
   prose around the objects or an empty value (``{...};``), is
   ``invalid_json``.
4. Each value must be an object with exactly two keys, ``name`` (a non-empty
   string) and one of ``parameters`` / ``arguments`` (an object); any other
   value makes the output ``invalid_shape``. Either key becomes the call's
   ``arguments``.
"""

from __future__ import annotations

from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    JSON_WHITESPACE,
    NO_JSON,
    json_values_between,
    llama_call,
    strict_json,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format

__all__ = ["decode_llama3_json"]

_PYTHON_TAG: Final = "<|python_tag|>"


def _fast_calls(body: str) -> list[dict[str, Any]] | None:
    """The calls when every ``;``-split part is a call object; ``None`` means "read carefully".

    When every part parses, no ``;`` lay inside a string (a split string
    leaves an unterminated quote behind), so this equals the careful reading.
    """
    calls: list[dict[str, Any]] = []
    for part in body.split(";"):
        if part.lstrip(JSON_WHITESPACE)[:1] != "{":
            return None
        call = llama_call(strict_json(part))
        if call is None:
            return None
        calls.append(call)
    return calls


def decode_llama3_json(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``llama3_json`` format (see the module docstring).

    Args:
        text: The raw completion, decoded with special tokens kept when the
            ``<|python_tag|>`` should count (it is also accepted absent).
        tools: The example's tools; not read, since this format's values are
            typed already.

    Returns:
        The calls in output order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools  # typed values: the schemas add nothing
    body = text.strip(JSON_WHITESPACE)
    tagged = body.startswith(_PYTHON_TAG)
    if tagged:
        body = body[len(_PYTHON_TAG) :]
    if "{" not in body:
        return INVALID_JSON if tagged else NO_JSON
    fast = _fast_calls(body)
    if fast is not None:
        return CallsParseResult("ok", tuple(fast))
    values = json_values_between(body, ";")
    if values is None:
        return INVALID_JSON
    calls = [llama_call(value) for value in values]
    if None in calls:
        return INVALID_SHAPE
    return CallsParseResult("ok", tuple(call for call in calls if call is not None))


register_output_format(
    OutputFormat(
        "llama3_json",
        "Llama 3.1/3.2: JSON objects with name and parameters (or arguments), joined by ';', "
        "after an optional <|python_tag|>.",
        decode=decode_llama3_json,
        version="llama3_json.v1",
        special_tokens=False,
    )
)
