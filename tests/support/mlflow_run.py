"""Run one entry point of this project through the real `mlflow run` command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

PROJECT = Path(__file__).resolve().parents[2]
MLFLOW = str(Path(sys.executable).with_name("mlflow"))


def mlproject_entry_points() -> dict[str, dict[str, Any]]:
    """The MLproject's entry points as declared: name -> ``parameters`` and ``command``."""
    document = yaml.safe_load((PROJECT / "MLproject").read_text(encoding="utf-8"))
    return dict(document["entry_points"])


def mlflow_run_process(
    tracking_uri: str,
    cwd: Path,
    entry: str,
    *,
    extra_env: dict[str, str] | None = None,
    timeout: float = 300,
    **params: str,
) -> subprocess.CompletedProcess[str]:
    """Run ``mlflow run <project> -e entry -P key=value ...`` and return the finished process.

    Whatever its outcome: for a test that expects ``mlflow run`` to refuse.
    ``extra_env`` is added to this process's environment (without ``MLFLOW_RUN_ID``).
    """
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": tracking_uri,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        **(extra_env or {}),
    }
    env.pop("MLFLOW_RUN_ID", None)
    command = [MLFLOW, "run", str(PROJECT), "-e", entry, "--env-manager", "local"]
    for key, value in params.items():
        command += ["-P", f"{key}={value}"]
    return subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def succeeded_run_id(result: subprocess.CompletedProcess[str]) -> str:
    """The id of the run ``mlflow run`` reported succeeded.

    Fails the calling test (with the end of its output) unless it did.
    """
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    match = re.search(r"Run \(ID '([0-9a-f]+)'\) succeeded", output)
    assert match, output[-2000:]
    return match.group(1)


def mlflow_run(tracking_uri: str, cwd: Path, entry: str, **options: Any) -> str:
    """Run ``mlflow run <project> -e entry -P key=value ...`` and return the run id.

    ``options`` are :func:`mlflow_run_process`'s (``extra_env``, ``timeout`` and
    the parameters); the run fails the calling test unless it succeeded.
    """
    return succeeded_run_id(mlflow_run_process(tracking_uri, cwd, entry, **options))
