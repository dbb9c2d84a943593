"""Parameter types as JSON Schema, for chat templates and for decoders that type values.

Datasets name parameter types the way their authors' code did: xlam writes
``"str"``, ``"int"``, ``"List[str]"`` and ``"str, optional"``; BFCL writes
``"dict"`` and ``"float"``. Chat templates, and the models trained on them,
expect JSON Schema (``"string"``, ``"integer"``, ``{"type": "array",
"items": ...}``), and some templates break on anything else: vLLM's Hermes
template turns a type into Python's spelling with a macro that recurses
without end on a type name it does not know. So the tools a model is shown
are converted here, while the row keeps its original tools for scoring.

The same view serves an output format whose parameter values are untyped
text (``<parameter=days>3</parameter>``): its decoder receives the example's
tools as the row holds them and asks :func:`parameter_type` what JSON Schema
type a parameter has, whichever shape (xlam's flat one, or JSON Schema) the
row used. The module lives in ``toolcalls`` so those decoders can reach it;
``data`` imports it from here for the templates.

The conversion reads only what a type name says. A name it does not know
loses its type (any value) rather than being guessed; a JSON Schema type
stays exactly as it is, so converting a schema twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = [
    "JSON_SCHEMA_TYPES",
    "json_schema_type",
    "json_schema_parameters",
    "tool_parameters",
    "parameter_schema",
    "parameter_type",
]

#: Type names (lower-cased) and their JSON Schema type; ``None``: any value, no ``type``.
JSON_SCHEMA_TYPES: Final[Mapping[str, str | None]] = {
    "string": "string",
    "str": "string",
    "integer": "integer",
    "int": "integer",
    "number": "number",
    "float": "number",
    "double": "number",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "sequence": "array",
    "set": "array",
    "tuple": "array",
    "object": "object",
    "dict": "object",
    "mapping": "object",
    "any": None,
}
# Generic heads whose one argument is the type of the items (List[str], Set[int]).
_ITEM_HEADS: Final = frozenset({"list", "array", "sequence", "set"})
_OPTIONAL_SUFFIX: Final = ", optional"


def _split_arguments(text: str) -> list[str] | None:
    """The comma-separated arguments of ``Head[...]`` at bracket depth zero, or None."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                return None
        elif char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    if depth != 0:
        return None
    parts.append(text[start:].strip())
    return parts if all(parts) else None


def _union(members: list[str]) -> tuple[dict[str, Any], bool]:
    """``Union[A, B]`` / ``A | B``: ``None`` makes it optional; the rest a type list."""
    optional = any(member.lower() in ("none", "nonetype", "null") for member in members)
    kept = [member for member in members if member.lower() not in ("none", "nonetype", "null")]
    converted = [_convert(member)[0] for member in kept]
    if len(converted) == 1:
        return converted[0], optional
    names: list[str] = []
    for schema in converted:
        name = schema.get("type")
        if not isinstance(name, str):  # one member is any value: so is the union
            return {}, optional
        if name not in names:
            names.append(name)
    # A list of names, not "anyOf": templates that print types (Hermes) read lists.
    return {"type": names[0] if len(names) == 1 else names}, optional


def _convert(text: str) -> tuple[dict[str, Any], bool]:
    """One type name as a JSON Schema fragment, and whether it marks the value optional."""
    text = text.strip()
    if text.lower().endswith(_OPTIONAL_SUFFIX):  # xlam's "str, optional"
        return _convert(text[: -len(_OPTIONAL_SUFFIX)])[0], True
    if "|" in text and "[" not in text:
        return _union([part.strip() for part in text.split("|")])
    if text.lower() in JSON_SCHEMA_TYPES:
        json_type = JSON_SCHEMA_TYPES[text.lower()]
        return ({} if json_type is None else {"type": json_type}), False
    head, bracket, rest = text.partition("[")
    arguments = _split_arguments(rest[:-1]) if bracket and rest.endswith("]") else None
    if arguments is None:
        return {}, False  # an unknown name: any value, nothing guessed
    head = head.strip().lower()
    if head == "optional" and len(arguments) == 1:
        return _convert(arguments[0])[0], True
    if head == "union":
        return _union(arguments)
    json_type = JSON_SCHEMA_TYPES.get(head)
    if json_type == "array":
        items = _convert(arguments[0])[0] if head in _ITEM_HEADS and len(arguments) == 1 else {}
        if head == "tuple" and len(arguments) == 2 and arguments[1] == "...":
            items = _convert(arguments[0])[0]  # Tuple[int, ...]: items of one type
        return ({"type": "array", "items": items} if items else {"type": "array"}), False
    if json_type == "object":
        return {"type": "object"}, False
    return {}, False


def json_schema_type(name: str) -> tuple[dict[str, Any], bool]:
    """A type name as the JSON Schema fragment a template expects.

    Args:
        name: ``"str"``, ``"List[int]"``, ``"Optional[float]"``,
            ``"str, optional"``, ``"Union[int, str]"``, or a JSON Schema
            type name (kept as it is).

    Returns:
        The fragment (``{"type": ...}``, with ``"items"`` for a typed list;
        ``{}`` for ``any`` or a name this table does not know) and whether
        the name marks the parameter optional.
    """
    return _convert(name)


def _schema_node(spec: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """One parameter (or nested) schema with every type converted, and its optionality."""
    converted: dict[str, Any] = {}
    optional = False
    for key, value in spec.items():
        if key == "type" and isinstance(value, str):
            fragment, optional = _convert(value)
            converted.update(fragment)  # a later "items" in spec still overrides
        elif key == "properties" and isinstance(value, Mapping):
            converted[key] = {
                name: _schema_node(child)[0] if isinstance(child, Mapping) else child
                for name, child in value.items()
            }
        elif key == "items" and isinstance(value, Mapping):
            converted[key] = _schema_node(value)[0]
        else:
            converted[key] = value
    return converted, optional


def json_schema_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's ``parameters`` as a JSON Schema object with JSON Schema types.

    A JSON Schema object (``{"type": "object", ...}``) keeps its shape and
    its ``required`` list (``[]`` when it gave none), with every nested type
    converted. The flat ``{name: spec}`` form (xlam's) becomes ``{"type":
    "object", "properties": ..., "required": [...]}``; a parameter is
    required unless its type says optional or it has a ``default``, which is
    how xlam marks the parameters a call may leave out.
    """
    if parameters.get("type") == "object":
        schema, _ = _schema_node(parameters)
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        return schema
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in parameters.items():
        if not isinstance(spec, Mapping):
            properties[name] = spec
            continue
        properties[name], optional = _schema_node(spec)
        if not optional and "default" not in spec:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def _function_of(tool: object) -> Mapping[str, Any] | None:
    """The ``{"name", "parameters"}`` part of a tool: a row's own, or OpenAI's ``function``."""
    if not isinstance(tool, Mapping):
        return None
    function = tool.get("function")
    if "name" not in tool and isinstance(function, Mapping):
        return function
    return tool


def tool_parameters(tools: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any] | None:
    """The parameters of the offered tool ``name`` as one JSON Schema object, or ``None``.

    Args:
        tools: The example's tools as a decoder receives them (the row's own
            shape: xlam's flat parameters, JSON Schema, or OpenAI's
            ``{"type": "function", "function": ...}``).
        name: The tool the output calls.

    Returns:
        ``{"type": "object", "properties": ..., "required": [...]}`` with JSON
        Schema types (see :func:`json_schema_parameters`); ``None`` when no
        offered tool has that name, so a decoder can tell an unknown tool from
        a tool without parameters. Malformed tools are skipped, never raised
        on: a decoder must not raise.
    """
    for tool in tools:
        function = _function_of(tool)
        if function is None or function.get("name") != name:
            continue
        parameters = function.get("parameters", {})
        return json_schema_parameters(parameters if isinstance(parameters, Mapping) else {})
    return None


def parameter_schema(
    tools: Sequence[Mapping[str, Any]], tool: str, parameter: str
) -> dict[str, Any] | None:
    """The JSON Schema of one parameter of one offered tool, or ``None`` if not offered."""
    parameters = tool_parameters(tools, tool)
    if parameters is None:
        return None
    properties = parameters.get("properties")
    found = properties.get(parameter) if isinstance(properties, Mapping) else None
    return dict(found) if isinstance(found, Mapping) else None


def parameter_type(
    tools: Sequence[Mapping[str, Any]], tool: str, parameter: str
) -> str | tuple[str, ...] | None:
    """The JSON Schema type of one parameter: what a decoder of untyped values reads it as.

    Args:
        tools: The example's tools, as the decoder received them.
        tool: The called tool's name.
        parameter: The argument's name.

    Returns:
        ``"integer"``, ``"string"``, ``"number"``, ``"boolean"``, ``"array"``
        or ``"object"`` (xlam's ``"int"`` reads as ``"integer"``); a tuple of
        them for a union (``Union[int, str]``); ``None`` when the tool or the
        parameter is not offered or its type says any value, where the decoder
        must not guess.
    """
    schema = parameter_schema(tools, tool, parameter)
    declared = None if schema is None else schema.get("type")
    if isinstance(declared, str):
        return declared
    if isinstance(declared, list) and all(isinstance(item, str) for item in declared):
        return tuple(declared)
    return None
