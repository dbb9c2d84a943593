"""Shared fixtures for the command-line and MLflow-project tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.cli_helpers import write_fixture
from tests.support.mlflow_server import local_mlflow_server


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """The CLI fixture's test split, generations and precomputed outputs, written afresh."""
    return write_fixture(tmp_path / "in")


@pytest.fixture
def tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh SQLite store in ``tmp_path``, this test's ``MLFLOW_TRACKING_URI``; its URI.

    ``MLFLOW_RUN_ID`` is unset, so no run from outside the test is logged into.
    """
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    return uri


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``mlflow server`` on 127.0.0.1 (up to 180 s to start on a loaded CI machine)."""
    with local_mlflow_server(tmp_path_factory.mktemp("server")) as url:
        yield url
