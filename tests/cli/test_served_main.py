"""`mlflow run . -e main -P backend=server` against a real vLLM server, end to end."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.cli.cli_helpers import assert_never_logged, assert_not_in_files, main_run_children
from tests.support.mlflow_run import PROJECT, mlflow_run_process, succeeded_run_id
from tests.support.vllm_server import ADAPTER_NAME, BASE_NAME

pytestmark = pytest.mark.slow


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
    result = mlflow_run_process(
        server,
        tmp_path,
        "main",
        extra_env={"SERVED_KEY": key},
        timeout=1200,
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
    parent_id, output = succeeded_run_id(result), result.stdout + result.stderr
    client = MlflowClient(tracking_uri=server)
    parent, by_name = main_run_children(client, parent_id)
    for kind, run in by_name.items():
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
    # The key reached the server (it refuses requests without it) and nothing else.
    assert_never_logged(client, (parent, *by_name.values()), key, tmp_path)
    reports = re.search(r"^reports: (.+)$", output, re.MULTILINE)
    assert reports, output[-2000:]
    out = Path(reports.group(1))
    assert (out / "comparison" / "comparison_report.json").is_file()
    assert_not_in_files(out, key)
