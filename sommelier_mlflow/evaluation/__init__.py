"""Evaluation layer: joining, scoring, reports, the comparison gate and statistics.

The flow is ``score_run`` (one arm: split + generations -> ``ScoredRun`` ->
``evaluation_report.json``), then ``compare_reports`` / ``run_comparison``
(two reports -> gate -> ``comparison_report.json`` + ``.md``), and
``read_claims`` / ``decide_claims`` (preregistered claims -> a verdict from the
comparison's own bootstrap draws). Nothing here imports MLflow or torch.
"""

from __future__ import annotations

from sommelier_mlflow._deprecation import deprecated_aliases
from sommelier_mlflow.evaluation._claims import (
    CLAIMS_SCHEMA,
    Claim,
    ClaimDecision,
    ClaimsSpec,
    RegistrationRecord,
    Verdict,
    bootstrap_p_value,
    check_claims,
    decide_claims,
    holm_adjust,
    parse_claims,
    read_claims,
)
from sommelier_mlflow.evaluation._compare import (
    COMPARISON_MARKDOWN_FILENAME,
    COMPARISON_REPORT_FILENAME,
    GATE_FIELDS,
    MCNEMAR_METRIC,
    ComparisonArtifacts,
    check_comparable,
    compare_reports,
    compare_reports_with_draws,
    run_comparison,
    write_comparison_report,
)
from sommelier_mlflow.evaluation._comparison_report import (
    MARGINAL_GAP_NOTE,
    ComparisonIdentity,
    ComparisonReport,
    LanguageGap,
    MarginalGap,
    RunSummary,
    SliceComparison,
    read_comparison_report,
)
from sommelier_mlflow.evaluation._digests import pair_set_digest, prompt_set_digest
from sommelier_mlflow.evaluation._joining import score_run
from sommelier_mlflow.evaluation._leaderboard import (
    LEADERBOARD_FILENAME,
    LEADERBOARD_MARKDOWN_FILENAME,
    LEADERBOARD_SCHEMA,
    AdapterArm,
    Leaderboard,
    LeaderboardRow,
    build_leaderboard,
    family_decisions,
    read_leaderboard,
    render_leaderboard_markdown,
    select_p_value,
    write_leaderboard,
)
from sommelier_mlflow.evaluation._markdown import render_comparison_markdown
from sommelier_mlflow.evaluation._predictions_report import (
    EVALUATOR_REPORT_SCHEMA,
    PredictionsReport,
    read_predictions_report,
    write_predictions_report,
)
from sommelier_mlflow.evaluation._report import (
    EVALUATION_REPORT_FILENAME,
    AdapterIdentity,
    ArmIdentity,
    EvaluationReport,
    SkippedOverlong,
    read_evaluation_report,
    validate_evaluation_report,
    write_evaluation_report,
)
from sommelier_mlflow.evaluation._results import (
    AnsweredExample,
    BootstrapSettings,
    ExampleResult,
    PairCoverage,
    PairedSlice,
    ScoredExamples,
    ScoredRun,
    SliceResult,
    metrics_from_components,
)
from sommelier_mlflow.evaluation._scoring import score_completions
from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import (
    BOOTSTRAP_METHOD,
    MCNEMAR_METHOD,
    QUANTILE_METHOD,
    BootstrapDraws,
    McNemarResult,
    MetricInterval,
    PairedBootstrapResult,
    mcnemar_exact,
    mcnemar_from_outcomes,
    mcnemar_one_sided,
    paired_bootstrap,
    paired_bootstrap_draws,
)
from sommelier_mlflow.evaluation._weighted import (
    WeightedDelta,
    weighted_overall_delta,
    weighted_overall_of,
)

__all__ = [
    "AdapterArm",
    "AdapterIdentity",
    "AnsweredExample",
    "ArmIdentity",
    "BOOTSTRAP_METHOD",
    "BootstrapDraws",
    "BootstrapSettings",
    "CLAIMS_SCHEMA",
    "COMPARISON_MARKDOWN_FILENAME",
    "COMPARISON_REPORT_FILENAME",
    "Claim",
    "ClaimDecision",
    "ClaimsSpec",
    "ComparisonArtifacts",
    "ComparisonIdentity",
    "ComparisonReport",
    "EVALUATION_REPORT_FILENAME",
    "EVALUATOR_REPORT_SCHEMA",
    "EvaluationReport",
    "ExampleResult",
    "GATE_FIELDS",
    "LEADERBOARD_FILENAME",
    "LEADERBOARD_MARKDOWN_FILENAME",
    "LEADERBOARD_SCHEMA",
    "LanguageGap",
    "Leaderboard",
    "LeaderboardRow",
    "MARGINAL_GAP_NOTE",
    "MCNEMAR_METHOD",
    "MCNEMAR_METRIC",
    "MarginalGap",
    "McNemarResult",
    "MetricInterval",
    "PairCoverage",
    "PairedBootstrapResult",
    "PairedSlice",
    "PredictionsReport",
    "QUANTILE_METHOD",
    "RegistrationRecord",
    "RunSummary",
    "ScoredExamples",
    "ScoredRun",
    "SkippedOverlong",
    "SliceComparison",
    "SliceResult",
    "Verdict",
    "WeightedDelta",
    "bootstrap_p_value",
    "build_leaderboard",
    "check_claims",
    "check_comparable",
    "compare_reports",
    "compare_reports_with_draws",
    "decide_claims",
    "derive_seed",
    "family_decisions",
    "holm_adjust",
    "mcnemar_exact",
    "mcnemar_from_outcomes",
    "mcnemar_one_sided",
    "metrics_from_components",
    "pair_set_digest",
    "paired_bootstrap",
    "paired_bootstrap_draws",
    "parse_claims",
    "prompt_set_digest",
    "read_claims",
    "read_comparison_report",
    "read_evaluation_report",
    "read_leaderboard",
    "read_predictions_report",
    "render_comparison_markdown",
    "render_leaderboard_markdown",
    "run_comparison",
    "score_completions",
    "score_run",
    "select_p_value",
    "validate_evaluation_report",
    "weighted_overall_delta",
    "weighted_overall_of",
    "write_comparison_report",
    "write_evaluation_report",
    "write_leaderboard",
    "write_predictions_report",
]

#: Names before issue 31's one vocabulary; each still works until the next release.
__getattr__ = deprecated_aliases(__name__, globals())
