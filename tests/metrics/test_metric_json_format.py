from __future__ import annotations

import json
from typing import Any

import pytest

from sommelier_mlflow.errors import MetricConfigError
from sommelier_mlflow.metrics import JsonFormatConfig, JsonFormatMeasure

JOKE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string"},
        "setup": {"type": "string"},
        "joke": {"type": "string"},
        "funniness_score": {"type": "number", "minimum": 0.0, "maximum": 1.0},
    },
    "required": ["question", "joke"],
}


def _verdict(text: str, schema: dict[str, Any] = JOKE_SCHEMA, **extra: Any) -> dict[str, bool]:
    metric = JsonFormatMeasure(expected_schema=schema, **extra)
    return metric.evaluate(text)["JsonFormatMetric"]


def test_all_fields_valid() -> None:
    text = json.dumps({"question": "q", "setup": "s", "joke": "j", "funniness_score": 0.5})
    assert _verdict(text) == dict.fromkeys(JOKE_SCHEMA["properties"], True)


def test_missing_optional_is_valid_and_missing_required_is_not() -> None:
    assert _verdict('{"question": "q"}') == {
        "question": True,
        "setup": True,
        "joke": False,
        "funniness_score": True,
    }


def test_null_optional_is_valid_and_null_required_is_not() -> None:
    text = '{"question": null, "joke": "j", "setup": null, "funniness_score": null}'
    assert _verdict(text) == {
        "question": False,
        "setup": True,
        "joke": True,
        "funniness_score": True,
    }


def test_present_fields_are_checked_against_their_schema() -> None:
    text = '{"question": 3, "joke": "j", "setup": ["x"], "funniness_score": 1.5}'
    assert _verdict(text) == {
        "question": False,
        "setup": False,
        "joke": True,
        "funniness_score": False,
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n",
        "not json",
        '{"question": "q", "joke": "j",}',
        '{"question": NaN}',
        'Sure! {"question": "q", "joke": "j"}',
        '[{"question": "q", "joke": "j"}]',
        '"a string"',
        "42",
        "null",
    ],
)
def test_unparseable_or_non_object_text_fails_every_field(text: str) -> None:
    assert _verdict(text) == dict.fromkeys(JOKE_SCHEMA["properties"], False)


def test_schema_as_json_string_equals_dict() -> None:
    from_string = JsonFormatMeasure.from_config(expected_schema=json.dumps(JOKE_SCHEMA))
    assert from_string.config["expected_schema"] == JOKE_SCHEMA
    assert from_string.evaluate('{"question": "q", "joke": "j"}') == {
        "JsonFormatMetric": dict.fromkeys(JOKE_SCHEMA["properties"], True)
    }


def test_whole_payload_as_json() -> None:
    payload = json.dumps({"expected_schema": JOKE_SCHEMA, "check_formats": True})
    metric = JsonFormatMeasure.from_config(json_payload=payload)
    assert metric.config["check_formats"] is True


def test_formats_are_checked_only_when_asked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "day": {"type": "string", "format": "date"},
            "mail": {"type": "string", "format": "email"},
        },
    }
    text = '{"day": "2024-13-45", "mail": "nobody"}'
    assert _verdict(text, schema) == {"day": True, "mail": True}
    assert _verdict(text, schema, check_formats=True) == {"day": False, "mail": False}
    good = '{"day": "2024-02-29", "mail": "a@b.example"}'
    assert _verdict(good, schema, check_formats=True) == {"day": True, "mail": True}


def test_refs_into_defs_resolve() -> None:
    schema = {
        "$defs": {"positive": {"type": "integer", "minimum": 1}},
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/positive"}, "m": {"$ref": "#/$defs/positive"}},
        "required": ["n", "m"],
    }
    assert _verdict('{"n": 3, "m": 0}', schema) == {"n": True, "m": False}


def test_nested_errors_count_against_their_top_level_field() -> None:
    schema = {
        "type": "object",
        "properties": {
            "args": {"type": "object", "properties": {"city": {"type": "string"}}},
            "name": {"type": "string"},
        },
    }
    assert _verdict('{"args": {"city": 1}, "name": "x"}', schema) == {"args": False, "name": True}
    assert _verdict('{"args": {"city": "Oslo"}, "extra": 1}', schema) == {
        "args": True,
        "name": True,
    }


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ("{not json", "not valid JSON"),
        ({"type": "array", "items": {}}, '"type": "object"'),
        ({"properties": {"a": {}}}, '"type": "object"'),
        ({"type": "object"}, '"properties"'),
        ({"type": "object", "properties": {}}, '"properties"'),
        ({"type": "object", "properties": {"a": {"type": "strng"}}}, "not a valid draft 2020-12"),
        ({"type": "object", "properties": {"a": {"minimum": "zero"}}}, "properties/a/minimum"),
        (["type", "object"], "valid dictionary"),
    ],
)
def test_invalid_schemas_are_refused_at_config_time(schema: object, message: str) -> None:
    with pytest.raises(MetricConfigError, match=message):
        JsonFormatMeasure(expected_schema=schema)


def test_config_requires_schema_and_strict_bool() -> None:
    with pytest.raises(MetricConfigError, match="expected_schema: Field required"):
        JsonFormatMeasure()
    with pytest.raises(MetricConfigError, match="check_formats"):
        JsonFormatMeasure(expected_schema=JOKE_SCHEMA, check_formats="yes")
    assert JsonFormatMeasure.config_schema is JsonFormatConfig
    assert JsonFormatMeasure.value_type == dict[str, bool]


def test_mutating_the_input_schema_later_changes_nothing() -> None:
    schema = json.loads(json.dumps(JOKE_SCHEMA))
    metric = JsonFormatMeasure(expected_schema=schema)
    schema["properties"]["joke"]["type"] = "integer"
    assert metric.evaluate('{"question": "q", "joke": "j"}')["JsonFormatMetric"]["joke"] is True
