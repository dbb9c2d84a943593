"""Hostile outputs through a real ``mlflow server``: the span request must not fail.

Through a server the store's span sanitiser runs inside the request handler; a
100,000-deep bracket output used to turn the span request into an HTTP 500,
which failed the run (and every concurrent run sending such an output).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from tests.integration.test_traces import check_hostile_outputs_are_kept_as_text
from tests.support.mlflow_server import local_mlflow_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server_experiment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("trace-server")
    with local_mlflow_server(root) as url:
        previous = os.environ.get("MLFLOW_TRACKING_URI")
        mlflow.set_tracking_uri(url)
        try:
            yield MlflowClient().create_experiment("hostile-outputs")
        finally:
            mlflow.set_tracking_uri(previous)  # None unsets it again


def test_hostile_outputs_are_logged_as_text_through_a_server(server_experiment: str) -> None:
    check_hostile_outputs_are_kept_as_text(server_experiment)
