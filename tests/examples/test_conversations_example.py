"""The bundled conversations example: OpenAI-format data imported, formatted, scored, compared."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.examples.examples_helpers import score_and_compare_precomputed_arms
from tests.support.mlflow_run import mlflow_run
from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "conversations"
FILES = ("data/conversations.jsonl", "outputs_base.jsonl", "outputs_adapter.jsonl")
TOKENIZER = REPO / "examples" / "demo" / "model" / "base_model"


def test_the_committed_example_is_what_the_script_writes(tmp_path: Path) -> None:
    load_script("examples/conversations/make_example.py").main(["--out", str(tmp_path)])
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (EXAMPLE / name).read_bytes(), name
    records = [json.loads(line) for line in (EXAMPLE / FILES[0]).read_text().splitlines()]
    assert len(records) == 40
    assert {record.get("language", "en") for record in records} == {"en", "fr"}
    assistant = [
        (message, record["messages"][index - 1]["role"])
        for record in records
        for index, message in enumerate(record["messages"])
        if message["role"] == "assistant"
    ]
    widths = {len(message.get("tool_calls") or []) for message, _ in assistant}
    assert widths == {0, 1, 2}  # text turns, single and parallel calls
    # Turns that must answer in text after reading a tool result, and tool steps in a row.
    assert any(not message.get("tool_calls") and after == "tool" for message, after in assistant)
    assert any(message.get("tool_calls") and after == "tool" for message, after in assistant)
    # Written as OpenAI's fine-tuning JSONL writes arguments: JSON text.
    call = next(message for message, _ in assistant if message.get("tool_calls"))["tool_calls"][0]
    assert isinstance(call["function"]["arguments"], str)


@pytest.mark.slow
def test_the_example_prepares_formats_scores_and_compares_through_mlflow_run(
    tmp_path: Path,
) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    prepared = tmp_path / "prepared"
    mlflow_run(
        uri,
        tmp_path,
        "prepare",
        input_format="openai",
        raw_data=str(EXAMPLE / "data" / "conversations.jsonl"),
        out=str(prepared),
        train_size="0",
        validation_size="0",
        test_size="40",
    )
    summary = json.loads((prepared / "drop_summary.json").read_text())
    assert summary["conversations"]["test"] == 40
    assert all(count == 0 for reasons in summary["dropped"].values() for count in reasons.values())
    formatted = tmp_path / "test.formatted.jsonl"
    mlflow_run(
        uri,
        tmp_path,
        "format",
        test_split=str(prepared / "test.jsonl"),
        tokenizer=str(TOKENIZER),
        prompt_format="native",
        out=str(formatted),
    )
    runs = score_and_compare_precomputed_arms(
        uri,
        tmp_path,
        test_split=formatted,
        outputs_dir=EXAMPLE,
        adapter="conversations-example-adapter",
        max_new_tokens="128",
        output_format="hermes",
        scoring="calls",
    )
    base, adapter = runs.base.metrics, runs.adapter.metrics
    # Every assistant turn is one example: 40 first turns, 56 later ones.
    expected = {  # slice -> (examples, base exact call sets, adapter exact call sets)
        "overall": (96, 50, 85),
        "turn:1": (40, 21, 35),
        "turn:2.2b": (56, 29, 50),
        "after:user": (48, 24, 42),
        "after:tool": (48, 26, 43),
        "fr": (18, 9, 15),
    }
    for name, (examples, base_right, adapter_right) in expected.items():
        key = f"{name}/counts/call_set_exact_match"
        assert base[f"{key}.denominator"] == examples, name
        assert base[f"{key}.numerator"] == base_right, name
        assert adapter[f"{key}.numerator"] == adapter_right, name
    # The turns that read a tool result and must answer in text: the base calls again.
    assert base["after:tool/counts/false_call_rate.numerator"] == 17
    assert base["after:tool/counts/false_call_rate.denominator"] == 40
    assert adapter["after:tool/counts/false_call_rate.numerator"] == 4
    compared = runs.compared
    assert compared["delta/overall/call_set_exact_match"] == pytest.approx((85 - 50) / 96)
    assert "delta/turn:2.2b/ci95/call_set_exact_match.lower" in compared
    assert 0.0 < compared["mcnemar/overall/p_value"] < 1e-4

    # Turns of one conversation are not independent: the statistics resample conversations.
    from mlflow.tracking import MlflowClient

    local = MlflowClient(tracking_uri=uri).download_artifacts(
        runs.compare_run_id, "sommelier/comparison_report.json", str(tmp_path / "artifacts")
    )
    report = json.loads(Path(local).read_text())
    overall = report["slices"]["overall"]
    assert overall["bootstrap"]["resampling"] == "conversation"
    assert overall["bootstrap"]["clusters"] == 40
    assert overall["mcnemar"]["method"] == "exact_sign_flip_conversations_two_sided"
    assert (overall["mcnemar"]["b"], overall["mcnemar"]["c"]) == (7, 42)
    assert report["slices"]["turn:2+"]["bootstrap"]["clusters"] == 32
