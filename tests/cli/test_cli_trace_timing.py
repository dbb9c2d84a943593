"""An arm's traces, as a command logs them: named after the arm, timed by its generation."""

from __future__ import annotations

from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.generation import read_example_seconds
from tests.cli.cli_helpers import (
    BASE_OUTPUTS,
    declared_score_args,
    examples,
    logged_run_id,
    precomputed_rows,
    write_jsonl,
)


def test_the_traces_of_a_replayed_arm_last_what_its_batches_took(
    files: dict[str, Path],
    tmp_path: Path,
    tracking_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mlflow.tracking import MlflowClient

    precomputed = write_jsonl(tmp_path / "outputs.jsonl", precomputed_rows(BASE_OUTPUTS))
    out = tmp_path / "p"
    args = [*declared_score_args(files["split"]), "--precomputed", str(precomputed)]
    assert main([*args, "--out", str(out), "--resamples", "100", "--mlflow"]) == 0
    run_id = logged_run_id(capsys.readouterr().out)

    seconds = read_example_seconds(out)  # the runner timed each replayed batch
    assert set(seconds) == {example.example_id for example in examples()}
    client = MlflowClient(tracking_uri)
    experiment_id = client.get_run(run_id).info.experiment_id
    traces = client.search_traces(locations=[experiment_id], run_id=run_id, include_spans=True)
    assert len(traces) == len(seconds)
    for trace in traces:
        root = trace.data.spans[0]
        example_id = trace.info.request_metadata["sommelier.example_id"]
        assert root.name == trace.info.tags["mlflow.traceName"] == "base"
        assert root.end_time_ns - root.start_time_ns == round(seconds[example_id] * 1e9)
        assert trace.info.execution_duration == round(seconds[example_id] * 1000)
