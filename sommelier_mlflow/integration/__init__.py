"""MLflow integration: tracking, the ``sommelier`` evaluator plugin, GenAI scorers.

Importing this package does not import MLflow: the tracking functions import
it when called, the evaluator class is built on first access
(:mod:`sommelier_mlflow.integration.evaluator`), and the GenAI scorers live in
:mod:`sommelier_mlflow.scorers`.
"""

from __future__ import annotations

from sommelier_mlflow._redact import REDACTED, redact, redact_value
from sommelier_mlflow.integration._claims import (
    CLAIMS_ARTIFACT,
    TAG_CLAIMS_SHA256,
    TAG_VERDICT,
    check_registration,
    find_registration,
    register_claims,
    verdict_tags,
)
from sommelier_mlflow.integration._figure import comparison_figure, gaps_figure
from sommelier_mlflow.integration._keys import (
    comparison_metric_keys,
    evaluation_metric_keys,
    interval_label,
)
from sommelier_mlflow.integration._params import comparison_params, evaluation_params
from sommelier_mlflow.integration._predictions import (
    EVALUATOR_REPORT_SCHEMA,
    PredictionScores,
    score_predictions,
)
from sommelier_mlflow.integration._primitives import (
    ARTIFACT_DIR,
    COMPARISON_FIGURE,
    EXAMPLES_TABLE,
    GAPS_FIGURE,
    MAX_METRICS_PER_BATCH,
    TAG_MODEL_KIND,
    TAG_PARSER_VERSION,
    TAG_TEST_SPLIT_SHA256,
    artifact_uri,
    log_artifact_files,
    log_comparison_figure,
    log_example_table,
    log_json_artifact,
    log_metrics_batch,
    log_params,
    log_test_split_input,
    log_text_artifact,
    set_sommelier_tags,
)
from sommelier_mlflow.integration._store_errors import check_tracking_server, tracking_errors
from sommelier_mlflow.integration._traces import (
    AUTO_TRACE_LIMIT,
    ExampleTrace,
    LogTraces,
    arm_example_traces,
    log_example_traces,
    should_log_traces,
)
from sommelier_mlflow.integration._tracking import log_comparison_run, log_evaluation_run

__all__ = [
    "ARTIFACT_DIR",
    "AUTO_TRACE_LIMIT",
    "CLAIMS_ARTIFACT",
    "COMPARISON_FIGURE",
    "EVALUATOR_REPORT_SCHEMA",
    "EXAMPLES_TABLE",
    "ExampleTrace",
    "GAPS_FIGURE",
    "LogTraces",
    "MAX_METRICS_PER_BATCH",
    "PredictionScores",
    "REDACTED",
    "TAG_CLAIMS_SHA256",
    "TAG_MODEL_KIND",
    "TAG_PARSER_VERSION",
    "TAG_TEST_SPLIT_SHA256",
    "TAG_VERDICT",
    "arm_example_traces",
    "artifact_uri",
    "check_registration",
    "check_tracking_server",
    "comparison_figure",
    "comparison_metric_keys",
    "comparison_params",
    "evaluation_metric_keys",
    "evaluation_params",
    "find_registration",
    "gaps_figure",
    "interval_label",
    "log_artifact_files",
    "log_comparison_figure",
    "log_comparison_run",
    "log_evaluation_run",
    "log_example_table",
    "log_example_traces",
    "log_json_artifact",
    "log_metrics_batch",
    "log_params",
    "log_test_split_input",
    "log_text_artifact",
    "redact",
    "redact_value",
    "register_claims",
    "score_predictions",
    "set_sommelier_tags",
    "should_log_traces",
    "tracking_errors",
    "verdict_tags",
]
