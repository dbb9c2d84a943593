"""Shared fixtures: real arm and comparison reports, and a real SQLite tracking store.

Every MLflow test here runs against a real SQLite tracking store with its
artifact root in a temporary directory; nothing is mocked. The store is
created once per test session (schema migrations take seconds) and each test
module points MLflow at it, restoring the previous tracking URI afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sommelier_mlflow.data import read_test_split, write_test_split
from sommelier_mlflow.evaluation import EvaluationReport, compare_reports
from tests.integration.integration_helpers import Arms, Store, examples, score_arms

HERE = Path(__file__).resolve().parent

# MLflow 3.17 itself triggers these deprecation warnings on the installed
# sqlalchemy 2.1 / pandas 3.1 (store start-up, dataset digests, EvaluationDataset)
# none comes from sommelier_mlflow's code. Each is matched by its exact text and
# applied to this directory's tests only.
_MLFLOW_THIRD_PARTY_WARNINGS = [
    pytest.mark.filterwarnings(
        "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:Starting with pandas version 4.0 all arguments of all will be keyword-only"
        ":DeprecationWarning"
    ),
    pytest.mark.filterwarnings(
        "ignore:The inplace keyword in DataFrame.drop is deprecated:DeprecationWarning"
    ),
    # Raised while `mlflow.pyfunc` is first imported (MLflow silences it for its own
    # schema inference, but an "error" filter fires before that silencing applies).
    pytest.mark.filterwarnings("ignore:.*Any type hint is inferred as AnyType:UserWarning"),
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            for mark in _MLFLOW_THIRD_PARTY_WARNINGS:
                item.add_marker(mark)


@pytest.fixture(scope="session")
def arms(tmp_path_factory: pytest.TempPathFactory) -> Arms:
    directory = tmp_path_factory.mktemp("arms")
    split_path = write_test_split(directory / "test.jsonl", examples())
    split = read_test_split(split_path)
    base, adapter = score_arms(split, resamples=300)
    base_typed, adapter_typed = EvaluationReport.from_run(base), EvaluationReport.from_run(adapter)
    comparison = compare_reports(base_typed, adapter_typed, resamples=300)
    return Arms(
        split_path,
        split,
        base,
        adapter,
        base_typed.to_json(),
        adapter_typed.to_json(),
        comparison.to_json(),
        base_typed,
        adapter_typed,
        comparison,
    )


@pytest.fixture(scope="session")
def _sqlite_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    from mlflow.tracking import MlflowClient

    directory = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{directory / 'mlflow.db'}"
    artifact_root = directory / "artifacts"
    experiment_id = MlflowClient(uri).create_experiment(
        "sommelier-tests", artifact_location=artifact_root.as_uri()
    )
    return Store(uri=uri, experiment_id=experiment_id, artifact_root=artifact_root)


@pytest.fixture(scope="module")
def store(_sqlite_store: Store) -> Iterator[Store]:
    """Point MLflow at the session's SQLite store for one test module."""
    import mlflow

    previous = os.environ.get("MLFLOW_TRACKING_URI")
    mlflow.set_tracking_uri(_sqlite_store.uri)
    try:
        yield _sqlite_store
    finally:
        mlflow.set_tracking_uri(previous)  # None unsets it again
