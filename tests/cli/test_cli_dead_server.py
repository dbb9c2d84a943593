"""A tracking server that dies mid-run (issue 13 #2): bounded, exit 3, never FINISHED."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.cli_helpers import write_fixture
from tests.support.mlflow_server import start_mlflow_server, wait_until_healthy
from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]


def _start_server(root: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """A server this test can kill by hand: its process, URL and SQLite file."""
    port = free_port()
    process = start_mlflow_server(root, port, subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    if not wait_until_healthy(url, process, 90):
        os.killpg(process.pid, signal.SIGKILL)
        raise RuntimeError("mlflow server did not start")
    return process, url, root / "mlflow.db"


def _run_rows(database: Path) -> list[tuple[str, str]]:
    try:
        with sqlite3.connect(database, timeout=1) as connection:
            return list(connection.execute("SELECT run_uuid, status FROM runs"))
    except sqlite3.Error:
        return []


@pytest.mark.slow
def test_server_killed_mid_run_is_exit_3_within_a_minute(tmp_path: Path) -> None:
    files = write_fixture(tmp_path / "in")
    server, url, database = _start_server(tmp_path / "server")
    env = {**os.environ, "MLFLOW_TRACKING_URI": url, "PYTHONPATH": str(ROOT)}
    env.pop("MLFLOW_RUN_ID", None)
    env.pop("MLFLOW_HTTP_REQUEST_MAX_RETRIES", None)
    env.pop("MLFLOW_HTTP_REQUEST_TIMEOUT", None)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "sommelier_mlflow.cli", "score"]
    command += ["--test-split", str(files["split"]), "--generations", str(files["base"])]
    command += ["--model-kind", "base", "--model", "tiny/model", "--out", str(out)]
    command += ["--resamples", "50", "--mlflow"]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        while not _run_rows(database) and process.poll() is None:
            time.sleep(0.005)
        os.killpg(server.pid, signal.SIGKILL)  # the moment the run exists
        killed = time.monotonic()
        server.wait()
        _, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
    # From the server's death, not the start: importing MLflow on a loaded CI
    # machine is no part of what this checks (that no retry loop runs for minutes).
    elapsed = time.monotonic() - killed
    assert process.returncode == 3, err
    assert elapsed < 60, elapsed
    assert err.startswith("error: ") and "127.0.0.1" in err
    assert "cannot end the run" not in err  # the logging failure is the one reported
    assert (out / "evaluation_report.json").is_file()  # local results intact
    statuses = [status for _, status in _run_rows(database)]
    assert len(statuses) == 1 and statuses[0] != "FINISHED"
