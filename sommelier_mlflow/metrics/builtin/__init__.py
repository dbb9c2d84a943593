"""Metrics that ship with sommelier_mlflow, registered in the catalog on import."""

from __future__ import annotations

from sommelier_mlflow.metrics.builtin._counts import (
    CountsConfig,
    CountsMetric,
    count_characters,
    count_encodings,
    count_tokens,
)
from sommelier_mlflow.metrics.builtin._json_format import JsonFormatConfig, JsonFormatMetric
from sommelier_mlflow.metrics.builtin._toolcall import ToolCallConfig, ToolCallMetric

__all__ = [
    "CountsConfig",
    "CountsMetric",
    "JsonFormatConfig",
    "JsonFormatMetric",
    "ToolCallConfig",
    "ToolCallMetric",
    "count_characters",
    "count_encodings",
    "count_tokens",
]
