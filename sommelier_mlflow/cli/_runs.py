"""MLflow run handling for the commands: which run to log into, children, downloads.

``mlflow run`` starts a run and passes its id in ``MLFLOW_RUN_ID``; the
commands log into that run. Run from a shell with ``--mlflow``, they create
their own run in ``MLFLOW_EXPERIMENT_NAME`` (default ``sommelier``).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sommelier_mlflow.errors import DataError, InputError
from sommelier_mlflow.integration import (
    check_tracking_server,
    log_evaluation_run,
    tracking_errors,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from sommelier_mlflow.cli._pipeline import ArmOutput

__all__ = [
    "DEFAULT_EXPERIMENT",
    "child_run",
    "download_evaluation_report",
    "log_arm",
    "top_run",
]

DEFAULT_EXPERIMENT = "sommelier"


def _client() -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient()


def _experiment_id(client: Any) -> str:
    explicit = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if explicit:
        return explicit
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    experiment = client.get_experiment_by_name(name)
    if experiment is not None:
        return str(experiment.experiment_id)
    from mlflow.exceptions import MlflowException

    try:
        return str(client.create_experiment(name))
    except MlflowException as exc:
        # Several runs started at once into a new experiment: all saw it
        # missing, one created it. The others use it rather than fail.
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            raise
        return str(experiment.experiment_id)


@contextmanager
def top_run(run_name: str) -> Iterator[str]:
    """Yield the run to log into: ``mlflow run``'s own, or a new one that we end.

    A run we created is ended FINISHED on success and FAILED on error; a run
    owned by ``mlflow run`` is left for MLflow to close.
    """
    existing = os.environ.get("MLFLOW_RUN_ID")
    if existing:
        yield existing
        return
    check_tracking_server()  # one quick probe instead of MLflow's minutes of retries
    with tracking_errors("create a run"):
        client = _client()
        run = client.create_run(_experiment_id(client), run_name=run_name)
    with _ended(client, str(run.info.run_id)) as run_id:
        yield run_id


@contextmanager
def _ended(client: Any, run_id: str) -> Iterator[str]:
    """End a run we created: FINISHED if the block succeeds, FAILED if it raises."""
    status = "FAILED"
    try:
        yield run_id
        status = "FINISHED"
    finally:
        with tracking_errors("end the run"):
            client.set_terminated(run_id, status=status)


@contextmanager
def child_run(parent_run_id: str, run_name: str) -> Iterator[str]:
    """Create a run nested under ``parent_run_id`` and end it with the block's outcome."""
    with tracking_errors("create a child run"):
        client = _client()
        parent = client.get_run(parent_run_id)
        run = client.create_run(
            parent.info.experiment_id,
            run_name=run_name,
            tags={"mlflow.parentRunId": parent_run_id},
        )
    with _ended(client, str(run.info.run_id)) as run_id:
        yield run_id


def download_evaluation_report(run_id: str, dest: Path) -> Path:
    """Fetch ``sommelier/evaluation_report.json`` of a run into ``dest``.

    Raises:
        InputError: The run id is empty.
        DataError: The run has no evaluation report (it was not an arm run).
    """
    if not run_id:
        raise InputError("a run id is required (see the run's page in the MLflow UI)")
    import mlflow

    dest.mkdir(parents=True, exist_ok=True)
    with tracking_errors(f"fetch the evaluation report of run {run_id}"):
        client = _client()
        client.get_run(run_id)
        names = {item.path for item in client.list_artifacts(run_id, "sommelier")}
        if "sommelier/evaluation_report.json" not in names:
            raise DataError(
                f"run {run_id} has no sommelier/evaluation_report.json: pass the run ids of a "
                "base arm and an adapter arm (the 'evaluate' or 'score' runs)"
            )
        local = mlflow.artifacts.download_artifacts(
            run_id=run_id, artifact_path="sommelier/evaluation_report.json", dst_path=str(dest)
        )
    return Path(local)


def log_arm(arm: ArmOutput, run_id: str, extra_params: dict[str, object]) -> None:
    """Log one arm's report, generations, split, table and params into ``run_id``."""
    log_evaluation_run(
        arm.report,
        run_id=run_id,
        artifact_files=arm.files,
        artifacts_root=arm.out_dir,
        test_split_path=arm.split_path,
        split=arm.split,
        table_rows=arm.scored.table_rows(),
        params=extra_params,
    )
