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

__all__ = ["format_arm_summary", "format_model", "load_run_report", "show_model", "show_run"]

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
    """The summary table of a logged arm, comparison or leaderboard, as its command printed it.

    ``run_id`` may also name a model: a LoggedModel id (``m-...``) or a
    registry version (``models:/<name>/<version>``, ``models:/<name>@<alias>``);
    see :func:`show_model`.
    """
    from sommelier_mlflow.cli._main_command import format_summary
    from sommelier_mlflow.integration import is_logged_model_id, is_registry_uri

    if is_logged_model_id(run_id.strip()) or is_registry_uri(run_id.strip()):
        return show_model(run_id.strip(), tracking_uri)
    report = load_run_report(run_id, tracking_uri)
    if isinstance(report, ComparisonReport):
        return format_summary(report)
    if isinstance(report, EvaluationReport):
        return format_arm_summary(report)
    return render_leaderboard_markdown(report)


#: Tags of a promoted version and of a ranked model that ``show`` prints as the verdict.
_VERDICT_TAGS = (
    "sommelier.verdict",
    "sommelier.comparison_run_id",
    "sommelier.claims_sha256",
    "sommelier.evaluated_model_id",
)


def show_model(reference: str, tracking_uri: str | None = None) -> str:
    """A model's verdict and metrics: a LoggedModel id or a registry version.

    A version shows the verdict its promotion recorded (``compare --promote``)
    and the metrics of the LoggedModel that carries its evaluation (the
    evaluated model it was promoted on, or the one it was registered from).

    Raises:
        ConfigError: MLflow does not know the model or version (exit 2).
        TrackingError: The tracking store is unreachable (exit 3).
    """
    import mlflow
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.integration import (
        check_tracking_server,
        is_registry_uri,
        parse_registry_uri,
        tracking_errors,
    )

    uri = tracking_uri or str(mlflow.get_tracking_uri())
    check_tracking_server(uri)
    client = MlflowClient(uri)
    header: list[str] = []
    model_id = reference
    if is_registry_uri(reference):
        name, version, alias = parse_registry_uri(reference)
        with tracking_errors(f"look up {reference}", uri):
            found = (
                client.get_model_version_by_alias(name, alias)
                if alias is not None
                else client.get_model_version(name, str(version))
            )
        header.append(f"{reference}: version {found.version} of {name}")
        header += [f"  {key}: {found.tags[key]}" for key in _VERDICT_TAGS if key in found.tags]
        if "sommelier.verdict" not in found.tags:
            header.append("  no verdict: never promoted by compare --promote")
        source = str(found.source or "")
        model_id = found.tags.get("sommelier.evaluated_model_id") or (
            source.removeprefix("models:/") if source.startswith("models:/m-") else ""
        )
        if not model_id:
            return "\n".join([*header, "  no LoggedModel carries its metrics"])
    with tracking_errors(f"read LoggedModel {model_id}", uri):
        model = client.get_logged_model(model_id)
    return "\n".join([*header, format_model(model)])


def format_model(model: Any) -> str:
    """A LoggedModel's identity, ranking tags and latest metrics (value and exact counts).

    The metrics of each run that evaluated the model are shown, newest run
    first; counts (``.../counts/<metric>.numerator`` / ``.denominator``) sit
    beside the value they count, as the arm table shows them.
    """
    tags = model.tags
    lines = [f"LoggedModel {model.model_id} ({model.name})"]
    lines += [
        f"  {key}: {value}"
        for key, value in sorted(tags.items())
        if key.startswith("sommelier.") and key != "sommelier.identity_sha256"
    ]
    by_run: dict[str, dict[str, float]] = {}
    newest: dict[str, int] = {}
    for metric in model.metrics or []:
        run = str(metric.run_id)
        by_run.setdefault(run, {})[metric.key] = float(metric.value)
        newest[run] = max(newest.get(run, 0), int(metric.timestamp))
    if not by_run:
        lines.append("  no metrics logged on this model")
    for run in sorted(by_run, key=lambda r: -newest[r]):
        values = by_run[run]
        lines.append(f"metrics of run {run}:")
        shown = sorted(key for key in values if "/counts/" not in key)
        width = max(len(key) for key in shown) + 2 if shown else 0
        for key in shown:
            section, _, name = key.rpartition("/")
            numerator = values.get(f"{section}/counts/{name}.numerator")
            denominator = values.get(f"{section}/counts/{name}.denominator")
            counts = (
                f"  {int(numerator)}/{int(denominator)}"
                if numerator is not None and denominator is not None
                else ""
            )
            lines.append(f"  {key:<{width}}{values[key]:>8.3f}{counts}")
    return "\n".join(lines)
