"""The evaluator with evaluator_config {"scoring": "calls"} and slice_by (once slice_columns)."""

from __future__ import annotations

import json
from typing import Any

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from sommelier_mlflow.evaluation import PredictionsReport
from sommelier_mlflow.integration import score_predictions
from sommelier_mlflow.toolcalls import CALLS_METRIC_NAMES, CALLS_PARSER_VERSION
from tests.integration.integration_helpers import Store, evaluate_in_run

W = {"name": "get_weather", "arguments": {"city": "Paris"}}
T = {"name": "convert", "arguments": {"amount": 10, "to": "USD"}}

# Gold as lists (an empty one: no tool applies), as JSON text, or one call.
DATA = pd.DataFrame(
    {
        "output": [
            json.dumps([T, W]),  # reordered parallel calls: exact
            json.dumps([W, W]),  # one duplicate too many
            "[]",  # explicit abstention, right
            json.dumps([W]),  # called on an abstention example
            "Nothing to call.",  # prose where a call was due
        ],
        "gold": [[W, T], json.dumps([W]), [], "[]", W],
        "topic": ["travel", "weather", "small talk", "small talk", "weather"],
    }
)


def _evaluate(store: Store, config: dict[str, Any]) -> tuple[Any, str]:
    return evaluate_in_run(store, DATA, evaluator_config={"sommelier": config})


def test_calls_scoring_through_mlflow_evaluate(store: Store) -> None:
    # slice_by as the MLproject spells it: one comma-separated string.
    result, run_id = _evaluate(store, {"scoring": "calls", "slice_by": "topic"})
    metrics = result.metrics
    for name in CALLS_METRIC_NAMES:
        assert f"overall/{name}" in metrics
    counts = {
        name: (
            metrics[f"overall/counts/{name}.numerator"],
            metrics[f"overall/counts/{name}.denominator"],
        )
        for name in CALLS_METRIC_NAMES
    }
    assert counts == {
        "call_set_exact_match": (2, 5),  # rows 0 and 2
        "call_precision": (3, 5),  # matched 2 + 1; predicted 2 + 2 + 1
        "call_recall": (3, 4),  # gold calls 2 + 1 + 1
        "call_f1": (6, 9),
        # pairs matched/predicted/gold: row 0 3/3/3, row 1 1/2/1, row 3 0/1/0, row 4 0/0/1
        "call_argument_f1": (8, 11),
        "abstention_accuracy": (1, 2),
        "false_call_rate": (1, 2),
    }
    assert metrics["calls:0/counts/call_set_exact_match.denominator"] == 2
    assert metrics["calls:2.2b/call_set_exact_match"] == 1.0
    assert metrics["topic:small.20talk/abstention_accuracy"] == 0.5
    run = MlflowClient().get_run(run_id)
    assert run.data.tags["sommelier.parser_version"] == CALLS_PARSER_VERSION
    assert run.data.metrics["overall/call_f1"] == pytest.approx(6 / 9)


def test_bad_calls_configuration_is_refused(store: Store) -> None:
    with pytest.raises(MlflowException, match="scoring must be one of"):
        _evaluate(store, {"scoring": "multi"})
    with pytest.raises(MlflowException, match="slice_by names 'missing'"):
        _evaluate(store, {"scoring": "calls", "slice_by": ["missing"]})
    both = {"scoring": "calls", "slice_by": ["topic"], "slice_columns": ["topic"]}
    with pytest.raises(MlflowException, match="slice_columns is the old name of slice_by"):
        _evaluate(store, both)
    with pytest.raises(MlflowException, match="list must hold exactly one call"):
        _evaluate(store, {})  # single scoring refuses multi-call gold


def test_the_old_config_key_slice_columns_still_slices_and_warns(store: Store) -> None:
    with pytest.warns(DeprecationWarning, match="slice_columns is renamed slice_by"):
        result, _ = _evaluate(store, {"scoring": "calls", "slice_columns": ["topic"]})
    assert result.metrics["topic:small.20talk/abstention_accuracy"] == 0.5


def test_single_scoring_output_is_unchanged_by_the_calls_options() -> None:
    single = score_predictions(DATA["output"][:2].tolist(), [W, W])
    assert single.report.parser_version == "sommelier.parser.v1"
    document = single.report.to_json()
    assert "scoring" not in document and "field_slices" not in document


def test_calls_evaluator_report_reads_back_as_written() -> None:
    scores = score_predictions(
        DATA["output"].tolist(),
        DATA["gold"].tolist(),
        scoring="calls",
        slice_by={"topic": DATA["topic"].tolist()},
    )
    document = scores.report.to_json()
    assert document["scoring"] == "calls" and document["slice_by"] == ["calls", "topic"]
    again = PredictionsReport.from_json(document)
    assert again.to_json() == document
    assert again.field_slices["topic:small talk"].metrics == (
        scores.report.field_slices["topic:small talk"].metrics
    )


def test_score_predictions_takes_slice_columns_as_the_old_name_of_slice_by() -> None:
    topics = {"topic": DATA["topic"].tolist()}
    new = score_predictions(
        DATA["output"].tolist(), DATA["gold"].tolist(), scoring="calls", slice_by=topics
    )
    with pytest.warns(DeprecationWarning, match="slice_columns is renamed slice_by") as caught:
        old = score_predictions(
            DATA["output"].tolist(), DATA["gold"].tolist(), scoring="calls", slice_columns=topics
        )
    assert caught[0].filename == __file__  # the warning points at the caller's line
    assert old.metrics == new.metrics and "topic:weather/call_f1" in old.metrics


def test_calls_scorers_score_rows_offline() -> None:
    from sommelier_mlflow.scorers import sommelier_scorers

    scorers = {built.name: built for built in sommelier_scorers(scoring="calls")}
    assert scorers["call_set_exact_match"](
        outputs=json.dumps([T, W]), expectations={"gold_calls": [W, T]}
    )
    assert (
        scorers["abstention_accuracy_denominator"](
            outputs="No tool fits.", expectations={"gold_calls": []}
        )
        == 1
    )
    assert (
        scorers["call_recall_numerator"](
            outputs=json.dumps([W, W]), expectations={"gold_calls": json.dumps([W])}
        )
        == 1
    )
    assert (
        scorers["call_precision_denominator"](
            outputs=json.dumps([W, W]), expectations={"gold_call": W}
        )
        == 2
    )


def test_calls_scorers_through_genai_evaluate(store: Store) -> None:
    from sommelier_mlflow.scorers import genai_evaluate, sommelier_scorers

    rows = [
        {"inputs": {"row": index}, "outputs": output, "expectations": {"gold_calls": gold}}
        for index, (output, gold) in enumerate(
            zip(DATA["output"], [[W, T], [W], [], [], [W]], strict=True)
        )
    ]
    with mlflow.start_run(experiment_id=store.experiment_id):
        result = genai_evaluate(rows, scorers=sommelier_scorers(scoring="calls"))
    metrics = result.metrics
    assert metrics["call_set_exact_match/mean"] == pytest.approx(2 / 5)
    assert metrics["call_f1_numerator/sum"] == 6.0
    assert metrics["call_f1_denominator/sum"] == 9.0
    assert metrics["false_call_rate_numerator/sum"] == 1.0
    assert metrics["false_call_rate_denominator/sum"] == 2.0
