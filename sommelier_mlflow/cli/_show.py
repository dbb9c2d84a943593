"""``sommelier-mlflow show RUN_ID``: a logged run's summary table, from its own report.

Weeks after a run, the question is "what did it say?", and the answer should
be the table the run printed, not a re-computation: so ``show`` downloads the
report the run logged (``sommelier/comparison_report.json`` for a comparison,
``sommelier/evaluation_report.json`` for an arm, ``sommelier/leaderboard.json``
for the run of ``compare`` with several adapters) from whatever tracking store
``MLFLOW_TRACKING_URI`` (or ``--tracking-uri``) names and formats it with the
same function the command printed it with. A deleted run is refused: its
results were thrown away.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from sommelier_mlflow.errors import DataError, InputError
from sommelier_mlflow.evaluation import (
    ComparisonReport,
    EvaluationReport,
    MetricInterval,
    read_comparison_report,
    read_evaluation_report,
    read_leaderboard,
    render_leaderboard_markdown,
)
from sommelier_mlflow.toolcalls import mcnemar_metric

__all__ = ["format_arm_summary", "load_run_report", "show_run"]

_COMPARISON = "sommelier/comparison_report.json"
_EVALUATION = "sommelier/evaluation_report.json"
_LEADERBOARD = "sommelier/leaderboard.json"


def _interval(interval: MetricInterval) -> str:
    estimate, lower, upper = (
        float(value) + 0.0 for value in (interval.estimate, interval.lower, interval.upper)
    )
    return f"{estimate:+.3f} [{lower:+.3f}, {upper:+.3f}]"


def format_arm_summary(report: EvaluationReport) -> str:
    """A terminal table of one arm: per slice and metric, value and exact counts, then gaps.

    The arm's output-format warning and hint come first, as the command that
    scored it printed them; the columns are as wide as their longest entry.
    """
    from sommelier_mlflow.cli._main_command import format_notices

    kind = report.identity.model_kind
    lines = [f"{kind} arm, {len(report.example_ids)} examples"]
    lines += format_notices(
        report.format_mismatch,
        report.format_hint,
        calls_in_reasoning=report.calls_in_reasoning,
        outputs=report.examples,
    )
    sections = [("overall", report.metrics)]
    sections += [(name, entry.metrics) for name, entry in report.slices.items()]
    slice_width = max(9, *(len(name) + 2 for name, _ in sections))
    metric_width = max(24, *(len(name) + 2 for name in report.metric_names))
    lines.append(f"{'slice':<{slice_width}}{'metric':<{metric_width}}{'value':>8}  counts")
    for slice_name, metrics in sections:
        for metric in report.metric_names:
            value = metrics[metric]
            counts = f"{value.numerator}/{value.denominator}"
            lines.append(
                f"{slice_name:<{slice_width}}{metric:<{metric_width}}{value.value:>8.3f}  {counts}"
            )
    # The headline gap is on the McNemar outcome, as in the comparison table.
    outcome = mcnemar_metric(report.metric_names) or report.metric_names[-1]
    for language, paired in report.paired_slices.items():
        gap = paired.bootstrap.interval(outcome)
        lines.append(
            f"matched-pair gap {language}-{paired.root_language} ({kind}, "
            f"{outcome}, {len(paired.pairs)} pairs): {_interval(gap)}"
        )
    return "\n".join(lines)


def load_run_report(
    run_id: str, tracking_uri: str | None = None
) -> EvaluationReport | ComparisonReport | dict[str, Any]:
    """Download and read (with the package's checking readers) the report a run logged.

    A comparison run gives its :class:`ComparisonReport`, an arm's run its
    :class:`EvaluationReport`, a leaderboard run its checked ``leaderboard.json``
    document (see :func:`~sommelier_mlflow.evaluation.read_leaderboard`).

    Raises:
        InputError: The run id is empty.
        DataError: The run logged no sommelier report, or it is malformed.
        TrackingError: The tracking store is unreachable (exit 3).
        ConfigError: MLflow does not know the run, or it is deleted (exit 2).
    """
    if not run_id.strip():
        raise InputError("a run id is required (see the run's page in the MLflow UI)")
    import mlflow
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration import (
        check_logged_report,
        check_tracking_server,
        read_active_run,
        tracking_errors,
    )

    uri = tracking_uri or str(mlflow.get_tracking_uri())
    check_tracking_server(uri)
    client = MlflowClient(uri)
    with tracking_errors(f"read run {run_id}", uri):
        run = read_active_run(run_id, client=client)
        names = {item.path for item in client.list_artifacts(run_id, "sommelier")}
    for artifact in (_COMPARISON, _EVALUATION, _LEADERBOARD):
        if artifact not in names:
            continue
        with tempfile.TemporaryDirectory(prefix="sommelier-show-") as tmp:
            with tracking_errors(f"download {artifact} of run {run_id}", uri):
                local = Path(client.download_artifacts(run_id, artifact, tmp))
            if artifact == _COMPARISON:
                check_logged_report(run, local)
                return read_comparison_report(local)
            if artifact == _LEADERBOARD:
                return read_leaderboard(local)
            report = read_evaluation_report(local)
            check_logged_report(run, local, {n: m.value for n, m in report.metrics.items()})
            return report
    raise DataError(
        f"run {run_id} logged no sommelier report ({_COMPARISON}, {_EVALUATION} or "
        f"{_LEADERBOARD}): pass the id of a comparison run, of a leaderboard run or of a "
        "base/adapter arm run"
    )


def show_run(run_id: str, tracking_uri: str | None = None) -> str:
    """The summary table of a logged arm, comparison or leaderboard, as its command printed it."""
    from sommelier_mlflow.cli._main_command import format_summary

    report = load_run_report(run_id, tracking_uri)
    if isinstance(report, ComparisonReport):
        return format_summary(report)
    if isinstance(report, EvaluationReport):
        return format_arm_summary(report)
    return render_leaderboard_markdown(report)
