"""sommelier_mlflow: prove, in MLflow, whether a fine-tuned model calls tools better.

The top level re-exports the scoring core (parser, flattening, the five
strict metrics and the registry to add more), the generic metric framework
and the error tree. Importing
it loads neither MLflow nor torch; those are imported by the generation and
integration layers only when used.
"""

from __future__ import annotations

from sommelier_mlflow._deprecation import deprecated_aliases
from sommelier_mlflow.errors import (
    ComparisonRefusedError,
    ConfigError,
    DataError,
    DependencyError,
    InputError,
    InvariantViolationError,
    SommelierError,
    TrackingError,
    UnknownMetricError,
)
from sommelier_mlflow.metrics import (
    BaseMeasure,
    CompositeMeasure,
    CountsMeasure,
    JsonFormatMeasure,
    MeasureResults,
    MeasureSpec,
    count_characters,
    count_encodings,
    count_tokens,
    get_measure,
    register_measure,
)
from sommelier_mlflow.toolcalls import (
    METRIC_NAMES,
    PARSER_VERSION,
    CallMatch,
    MetricValue,
    ParseResult,
    ScoringMetric,
    compute_metrics,
    flatten_arguments,
    parse_tool_call,
    register_scoring_metric,
    scoring_metrics,
    unregister_scoring_metric,
)

__version__ = "0.1.0"

__all__ = [
    "BaseMeasure",
    "CallMatch",
    "ComparisonRefusedError",
    "CompositeMeasure",
    "ConfigError",
    "CountsMeasure",
    "DataError",
    "DependencyError",
    "InputError",
    "InvariantViolationError",
    "JsonFormatMeasure",
    "METRIC_NAMES",
    "MeasureResults",
    "MeasureSpec",
    "MetricValue",
    "PARSER_VERSION",
    "ParseResult",
    "ScoringMetric",
    "SommelierError",
    "TrackingError",
    "UnknownMetricError",
    "compute_metrics",
    "count_characters",
    "count_encodings",
    "count_tokens",
    "flatten_arguments",
    "get_measure",
    "parse_tool_call",
    "register_measure",
    "register_scoring_metric",
    "scoring_metrics",
    "unregister_scoring_metric",
]

#: Names before issue 31's one vocabulary (see the glossary in docs/architecture.md);
#: each still works, with a DeprecationWarning, until the next release.
__getattr__ = deprecated_aliases(__name__, globals())
