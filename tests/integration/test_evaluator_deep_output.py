"""The evaluator plugin on valid but deeply nested model output (issue 13 #4)."""

from __future__ import annotations

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from tests.integration.integration_helpers import Store, evaluate_in_run, weather


def _deep_call(depth: int) -> str:
    inner = '"x"'
    for _ in range(depth - 1):
        inner = '{"a":' + inner + "}"
    return '{"name":"get_weather","arguments":' + inner + "}"


@pytest.mark.parametrize("depth", [255, 300, 1000])
def test_mlflow_evaluate_scores_deep_output(store: Store, depth: int) -> None:
    data = pd.DataFrame(
        {"output": [_deep_call(depth), _deep_call(depth)], "gold": [weather("Paris")] * 2}
    )
    result, run_id = evaluate_in_run(store, data, evaluator_config={"sommelier": {"resamples": 20}})
    assert result.metrics["overall/valid_json_rate"] == 1.0
    assert result.metrics["overall/function_name_accuracy"] == 1.0
    assert result.metrics["overall/full_call_exact_match"] == 0.0
    logged = MlflowClient().get_run(run_id).data.metrics
    assert logged["overall/counts/valid_json_rate.numerator"] == 2
