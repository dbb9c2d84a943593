"""One way to start a local ``mlflow server`` for tests and the screenshot script.

Both need the same thing: a real server on a free loopback port with a SQLite
store and proxied artifacts, polled until healthy, and stopped with its worker
processes (it runs in its own session, so the whole group is signalled).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from tests.support.net import free_port

MLFLOW = str(Path(sys.executable).with_name("mlflow"))


def server_env() -> dict[str, str]:
    """The environment a test's ``mlflow server`` runs in.

    MLflow 3.x servers on a SQL store start a job runner by default: half a
    dozen ``huey`` worker processes that each import MLflow (about 1.5 GB and
    tens of CPU-seconds per server). No test submits server jobs, so they are
    switched off; on a 2-core CI machine they slowed every test near a server.
    """
    return {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }


def start_mlflow_server(root: Path, port: int, output: IO[bytes] | int) -> subprocess.Popen[bytes]:
    """Start serving ``root/mlflow.db`` and ``root/artifacts`` on ``127.0.0.1:port``.

    The server runs in its own session (signal its process group to stop it),
    writes to ``output`` (a file or ``subprocess.DEVNULL``) and is not waited for:
    see :func:`wait_until_healthy`.
    """
    return subprocess.Popen(
        [
            *(MLFLOW, "server", "--host", "127.0.0.1", "--port", str(port)),
            *("--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}"),
            *("--artifacts-destination", str(root / "artifacts"), "--workers", "1"),
        ],
        stdout=output,
        stderr=subprocess.STDOUT,
        env=server_env(),
        start_new_session=True,
    )


def wait_until_healthy(url: str, process: subprocess.Popen[bytes], timeout: float) -> bool:
    """Poll ``url/health`` until it answers 200 (True), or ``process`` exits or time is up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            return False
        time.sleep(0.5)


@contextmanager
def local_mlflow_server(root: Path, *, start_timeout: float = 180.0) -> Iterator[str]:
    """Serve ``root/mlflow.db`` and ``root/artifacts``; yield the URL once ``/health`` answers.

    Raises:
        RuntimeError: The server exited or did not become healthy in time (the
            end of its log is the message).
    """
    port = free_port()
    log = (root / "server.log").open("wb")
    process = start_mlflow_server(root, port, log)
    url = f"http://127.0.0.1:{port}"
    try:
        if not wait_until_healthy(url, process, start_timeout):
            raise RuntimeError((root / "server.log").read_text()[-3000:])
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
