"""MLflow run handling for the commands: which run to log into, children, downloads.

``mlflow run`` starts a run and passes its id in ``MLFLOW_RUN_ID``; the
commands log into that run. Run from a shell with ``--mlflow``, they create
their own run in ``MLFLOW_EXPERIMENT_NAME`` (default ``sommelier``).
"""

from __future__ import annotations

import contextlib
import os
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sommelier_mlflow._redact import contains_secret, redact
from sommelier_mlflow.errors import ConfigError, DataError, InputError
from sommelier_mlflow.evaluation import read_evaluation_report
from sommelier_mlflow.generation import read_example_seconds
from sommelier_mlflow.integration import (
    arm_example_traces,
    check_logged_report,
    check_registration,
    check_tracking_server,
    download_checkpoint_report,
    is_logged_model_id,
    log_evaluation_run,
    log_example_traces,
    log_text_artifact,
    read_active_run,
    should_log_traces,
    tracking_errors,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from sommelier_mlflow.cli._pipeline import ArmOutput
    from sommelier_mlflow.evaluation import ClaimsSpec, RegistrationRecord

__all__ = [
    "DEFAULT_EXPERIMENT",
    "HTTP_LIMITS",
    "prepared_tracking",
    "ui_hint",
    "THROUGHPUT_SECTION",
    "claims_registration",
    "display_name",
    "comparison_run_name",
    "top_run",
    "child_run",
    "download_evaluation_report",
    "log_arm",
]

DEFAULT_EXPERIMENT = "sommelier"
#: MLflow's HTTP client retries a dead server for minutes (7 retries with
#: exponential backoff, 120 s timeouts). These bounds make the whole logging
#: phase fail within a minute; a value the user exported wins.
HTTP_LIMITS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}


@contextmanager
def prepared_tracking() -> Iterator[None]:
    """Bound MLflow's retries, probe the store, and vet ``mlflow run``'s own params.

    Entered before any work by every command that talks to a tracking
    server, so an unreachable one is reported in seconds (exit 3), not after
    the work and minutes of retries. The HTTP bounds hold for the block only
    (a caller embedding the CLI keeps its own environment).

    Raises:
        TrackingError: The tracking store is unreachable (exit 3).
        ConfigError: ``mlflow run`` logged a credential as a param (exit 2);
            the run has been deleted.
    """
    added = [name for name in HTTP_LIMITS if name not in os.environ]
    os.environ.update({name: HTTP_LIMITS[name] for name in added})
    try:
        check_tracking_server()
        existing = os.environ.get("MLFLOW_RUN_ID")
        if existing:
            _refuse_credentials_in_params(existing)
        yield
    finally:
        for name in added:
            os.environ.pop(name, None)


def _refuse_credentials_in_params(run_id: str) -> None:
    """Delete ``mlflow run``'s run if it logged a credential, and say how to avoid it.

    MLflow logs every ``-P`` value as a param when it creates the run, before
    this command starts, so scrubbing cannot help any more: the value is
    already stored. The only safe outcome is to take the run out of view and
    stop before logging anything else.
    """
    with tracking_errors("read the run's params"):
        client = _client()
        params = client.get_run(run_id).data.params
    leaking = sorted(key for key, value in params.items() if contains_secret(str(value)))
    if not leaking:
        return
    with tracking_errors(f"delete run {run_id}"):
        client.delete_run(run_id)
    raise ConfigError(
        f"the MLflow run {run_id} was given credentials in its parameters "
        f"({', '.join(leaking)}): MLflow stored them in the tracking store, so the run has "
        "been deleted. Pass credentials by environment variable instead (HF_TOKEN for the "
        "Hugging Face Hub, the variable named by api_key_env for a served model; never as "
        "user:password@ in a URL), and run `mlflow gc` to purge the deleted run for good"
    )


def ui_hint(tracking_uri: str) -> str:
    """How to look at the runs: open an HTTP server in a browser, or start ``mlflow ui``."""
    shown = redact(tracking_uri)
    if tracking_uri.startswith(("http://", "https://")):
        return f"open the UI: {shown} in a web browser"
    return f"open the UI: mlflow ui --backend-store-uri {shown}"


#: MLflow section of an arm's throughput metrics (``generation/prompts_per_s``, ...).
THROUGHPUT_SECTION = "generation"


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


def _current_experiment_id(client: Any) -> str | None:
    """The experiment new runs would go to, without creating it."""
    explicit = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if explicit:
        return explicit
    run_id = os.environ.get("MLFLOW_RUN_ID")
    if run_id:
        return str(client.get_run(run_id).info.experiment_id)
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
    experiment = client.get_experiment_by_name(name)
    return str(experiment.experiment_id) if experiment is not None else None


def claims_registration(
    spec: ClaimsSpec, arm_run_ids: Sequence[str], *, require: bool
) -> RegistrationRecord:
    """Look up the claims' preregistration in the arms' experiments and the current one.

    Raises:
        ComparisonRefusedError: ``require`` and the digest was never registered (exit 4).
        TrackingError: The tracking store is unreachable (exit 3).
    """
    check_tracking_server()
    with tracking_errors("find the experiments to search for claims registrations"):
        client = _client()
        experiments = {
            str(read_active_run(run, client=client).info.experiment_id) for run in arm_run_ids
        }
        current = _current_experiment_id(client)
    if current is not None:
        experiments.add(current)
    return check_registration(
        spec, experiment_ids=experiments, arm_run_ids=arm_run_ids, require=require, client=client
    )


def display_name(source: str) -> str:
    """A short name for a model or adapter source, for run names people scan.

    A local path shows its last component (the rest is in the params), a
    served adapter its served name, a hub id stays whole (``org/model``).
    """
    if source.startswith("served:"):
        return source.removeprefix("served:")
    if os.path.isabs(source) or source.startswith((".", "~")):
        return Path(source).name or source
    return source


def comparison_run_name(base_model: str, adapter: str) -> str:
    """``compare <base> vs <adapter>``: what a comparison run holds, readable in the runs list."""
    return f"compare {display_name(base_model)} vs {display_name(adapter)}"


@contextmanager
def top_run(run_name: str) -> Iterator[str]:
    """Yield the run to log into: ``mlflow run``'s own, or a new one that we end.

    Either way the run is named ``run_name`` (``base``, ``compare <base> vs
    <adapter>``...), so the runs list tells the runs apart without opening them.
    A run we created is ended FINISHED on success and FAILED on error; a run
    owned by ``mlflow run`` is left for MLflow to close.
    """
    existing = os.environ.get("MLFLOW_RUN_ID")
    if existing:
        # `mlflow run` names its run at random; the runs list should say what it holds.
        with tracking_errors("name the run"):
            _client().update_run(existing, name=run_name)
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
    """End a run we created: FINISHED only if everything was logged.

    A block that raises (logging cut short included) ends the run FAILED, an
    interrupt KILLED. If the server is gone, ending the run fails too; the
    first failure is the one reported, and the run stays RUNNING rather than
    claim a completeness it does not have.
    """
    try:
        yield run_id
    except KeyboardInterrupt:
        _end_quietly(client, run_id, "KILLED")
        raise
    except BaseException:
        _end_quietly(client, run_id, "FAILED")
        raise
    with tracking_errors("end the run"):
        client.set_terminated(run_id, status="FINISHED")


def _end_quietly(client: Any, run_id: str, status: str) -> None:
    # The block's own error is what the user must see; a second failure here
    # (the same dead server) would only hide it.
    with contextlib.suppress(Exception):
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
        ConfigError: The run is deleted.
        DataError: The run has no evaluation report (it was not an arm run).
    """
    if not run_id:
        raise InputError("a run id is required (see the run's page in the MLflow UI)")
    if is_logged_model_id(run_id):  # a training checkpoint's LoggedModel (leaderboard arm)
        return download_checkpoint_report(run_id, dest)
    import mlflow

    dest.mkdir(parents=True, exist_ok=True)
    with tracking_errors(f"fetch the evaluation report of run {run_id}"):
        client = _client()
        run = read_active_run(run_id, client=client)
        names = {item.path for item in client.list_artifacts(run_id, "sommelier")}
        if "sommelier/evaluation_report.json" not in names:
            raise DataError(
                f"run {run_id} has no sommelier/evaluation_report.json: pass the run ids of a "
                "base arm and an adapter arm (the 'evaluate' or 'score' runs)"
            )
        local = mlflow.artifacts.download_artifacts(
            run_id=run_id, artifact_path="sommelier/evaluation_report.json", dst_path=str(dest)
        )
    report = read_evaluation_report(local)
    check_logged_report(run, Path(local), {name: m.value for name, m in report.metrics.items()})
    return Path(local)


def log_arm(
    arm: ArmOutput,
    run_id: str,
    extra_params: dict[str, object],
    *,
    log_traces: str = "auto",
    progress: bool = False,
    texts: Mapping[str, str] | None = None,
) -> int:
    """Log one arm's report, generations, split, table and params into ``run_id``.

    With ``log_traces`` on (``auto``: up to 5,000 examples) every example also
    becomes a trace with its assessments, for MLflow's evaluation view.
    ``texts`` are further text artifacts by path (a system prompt too long
    for a param).

    Returns:
        The number of traces logged (0 when off).
    """
    traces = should_log_traces(log_traces, len(arm.scored.examples))
    log_evaluation_run(
        arm.report,
        run_id=run_id,
        artifact_files=arm.files,
        artifacts_root=arm.out_dir,
        test_split_path=arm.split_path,
        split=arm.split,
        table_rows=arm.scored.table_rows(),
        params={**arm.backend_params, **extra_params, "log_traces": log_traces},
        metrics={f"{THROUGHPUT_SECTION}/{name}": value for name, value in arm.throughput.items()},
    )
    for artifact_file, text in (texts or {}).items():
        log_text_artifact(text, artifact_file, run_id=run_id)
    if not traces:
        return 0
    seconds = read_example_seconds(arm.out_dir)  # each trace's duration
    examples = arm_example_traces(arm.report, arm.scored, arm.split, seconds)
    return log_example_traces(run_id, examples, progress=progress)
