"""MLflow's own ``ToolCallCorrectness`` on our traces agrees with our exact comparison.

Each trace carries one ``TOOL`` span per decoded call and an
``expected_tool_calls`` expectation in MLflow's shape, so
``mlflow.genai.evaluate`` with ``ToolCallCorrectness(should_exact_match=True)``
judges the same traces the product scored. Its verdict per trace is compared
with the product's own per-example exact comparison (``full_call_exact_match``
in ``single`` mode, ``call_set_exact_match`` in ``calls`` mode), which the same
traces hold as feedback. Where the two notions differ (docs/mlflow.md), the
test says which examples and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import mlflow
import pytest
from mlflow.genai.scorers import ToolCallCorrectness
from mlflow.tracking import MlflowClient

from sommelier_mlflow.integration import arm_example_traces, log_example_traces
from tests.integration.integration_helpers import GOLD, Arms, Store

PROJECT = Path(__file__).resolve().parents[2]
CALLS = PROJECT / "examples" / "calls" / "data"


@pytest.fixture(autouse=True)
def _no_llm_judge(monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow's scorer asks an LLM for the available tools when a key is set: never here."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DATABRICKS_HOST", "DATABRICKS_TOKEN"):
        monkeypatch.delenv(name, raising=False)


def _verdicts(experiment_id: str, run_id: str, ours: str) -> dict[str, tuple[bool | None, bool]]:
    """Per example: MLflow's verdict (``None`` where it gives none) and ours."""
    traces = mlflow.search_traces(locations=[experiment_id], run_id=run_id)
    # Inside a run of the arm's experiment, evaluate logs there without
    # changing the process's active experiment for later tests.
    with mlflow.start_run(experiment_id=experiment_id):
        result = mlflow.genai.evaluate(
            data=traces, scorers=[ToolCallCorrectness(should_exact_match=True)]
        )
    judged = mlflow.search_traces(
        locations=[experiment_id], run_id=result.run_id, return_type="list"
    )
    verdicts: dict[str, tuple[bool | None, bool]] = {}
    for trace in judged:
        found: dict[str, Any] = {a.name: a for a in trace.info.assessments}
        mlflow_verdict = found["tool_call_correctness"]
        value = None if mlflow_verdict.error is not None else mlflow_verdict.value == "yes"
        example_id = trace.info.request_metadata["sommelier.example_id"]
        verdicts[example_id] = (value, found[ours].value is True)
    return verdicts


def _abstentions() -> set[str]:
    """The calls example's ids whose gold is "no call"."""
    rows = [json.loads(line) for line in (CALLS / "test_split.jsonl").read_text().splitlines()]
    return {row["example_id"] for row in rows if row["gold_calls"] == []}


def test_single_mode_verdicts_agree(store: Store, arms: Arms) -> None:
    client = MlflowClient()
    outcomes: set[bool] = set()
    for scored, typed in ((arms.base, arms.base_typed), (arms.adapter, arms.adapter_typed)):
        run_id = client.create_run(store.experiment_id).info.run_id
        log_example_traces(run_id, arm_example_traces(typed, scored, arms.split))
        verdicts = _verdicts(store.experiment_id, run_id, "full_call_exact_match")
        assert set(verdicts) == set(GOLD)
        outcomes |= {ours for _, ours in verdicts.values()}
        assert {key: mlflow for key, (mlflow, _) in verdicts.items()} == {
            key: ours for key, (_, ours) in verdicts.items()
        }
    assert outcomes == {True, False}


def test_calls_mode_verdicts_agree(tmp_path: Path, store: Store) -> None:
    uri = f"sqlite:///{tmp_path / 'calls.db'}"
    env = {
        **{key: value for key, value in os.environ.items() if key != "MLFLOW_EXPERIMENT_ID"},
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_EXPERIMENT_NAME": "calls-tool-call-correctness",
        "PYTHONPATH": str(PROJECT),
    }
    for kind, outputs in (("base", "outputs_base.jsonl"), ("adapter", "outputs_adapter.jsonl")):
        args = ["score", "--test-split", str(CALLS / "test_split.jsonl")]
        args += ["--precomputed", str(CALLS / outputs), "--model-kind", kind]
        args += [
            "--model",
            "example/precomputed-model",
            "--max-new-tokens",
            "128",
            "--batch-size",
            "1",
        ]
        args += ["--scoring", "calls", "--resamples", "100", "--out", str(tmp_path / kind)]
        args += ["--mlflow", "--log-traces", "true"]
        args += ["--adapter", str(PROJECT / "examples" / "calls" / "adapter")] * (kind == "adapter")
        result = subprocess.run(
            [sys.executable, "-m", "sommelier_mlflow.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, result.stderr[-3000:]
    mlflow.set_tracking_uri(uri)
    try:
        client = MlflowClient()
        experiment = client.get_experiment_by_name("calls-tool-call-correctness")
        assert experiment is not None
        runs = client.search_runs([experiment.experiment_id])
        assert len(runs) == 2
        outcomes: set[bool] = set()
        for run in runs:
            verdicts = _verdicts(experiment.experiment_id, run.info.run_id, "call_set_exact_match")
            assert len(verdicts) == 80
            # MLflow's exact match refuses an empty expectation: an abstention
            # example (gold: no call) gets an error, not a verdict.
            abstentions = {
                key for key, (mlflow_verdict, _) in verdicts.items() if mlflow_verdict is None
            }
            assert abstentions == _abstentions()
            agree = {key: v for key, v in verdicts.items() if key not in abstentions}
            outcomes |= {ours for _, ours in agree.values()}
            assert {key: m for key, (m, _) in agree.items()} == {
                key: o for key, (_, o) in agree.items()
            }
        assert outcomes == {True, False}
    finally:
        mlflow.set_tracking_uri(None)  # unset: later tests read the environment
