"""`mlflow run . -e main -P backend=server` against a real vLLM server, end to end."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_mlflow_project import MLFLOW, PROJECT
from tests.support.vllm_server import ADAPTER_NAME, BASE_NAME

pytestmark = pytest.mark.slow


def _mlflow_run(url: str, cwd: Path, env: dict[str, str], **params: str) -> tuple[str, str]:
    """Run the ``main`` entry point; return the parent run id and the output."""
    full_env = {**os.environ, "MLFLOW_TRACKING_URI": url, **env}
    full_env.pop("MLFLOW_RUN_ID", None)
    command = [MLFLOW, "run", str(PROJECT), "-e", "main", "--env-manager", "local"]
    for key, value in params.items():
        command += ["-P", f"{key}={value}"]
    result = subprocess.run(
        command, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=1200, check=False
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    match = re.search(r"Run \(ID '([0-9a-f]+)'\) succeeded", output)
    assert match, output[-2000:]
    return match.group(1), output


def test_main_through_a_served_base_and_adapter(
    server: str, vllm_server: Any, demo_assets: Any, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    key = vllm_server.api_key
    # `mlflow run` writes to a folder derived from the inputs under the project, so a
    # previous session's run of this same test would be resumed (nothing generated,
    # no throughput). Remove only folders written by this test's configuration.
    for manifest in PROJECT.glob("sommelier_out/main-*/base/generation_manifest.json"):
        generator = json.loads(manifest.read_text()).get("generator") or {}
        if (generator.get("server") or {}).get("served_model") == BASE_NAME:
            shutil.rmtree(manifest.parent.parent)
    parent_id, output = _mlflow_run(
        server,
        tmp_path,
        {"SERVED_KEY": key},
        model=str(demo_assets.base_model_dir),
        adapter=str(demo_assets.adapter_dir),
        test_split=str(demo_assets.splits_dir / "test.jsonl"),
        backend="server",
        base_url=vllm_server.url,
        served_model=BASE_NAME,
        served_adapter=ADAPTER_NAME,
        api_key_env="SERVED_KEY",
        concurrency="8",
        max_examples="20",
        batch_size="32",
        resamples="200",
    )
    client = MlflowClient(tracking_uri=server)
    parent = client.get_run(parent_id)
    assert parent.data.tags["sommelier.model_kind"] == "comparison"
    assert "delta/overall/full_call_exact_match" in parent.data.metrics
    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    by_name = {run.info.run_name: run for run in children}
    assert set(by_name) == {"base", "adapter"}
    for kind, run in by_name.items():
        assert run.info.status == "FINISHED"
        params, metrics = run.data.params, run.data.metrics
        assert params["decoding.backend"] == "server"
        assert params["server.served_model"] == BASE_NAME
        assert params["server.key_from_env"] == "SERVED_KEY"
        assert params["server.server_version"].startswith("0.")
        for name in ("prompts_per_s", "tokens_per_s", "latency_p50_s", "latency_p95_s"):
            assert metrics[f"generation/{name}"] > 0, name
        served = params["server.served_adapter"]
        assert served == (ADAPTER_NAME if kind == "adapter" else "None")
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "sommelier")}
        assert "sommelier/generation_usage.jsonl" in artifacts
    assert by_name["adapter"].data.params["adapter_sha256"] != "None"
    # The key reached the server (it refuses requests without it) and nothing else.
    for run in (parent, *children):
        logged = json.dumps([run.data.params, run.data.tags, run.data.metrics])
        assert key not in logged
        local = Path(
            client.download_artifacts(run.info.run_id, "", str(tmp_path / run.info.run_id))
        )
        for path in local.rglob("*"):
            if path.is_file():
                assert key.encode() not in path.read_bytes(), path
    reports = re.search(r"^reports: (.+)$", output, re.MULTILINE)
    assert reports, output[-2000:]
    out = Path(reports.group(1))
    assert (out / "comparison" / "comparison_report.json").is_file()
    for path in out.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
