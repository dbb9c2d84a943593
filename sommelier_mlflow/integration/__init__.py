"""MLflow integration: tracking, the ``sommelier`` evaluator plugin, GenAI scorers.

The facade holds what the CLI, tests and users call; the single-write helpers
behind them stay in their private modules.

Importing this package does not import MLflow: the tracking functions import
it when called, the evaluator class is built on first access
(:mod:`sommelier_mlflow.integration.evaluator`), and the GenAI scorers live in
:mod:`sommelier_mlflow.scorers`.
"""

from __future__ import annotations

from sommelier_mlflow._redact import REDACTED, redact
from sommelier_mlflow.integration._claims import (
    CLAIMS_ARTIFACT,
    TAG_CLAIMS_SHA256,
    TAG_VERDICT,
    check_registration,
    find_registration,
    register_claims,
)
from sommelier_mlflow.integration._datasets import (
    DATASET_PREFIX,
    PushedDataset,
    is_dataset_reference,
    push_dataset_split,
    read_dataset_split,
)
from sommelier_mlflow.integration._figure import comparison_figure, gaps_figure, leaderboard_figure
from sommelier_mlflow.integration._keys import (
    comparison_metric_keys,
    evaluation_metric_keys,
    interval_label,
)
from sommelier_mlflow.integration._leaderboard import TAG_BEST_ADAPTER_RUN, log_leaderboard
from sommelier_mlflow.integration._logged_models import (
    TAG_CHECKPOINT_STEP,
    TAG_IDENTITY_SHA256,
    TAG_LOGGED_MODEL_ID,
    TAG_TRAINING_RUN_ID,
    LoggedModelUnsupportedWarning,
    download_checkpoint_report,
    is_logged_model_id,
    log_checkpoint_model,
)
from sommelier_mlflow.integration._model_registry import (
    REGISTRY_PREFIX,
    RegisteredModel,
    check_alias,
    check_promotion,
    is_registry_uri,
    parse_registry_uri,
    promote_version,
    resolve_registered_model,
)
from sommelier_mlflow.integration._predictions import score_predictions
from sommelier_mlflow.integration._primitives import (
    MAX_METRICS_PER_BATCH,
    check_logged_report,
    log_artifact_files,
    log_json_artifact,
    log_metrics_batch,
    log_params,
    log_text_artifact,
    read_active_run,
    set_sommelier_tags,
)
from sommelier_mlflow.integration._store_errors import check_tracking_server, tracking_errors
from sommelier_mlflow.integration._trace_entities import ExampleTrace
from sommelier_mlflow.integration._traces import (
    AUTO_TRACE_LIMIT,
    arm_example_traces,
    log_example_traces,
    should_log_traces,
)
from sommelier_mlflow.integration._tracking import (
    log_comparison_run,
    log_evaluation_run,
    log_verdict,
)

__all__ = [
    "AUTO_TRACE_LIMIT",
    "CLAIMS_ARTIFACT",
    "DATASET_PREFIX",
    "ExampleTrace",
    "LoggedModelUnsupportedWarning",
    "MAX_METRICS_PER_BATCH",
    "PushedDataset",
    "REDACTED",
    "REGISTRY_PREFIX",
    "RegisteredModel",
    "TAG_BEST_ADAPTER_RUN",
    "TAG_CHECKPOINT_STEP",
    "TAG_CLAIMS_SHA256",
    "TAG_IDENTITY_SHA256",
    "TAG_LOGGED_MODEL_ID",
    "TAG_TRAINING_RUN_ID",
    "TAG_VERDICT",
    "arm_example_traces",
    "check_alias",
    "check_logged_report",
    "check_promotion",
    "check_registration",
    "check_tracking_server",
    "comparison_figure",
    "comparison_metric_keys",
    "download_checkpoint_report",
    "evaluation_metric_keys",
    "find_registration",
    "gaps_figure",
    "interval_label",
    "is_dataset_reference",
    "is_logged_model_id",
    "is_registry_uri",
    "leaderboard_figure",
    "log_artifact_files",
    "log_checkpoint_model",
    "log_comparison_run",
    "log_evaluation_run",
    "log_example_traces",
    "log_json_artifact",
    "log_leaderboard",
    "log_metrics_batch",
    "log_params",
    "log_text_artifact",
    "log_verdict",
    "parse_registry_uri",
    "promote_version",
    "push_dataset_split",
    "read_active_run",
    "read_dataset_split",
    "redact",
    "register_claims",
    "resolve_registered_model",
    "score_predictions",
    "set_sommelier_tags",
    "should_log_traces",
    "tracking_errors",
]
