from __future__ import annotations

import pytest

from sommelier_mlflow.toolcalls._tool_types import (
    BAD_VALUE,
    LONG_INTEGER,
    parameter_types,
    typed_value,
)
from tests.support.decoder_texts import TYPED_TOOLS


def test_types_come_from_either_tool_shape_with_dataset_names_converted() -> None:
    assert parameter_types(TYPED_TOOLS, "get_weather") == {
        "city": ("string",),
        "days": ("integer",),
        "units": ("string",),
    }
    assert parameter_types(TYPED_TOOLS, "book")["code"] == ("integer", "string")
    assert parameter_types(TYPED_TOOLS, "book")["note"] == ()  # no type: any value
    assert parameter_types(TYPED_TOOLS, "missing") == {}
    assert parameter_types(None, "book") == {}
    xlam = [{"name": "f", "parameters": {"ids": {"type": "List[int]"}, "x": {"type": "Any"}}}]
    assert parameter_types(xlam, "f") == {"ids": ("array",), "x": ()}


@pytest.mark.parametrize(
    ("text", "types", "expected"),
    [
        ("3", ("integer",), 3),
        (" 3\n", ("integer",), 3),  # JSON whitespace around a value
        ("3", ("string",), "3"),
        ("3", (), "3"),  # any value: the text, nothing guessed
        ("3", ("integer", "string"), "3"),
        ("3.0", ("integer",), BAD_VALUE),
        ("3.0", ("number",), 3.0),
        ("true", ("integer",), BAD_VALUE),  # JSON keeps true and 1 apart
        ("true", ("boolean",), True),
        ("1", ("boolean",), BAD_VALUE),
        ("null", ("null", "integer"), None),
        ("null", ("integer",), BAD_VALUE),
        ("[1, 2]", ("array",), [1, 2]),
        ('{"a": 1, "a": 2}', ("object",), BAD_VALUE),  # duplicate keys: not strict JSON
        ("NaN", ("number",), BAD_VALUE),
        ("1" * 309, ("integer",), LONG_INTEGER),
        ("[" + "2" * 400 + "]", ("array",), LONG_INTEGER),
        ('"' + "2" * 400 + '"', ("array",), BAD_VALUE),  # digits in a string are text
    ],
)
def test_typed_values(text: str, types: tuple[str, ...], expected: object) -> None:
    value = typed_value(text, types)
    if expected is BAD_VALUE or expected is LONG_INTEGER:
        assert value is expected
    else:
        assert (value, type(value)) == (expected, type(expected))
