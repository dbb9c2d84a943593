"""The generic measure framework: typed measures, measure trees and the catalog.

Write a measure by subclassing ``BaseMeasure[T]`` with a JSON value type ``T``
and implementing ``evaluate(self, text: str) -> dict[str, T]``. A measure that
needs the row's gold answer declares a keyword-only parameter instead:
``evaluate(self, text: str, *, reference: Any = None)``; call measures through
``score(text, reference=...)`` (as ``CompositeMeasure`` and
``evaluate_measures`` do) and the reference reaches only those that accept it.

This package imports neither mlflow, torch, transformers nor peft at import
time; ``CountsMeasure`` imports transformers only for ``encodings`` counts.
"""

from __future__ import annotations

from sommelier_mlflow._deprecation import deprecated_aliases
from sommelier_mlflow.metrics._api import MeasureResults, MeasureSpec, evaluate_measures
from sommelier_mlflow.metrics._base import BaseMeasure, config_schema
from sommelier_mlflow.metrics._catalog import (
    get_measure,
    list_measures,
    register_measure,
    unregister_measure,
)
from sommelier_mlflow.metrics._composite import CompositeMeasure
from sommelier_mlflow.metrics._config import MeasureConfig, NoConfig
from sommelier_mlflow.metrics._types import JSONValue

# The framework above never imports its plug-ins; this facade does, so the
# built-in measures are registered (the catalog complete) before any caller
# can reach get_measure, whichever measures module it imports first.
from sommelier_mlflow.metrics.builtin import (
    CountsConfig,
    CountsMeasure,
    JsonFormatConfig,
    JsonFormatMeasure,
    count_characters,
    count_encodings,
    count_tokens,
)

__all__ = [
    "BaseMeasure",
    "CompositeMeasure",
    "CountsConfig",
    "CountsMeasure",
    "JSONValue",
    "JsonFormatConfig",
    "JsonFormatMeasure",
    "MeasureConfig",
    "MeasureResults",
    "MeasureSpec",
    "NoConfig",
    "config_schema",
    "count_characters",
    "count_encodings",
    "count_tokens",
    "evaluate_measures",
    "get_measure",
    "list_measures",
    "register_measure",
    "unregister_measure",
]

#: Names before issue 31's one vocabulary; each still works until the next release.
__getattr__ = deprecated_aliases(__name__, globals())
