"""Typing untyped argument text by the tool's schema, for the XML-style output formats.

Qwen3-Coder writes ``<parameter=count>3</parameter>`` (between newlines) and GLM-4.5 writes
``<arg_value>3</arg_value>``: the value is bare text, and whether it is the
integer 3 or the string ``"3"`` is said only by the tool the call names. So
these formats read each value by the JSON type its parameter declares:

- a parameter whose types include ``string``, one the tool does not declare,
  one without a type (any value), a tool not among the example's, or no
  tools at all: the text itself, as a string (nothing is guessed);
- otherwise the text (JSON whitespace around it allowed) must be one strict
  JSON value of a declared type: ``integer`` an integer (``3``, not ``3.0``),
  ``number`` an integer or a float, ``boolean`` ``true``/``false``, ``array``
  a list, ``object`` an object, ``null`` ``null``. Anything else makes the
  call ``invalid_shape``; an integer of more than 308 digits is refused as
  ``invalid_json``, as in every format.

Types are read from the tool's ``parameters`` in either shape a split row
allows (JSON Schema ``{"type": "object", "properties": ...}``, or xlam's
flat ``{name: {"type": "int"}}``), with the dataset type names converted by
the same table native prompts use (:mod:`~sommelier_mlflow.toolcalls._schema_types`).
Its :func:`~sommelier_mlflow.toolcalls._schema_types.parameter_type` answers
the same question for one parameter by converting the whole tool's schema;
decoding reads several values per output in a hot loop, so this module looks
up the raw spec and converts each type name once (cached).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any, Final, TypeGuard

from sommelier_mlflow.toolcalls._decode import strict_json
from sommelier_mlflow.toolcalls._parse import NOT_JSON
from sommelier_mlflow.toolcalls._schema_types import json_schema_type

__all__ = [
    "BAD_VALUE",
    "LONG_INTEGER",
    "spec_types",
    "parameter_specs",
    "parameter_types",
    "typed_value",
    "typed_argument",
]

#: A value that does not read as any of its parameter's types (``invalid_shape``).
BAD_VALUE: Final = object()
#: A value holding an integer of more than 308 digits (``invalid_json``, as every format).
LONG_INTEGER: Final = object()

_LONG_INTEGER: Final = re.compile(r"(?<![0-9.eE])-?[0-9]{309}")
_INTEGER: Final = re.compile(r"[ \t\n\r]*(-?(?:0|[1-9][0-9]{0,307}))[ \t\n\r]*")
_TYPE_OF: Final[Mapping[str, tuple[type, ...]]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, with the common ``dict`` answered without the abc check."""
    return type(value) is dict or isinstance(value, Mapping)


@lru_cache(maxsize=1024)
def _named_types(name: str) -> tuple[str, ...]:
    """The JSON Schema types a type name stands for (``()``: any value); cached, names repeat."""
    converted = json_schema_type(name)[0].get("type")
    if converted is None:
        return ()
    return (converted,) if isinstance(converted, str) else tuple(converted)


def spec_types(spec: object) -> tuple[str, ...]:
    """The JSON types one parameter spec declares; ``()`` means any value (read as a string)."""
    if not _is_mapping(spec):
        return ()
    declared = spec.get("type")
    if isinstance(declared, str):
        return _named_types(declared)
    if not isinstance(declared, list):
        return ()
    found: list[str] = []
    for name in declared:
        if not isinstance(name, str):
            return ()
        types = _named_types(name)
        if not types:
            return ()  # one member takes any value: so does the parameter
        found.extend(types)
    return tuple(found)


def parameter_specs(tools: Sequence[object] | None, name: str) -> Mapping[str, object]:
    """Each parameter of the tool called ``name`` and its spec (``{}``: no such tool).

    Tools may be ``{"name", "parameters"}`` rows or the OpenAI shape
    ``{"type": "function", "function": {...}}``, with parameters as a JSON
    Schema object or xlam's flat form; the first tool named ``name`` counts.
    Anything that is not a tool is passed over, so no row can make a decoder
    raise.
    """
    for tool in tools or ():
        if not _is_mapping(tool):
            continue
        function = tool.get("function", tool)
        if not _is_mapping(function) or function.get("name") != name:
            continue
        parameters = function.get("parameters")
        if not _is_mapping(parameters):
            return {}
        if parameters.get("type") == "object":
            properties = parameters.get("properties")
            return properties if _is_mapping(properties) else {}
        return parameters
    return {}


def parameter_types(tools: Sequence[object] | None, name: str) -> dict[str, tuple[str, ...]]:
    """Each parameter of the tool called ``name`` and its JSON types (empty: read as strings)."""
    return {key: spec_types(spec) for key, spec in parameter_specs(tools, name).items()}


def typed_value(text: str, types: tuple[str, ...]) -> Any:
    """``text`` read as its parameter's types declare (see the module docstring).

    Returns:
        The value; :data:`BAD_VALUE` when it reads as none of ``types``;
        :data:`LONG_INTEGER` when it holds an integer of more than 308 digits.
    """
    if not types or "string" in types:
        return text
    if "integer" in types or "number" in types:
        integer = _INTEGER.fullmatch(text)  # the common case, without a JSON parse
        if integer is not None:
            return int(integer.group(1))
    value = strict_json(text)
    if value is NOT_JSON:
        return LONG_INTEGER if _LONG_INTEGER.search(text) is not None else BAD_VALUE
    for name in types:
        expected = _TYPE_OF.get(name)
        # bool is an int in Python; JSON keeps them apart (true is not 1).
        if expected is not None and isinstance(value, expected):
            if type(value) is bool and bool not in expected:
                continue
            return value
    return BAD_VALUE


def typed_argument(text: str, spec: object) -> Any:
    """``text`` read as the parameter ``spec`` declares: :func:`typed_value` of its types.

    ``spec`` is the parameter's entry in :func:`parameter_specs` (``None``
    when the tool does not declare it: the text, as a string).
    """
    if spec is None:
        return text
    declared = spec.get("type") if type(spec) is dict else None
    types = _named_types(declared) if type(declared) is str else spec_types(spec)
    if not types or "string" in types:  # most parameters: no reading at all
        return text
    return typed_value(text, types)
