"""Tool-call parsing, argument flattening and the five strict metrics.

This is the scoring core: it depends only on the standard library and
orjson, so it can score millions of records without MLflow or torch loaded.
"""

from __future__ import annotations

from sommelier_mlflow.toolcalls._flatten import ROOT_PATH, flatten_arguments
from sommelier_mlflow.toolcalls._parse import (
    PARSE_STATUSES,
    PARSER_VERSION,
    ParseResult,
    ParseStatus,
    is_tool_call,
    parse_tool_call,
)
from sommelier_mlflow.toolcalls._score import (
    METRIC_NAMES,
    ExampleScore,
    GoldCall,
    MetricValue,
    compute_metrics,
    metrics_from_scores,
    score_example,
    score_records,
)

__all__ = [
    "ExampleScore",
    "GoldCall",
    "METRIC_NAMES",
    "MetricValue",
    "PARSER_VERSION",
    "PARSE_STATUSES",
    "ParseResult",
    "ParseStatus",
    "ROOT_PATH",
    "compute_metrics",
    "flatten_arguments",
    "is_tool_call",
    "metrics_from_scores",
    "parse_tool_call",
    "score_example",
    "score_records",
]
