"""Conversation turns through ``mlflow.models.evaluate`` (a messages column) and the scorers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from sommelier_mlflow.errors import DataError
from sommelier_mlflow.integration._primitives import log_test_split_input
from sommelier_mlflow.scorers import full_call_exact_match
from tests.integration.integration_helpers import Store, evaluate_in_run
from tests.support.conversations import TOOLS, conversation_rows, write_conversation_split

ROWS = conversation_rows()


def _output(row: dict[str, Any]) -> str:
    """The gold answer written as the model should, except on c2's second turn."""
    if row["example_id"] == "c2-t2":
        return json.dumps([{"name": "book_hotel", "arguments": {"city": "Paris", "nights": 3}}])
    return json.dumps(row["gold_calls"])


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "example_id": [row["example_id"] for row in rows],
            "language": [row["language"] for row in rows],
            # As a table holds them: JSON text in one column, lists in the other.
            "messages": [json.dumps(row["messages"]) for row in rows],
            "tools": [row["tools"] for row in rows],
            "output": [_output(row) for row in rows],
            "gold": [row["gold_calls"] for row in rows],
        }
    )


def test_a_messages_column_gives_the_turn_and_after_slices(store: Store) -> None:
    result, _ = evaluate_in_run(
        store, _frame(ROWS), evaluator_config={"sommelier": {"scoring": "calls"}}
    )
    metrics = result.metrics
    assert metrics["turn:1/counts/call_set_exact_match.denominator"] == 4
    assert metrics["turn:2.2b/counts/call_set_exact_match.denominator"] == 6
    # The one wrong turn follows a tool result and is a later turn.
    assert metrics["after:tool/counts/call_set_exact_match.numerator"] == 4
    assert metrics["after:tool/counts/call_set_exact_match.denominator"] == 5
    assert metrics["after:user/call_set_exact_match"] == 1.0
    assert metrics["turn:1/call_set_exact_match"] == 1.0


def test_single_turn_rows_get_no_conversation_slices(store: Store) -> None:
    frame = _frame(ROWS).drop(columns=["messages"])
    result, _ = evaluate_in_run(store, frame, evaluator_config={"sommelier": {"scoring": "calls"}})
    assert not [key for key in result.metrics if key.startswith(("turn:", "after:"))]


def test_a_broken_history_in_the_messages_column_is_refused(store: Store) -> None:
    rows = json.loads(json.dumps(ROWS))
    rows[1]["messages"][2]["tool_call_id"] = "nobody"
    with pytest.raises(MlflowException, match=r"row 1: messages\[2\] \(tool\) answers no tool"):
        evaluate_in_run(store, _frame(rows), evaluator_config={"sommelier": {"scoring": "calls"}})


def test_the_scorers_read_a_history_from_inputs() -> None:
    row = next(r for r in ROWS if r["example_id"] == "c4-t3")
    inputs = {"messages": row["messages"], "tools": TOOLS}
    gold = {"gold_call": row["gold_calls"][0]}
    assert full_call_exact_match(
        outputs=json.dumps(row["gold_calls"][0]), expectations=gold, inputs=inputs
    )
    broken = {**inputs, "messages": [*row["messages"], {"role": "assistant", "content": ""}]}
    with pytest.raises(DataError, match=r"inputs\['messages'\]: messages\[5\] \(assistant\)"):
        full_call_exact_match(outputs="{}", expectations=gold, inputs=broken)


def test_a_conversation_split_is_logged_as_an_input_with_its_histories(
    store: Store, tmp_path: Path
) -> None:
    path = write_conversation_split(tmp_path / "split.jsonl")
    with mlflow.start_run(experiment_id=store.experiment_id) as run:
        log_test_split_input(path, run_id=run.info.run_id)
    (dataset_input,) = MlflowClient().get_run(run.info.run_id).inputs.dataset_inputs
    # Five columns of every split, and conversation_id, turn and messages.
    assert json.loads(dataset_input.dataset.profile) == {"num_rows": 10, "num_elements": 80}
