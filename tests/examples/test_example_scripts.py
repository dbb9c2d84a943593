"""The runnable scripts in examples/, run as a user would, against a sqlite store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.cli_helpers import score_args, write_fixture

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    env.pop("MLFLOW_RUN_ID", None)
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
def test_evaluate_static_predictions(tmp_path: Path) -> None:
    result = _run("evaluate_static_predictions.py", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    # 3 + 2 of 8 rows parse: (en: 3/4, fr: 2/4); full calls: en 1, fr 2.
    assert "overall/valid_json_rate = 0.625" in result.stdout
    assert "overall/full_call_exact_match = 0.375" in result.stdout
    assert "gap/fr/pairs = 4.0" in result.stdout


@pytest.mark.slow
def test_genai_scorers(tmp_path: Path) -> None:
    result = _run("genai_scorers.py", tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "valid_json_rate/mean = 0.75" in result.stdout
    assert "full_call_exact_match/mean = 0.25" in result.stdout
    micro = re.search(r"argument_f1 \(micro, exact\) = ([0-9.]+)", result.stdout)
    assert micro and float(micro.group(1)) == pytest.approx(10 / 14)


@pytest.mark.slow
def test_compare_runs(tmp_path: Path) -> None:
    files = write_fixture(tmp_path / "in")
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    env.pop("MLFLOW_RUN_ID", None)
    run_ids = []
    for kind in ("base", "adapter"):
        arm = score_args(files, kind, tmp_path / kind, resamples=100, revision=None)
        command = [sys.executable, "-m", "sommelier_mlflow.cli", *arm, "--mlflow"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        run_ids.append(re.findall(r"logged to MLflow run ([0-9a-f]+)", done.stdout)[-1])
    result = _run("compare_runs.py", tmp_path, *run_ids, "--out", str(tmp_path / "cmp"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "logged to MLflow run" in result.stdout
    assert (tmp_path / "cmp" / "comparison" / "comparison_report.json").is_file()
    refused = _run("compare_runs.py", tmp_path, run_ids[1], run_ids[0])
    assert refused.returncode == 4
