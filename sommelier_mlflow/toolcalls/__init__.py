"""Tool-call parsing and flattening, the metric registry, the five metrics, the calls mode.

This is the scoring core: it depends only on the standard library, orjson
and (for the optimal call assignment of ``calls`` mode, imported lazily)
scipy, so it can score millions of records without MLflow or torch loaded.
"""

from __future__ import annotations

from sommelier_mlflow.toolcalls._calls_parse import (
    CALLS_PARSER_VERSION,
    CallsParseResult,
    parse_tool_calls,
)
from sommelier_mlflow.toolcalls._calls_score import (
    CALLS_METRIC_NAMES,
    CALLS_MODE,
    CallsComparison,
    GoldCalls,
    compute_calls_metrics,
    matched_argument_pairs,
    score_calls_example,
)
from sommelier_mlflow.toolcalls._flatten import ROOT_PATH, flatten_arguments
from sommelier_mlflow.toolcalls._normalise import (
    completion_text,
    gold_call_of,
    gold_calls_of,
    is_missing,
)
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
    "CALLS_METRIC_NAMES",
    "CALLS_MODE",
    "CALLS_PARSER_VERSION",
    "CallComparison",
    "CallsComparison",
    "CallsParseResult",
    "DEFAULT_MODE",
    "ExampleScore",
    "GoldCall",
    "GoldCalls",
    "METRIC_NAMES",
    "MetricValue",
    "PARSER_VERSION",
    "PARSE_STATUSES",
    "ParseResult",
    "ParseStatus",
    "ROOT_PATH",
    "ScoringMetric",
    "completion_text",
    "compute_calls_metrics",
    "compute_metrics",
    "flatten_arguments",
    "gold_call_of",
    "gold_calls_of",
    "is_missing",
    "is_tool_call",
    "matched_argument_pairs",
    "mcnemar_metric",
    "metrics_from_scores",
    "parse_tool_call",
    "parse_tool_calls",
    "register_scoring_metric",
    "register_scoring_mode",
    "score_calls_example",
    "score_components",
    "score_example",
    "score_records",
    "scoring_metric_names",
    "scoring_metrics",
    "scoring_modes",
    "unregister_scoring_metric",
]
