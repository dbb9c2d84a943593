"""The demo's `main` with the bundled claims file, end to end through `mlflow run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
MLFLOW = str(Path(sys.executable).with_name("mlflow"))


@pytest.mark.slow
def test_demo_main_with_claims_shows_the_verdict_everywhere(server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    env = {**os.environ, "MLFLOW_TRACKING_URI": server, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_RUN_ID", None)
    command = [
        MLFLOW, "run", str(PROJECT), "--env-manager", "local",
        "-P", "claims=examples/demo/claims.json",
    ]  # fmt: skip
    result = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    match = re.search(r"Run \(ID '([0-9a-f]+)'\) succeeded", output)
    assert match, output[-2000:]
    parent_id = match.group(1)

    # The summary printed by `main`.
    assert re.search(r"^\s+fr-gain\s+fr\s+full_call_exact_match .* supported$", output, re.M)
    assert re.search(r"^\s+en-holds\s+en\s+full_call_exact_match .* supported$", output, re.M)
    assert "verdict: supported" in output

    client = MlflowClient(tracking_uri=server)
    tags = client.get_run(parent_id).data.tags
    assert tags["sommelier.verdict"] == "supported"
    assert tags["sommelier.claim.fr-gain"] == "supported"
    assert tags["sommelier.claim.en-holds"] == "supported"
    local = Path(client.download_artifacts(parent_id, "sommelier", str(tmp_path / "dl")))
    report = json.loads((local / "comparison_report.json").read_text())
    claims = report["claims"]
    assert claims["verdict"] == "supported"
    assert claims["sha256"] == tags["sommelier.claims_sha256"]
    assert claims["registration"]["checked"] is True
    assert claims["registration"]["registered"] is False  # never registered in this store
    fr = report["slices"]["fr"]["delta"]["full_call_exact_match"]
    (fr_row,) = [row for row in claims["claims"] if row["id"] == "fr-gain"]
    assert (fr_row["estimate"], fr_row["lower"], fr_row["upper"]) == (
        fr["value"],
        fr["lower"],
        fr["upper"],
    )
    markdown = (local / "comparison_report.md").read_text()
    assert "## Preregistered claims: verdict SUPPORTED" in markdown
    assert "| `en-holds` | en | full_call_exact_match | non-inferiority: delta > -0.0100 |" in (
        markdown
    )
