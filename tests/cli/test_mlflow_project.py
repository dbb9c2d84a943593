"""`mlflow run .` end to end against a real `mlflow server` on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.cli_helpers import write_fixture
from tests.support.mlflow_run import PROJECT, mlflow_run, mlflow_run_process


@pytest.mark.slow
def test_score_and_compare_through_mlflow_run(server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    files = write_fixture(tmp_path / "in")
    # `path` parameters are resolved from where the user runs `mlflow run`; test_split is
    # a string (it may name an MLflow dataset), so a relative one is the project's.
    rel = {key: os.path.relpath(path, tmp_path) for key, path in files.items()}
    rel["split"] = os.path.relpath(files["split"], PROJECT)
    common = dict(test_split=rel["split"], model="tiny/model", revision="abc123", resamples="200")
    base_id = mlflow_run(
        server, tmp_path, "score", generations=rel["base"], model_kind="base", **common
    )
    adapter_id = mlflow_run(
        server,
        tmp_path,
        "score",
        generations=rel["adapter"],
        model_kind="adapter",
        adapter=str(files["adapter_dir"]),
        **common,
    )
    compare_id = mlflow_run(
        server, tmp_path, "compare", base_run_id=base_id, adapter_run_id=adapter_id, resamples="200"
    )
    client = MlflowClient(tracking_uri=server)

    base = client.get_run(base_id)
    metrics = base.data.metrics
    assert metrics["overall/valid_json_rate"] == 0.75
    assert metrics["overall/counts/valid_json_rate.numerator"] == 6
    assert metrics["overall/counts/valid_json_rate.denominator"] == 8
    assert metrics["en/argument_f1"] == pytest.approx(10 / 14)
    assert metrics["fr/counts/argument_f1.numerator"] == 10
    assert metrics["fr/counts/argument_f1.denominator"] == 14
    assert metrics["gap/fr/pairs"] == 4
    assert metrics["gap/fr/full_call_exact_match"] == 0.0
    assert base.data.tags["sommelier.model_kind"] == "base"
    assert base.data.tags["sommelier.parser_version"] == "sommelier.parser.v1"
    split_sha = base.data.tags["sommelier.test_split_sha256"]
    assert re.fullmatch(r"[0-9a-f]{64}", split_sha)
    assert base.data.params["base_model"] == "tiny/model"
    assert base.data.params["decoding.batch_size"] == "2"
    assert base.data.params["model_kind"] == "base"  # logged by mlflow run itself
    assert [d.dataset.name for d in base.inputs.dataset_inputs]
    artifacts = {a.path for a in client.list_artifacts(base_id, "sommelier")}
    assert "sommelier/evaluation_report.json" in artifacts
    generations = {a.path for a in client.list_artifacts(base_id, "sommelier/generations")}
    assert generations == {"sommelier/generations/en.jsonl", "sommelier/generations/fr.jsonl"}

    adapter = client.get_run(adapter_id)
    assert adapter.data.metrics["overall/full_call_exact_match"] == 1.0
    assert adapter.data.tags["sommelier.model_kind"] == "adapter"

    comparison = client.get_run(compare_id)
    cm = comparison.data.metrics
    assert cm["delta/overall/full_call_exact_match"] == pytest.approx(0.75)
    assert cm["delta/en/valid_json_rate"] == pytest.approx(0.25)
    assert "delta/overall/ci95/full_call_exact_match.lower" in cm
    assert cm["mcnemar/overall/p_value"] == pytest.approx(2 * 0.5**6)
    assert cm["gap/adapter/fr/full_call_exact_match"] == 0.0
    assert "marginal_gap/base/fr/full_call_exact_match" in cm
    assert comparison.data.tags["sommelier.base_run_id"] == base_id
    assert comparison.data.tags["sommelier.adapter_run_id"] == adapter_id
    assert comparison.data.tags["sommelier.test_split_sha256"] == split_sha
    names = {a.path for a in client.list_artifacts(compare_id, "sommelier")}
    assert {
        "sommelier/comparison_report.json",
        "sommelier/comparison_report.md",
        "sommelier/comparison.png",
    } <= names
    local = client.download_artifacts(compare_id, "sommelier/comparison_report.json", str(tmp_path))
    report = json.loads(Path(local).read_text())
    assert report["slices"]["overall"]["mcnemar"]["c"] == 6


@pytest.mark.slow
def test_refused_comparison_logs_nothing_as_passed(server: str, tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    files = write_fixture(tmp_path / "in")
    common = {"test_split": str(files["split"]), "resamples": "100"}
    base_id = mlflow_run(
        server,
        tmp_path,
        "score",
        generations=str(files["base"]),
        model_kind="base",
        model="tiny/model",
        **common,
    )
    other_id = mlflow_run(
        server,
        tmp_path,
        "score",
        generations=str(files["adapter"]),
        model_kind="adapter",
        model="other/model",
        adapter=str(files["adapter_dir"]),
        **common,
    )
    result = mlflow_run_process(
        server, tmp_path, "compare", base_run_id=base_id, adapter_run_id=other_id
    )
    assert result.returncode != 0
    assert "model_identity.base_model" in result.stdout + result.stderr
    client = MlflowClient(tracking_uri=server)
    runs = client.search_runs(["0"], filter_string="tags.`sommelier.model_kind` = 'comparison'")
    for run in runs:
        assert run.data.tags.get("sommelier.base_run_id") != base_id


@pytest.mark.slow
def test_main_entry_point_runs_both_arms_and_the_comparison(server: str, tmp_path: Path) -> None:
    """`mlflow run .` with a real tiny model and LoRA adapter: parent + base/adapter children."""

    from mlflow.tracking import MlflowClient

    from tests.cli.cli_helpers import (
        assert_never_logged,
        examples,
        main_run_children,
        tiny_arms,
    )

    tiny = tiny_arms(tmp_path)
    rows, split, model, adapter = examples(), tiny["split"], tiny["model"], tiny["adapter"]

    planted = "hf_PlantedSecretToken1234567890"
    parent_id = mlflow_run(
        server,
        tmp_path,
        "main",
        extra_env={"HF_TOKEN": planted},
        test_split=str(split),
        model=str(model),
        adapter=str(adapter),
        max_new_tokens="8",
        batch_size="4",
        resamples="200",
    )
    client = MlflowClient(tracking_uri=server)
    parent, by_name = main_run_children(client, parent_id)
    assert "mcnemar/fr/p_value" in parent.data.metrics
    for kind, run in by_name.items():
        assert run.data.tags["sommelier.model_kind"] == kind
        assert run.data.metrics["overall/counts/valid_json_rate.denominator"] == len(rows)
        assert run.data.params["decoding.max_new_tokens"] == "8"
    artifacts = {a.path for a in client.list_artifacts(parent_id, "sommelier")}
    assert "sommelier/comparison.png" in artifacts
    # The Hub token the user exported never reaches anything logged.
    assert_never_logged(client, (parent, *by_name.values()), planted, tmp_path)


@pytest.mark.slow
def test_outputs_from_elsewhere_through_mlflow_run(server: str, tmp_path: Path) -> None:
    """`-e score -P precomputed=…` for both arms (JSONL and CSV, a served adapter name), then
    `-e compare`: the runs carry traces with assessments and say what produced the outputs."""
    import mlflow
    import pandas as pd
    from mlflow.tracking import MlflowClient

    from tests.cli.cli_helpers import ADAPTER_OUTPUTS, BASE_OUTPUTS, precomputed_rows, write_jsonl

    files = write_fixture(tmp_path / "in")
    write_jsonl(tmp_path / "base.jsonl", precomputed_rows(BASE_OUTPUTS))
    pd.DataFrame(precomputed_rows(ADAPTER_OUTPUTS)).to_csv(tmp_path / "adapter.csv", index=False)
    declared = {"model": "tiny/model", "revision": "abc123", "max_new_tokens": "32"}
    declared |= {"batch_size": "2", "backend": "server", "resamples": "200"}
    base_id = mlflow_run(
        server,
        tmp_path,
        "score",
        test_split=os.path.relpath(files["split"], PROJECT),  # a string: the project's
        precomputed="base.jsonl",
        model_kind="base",
        **declared,
    )
    adapter_id = mlflow_run(
        server,
        tmp_path,
        "score",
        test_split=str(files["split"]),
        precomputed="adapter.csv",
        model_kind="adapter",
        adapter="demo-adapter",
        **declared,
    )
    compare_id = mlflow_run(
        server, tmp_path, "compare", base_run_id=base_id, adapter_run_id=adapter_id, resamples="200"
    )
    client = MlflowClient(tracking_uri=server)
    base, adapter = client.get_run(base_id), client.get_run(adapter_id)
    assert (base.info.run_name, adapter.info.run_name) == ("base", "adapter")
    assert base.data.metrics["overall/full_call_exact_match"] == 0.25
    assert adapter.data.metrics["overall/full_call_exact_match"] == 1.0
    assert adapter.data.params["adapter_source"] == "served:demo-adapter"
    assert adapter.data.params["outputs_source"] == "precomputed"
    assert adapter.data.params["decoding.backend"] == "server"  # declared, checked by the gate
    comparison = client.get_run(compare_id)
    assert comparison.info.run_name == "compare tiny/model vs demo-adapter"
    assert comparison.data.metrics["delta/overall/full_call_exact_match"] == pytest.approx(0.75)
    artifacts = {a.path for a in client.list_artifacts(compare_id, "sommelier")}
    assert {"sommelier/comparison.png", "sommelier/gaps.png"} <= artifacts

    mlflow.set_tracking_uri(server)
    try:
        for run_id, kind in ((base_id, "base"), (adapter_id, "adapter")):
            traces = mlflow.search_traces(
                locations=[base.info.experiment_id], run_id=run_id, return_type="list"
            )
            assert len(traces) == 8
            by_example = {t.info.request_metadata["sommelier.example_id"]: t for t in traces}
            fr1 = {a.name: a for a in by_example["fr-1"].info.assessments}
            assert fr1["expected_call"].value == {
                "name": "get_weather",
                "arguments": {"city": "Oslo", "units": "celsius"},
            }
            assert fr1["parse_status"].value == "ok"
            full = fr1["full_call_exact_match"].value
            assert full == (1.0 if kind == "adapter" else 0.0)
            assert client.get_run(run_id).data.tags["mlflow.runType"] == "genai_evaluate"
    finally:
        mlflow.set_tracking_uri(None)  # unset: later tests read the environment


@pytest.mark.slow
def test_score_reads_an_mlflow_dataset_through_mlflow_run(server: str, tmp_path: Path) -> None:
    """MLflow would download a `path` parameter that looks like a URI; test_split passes through."""
    from mlflow.tracking import MlflowClient

    files = write_fixture(tmp_path / "in")
    push = [sys.executable, "-m", "sommelier_mlflow.cli", "dataset", "push", str(files["split"])]
    env = {**os.environ, "MLFLOW_TRACKING_URI": server, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_RUN_ID", None)
    pushed = subprocess.run(
        [*push, "--name", "weather"], env=env, capture_output=True, text=True, check=False
    )
    assert pushed.returncode == 0, pushed.stderr[-2000:]
    run_id = mlflow_run(
        server,
        tmp_path,
        "score",
        test_split="mlflow-dataset:weather",
        generations=str(files["base"]),
        model_kind="base",
        model="tiny/model",
        revision="abc123",
        resamples="200",
    )
    client = MlflowClient(tracking_uri=server)
    local = client.download_artifacts(run_id, "sommelier/evaluation_report.json", str(tmp_path))
    identity = json.loads(Path(local).read_text())["identity"]
    assert identity["dataset"]["name"] == "weather"
    assert identity["dataset"]["id"].startswith("d-")
