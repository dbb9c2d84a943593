"""Measures that ship with sommelier_mlflow, registered in the catalog on import."""

from __future__ import annotations

from sommelier_mlflow._deprecation import deprecated_aliases
from sommelier_mlflow.metrics.builtin._counts import (
    CountsConfig,
    CountsMeasure,
    count_characters,
    count_encodings,
    count_tokens,
)
from sommelier_mlflow.metrics.builtin._json_format import JsonFormatConfig, JsonFormatMeasure
from sommelier_mlflow.metrics.builtin._toolcall import ToolCallConfig, ToolCallMeasure

__all__ = [
    "CountsConfig",
    "CountsMeasure",
    "JsonFormatConfig",
    "JsonFormatMeasure",
    "ToolCallConfig",
    "ToolCallMeasure",
    "count_characters",
    "count_encodings",
    "count_tokens",
]

#: Names before issue 31's one vocabulary; each still works until the next release.
__getattr__ = deprecated_aliases(__name__, globals())
