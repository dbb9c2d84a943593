"""Tool-call parsing, argument flattening, the metric registry and the five strict metrics.

This is the scoring core: it depends only on the standard library and
orjson, so it can score millions of records without MLflow or torch loaded.
"""

from __future__ import annotations

from sommelier_mlflow.toolcalls._flatten import ROOT_PATH, flatten_arguments
from sommelier_mlflow.toolcalls._normalise import completion_text, gold_call_of, is_missing
from sommelier_mlflow.toolcalls._parse import (
    PARSE_STATUSES,
    PARSER_VERSION,
    ParseResult,
    ParseStatus,
    is_tool_call,
    parse_tool_call,
)
from sommelier_mlflow.toolcalls._registry import (
    DEFAULT_MODE,
    ScoringMetric,
    mcnemar_metric,
    register_scoring_metric,
    register_scoring_mode,
    scoring_metric_names,
    scoring_metrics,
    scoring_modes,
    unregister_scoring_metric,
)
from sommelier_mlflow.toolcalls._score import (
    METRIC_NAMES,
    CallComparison,
    ExampleScore,
    GoldCall,
    MetricValue,
    compute_metrics,
    metrics_from_scores,
    score_components,
    score_example,
    score_records,
)

__all__ = [
    "CallComparison",
    "DEFAULT_MODE",
    "ExampleScore",
    "GoldCall",
    "METRIC_NAMES",
    "MetricValue",
    "PARSER_VERSION",
    "PARSE_STATUSES",
    "ParseResult",
    "ParseStatus",
    "ROOT_PATH",
    "ScoringMetric",
    "completion_text",
    "compute_metrics",
    "flatten_arguments",
    "gold_call_of",
    "is_missing",
    "is_tool_call",
    "mcnemar_metric",
    "metrics_from_scores",
    "parse_tool_call",
    "register_scoring_metric",
    "register_scoring_mode",
    "score_components",
    "score_example",
    "score_records",
    "scoring_metric_names",
    "scoring_metrics",
    "scoring_modes",
    "unregister_scoring_metric",
]
