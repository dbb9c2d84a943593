r"""The ``openai`` output format (a chat endpoint's calls), decoder ``openai.v1``.

A chat endpoint returns calls as ``tool_calls`` whose ``function.arguments``
is a JSON *string*::

    {"tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}

What the decoder accepts, exactly:

1. Text without ``{`` or ``[`` is zero calls (``no_json``): the endpoint
   answered with content only.
2. Otherwise the whole text (JSON whitespace around it allowed) must be one
   strict JSON value (``invalid_json`` if not): either an object with exactly
   the one key ``tool_calls`` holding a list, or a bare list. An empty list
   is ``ok`` with zero calls.
3. Each item is an object with ``function`` and at most ``id`` (a string) and
   ``type`` (exactly ``"function"``) besides; ``function`` has exactly
   ``name`` (a non-empty string) and ``arguments``, a string holding strict
   JSON that decodes to an object. Arguments given as an object rather than
   a string, or any other shape, are ``invalid_shape``; an arguments string
   that is not strict JSON is ``invalid_json``.
"""

from __future__ import annotations

from typing import Any, Final

from sommelier_mlflow.toolcalls._calls_parse import CallsParseResult
from sommelier_mlflow.toolcalls._decode import (
    INVALID_JSON,
    INVALID_SHAPE,
    NO_JSON,
    strict_json,
)
from sommelier_mlflow.toolcalls._modes import OutputFormat, Tools, register_output_format
from sommelier_mlflow.toolcalls._parse import NOT_JSON

__all__ = ["decode_openai"]

_ITEM_KEYS: Final = frozenset({"id", "type", "function"})


def _function_of(item: Any) -> tuple[str, str] | None:
    """``(name, arguments string)`` of one tool-call object, or ``None`` when its shape is wrong."""
    if type(item) is not dict or "function" not in item or not _ITEM_KEYS.issuperset(item):
        return None
    if type(item.get("id", "")) is not str or item.get("type", "function") != "function":
        return None
    function = item["function"]
    if type(function) is not dict or len(function) != 2:
        return None
    name = function.get("name")
    arguments = function.get("arguments")
    if type(name) is not str or not name or type(arguments) is not str:
        return None
    return name, arguments


def decode_openai(text: str, tools: Tools = ()) -> CallsParseResult:
    """Decode one completion in the ``openai`` format (see the module docstring).

    Args:
        text: The captured ``tool_calls`` message (or bare list) as JSON text.
        tools: The example's tools; not read, since this format's values are
            typed already.

    Returns:
        The calls in list order, or the status that refuses the output.
        Never raises for any ``str``.
    """
    del tools  # typed values: the schemas add nothing
    if "{" not in text and "[" not in text:
        return NO_JSON
    value = strict_json(text)
    if value is NOT_JSON:
        return INVALID_JSON
    if type(value) is dict:
        if len(value) != 1 or "tool_calls" not in value:
            return INVALID_SHAPE
        value = value["tool_calls"]
    if type(value) is not list:
        return INVALID_SHAPE
    calls: list[dict[str, Any]] = []
    all_calls = True
    for item in value:
        function = _function_of(item)
        if function is None:
            all_calls = False
            continue
        arguments = strict_json(function[1])
        if arguments is NOT_JSON:
            return INVALID_JSON
        if type(arguments) is not dict:
            all_calls = False
            continue
        calls.append({"name": function[0], "arguments": arguments})
    if not all_calls:
        return INVALID_SHAPE
    return CallsParseResult("ok", tuple(calls))


register_output_format(
    OutputFormat(
        "openai",
        'An OpenAI-compatible chat endpoint\'s {"tool_calls": [...]} (or a bare list), '
        "function.arguments as a JSON string.",
        decode=decode_openai,
        version="openai.v1",
        special_tokens=False,
    )
)
