"""Shape checks for tool schemas and gold calls, shared by the readers and ``prepare``.

Both the test-split reader and the raw-row preparation must agree on what a
usable tool list and gold call are; otherwise a row ``prepare`` kept could
be refused by the reader (or the reverse). The checks return a problem
description instead of raising, so each caller can turn it into its own
kind of failure: a counted drop reason in ``prepare``, a ``DataError``
naming file and line in the reader.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Any

from sommelier_mlflow.toolcalls import is_tool_call

__all__ = [
    "tool_schema_problem",
    "tools_problem",
    "gold_call_problem",
    "normalize_query",
    "query_hash",
]


def _parameters_problem(parameters: object) -> str | None:
    """Accept the two parameter shapes seen in practice.

    JSON Schema (``{"type": "object", "properties": {...}}``) is what chat
    templates and OpenAI-style tools use; the xlam dataset uses a flat
    mapping from parameter name to its spec. A flat parameter may itself be
    called ``type``, so a schema is recognised by ``type == "object"`` only.
    """
    if not isinstance(parameters, dict):
        return "'parameters' must be an object"
    if parameters.get("type") == "object":
        properties = parameters.get("properties", {})
        if not isinstance(properties, dict):
            return "'parameters.properties' must be an object"
        for key, spec in properties.items():
            if not isinstance(spec, dict):
                return f"property {key!r} must be described by an object"
        required = parameters.get("required", [])
        if not isinstance(required, list) or not all(isinstance(item, str) for item in required):
            return "'parameters.required' must be a list of strings"
        return None
    for key, spec in parameters.items():
        if not isinstance(spec, dict):
            return f"parameter {key!r} must be described by an object"
    return None


def tool_schema_problem(tool: object) -> str | None:
    """Describe what is wrong with one tool schema, or return ``None`` if it is usable."""
    if not isinstance(tool, dict):
        return f"a tool must be an object, got {type(tool).__name__}"
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        return "a tool needs a non-empty string 'name'"
    if "description" in tool and not isinstance(tool["description"], str):
        return f"tool {name!r}: 'description' must be a string"
    if "parameters" in tool:
        problem = _parameters_problem(tool["parameters"])
        if problem is not None:
            return f"tool {name!r}: {problem}"
    return None


def tools_problem(tools: object) -> str | None:
    """Describe what is wrong with a tool list, or return ``None``.

    The list must be non-empty (a gold call has to name an offered tool) and
    tool names unique (otherwise a call's name would not say which schema
    it targets).
    """
    if not isinstance(tools, list):
        return f"'tools' must be a list of tool schemas, got {type(tools).__name__}"
    if not tools:
        return "'tools' is empty; at least the tool of the gold call must be offered"
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        problem = tool_schema_problem(tool)
        if problem is not None:
            return f"tools[{index}]: {problem}"
        name = tool["name"]
        if name in seen:
            return f"tool name {name!r} is offered twice"
        seen.add(name)
    return None


def gold_call_problem(call: object, tools: list[Any]) -> str | None:
    """Describe what is wrong with a gold call given its (already valid) tools, or ``None``."""
    if not isinstance(call, dict) or not is_tool_call(call):
        return (
            "the gold call must be exactly {'name': non-empty string, 'arguments': object}, "
            f"got {call!r}"
        )
    offered = {tool["name"] for tool in tools}
    if call["name"] not in offered:
        return f"the gold call names tool {call['name']!r}, which is not among the offered tools"
    return None


def normalize_query(query: str) -> str:
    """Normalise a query for duplicate detection.

    NFKC folds compatibility characters (full-width letters, ligatures),
    casefold handles case beyond ASCII, and collapsing whitespace ignores
    spacing differences: queries that read the same count as the same.
    """
    return " ".join(unicodedata.normalize("NFKC", query).casefold().split())


def query_hash(query: str) -> str:
    """Hex SHA-256 of the normalised query: the duplicate key."""
    return hashlib.sha256(normalize_query(query).encode("utf-8")).hexdigest()
