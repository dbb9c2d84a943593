"""Parameter types as JSON Schema: the table docs/formats.md documents, row by row."""

from __future__ import annotations

from typing import Any

import pytest

from sommelier_mlflow.data import tool_schemas
from sommelier_mlflow.toolcalls._schema_types import json_schema_parameters, json_schema_type


@pytest.mark.parametrize(
    ("name", "schema", "optional"),
    [
        ("str", {"type": "string"}, False),
        ("string", {"type": "string"}, False),
        ("int", {"type": "integer"}, False),
        ("float", {"type": "number"}, False),
        ("bool", {"type": "boolean"}, False),
        ("list", {"type": "array"}, False),
        ("List[str]", {"type": "array", "items": {"type": "string"}}, False),
        (
            "list[List[int]]",
            {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            False,
        ),
        ("dict", {"type": "object"}, False),
        ("Dict[str, Any]", {"type": "object"}, False),
        ("tuple", {"type": "array"}, False),
        ("Tuple[int, int]", {"type": "array"}, False),
        ("Tuple[float, ...]", {"type": "array", "items": {"type": "number"}}, False),
        ("Optional[int]", {"type": "integer"}, True),
        ("str, optional", {"type": "string"}, True),
        ("List[str], optional", {"type": "array", "items": {"type": "string"}}, True),
        ("Union[int, str]", {"type": ["integer", "string"]}, False),
        ("Union[str, None]", {"type": "string"}, True),
        ("int | None", {"type": "integer"}, True),
        ("any", {}, False),
        ("Any", {}, False),
        ("datetime", {}, False),  # not in the table: any value, nothing guessed
        ("List[str", {}, False),  # malformed: any value
    ],
)
def test_each_type_name_converts_as_documented(
    name: str, schema: dict[str, Any], optional: bool
) -> None:
    assert json_schema_type(name) == (schema, optional)


def test_xlam_parameters_become_an_object_with_required_from_optional_and_default() -> None:
    flat = {
        "city": {"description": "City", "type": "str"},
        "days": {"description": "Days", "type": "int, optional", "default": 3},
        "units": {"description": "Units", "type": "str", "default": "metric"},
        "tags": {"description": "Tags", "type": "List[str]"},
    }
    assert json_schema_parameters(flat) == {
        "type": "object",
        "properties": {
            "city": {"description": "City", "type": "string"},
            "days": {"description": "Days", "type": "integer", "default": 3},
            "units": {"description": "Units", "type": "string", "default": "metric"},
            "tags": {"description": "Tags", "type": "array", "items": {"type": "string"}},
        },
        "required": ["city", "tags"],
    }


def test_a_json_schema_keeps_its_shape_and_nested_types_convert() -> None:
    schema = {
        "type": "object",
        "properties": {
            "point": {"type": "dict", "properties": {"x": {"type": "float"}}},
            "names": {"type": "array", "items": {"type": "str"}},
        },
        "required": ["point"],
    }
    converted = json_schema_parameters(schema)
    assert converted == {
        "type": "object",
        "properties": {
            "point": {"type": "object", "properties": {"x": {"type": "number"}}},
            "names": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["point"],
    }
    assert json_schema_parameters(converted) == converted  # converting twice changes nothing
    assert json_schema_parameters({"type": "object"}) == {
        "type": "object",
        "properties": {},
        "required": [],
    }


def test_tools_take_the_openai_shape_and_the_row_is_left_alone() -> None:
    tool = {"name": "f", "description": "d", "parameters": {"x": {"type": "str"}}}
    original = {"name": "f", "description": "d", "parameters": {"x": {"type": "str"}}}
    assert tool_schemas([tool]) == [
        {
            "type": "function",
            "function": {
                "name": "f",
                "description": "d",
                "parameters": {
                    "type": "object",
                    "properties": {"x": {"type": "string"}},
                    "required": ["x"],
                },
            },
        }
    ]
    assert tool == original
