"""Tool-call parsing and flattening, the metric registry, scoring modes and output formats.

This is the scoring core: it depends only on the standard library, orjson
and (for the optimal call assignment of ``calls`` mode, imported lazily)
scipy, so it can score millions of records without MLflow or torch loaded.
"""

from __future__ import annotations

# The native output formats register themselves on import (hermes, llama3_json,
# mistral, openai, pythonic); json is registered by _modes.
from sommelier_mlflow.toolcalls import (  # noqa: F401
    _decode_hermes,
    _decode_llama3,
    _decode_mistral,
    _decode_openai,
    _decode_pythonic,
)
from sommelier_mlflow.toolcalls._bfcl import (
    BFCL_REASONS,
    BfclGold,
    BfclVerdict,
    check_bfcl,
    standardize_bfcl_string,
)
from sommelier_mlflow.toolcalls._bfcl_mode import (
    BFCL_CATEGORY_FIELD,
    BFCL_METRIC_NAMES,
    BFCL_MODE,
    BfclAggregate,
    BfclComparison,
    bfcl_aggregate,
    category_counts,
)
from sommelier_mlflow.toolcalls._calls_parse import (
    CALLS_PARSER_VERSION,
    CallsParseResult,
    parse_tool_calls,
)
from sommelier_mlflow.toolcalls._calls_score import (
    CALLS_METRIC_NAMES,
    CALLS_MODE,
    CALLS_SLICE_FIELD,
    CallsComparison,
    GoldCalls,
    call_count_value,
    compute_calls_metrics,
    matched_argument_pairs,
    score_calls_example,
)
from sommelier_mlflow.toolcalls._flatten import ROOT_PATH, flatten_arguments
from sommelier_mlflow.toolcalls._format_hint import FormatHint, format_hint
from sommelier_mlflow.toolcalls._modes import (
    JSON_FORMAT,
    OutputFormat,
    Parsed,
    ScoringMode,
    output_format,
    output_format_names,
    register_output_format,
    register_scoring_mode,
    scoring_mode,
    scoring_mode_names,
    single_call,
    unregister_output_format,
)
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
    one_example_score,
    score_components,
    score_example,
    score_records,
)

__all__ = [
    "BFCL_CATEGORY_FIELD",
    "BFCL_METRIC_NAMES",
    "BFCL_MODE",
    "BFCL_REASONS",
    "BfclAggregate",
    "BfclComparison",
    "BfclGold",
    "BfclVerdict",
    "CALLS_METRIC_NAMES",
    "CALLS_MODE",
    "CALLS_PARSER_VERSION",
    "CALLS_SLICE_FIELD",
    "CallComparison",
    "CallsComparison",
    "CallsParseResult",
    "DEFAULT_MODE",
    "ExampleScore",
    "FormatHint",
    "GoldCall",
    "GoldCalls",
    "JSON_FORMAT",
    "METRIC_NAMES",
    "MetricValue",
    "OutputFormat",
    "PARSER_VERSION",
    "PARSE_STATUSES",
    "ParseResult",
    "ParseStatus",
    "Parsed",
    "ROOT_PATH",
    "ScoringMetric",
    "ScoringMode",
    "bfcl_aggregate",
    "call_count_value",
    "category_counts",
    "check_bfcl",
    "completion_text",
    "compute_calls_metrics",
    "compute_metrics",
    "flatten_arguments",
    "format_hint",
    "gold_call_of",
    "gold_calls_of",
    "is_missing",
    "is_tool_call",
    "matched_argument_pairs",
    "mcnemar_metric",
    "metrics_from_scores",
    "one_example_score",
    "output_format",
    "output_format_names",
    "parse_tool_call",
    "parse_tool_calls",
    "register_output_format",
    "register_scoring_metric",
    "register_scoring_mode",
    "score_calls_example",
    "score_components",
    "score_example",
    "score_records",
    "scoring_metric_names",
    "scoring_metrics",
    "scoring_mode",
    "scoring_mode_names",
    "scoring_modes",
    "single_call",
    "standardize_bfcl_string",
    "unregister_output_format",
    "unregister_scoring_metric",
]
