"""Rows and tools shared by the data-layer tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from sommelier_mlflow.errors import DataError

WEATHER_TOOL: dict[str, Any] = {
    "name": "get_weather",
    "description": "Current weather for a city.",
    "parameters": {"city": {"type": "str", "description": "City name"}},
}
SCHEMA_TOOL: dict[str, Any] = {
    "name": "convert",
    "description": "Convert an amount between currencies.",
    "parameters": {
        "type": "object",
        "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
        "required": ["amount", "to"],
    },
}
WEATHER_CALL: dict[str, Any] = {"name": "get_weather", "arguments": {"city": "Paris"}}

WriteLines = Callable[[Sequence[Any]], Path]


def native_row(example_id: Any = "ex-1", **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "schema_version": "sommelier_mlflow.test_example.v1",
        "example_id": example_id,
        "query": "What is the weather in Paris?",
        "tools": [WEATHER_TOOL],
        "gold_calls": [WEATHER_CALL],
    }
    row.update(overrides)
    return row


def encode(item: Any) -> bytes:
    """A row as one JSONL line; ``str``/``bytes`` items are written verbatim."""
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    return orjson.dumps(item) + b"\n"


def expect_error(path: Path, line: int | None, fragment: str, *, reader: Any) -> None:
    """``reader(path)`` fails closed: exit 2, naming the file (and line) and saying ``fragment``."""
    with pytest.raises(DataError) as info:
        reader(path)
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert str(info.value).startswith(where), str(info.value)
    assert fragment in str(info.value), str(info.value)
    assert info.value.exit_code == 2
