"""The generic metric framework: typed metrics, metric trees and the catalog.

Write a metric by subclassing ``BaseMetric[T]`` with a JSON value type ``T``
and implementing ``evaluate(self, text: str) -> dict[str, T]``. A metric that
needs the row's gold answer declares a keyword-only parameter instead:
``evaluate(self, text: str, *, reference: Any = None)``; call metrics through
``score(text, reference=...)`` (as ``CompositeMetric`` and
``evaluate_metrics`` do) and the reference reaches only those that accept it.

This package imports neither mlflow, torch, transformers nor peft at import
time; ``CountsMetric`` imports transformers only for ``encodings`` counts.
"""

from __future__ import annotations

from sommelier_mlflow.metrics._api import EvaluationResult, MetricSpec, evaluate_metrics
from sommelier_mlflow.metrics._base import BaseMetric, config_schema
from sommelier_mlflow.metrics._catalog import (
    get_metric,
    list_metrics,
    register_metric,
    unregister_metric,
)
from sommelier_mlflow.metrics._composite import CompositeMetric
from sommelier_mlflow.metrics._config import MetricConfig, NoConfig
from sommelier_mlflow.metrics._types import JSONValue

# The framework above never imports its plug-ins; this facade does, so the
# built-in metrics are registered (the catalog complete) before any caller
# can reach get_metric, whichever metrics module it imports first.
from sommelier_mlflow.metrics.builtin import (
    CountsConfig,
    CountsMetric,
    JsonFormatConfig,
    JsonFormatMetric,
    count_characters,
    count_encodings,
    count_tokens,
)

__all__ = [
    "BaseMetric",
    "CompositeMetric",
    "CountsConfig",
    "CountsMetric",
    "EvaluationResult",
    "JSONValue",
    "JsonFormatConfig",
    "JsonFormatMetric",
    "MetricConfig",
    "MetricSpec",
    "NoConfig",
    "config_schema",
    "count_characters",
    "count_encodings",
    "count_tokens",
    "evaluate_metrics",
    "get_metric",
    "list_metrics",
    "register_metric",
    "unregister_metric",
]
