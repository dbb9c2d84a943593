"""Evaluation layer: joining, scoring, reports, the comparison gate and statistics.

The flow is ``score_run`` (one arm: split + generations -> ``ScoredRun`` ->
``evaluation_report.json``), then ``compare_reports`` / ``run_comparison``
(two reports -> gate -> ``comparison_report.json`` + ``.md``), and
``read_claims`` / ``decide_claims`` (preregistered claims -> a verdict from the
comparison's own bootstrap draws). Nothing here imports MLflow or torch.
"""

from __future__ import annotations

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
from sommelier_mlflow.evaluation._markdown import render_comparison_markdown
from sommelier_mlflow.evaluation._report import (
    EVALUATION_REPORT_FILENAME,
    AdapterIdentity,
    ArmIdentity,
    EvaluationReport,
    read_evaluation_report,
    validate_evaluation_report,
    write_evaluation_report,
)
from sommelier_mlflow.evaluation._scoring import (
    AnsweredExample,
    BootstrapSettings,
    ExampleResult,
    PairCoverage,
    PairedSlice,
    ScoredExamples,
    ScoredRun,
    SliceResult,
    metrics_from_components,
    score_completions,
    score_run,
)
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
    paired_bootstrap,
    paired_bootstrap_draws,
)

__all__ = [
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
    "EvaluationReport",
    "ExampleResult",
    "GATE_FIELDS",
    "LanguageGap",
    "MARGINAL_GAP_NOTE",
    "MCNEMAR_METHOD",
    "MCNEMAR_METRIC",
    "MarginalGap",
    "McNemarResult",
    "MetricInterval",
    "PairCoverage",
    "PairedBootstrapResult",
    "PairedSlice",
    "QUANTILE_METHOD",
    "RegistrationRecord",
    "RunSummary",
    "ScoredExamples",
    "ScoredRun",
    "SliceComparison",
    "SliceResult",
    "Verdict",
    "bootstrap_p_value",
    "check_claims",
    "check_comparable",
    "compare_reports",
    "decide_claims",
    "derive_seed",
    "holm_adjust",
    "mcnemar_exact",
    "mcnemar_from_outcomes",
    "metrics_from_components",
    "pair_set_digest",
    "paired_bootstrap",
    "paired_bootstrap_draws",
    "parse_claims",
    "prompt_set_digest",
    "read_claims",
    "read_comparison_report",
    "read_evaluation_report",
    "render_comparison_markdown",
    "run_comparison",
    "score_completions",
    "score_run",
    "validate_evaluation_report",
    "write_comparison_report",
    "write_evaluation_report",
]
