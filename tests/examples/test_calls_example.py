"""The bundled calls-mode example: reproducible data, its published table, and `mlflow run`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.examples_helpers import score_and_compare_precomputed_arms
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
    for kind in ("base", "adapter"):
        adapter = ["--adapter", str(EXAMPLE / "adapter")] if kind == "adapter" else []
        _cli(
            "score",
            "--test-split",
            str(DATA / "test_split.jsonl"),
            "--precomputed",
            str(DATA / f"outputs_{kind}.jsonl"),
            "--model-kind",
            kind,
            *adapter,
            "--out",
            str(root / kind),
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
    runs = score_and_compare_precomputed_arms(
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        tmp_path,
        test_split=DATA / "test_split.jsonl",
        outputs_dir=DATA,
        adapter=str(EXAMPLE / "adapter"),
        max_new_tokens="128",
        scoring="calls",
    )
    base = runs.base
    assert base.tags["sommelier.parser_version"] == "sommelier.calls_parser.v1"
    assert base.metrics["overall/counts/call_set_exact_match.numerator"] == 42
    assert base.metrics["overall/counts/call_set_exact_match.denominator"] == 80
    assert base.metrics["calls:0/counts/abstention_accuracy.denominator"] == 22
    assert "calls:2.2b/call_f1" in base.metrics and "gap/fr/call_f1" in base.metrics
    compared = runs.compared
    assert compared["delta/overall/call_set_exact_match"] == pytest.approx(66 / 80 - 42 / 80)
    assert "delta/calls:2.2b/ci95/call_recall.lower" in compared
    assert 0.0 < compared["mcnemar/overall/p_value"] < 1e-3
