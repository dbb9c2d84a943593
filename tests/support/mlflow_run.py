"""Run one entry point of this project through the real `mlflow run` command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
MLFLOW = str(Path(sys.executable).with_name("mlflow"))


def mlflow_run(tracking_uri: str, cwd: Path, entry: str, **params: str) -> str:
    """Run ``mlflow run <project> -e entry -P key=value ...`` and return the run id.

    The run fails the calling test (with the end of its output) unless
    ``mlflow run`` reports it succeeded.
    """
    env = {**os.environ, "MLFLOW_TRACKING_URI": tracking_uri, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_RUN_ID", None)
    command = [MLFLOW, "run", str(PROJECT), "-e", entry, "--env-manager", "local"]
    for key, value in params.items():
        command += ["-P", f"{key}={value}"]
    result = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    match = re.search(r"Run \(ID '([0-9a-f]+)'\) succeeded", output)
    assert match, output[-2000:]
    return match.group(1)
