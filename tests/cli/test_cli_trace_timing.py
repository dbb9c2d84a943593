"""An arm's traces, as a command logs them: named after the arm, timed by its generation.

A multi-turn question is timed by every step the execution loop generated for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.cli import main
from sommelier_mlflow.data import write_test_split
from sommelier_mlflow.generation import MULTI_TURN_JOURNAL_NAME, TIMING_NAME, read_example_seconds
from tests.cli.cli_helpers import (
    BASE_OUTPUTS,
    declared_score_args,
    examples,
    logged_run_id,
    precomputed_rows,
    write_jsonl,
)
from tests.generation.multi_turn_helpers import question
from tests.support.bfcl_multi_turn import require_bfcl
from tests.support.chat_templates import DEMO_TOKENIZER


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


def test_the_traces_of_played_multi_turn_questions_last_every_step_they_took(
    tmp_path: Path, tracking_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    require_bfcl()
    split = write_test_split(tmp_path / "split.jsonl", [question("a"), question("b", turns=3)])
    out = tmp_path / "played"
    code = main(
        [
            *("evaluate", "--test-split", str(split), "--model", str(DEMO_TOKENIZER)),
            *("--model-kind", "base", "--backend", "hf", "--scoring", "bfcl"),
            *("--max-new-tokens", "8", "--batch-size", "8", "--resamples", "50"),
            *("--out", str(out), "--mlflow"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    run_id = logged_run_id(capsys.readouterr().out)

    # The demo model (a real tiny one) took every step; each batch's line names its questions.
    journal = [loads(line) for line in (out / MULTI_TURN_JOURNAL_NAME).read_bytes().splitlines()]
    rows = [loads(line) for line in (out / TIMING_NAME).read_bytes().splitlines()]
    timed = sorted((row["round"], example_id) for row in rows for example_id in row["example_ids"])
    assert timed == sorted((entry["round"], entry["example_id"]) for entry in journal)
    seconds = read_example_seconds(out)
    assert set(seconds) == {"a", "b"}
    assert all(value > 0 for value in seconds.values())

    client = MlflowClient(tracking_uri)
    experiment_id = client.get_run(run_id).info.experiment_id
    traces = client.search_traces(locations=[experiment_id], run_id=run_id, include_spans=True)
    assert len(traces) == 2
    for trace in traces:
        root = trace.data.spans[0]
        example_id = trace.info.request_metadata["sommelier.example_id"]
        assert root.end_time_ns - root.start_time_ns == round(seconds[example_id] * 1e9) > 0
        assert trace.info.execution_duration == round(seconds[example_id] * 1000)
