"""Each evaluated model as an MLflow 3 LoggedModel carrying its metrics (issue 35).

Against the session's real SQLite store: an arm's metrics land on the
LoggedModel of the model it evaluated (external, tagged with its identity),
the same identity evaluated again reuses that model, two processes racing on
one identity leave one model, and a store without LoggedModels gets the run
as before with one warning.
"""

from __future__ import annotations

import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from sommelier_mlflow.integration import log_evaluation_run
from sommelier_mlflow.integration._logged_models import (
    TAG_IDENTITY_SHA256,
    TAG_LOGGED_MODEL_ID,
    LoggedModelUnsupportedWarning,
    identity_sha256,
    model_identity_fields,
)
from tests.integration.integration_helpers import Arms, Store

REPO = Path(__file__).resolve().parents[2]


def _arm_run(store: Store, arms: Arms, kind: str, experiment_id: str | None = None) -> str:
    client = MlflowClient()
    run_id = client.create_run(experiment_id or store.experiment_id).info.run_id
    report = arms.base_typed if kind == "base" else arms.adapter_typed
    log_evaluation_run(report, run_id=run_id, test_split_path=arms.split_path, split=arms.split)
    return run_id


def _models(experiment_id: str, digest: str) -> list[object]:
    return list(
        MlflowClient().search_logged_models(
            experiment_ids=[experiment_id],
            filter_string=f"tags.`{TAG_IDENTITY_SHA256}` = '{digest}'",
        )
    )


def test_an_arm_links_its_metrics_to_an_external_model_of_its_identity(
    store: Store, arms: Arms
) -> None:
    experiment_id = MlflowClient().create_experiment("logged-models-arm")
    base_run = _arm_run(store, arms, "base", experiment_id)
    adapter_run = _arm_run(store, arms, "adapter", experiment_id)
    client = MlflowClient()
    base_id = client.get_run(base_run).data.tags[TAG_LOGGED_MODEL_ID]
    adapter_id = client.get_run(adapter_run).data.tags[TAG_LOGGED_MODEL_ID]
    assert base_id != adapter_id
    base = client.get_logged_model(base_id)
    adapter = client.get_logged_model(adapter_id)
    assert base.name == "base-model"
    assert adapter.name == "base-model+adapter"
    assert base.tags["mlflow.model.isExternal"] == "true"
    assert base.source_run_id == base_run
    assert base.tags[TAG_IDENTITY_SHA256] == identity_sha256(
        model_identity_fields(arms.base_typed.identity)
    )
    assert adapter.tags["sommelier.adapter_sha256"] == "ab" * 32
    assert base.tags["sommelier.base_revision"] == "rev-1"
    # The model's metrics are the run's, keyed as today, on the test split as dataset.
    on_model = {m.key: m for m in base.metrics}
    run_metrics = client.get_run(base_run).data.metrics
    assert on_model.keys() == run_metrics.keys()
    exact = on_model["overall/full_call_exact_match"]
    expected = arms.base_typed.metrics["full_call_exact_match"].value
    assert exact.value == run_metrics["overall/full_call_exact_match"] == expected == 2 / 6
    assert exact.dataset_name == "test.jsonl"
    (dataset_input,) = client.get_run(base_run).inputs.dataset_inputs
    assert exact.dataset_digest == dataset_input.dataset.digest
    assert {m.run_id for m in base.metrics} == {base_run}


def test_the_same_identity_evaluated_again_reuses_its_model(store: Store, arms: Arms) -> None:
    experiment_id = MlflowClient().create_experiment("logged-models-reuse")
    first = _arm_run(store, arms, "adapter", experiment_id)
    second = _arm_run(store, arms, "adapter", experiment_id)
    client = MlflowClient()
    model_id = client.get_run(first).data.tags[TAG_LOGGED_MODEL_ID]
    assert client.get_run(second).data.tags[TAG_LOGGED_MODEL_ID] == model_id
    digest = identity_sha256(model_identity_fields(arms.adapter_typed.identity))
    assert len(_models(experiment_id, digest)) == 1
    metric_runs = {m.run_id for m in client.get_logged_model(model_id).metrics}
    assert metric_runs == {first, second}


#: One racing process: THREADS runs, each logging the same arm at the same instant.
_RACER = """
import sys, threading, time
from mlflow.tracking import MlflowClient
from sommelier_mlflow.evaluation import read_evaluation_report
from sommelier_mlflow.integration import log_evaluation_run
report_path, experiment_id = sys.argv[1], sys.argv[2]
start, threads = float(sys.argv[3]), int(sys.argv[4])
report = read_evaluation_report(report_path)
client = MlflowClient()
run_ids = [client.create_run(experiment_id).info.run_id for _ in range(threads)]
def arm(run_id):
    time.sleep(max(0.0, start - time.time()))
    log_evaluation_run(report, run_id=run_id, client=client)
workers = [threading.Thread(target=arm, args=(run_id,)) for run_id in run_ids]
for worker in workers: worker.start()
for worker in workers: worker.join()
print(" ".join(run_ids))
"""
_THREADS = 3


def test_two_processes_evaluating_one_identity_at_once_share_one_model(
    store: Store, arms: Arms, tmp_path: Path
) -> None:
    """All find no model, several create one: after the race one remains, with every run's metrics.

    Two processes of three threads each log the same arm at the same instant
    (a run that logs before the others' models exist creates its own).
    """
    from sommelier_mlflow._json import dumps_pretty

    report_path = tmp_path / "evaluation_report.json"
    report_path.write_bytes(dumps_pretty(arms.base_report))
    experiment_id = MlflowClient().create_experiment("logged-models-race")
    start = time.time() + 8.0  # both processes have imported MLflow by then
    env = {"MLFLOW_TRACKING_URI": store.uri, "PYTHONPATH": str(REPO)}
    import os

    racers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _RACER,
                str(report_path),
                experiment_id,
                str(start),
                str(_THREADS),
            ],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [racer.communicate(timeout=120) for racer in racers]
    assert [racer.returncode for racer in racers] == [0, 0], outputs
    run_ids = {run for out, _ in outputs for run in out.strip().splitlines()[-1].split()}
    assert len(run_ids) == 2 * _THREADS
    digest = identity_sha256(model_identity_fields(arms.base_typed.identity))
    (model,) = _models(experiment_id, digest)
    client = MlflowClient()
    assert {client.get_run(run).data.tags[TAG_LOGGED_MODEL_ID] for run in run_ids} == {
        model.model_id  # type: ignore[attr-defined]
    }
    linked = client.get_logged_model(model.model_id).metrics  # type: ignore[attr-defined]
    assert {m.run_id for m in linked} == run_ids


def _store_without_logged_models(uri: str) -> str:
    """Register ``nolm+sqlite://``: the SQLite store as a plugin that lacks LoggedModels.

    A tracking-store plugin written before MLflow 3 inherits ``AbstractStore``'s
    LoggedModel methods, which raise ``NotImplementedError``; this store does
    exactly that over the session's real database.
    """
    from mlflow.store.tracking.abstract_store import AbstractStore
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
    from mlflow.tracking._tracking_service.utils import _tracking_store_registry

    class PreLoggedModelStore(SqlAlchemyStore):  # type: ignore[misc]
        create_logged_model = AbstractStore.create_logged_model
        search_logged_models = AbstractStore.search_logged_models

    _tracking_store_registry.register(
        "nolm+sqlite",
        lambda store_uri, artifact_uri=None: PreLoggedModelStore(
            store_uri.removeprefix("nolm+"), artifact_uri
        ),
    )
    return "nolm+" + uri


def test_a_store_without_logged_models_gets_the_run_as_before_and_one_warning(
    store: Store, arms: Arms
) -> None:
    uri = _store_without_logged_models(store.uri)
    client = MlflowClient(uri)
    runs = [client.create_run(store.experiment_id).info.run_id for _ in range(2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for run_id in runs:
            keys = log_evaluation_run(
                arms.base_typed, run_id=run_id, test_split_path=arms.split_path, client=client
            )
    unsupported = [w for w in caught if issubclass(w.category, LoggedModelUnsupportedWarning)]
    assert len(unsupported) == 1
    assert "nolm+sqlite" in str(unsupported[0].message)
    for run_id in runs:
        run = client.get_run(run_id)
        assert run.data.metrics.keys() == keys.keys()
        assert TAG_LOGGED_MODEL_ID not in run.data.tags
        assert run.data.tags["sommelier.model_kind"] == "base"


@pytest.mark.parametrize("kind", ["base"])
def test_a_failing_store_is_not_mistaken_for_one_without_models(
    store: Store, arms: Arms, kind: str
) -> None:
    """A refused request (a deleted experiment) stays an error: only 'unsupported' is skipped."""
    from sommelier_mlflow.errors import SommelierError

    client = MlflowClient()
    experiment_id = client.create_experiment("logged-models-deleted")
    run_id = client.create_run(experiment_id).info.run_id
    client.delete_experiment(experiment_id)
    with pytest.raises(SommelierError):
        log_evaluation_run(arms.base_typed, run_id=run_id)
