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


@contextmanager
def local_mlflow_server(root: Path, *, start_timeout: float = 180.0) -> Iterator[str]:
    """Serve ``root/mlflow.db`` and ``root/artifacts``; yield the URL once ``/health`` answers.

    Raises:
        RuntimeError: The server exited or did not become healthy in time (the
            end of its log is the message).
    """
    port = free_port()
    log = (root / "server.log").open("wb")
    process = subprocess.Popen(
        [
            MLFLOW,
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--backend-store-uri",
            f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=server_env(),
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + start_timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError((root / "server.log").read_text()[-3000:])
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
