from __future__ import annotations

import json
import os
from typing import Any

import mlflow
import pytest
from mlflow.tracking import MlflowClient

import sommelier_mlflow.scorers as scorers_module
from sommelier_mlflow.errors import DataError, InputError
from sommelier_mlflow.scorers import (
    GENAI_MAX_WORKERS_ENV,
    argument_exact_match,
    argument_f1,
    argument_f1_denominator,
    argument_f1_numerator,
    full_call_exact_match,
    function_name_accuracy,
    genai_evaluate,
    micro_argument_f1,
    safe_genai_env,
    sommelier_scorers,
    valid_json_rate,
)
from tests.integration.integration_helpers import Store, text, weather

OUTPUTS = [
    text(weather("Paris")),
    text(weather("Paris", "kelvin")),
    text(weather("Oslo", name="fetch_weather")),
    "The weather in Rome is sunny.",
]
# The same gold calls in the three accepted spellings of ``expectations``.
EXPECTATIONS: list[dict[str, Any]] = [
    {"gold_call": weather("Paris")},
    {"gold_call": json.dumps(weather("Paris"))},
    {"gold_calls": [weather("Oslo")]},
    weather("Rome"),
]


def test_public_module_exports_sorted_names() -> None:
    assert scorers_module.__all__ == sorted(scorers_module.__all__)
    names = [scorer.name for scorer in sommelier_scorers()]
    assert names == [
        "valid_json_rate",
        "function_name_accuracy",
        "argument_exact_match",
        "argument_f1",
        "argument_f1_numerator",
        "argument_f1_denominator",
        "full_call_exact_match",
    ]


def test_scorers_score_one_row_offline() -> None:
    row = {"outputs": OUTPUTS[1], "expectations": EXPECTATIONS[1]}
    assert valid_json_rate(**row) is True
    assert function_name_accuracy(**row) is True
    assert argument_exact_match(**row) is False
    assert full_call_exact_match(**row) is False
    assert argument_f1_numerator(**row) == 2  # city matches: 2 * 1 matched pair
    assert argument_f1_denominator(**row) == 4  # 2 predicted + 2 gold pairs
    assert argument_f1(**row) == 0.5


def test_decoded_dict_outputs_and_missing_outputs() -> None:
    gold = {"gold_call": weather("Paris")}
    assert full_call_exact_match(outputs=weather("Paris"), expectations=gold) is True
    assert valid_json_rate(outputs={"answer": "Paris"}, expectations=gold) is False
    assert valid_json_rate(outputs=None, expectations=gold) is False
    assert argument_f1_denominator(outputs=None, expectations=gold) == 2


@pytest.mark.parametrize(
    "expectations",
    [{"expected_response": "Paris"}, {"gold_call": "{not json"}, {"gold_calls": []}, 42],
)
def test_unusable_expectations_are_refused(expectations: object) -> None:
    with pytest.raises(InputError, match=r"gold|expectations"):
        valid_json_rate(outputs=OUTPUTS[0], expectations=expectations)


def test_unusable_outputs_are_refused() -> None:
    with pytest.raises(DataError, match="outputs must be"):
        valid_json_rate(outputs=3.5, expectations=EXPECTATIONS[0])


def test_micro_f1_needs_both_sums() -> None:
    assert micro_argument_f1(
        {"argument_f1_numerator/sum": 10.0, "argument_f1_denominator/sum": 14.0}
    ) == pytest.approx(10 / 14)
    with pytest.raises(DataError, match="argument_f1_denominator/sum"):
        micro_argument_f1({"argument_f1_numerator/sum": 10.0})


def test_safe_env_sets_a_default_and_respects_the_users_choice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(GENAI_MAX_WORKERS_ENV, raising=False)
    assert safe_genai_env() == 4
    assert os.environ[GENAI_MAX_WORKERS_ENV] == "4"
    monkeypatch.setenv(GENAI_MAX_WORKERS_ENV, "2")
    assert safe_genai_env() == 2
    assert os.environ[GENAI_MAX_WORKERS_ENV] == "2"


def test_genai_evaluate_gives_exact_metrics_and_micro_f1(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(GENAI_MAX_WORKERS_ENV, raising=False)
    # MLflow before 3.10 looks for the evaluation's traces in the active experiment,
    # not the run's: the user's usual set-up (an experiment chosen) is what works there.
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", store.experiment_id)
    rows = [
        {"inputs": {"row": index}, "outputs": output, "expectations": expectations}
        for index, (output, expectations) in enumerate(zip(OUTPUTS, EXPECTATIONS, strict=True))
    ]
    with mlflow.start_run(experiment_id=store.experiment_id) as run:
        result = genai_evaluate(rows)
    metrics = result.metrics

    assert metrics["valid_json_rate/mean"] == 0.75
    assert metrics["function_name_accuracy/mean"] == 0.5
    assert metrics["argument_exact_match/mean"] == 0.5
    assert metrics["full_call_exact_match/mean"] == 0.25
    # Per-row F1s are 1, 0.5, 1 and 0: their mean is the macro F1 ...
    assert metrics["argument_f1/mean"] == 0.625
    # ... while the summed counts give the product's exact micro F1, 10/14.
    assert metrics["argument_f1_numerator/sum"] == 10.0
    assert metrics["argument_f1_denominator/sum"] == 14.0
    assert micro_argument_f1(metrics) == 10 / 14

    logged = MlflowClient().get_run(run.info.run_id).data.metrics
    assert logged["argument_f1_numerator/sum"] == 10.0
    assert logged["full_call_exact_match/mean"] == 0.25
