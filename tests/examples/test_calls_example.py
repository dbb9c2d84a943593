"""The bundled calls-mode example: reproducible data, its published table, and `mlflow run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.mlflow_run import mlflow_run
from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "calls"
DATA = EXAMPLE / "data"
FILES = ("test_split.jsonl", "outputs_base.jsonl", "outputs_adapter.jsonl")


def _cli(*args: str, cwd: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "sommelier_mlflow.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{cwd / 'unused.db'}"},
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result.stdout


def _score_arms(root: Path) -> dict[str, Path]:
    common = ["--model", "example/precomputed-model", "--max-new-tokens", "128"]
    common += ["--batch-size", "1", "--scoring", "calls", "--resamples", "1000"]
    _cli(
        "score",
        "--test-split",
        str(DATA / "test_split.jsonl"),
        "--precomputed",
        str(DATA / "outputs_base.jsonl"),
        "--model-kind",
        "base",
        "--out",
        str(root / "base"),
        *common,
        cwd=root,
    )
    _cli(
        "score",
        "--test-split",
        str(DATA / "test_split.jsonl"),
        "--precomputed",
        str(DATA / "outputs_adapter.jsonl"),
        "--model-kind",
        "adapter",
        "--adapter",
        str(EXAMPLE / "adapter"),
        "--out",
        str(root / "adapter"),
        *common,
        cwd=root,
    )
    _cli(
        "compare",
        "--base-report",
        str(root / "base" / "evaluation_report.json"),
        "--adapter-report",
        str(root / "adapter" / "evaluation_report.json"),
        "--out",
        str(root / "cmp"),
        "--resamples",
        "1000",
        cwd=root,
    )
    return {"base": root / "base", "adapter": root / "adapter", "cmp": root / "cmp"}


def test_the_committed_data_is_what_the_script_writes(tmp_path: Path) -> None:
    load_script("examples/calls/make_example.py").main(["--out", str(tmp_path)])
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name
    rows = [json.loads(line) for line in (DATA / "test_split.jsonl").read_text().splitlines()]
    widths = {len(row["gold_calls"]) for row in rows}
    assert {0, 1} <= widths and max(widths) >= 2  # abstention, single and parallel calls
    assert {row["language"] for row in rows} == {"en", "fr"}


def test_the_readme_table_is_the_one_a_fresh_run_prints(tmp_path: Path) -> None:
    paths = _score_arms(tmp_path)
    markdown = (paths["cmp"] / "comparison" / "comparison_report.md").read_text()
    page = (REPO / "docs" / "scoring-modes.md").read_text()
    section = page.split("<!-- calls-example-table -->")[1]
    rows = [line for line in section.splitlines() if line.startswith("| call")]
    rows += [line for line in section.splitlines() if line.startswith("| abstention")]
    rows += [line for line in section.splitlines() if line.startswith("| false_call")]
    assert len(rows) == 7, rows
    overall = markdown.split("### overall")[1].split("###")[0]
    for row in rows:
        assert row in overall, row
    report = json.loads((paths["cmp"] / "comparison" / "comparison_report.json").read_text())
    assert report["identity"]["scoring"] == "calls"
    assert report["identity"]["field_slices"] == ["calls:0", "calls:1", "calls:2+"]
    assert report["slices"]["overall"]["mcnemar"]["metric"] == "call_set_exact_match"


@pytest.mark.slow
def test_the_example_scores_and_compares_through_mlflow_run(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_ids = {
        kind: mlflow_run(
            uri,
            tmp_path,
            "score",
            test_split=str(DATA / "test_split.jsonl"),
            precomputed=str(DATA / f"outputs_{kind}.jsonl"),
            model_kind=kind,
            model="example/precomputed-model",
            max_new_tokens="128",
            batch_size="1",
            scoring="calls",
            resamples="200",
            **({"adapter": str(EXAMPLE / "adapter")} if kind == "adapter" else {}),
        )
        for kind in ("base", "adapter")
    }
    compare_id = mlflow_run(
        uri,
        tmp_path,
        "compare",
        base_run_id=run_ids["base"],
        adapter_run_id=run_ids["adapter"],
        resamples="200",
    )
    client = MlflowClient(tracking_uri=uri)
    base = client.get_run(run_ids["base"]).data
    assert base.tags["sommelier.parser_version"] == "sommelier.calls_parser.v1"
    assert base.metrics["overall/counts/call_set_exact_match.numerator"] == 42
    assert base.metrics["overall/counts/call_set_exact_match.denominator"] == 80
    assert base.metrics["calls:0/counts/abstention_accuracy.denominator"] == 22
    assert "calls:2.2b/call_f1" in base.metrics and "gap/fr/call_f1" in base.metrics
    compared = client.get_run(compare_id).data.metrics
    assert compared["delta/overall/call_set_exact_match"] == pytest.approx(66 / 80 - 42 / 80)
    assert "delta/calls:2.2b/ci95/call_recall.lower" in compared
    assert 0.0 < compared["mcnemar/overall/p_value"] < 1e-3
