"""The demo's `main` with the bundled claims file, end to end through `mlflow run`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.mlflow_run import MLFLOW, PROJECT, succeeded_run_id


@pytest.mark.slow
def test_demo_main_with_claims_shows_the_verdict_everywhere(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    # A SQLite store (no server to start) with its artifacts in the test's folder.
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(store).create_experiment(
        "claims-demo", artifact_location=(tmp_path / "artifacts").as_uri()
    )
    env = {**os.environ, "MLFLOW_TRACKING_URI": store, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_RUN_ID", None)
    env.pop("MLFLOW_EXPERIMENT_ID", None)

    def mlflow_run(*params: str) -> tuple[str, str]:
        command = [MLFLOW, "run", str(PROJECT), "--env-manager", "local"]
        command += ["--experiment-name", "claims-demo"]
        result = subprocess.run(
            [*command, *params],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        return succeeded_run_id(result), result.stdout + result.stderr

    # Preregister first (a `path` parameter: resolved from where mlflow runs) ...
    claims_file = PROJECT / "examples" / "demo" / "claims.json"
    register_id, _ = mlflow_run("-e", "register_claims", "-P", f"claims={claims_file}")
    # ... then the demo, naming the same file relative to the project.
    # 60 roots keep the test to minutes; the full demo decides the same way (README).
    parent_id, output = mlflow_run(
        "-P", "claims=examples/demo/claims.json", "-P", "max_examples=60"
    )  # fmt: skip

    client = MlflowClient(tracking_uri=store)
    tags = client.get_run(parent_id).data.tags
    local = Path(client.download_artifacts(parent_id, "sommelier", str(tmp_path / "dl")))
    report = json.loads((local / "comparison_report.json").read_text())
    # The demo's split was prepared: what preparing dropped goes with the parent run.
    dropped = json.loads((local / "prepared" / "drop_summary.json").read_text())
    assert set(dropped["splits"]) == {"train", "validation", "test"}
    claims = report["claims"]
    decisions = {row["id"]: row["decision"] for row in claims["claims"]}
    assert set(decisions) == {"fr-gain", "en-holds"}
    # The same verdict in the summary printed by `main`, the tags and the report.
    for claim_id, decision in decisions.items():
        assert tags[f"sommelier.claim.{claim_id}"] == decision
        assert re.search(
            rf"^\s+{claim_id}\s+\w+\s+full_call_exact_match .* {decision}$", output, re.M
        )
    assert tags["sommelier.verdict"] == claims["verdict"]
    assert f"verdict: {claims['verdict']}" in output
    assert claims["sha256"] == tags["sommelier.claims_sha256"]
    registration = claims["registration"]
    assert registration["registered"] is True
    assert registration["run_id"] == register_id
    assert registration["registered_before_arms"] is True
    assert "preregistration: registered before the arms ran" in output
    fr = report["slices"]["fr"]["delta"]["full_call_exact_match"]
    (fr_row,) = [row for row in claims["claims"] if row["id"] == "fr-gain"]
    assert (fr_row["estimate"], fr_row["lower"], fr_row["upper"]) == (
        fr["value"],
        fr["lower"],
        fr["upper"],
    )
    markdown = (local / "comparison_report.md").read_text()
    heading = claims["verdict"].replace("_", " ").upper()
    assert f"## Preregistered claims: verdict {heading}" in markdown
    assert "| `en-holds` | en | full_call_exact_match | non-inferiority: delta > -0.0100 |" in (
        markdown
    )
