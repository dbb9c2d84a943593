"""Shared fixtures for the command-line and MLflow-project tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.mlflow_server import local_mlflow_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``mlflow server`` on 127.0.0.1 (up to 180 s to start on a loaded CI machine)."""
    with local_mlflow_server(tmp_path_factory.mktemp("server")) as url:
        yield url
