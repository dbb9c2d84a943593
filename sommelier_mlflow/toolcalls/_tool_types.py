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
the same table native prompts use (:mod:`sommelier_mlflow.data._schema_types`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow.toolcalls._decode import strict_json
from sommelier_mlflow.toolcalls._parse import NOT_JSON

__all__ = ["BAD_VALUE", "LONG_INTEGER", "parameter_types", "typed_value"]

#: A value that does not read as any of its parameter's types (``invalid_shape``).
BAD_VALUE: Final = object()
#: A value holding an integer of more than 308 digits (``invalid_json``, as every format).
LONG_INTEGER: Final = object()

_LONG_INTEGER: Final = re.compile(r"(?<![0-9.eE])-?[0-9]{309}")
_TYPE_OF: Final[Mapping[str, tuple[type, ...]]] = {
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _json_types(spec: object) -> tuple[str, ...]:
    """The JSON Schema types one parameter spec declares; ``()`` means any value."""
    # Imported here: ``data`` imports ``toolcalls`` at package level, so a
    # module-level import would make the two packages' initialisations a circle.
    from sommelier_mlflow.data._schema_types import json_schema_type

    if not isinstance(spec, Mapping):
        return ()
    declared = spec.get("type")
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list):
        return ()
    found: list[str] = []
    for name in names:
        if not isinstance(name, str):
            return ()
        converted = json_schema_type(name)[0].get("type")
        if converted is None:
            return ()  # one member takes any value: so does the parameter
        found.extend([converted] if isinstance(converted, str) else converted)
    return tuple(found)


def parameter_types(tools: Sequence[object] | None, name: str) -> Mapping[str, tuple[str, ...]]:
    """Each parameter of the tool called ``name`` and its JSON types (empty: read as strings).

    Tools may be ``{"name", "parameters"}`` rows or the OpenAI shape
    ``{"type": "function", "function": {...}}``; the first tool named
    ``name`` counts; anything that is not a tool is passed over, so no
    row can make a decoder raise.
    """
    for tool in tools or ():
        if not isinstance(tool, Mapping):
            continue
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or function.get("name") != name:
            continue
        parameters = function.get("parameters")
        if not isinstance(parameters, Mapping):
            return {}
        if parameters.get("type") == "object":
            properties = parameters.get("properties")
            parameters = properties if isinstance(properties, Mapping) else {}
        return {key: _json_types(spec) for key, spec in parameters.items()}
    return {}


def typed_value(text: str, types: tuple[str, ...]) -> Any:
    """``text`` read as its parameter's types declare (see the module docstring).

    Returns:
        The value; :data:`BAD_VALUE` when it reads as none of ``types``;
        :data:`LONG_INTEGER` when it holds an integer of more than 308 digits.
    """
    if not types or "string" in types:
        return text
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
