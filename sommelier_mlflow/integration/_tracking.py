"""Whole runs: everything one arm or one comparison records in MLflow, in order.

Every entry point (``evaluate``, ``score``, ``compare``, ``main``) logs through
these two functions, so one run looks the same whichever way it was produced:
the same metric keys (see :mod:`._keys`), the same params and tags, artifacts
under ``sommelier/``. The single writes live in :mod:`._primitives`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sommelier_mlflow._redact import redact
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.evaluation import ComparisonReport, EvaluationReport
from sommelier_mlflow.integration._claims import verdict_tags
from sommelier_mlflow.integration._keys import comparison_metric_keys, evaluation_metric_keys
from sommelier_mlflow.integration._logged_models import TAG_LOGGED_MODEL_ID, find_or_create_model
from sommelier_mlflow.integration._params import (
    comparison_params,
    evaluation_params,
)
from sommelier_mlflow.integration._primitives import (
    ARTIFACT_DIR,
    COMPARISON_MARKDOWN_ARTIFACT,
    COMPARISON_REPORT_ARTIFACT,
    EVALUATION_REPORT_ARTIFACT,
    TAG_REPORT_SHA256,
    dataset_digest,
    json_artifact_bytes,
    log_artifact_files,
    log_comparison_figure,
    log_example_table,
    log_json_artifact,
    log_metrics_batch,
    log_params,
    log_test_split_input,
    log_text_artifact,
    read_active_run,
    resolve_client,
    set_sommelier_tags,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.data import TestSplit

__all__ = ["log_evaluation_run", "log_comparison_run", "log_verdict"]


def log_evaluation_run(
    report: EvaluationReport,
    *,
    run_id: str,
    artifact_files: Sequence[str | os.PathLike[str]] = (),
    artifacts_root: str | os.PathLike[str] | None = None,
    test_split_path: str | os.PathLike[str] | None = None,
    split: TestSplit | None = None,
    table_rows: Sequence[Mapping[str, Any]] | None = None,
    params: Mapping[str, object] | None = None,
    metrics: Mapping[str, float] | None = None,
    client: MlflowClient | None = None,
    logged_model: bool = True,
) -> dict[str, float]:
    """Record one arm's evaluation in an existing run.

    Logs, in order: the three ``sommelier.*`` tags and the params of
    :func:`evaluation_params` plus ``params`` (first, so a run cut short is
    still identifiable), every metric key plus ``metrics`` (one batch), the test split as
    dataset input (if ``test_split_path``), ``artifact_files`` under
    ``sommelier/`` at their paths relative to ``artifacts_root`` (e.g.
    ``generations/<slice>.jsonl``), ``sommelier/evaluation_report.json`` and
    the per-example table.

    The metrics are also linked to the LoggedModel of the evaluated model
    (found by its identity, created as an external model the first time; see
    :mod:`._logged_models`), for the test split as dataset, and the run is
    tagged with its id (:data:`TAG_LOGGED_MODEL_ID`). A store without
    LoggedModels gets the run as before and one warning.

    Args:
        report: The arm's evaluation report.
        run_id: The run to log into (the caller creates and ends it).
        artifact_files: The files the command wrote, to log under ``sommelier/``
            (an explicit list: an output folder may hold other files).
        artifacts_root: The folder ``artifact_files`` are relative to.
        test_split_path: The test-split file to log with ``log_input``.
        split: The already-read split, to avoid reading it again.
        table_rows: Per-example rows (``ScoredRun.table_rows()``).
        params: Extra params (e.g. ``max_examples``); secrets are masked.
        metrics: Extra metrics outside the report (e.g. ``generation/prompts_per_s``);
            a key that collides with a report key is refused.
        client: Tracking client (default: a new one).
        logged_model: Link the metrics to the model's LoggedModel (``False``
            for a caller that links them itself, such as a training checkpoint).

    Returns:
        The metric keys logged.

    Raises:
        ConfigError: An extra metric key collides with a report key.
    """
    tracker = resolve_client(client)
    keys = evaluation_metric_keys(report, scoring=report.identity.scoring)
    clashes = sorted(set(keys) & set(metrics or {}))
    if clashes:
        raise ConfigError(f"extra metric keys collide with report keys: {', '.join(clashes)}")
    keys = {**keys, **(metrics or {})}
    document = report.to_json()
    dataset = report.identity.dataset
    # An arm read from an MLflow evaluation dataset is found by its dataset in a search.
    dataset_tags = (
        {f"sommelier.dataset.{key}": value for key, value in dataset.to_dict().items()}
        if dataset is not None
        else {}
    )
    model_id = _arm_model(report, run_id, tracker) if logged_model else None
    model_tags = {TAG_LOGGED_MODEL_ID: model_id} if model_id is not None else {}
    set_sommelier_tags(
        run_id,
        model_kind=report.identity.model_kind,
        parser_version=report.identity.parser_version,
        test_split_sha256=report.identity.test_split_sha256,
        extra={TAG_REPORT_SHA256: _digest(document), **dataset_tags, **model_tags},
        client=tracker,
    )
    log_params(run_id, {**evaluation_params(document), **(params or {})}, client=tracker)
    # The model's metrics are on the test split, named and digested as its dataset input.
    split_dataset = (
        (redact(Path(test_split_path).name), dataset_digest(report.identity.test_split_sha256))
        if test_split_path is not None
        else None
    )
    log_metrics_batch(run_id, keys, client=tracker, model_id=model_id, dataset=split_dataset)
    if test_split_path is not None:
        log_test_split_input(test_split_path, run_id=run_id, split=split, client=tracker)
    if artifact_files:
        log_artifact_files(
            artifact_files, ARTIFACT_DIR, root=artifacts_root or ".", run_id=run_id, client=tracker
        )
    log_json_artifact(document, EVALUATION_REPORT_ARTIFACT, run_id=run_id, client=tracker)
    if table_rows is not None:
        log_example_table(table_rows, run_id=run_id, client=tracker)
    return keys


def log_comparison_run(
    report: ComparisonReport,
    *,
    run_id: str,
    artifact_files: Sequence[str | os.PathLike[str]] = (),
    artifacts_root: str | os.PathLike[str] | None = None,
    params: Mapping[str, object] | None = None,
    figure: bool = True,
    client: MlflowClient | None = None,
    tag_verdict: bool = True,
) -> dict[str, float]:
    """Record a comparison in an existing run (the parent run of ``main``, or ``compare``'s).

    Logs every comparison key (one batch), :func:`comparison_params` plus
    ``params``, the tags (``sommelier.model_kind`` = ``comparison``; tags and
    params first), ``artifact_files`` under ``sommelier/`` if given, the
    report as ``sommelier/comparison_report.json`` and ``.md``, the chart
    ``sommelier/comparison.png``, and last, with claims, the verdict tags
    (:func:`log_verdict`), so that a run the documented filter
    ``tags.`sommelier.verdict` = 'supported'`` finds holds everything. With
    ``tag_verdict=False`` the verdict tags are left out: the caller writes them
    with :func:`log_verdict` once what the verdict decides (a promotion) has
    succeeded.

    Returns:
        The metric keys logged.
    """
    from sommelier_mlflow.evaluation import render_comparison_markdown

    tracker = resolve_client(client)
    keys = comparison_metric_keys(report)
    document = report.to_json()
    set_sommelier_tags(
        run_id,
        model_kind="comparison",
        parser_version=report.identity.parser_version,
        test_split_sha256=report.identity.test_split_sha256,
        extra={TAG_REPORT_SHA256: _digest(document)},
        client=tracker,
    )
    log_params(run_id, {**comparison_params(document), **(params or {})}, client=tracker)
    log_metrics_batch(run_id, keys, client=tracker)
    if artifact_files:
        log_artifact_files(
            artifact_files, ARTIFACT_DIR, root=artifacts_root or ".", run_id=run_id, client=tracker
        )
    log_json_artifact(document, COMPARISON_REPORT_ARTIFACT, run_id=run_id, client=tracker)
    log_text_artifact(
        render_comparison_markdown(report),
        COMPARISON_MARKDOWN_ARTIFACT,
        run_id=run_id,
        client=tracker,
    )
    if figure:
        log_comparison_figure(report, run_id=run_id, client=tracker)
    if tag_verdict:
        log_verdict(report, run_id=run_id, client=tracker)
    return keys


def log_verdict(
    report: ComparisonReport, *, run_id: str, client: MlflowClient | None = None
) -> dict[str, str]:
    """Tag a comparison run with its claims' verdict, the last thing written to it.

    ``sommelier.verdict``, ``sommelier.claims_sha256`` and one
    ``sommelier.claim.<id>`` per claim; nothing without claims. A run that
    failed before this point carries no verdict at all.

    Returns:
        The tags as set.
    """
    if report.claims is None:
        return {}
    return set_sommelier_tags(run_id, extra=verdict_tags(report.claims), client=client)


def _arm_model(report: EvaluationReport, run_id: str, tracker: MlflowClient) -> str | None:
    """The LoggedModel an arm's metrics go to: its registry version's, or one of its identity.

    An arm evaluated from ``models:/`` (the adapter version, or a full model
    version given as ``--model``) carries the version's LoggedModel id in its
    ``sommelier.registry.*`` tags, set before this; the metrics join that
    model, where the registry already links it.
    """
    run = read_active_run(run_id, client=tracker)
    role = "adapter" if report.identity.adapter is not None else "model"
    registered = run.data.tags.get(f"sommelier.registry.{role}.model_id")
    if registered:
        return str(registered)
    return find_or_create_model(
        report.identity,
        experiment_id=str(run.info.experiment_id),
        source_run_id=run_id,
        client=tracker,
    )


def _digest(document: object) -> str:
    """SHA-256 of the report artifact exactly as it will be logged."""
    return hashlib.sha256(json_artifact_bytes(document)).hexdigest()
