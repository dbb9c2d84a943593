"""A team's tracking setup for the tests: PostgreSQL + ``mlflow server`` with proxied artifacts.

PostgreSQL is Debian's package (``apt-get install postgresql``; ``.ci/run``
installs it), run as the ``postgres`` user on a throw-away data directory and
port. The MLflow server stores runs in it and serves artifacts from a local
folder (``--artifacts-destination DIR --serve-artifacts``), so clients need no
access to the artifact store themselves.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.mlflow_server import server_env, wait_until_healthy
from tests.support.net import free_port

__all__ = ["MlflowServer", "Postgres", "postgres_bin"]

MLFLOW = str(Path(sys.executable).with_name("mlflow"))


def postgres_bin() -> Path | None:
    """The newest Debian PostgreSQL ``bin`` folder (``initdb`` is not on PATH there)."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return candidates[-1].parent if candidates else None



def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: drop to the ``postgres`` user when we are root."""
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@dataclass
class Postgres:
    """A PostgreSQL cluster on a temporary data directory, listening on 127.0.0.1 only."""

    bin_dir: Path
    port: int = field(default_factory=free_port)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sommelier-pg-")))

    @property
    def uri(self) -> str:
        """SQLAlchemy URI of the ``mlflow`` database."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/mlflow"

    def _run(self, *command: str) -> None:
        result = subprocess.run(
            _as_postgres([str(self.bin_dir / command[0]), *command[1:]]),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{command[0]} failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> None:
        """initdb (trust auth on loopback), start, and create the ``mlflow`` database."""
        data = self.root / "data"
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run(
            "pg_ctl",
            "-D",
            str(data),
            "-l",
            str(self.root / "postgres.log"),
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1",
            "-w",
            "start",
        )
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "mlflow")

    def stop(self) -> None:
        """Stop the cluster and delete its files."""
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class MlflowServer:
    """``mlflow server`` on PostgreSQL with proxied artifacts; restartable on its port."""

    backend_uri: str
    artifacts: Path
    log_path: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The tracking URI clients use."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 180.0) -> None:
        """Launch the server and wait for ``/health``."""
        env = server_env()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    MLFLOW,
                    "server",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--backend-store-uri",
                    self.backend_uri,
                    "--artifacts-destination",
                    str(self.artifacts),
                    "--serve-artifacts",
                    "--workers",
                    "2",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        if not wait_until_healthy(self.url, self.process, timeout):
            self.stop()
            raise RuntimeError(self.log_path.read_text(errors="replace")[-3000:])

    def stop(self) -> None:
        """Stop the server's whole process group (gunicorn/uvicorn workers included)."""
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None
