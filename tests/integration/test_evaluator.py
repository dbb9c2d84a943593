from __future__ import annotations

import json
import re
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
import pytest
from mlflow.exceptions import MlflowException
from mlflow.models import list_evaluators
from mlflow.tracking import MlflowClient

from sommelier_mlflow._json import loads
from sommelier_mlflow.errors import ConfigError, SommelierError
from sommelier_mlflow.toolcalls import METRIC_NAMES, PARSER_VERSION
from tests.integration.integration_helpers import Store, evaluate_in_run, text, weather

# The worked example of the metrics spec: four rows, gold calls as dicts and JSON strings.
WORKED = pd.DataFrame(
    {
        "query": ["weather Paris", "weather Paris", "weather Oslo", "weather Rome"],
        "output": [
            text(weather("Paris")),
            text(weather("Paris", "kelvin")),
            text(weather("Oslo", name="fetch_weather")),
            "The weather in Rome is sunny.",
        ],
        "gold": [
            weather("Paris"),
            json.dumps(weather("Paris")),
            weather("Oslo"),
            json.dumps(weather("Rome")),
        ],
    }
)
WORKED_COUNTS = {
    "valid_json_rate": (3, 4),
    "function_name_accuracy": (2, 4),
    "argument_exact_match": (2, 4),
    "argument_f1": (10, 14),
    "full_call_exact_match": (1, 4),
}


def _bilingual() -> pd.DataFrame:
    """English roots a..c and French translations; fr answers worse on one pair."""
    return pd.DataFrame(
        {
            "id": ["a", "b", "c", "a-fr", "b-fr", "c-fr"],
            "lang": ["en", "en", "en", "fr", "fr", "fr"],
            "root": [None, None, None, "a", "b", "c"],
            "output": [
                text(weather("Paris")),
                text(weather("Oslo")),
                text(weather("Rome")),
                text(weather("Paris")),
                "Il fait beau.",
                text(weather("Rome", "kelvin")),
            ],
            "gold": [weather("Paris"), weather("Oslo"), weather("Rome")] * 2,
        }
    )


def _logged_metrics(run_id: str) -> dict[str, float]:
    return dict(MlflowClient().get_run(run_id).data.metrics)


def test_the_plugin_is_discovered_through_package_metadata() -> None:
    (entry,) = [ep for ep in entry_points(group="mlflow.model_evaluator") if ep.name == "sommelier"]
    assert entry.value == "sommelier_mlflow.integration.evaluator:SommelierEvaluator"
    assert "sommelier" in list_evaluators()


def test_the_evaluator_class_is_built_on_first_access() -> None:
    # That the entry module imports without MLflow is checked in tests/test_import_graph.py.
    from mlflow.models.evaluation import ModelEvaluator

    import sommelier_mlflow.integration.evaluator as ev

    assert issubclass(ev.SommelierEvaluator, ModelEvaluator)
    claims = ev.SommelierEvaluator.can_evaluate
    assert claims(model_type="tool-calling", evaluator_config={}) is True
    assert claims(model_type="classifier", evaluator_config={}) is False


def test_worked_example_with_static_predictions(store: Store, tmp_path: Path) -> None:
    result, run_id = evaluate_in_run(store, WORKED)
    logged = _logged_metrics(run_id)

    for name, (numerator, denominator) in WORKED_COUNTS.items():
        assert result.metrics[f"overall/{name}"] == numerator / denominator
        assert result.metrics[f"overall/counts/{name}.numerator"] == numerator
        assert result.metrics[f"overall/counts/{name}.denominator"] == denominator
    assert result.metrics["overall/valid_json_rate"] == 0.75
    # No language column: every row is in the default "en" slice.
    assert result.metrics["en/counts/argument_f1.numerator"] == 10
    assert logged == result.metrics
    assert MlflowClient().get_run(run_id).data.tags["sommelier.parser_version"] == PARSER_VERSION

    report = result.artifacts["sommelier_evaluator_report"].content
    assert report["schema_version"] == "sommelier_mlflow.evaluator_report.v1"
    assert report["metrics"]["argument_f1"] == {
        "value": 10 / 14,
        "numerator": 10,
        "denominator": 14,
    }
    downloaded = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path="sommelier/evaluator_report.json", dst_path=tmp_path
    )
    assert loads(Path(downloaded).read_bytes()) == report

    table = result.artifacts["sommelier_examples"].content
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert [row["example_id"] for row in rows] == ["0", "1", "2", "3"]
    assert [row["parse_status"] for row in rows] == ["ok", "ok", "ok", "no_json"]
    assert [row["full_call_correct"] for row in rows] == [True, False, False, False]


def test_language_and_id_columns_give_slices_and_matched_pair_gaps(store: Store) -> None:
    config = {
        "language_column": "lang",
        "example_id_column": "id",
        "source_example_id_column": "root",
        "resamples": 500,
        "seed": 7,
    }
    result, run_id = evaluate_in_run(store, _bilingual(), evaluator_config={"sommelier": config})
    metrics = result.metrics

    assert metrics["en/full_call_exact_match"] == 1.0
    assert metrics["fr/full_call_exact_match"] == 1 / 3
    assert metrics["fr/counts/valid_json_rate.numerator"] == 2
    assert metrics["gap/fr/pairs"] == 3
    assert metrics["gap/fr/full_call_exact_match"] == pytest.approx(1 / 3 - 1)
    assert metrics["gap/fr/valid_json_rate"] == pytest.approx(2 / 3 - 1)
    for name in METRIC_NAMES:
        assert metrics[f"gap/fr/ci95/{name}.lower"] <= metrics[f"gap/fr/ci95/{name}.upper"]
    assert _logged_metrics(run_id) == metrics
    report = result.artifacts["sommelier_evaluator_report"].content
    assert report["paired_slices"]["fr"]["root_language"] == "en"
    assert report["bootstrap"]["seed"] == 7

    again, _ = evaluate_in_run(store, _bilingual(), evaluator_config={"sommelier": config})
    assert again.metrics == metrics  # seeded bootstrap: identical intervals


def test_default_column_names_are_picked_up(store: Store) -> None:
    data = _bilingual().rename(
        columns={"id": "example_id", "lang": "language", "root": "source_example_id"}
    )
    result, _ = evaluate_in_run(store, data, evaluator_config={"sommelier": {"resamples": 50}})
    assert result.metrics["gap/fr/pairs"] == 3
    table = result.artifacts["sommelier_examples"].content
    assert [row[0] for row in table["data"]] == list(data["example_id"])


def test_flat_config_with_a_single_evaluator_name(store: Store) -> None:
    result, _ = evaluate_in_run(
        store,
        _bilingual(),
        evaluators="sommelier",
        evaluator_config={"language_column": "lang", "example_id_column": "id", "resamples": 50},
    )
    assert "fr/argument_f1" in result.metrics
    assert not any(key.startswith("gap/") for key in result.metrics)  # no root column named


def test_keyed_config_with_a_single_evaluator_name(store: Store) -> None:
    result, _ = evaluate_in_run(
        store,
        _bilingual(),
        evaluators="sommelier",
        evaluator_config={"sommelier": {"language_column": "lang"}},
    )
    assert "fr/argument_f1" in result.metrics


def test_pyfunc_model_is_called_on_the_features(store: Store) -> None:
    class FixedAnswers(mlflow.pyfunc.PythonModel):
        """Answers every request with the same call, as a model that ignores its input."""

        def predict(self, model_input: list[dict[str, str]]) -> list[str]:
            return [text(weather("Paris")) for _ in model_input]

    data = WORKED.drop(columns=["output"])
    with mlflow.start_run(experiment_id=store.experiment_id) as run:
        info = mlflow.pyfunc.log_model(
            name="fixed", python_model=FixedAnswers(), pip_requirements=[]
        )
        result = mlflow.models.evaluate(
            model=info.model_uri,
            data=data,
            targets="gold",
            model_type="tool-calling",
            evaluators=["sommelier"],
        )
    # Rows 0 and 1 ask for Paris in celsius; the model always answers exactly that.
    assert result.metrics["overall/full_call_exact_match"] == 0.5
    assert result.metrics["overall/valid_json_rate"] == 1.0
    assert _logged_metrics(run.info.run_id)["overall/full_call_exact_match"] == 0.5


def test_deprecated_mlflow_evaluate_alias(store: Store) -> None:
    with (
        mlflow.start_run(experiment_id=store.experiment_id),
        pytest.warns(FutureWarning, match="mlflow.evaluate"),
    ):
        result = mlflow.evaluate(
            data=WORKED,
            predictions="output",
            targets="gold",
            model_type="tool-calling",
            evaluators=["sommelier"],
        )
    assert result.metrics["overall/argument_f1"] == 10 / 14


def test_catalog_metrics_become_columns_and_aggregates(store: Store) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["name", "arguments"],
    }
    config = {
        "metrics": [
            {"name": "CountsMetric", "config": {"segments": "tokens"}, "result_key": "words"},
            {"name": "JsonFormatMetric", "config": {"expected_schema": schema}},
        ]
    }
    result, _ = evaluate_in_run(store, WORKED, evaluator_config={"sommelier": config})
    table = result.artifacts["sommelier_examples"].content
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert [row["words"] for row in rows] == [len(value.split()) for value in WORKED["output"]]
    assert [row["JsonFormatMetric.name"] for row in rows] == [True, True, True, False]
    assert result.metrics["overall/extra/JsonFormatMetric.name.mean"] == 0.75
    words = [len(value.split()) for value in WORKED["output"]]
    assert result.metrics["overall/extra/words.min"] == min(words)
    assert result.metrics["overall/extra/words.max"] == max(words)
    assert result.metrics["en/extra/words.mean"] == sum(words) / 4


def test_chat_template_kwargs_are_checked_and_logged_as_a_param(store: Store) -> None:
    import mlflow

    config = {"language_column": "lang", "chat_template_kwargs": '{"enable_thinking": false}'}
    _, run_id = evaluate_in_run(store, _bilingual(), evaluator_config={"sommelier": config})
    params = mlflow.get_run(run_id).data.params
    assert params["sommelier.chat_template_kwargs"] == '{"enable_thinking":false}'
    plain_config = {"sommelier": {"language_column": "lang"}}
    _, plain = evaluate_in_run(store, _bilingual(), evaluator_config=plain_config)
    assert "sommelier.chat_template_kwargs" not in mlflow.get_run(plain).data.params


def test_the_template_date_is_checked_and_logged_as_a_param(store: Store) -> None:
    import mlflow

    config = {"language_column": "lang", "template_date": "2024-07-26"}
    _, run_id = evaluate_in_run(store, _bilingual(), evaluator_config={"sommelier": config})
    assert mlflow.get_run(run_id).data.params["sommelier.template_date"] == "2024-07-26"


def _config_error(store: Store, data: pd.DataFrame, **kwargs: Any) -> SommelierError:
    with pytest.raises(ConfigError) as caught:
        evaluate_in_run(store, data, **kwargs)
    assert isinstance(caught.value, MlflowException)
    assert caught.value.error_code == "INVALID_PARAMETER_VALUE"
    assert caught.value.exit_code == 2
    return caught.value


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"langauge_column": "lang"}, "unknown 'sommelier' evaluator_config key"),
        ({"language_column": "missing"}, "no such column"),
        ({"seed": "1"}, "seed must be an integer"),
        ({"resamples": 0}, "resamples must be a positive integer"),
        ({"metrics": [{"name": "NoSuchMetric"}]}, "NoSuchMetric"),
        ({"metrics": [{"nom": "CountsMetric"}]}, r"metrics\[0\] is not a MeasureSpec"),
        ({"chat_template_kwargs": "[1]"}, "chat_template_kwargs: .*must be a JSON object"),
        ({"chat_template_kwargs": {"tools": []}}, "chat_template_kwargs: .*may not set tools"),
        ({"template_date": "26 Jul 2024"}, "template_date: .*must be a calendar date"),
    ],
)
def test_bad_config_is_a_config_error_and_an_mlflow_exception(
    store: Store, config: dict[str, Any], message: str
) -> None:
    error = _config_error(store, _bilingual(), evaluator_config={"sommelier": config})
    assert re.search(message, str(error))


def test_bad_rows_name_the_row(store: Store) -> None:
    data = WORKED.copy()
    data.loc[2, "gold"] = json.dumps({"name": "get_weather"})
    assert "row 2" in str(_config_error(store, data))

    duplicated = _bilingual().assign(id=["a", "a", "b", "c", "d", "e"])
    error = _config_error(
        store, duplicated, evaluator_config={"sommelier": {"example_id_column": "id"}}
    )
    assert "duplicated: 'a'" in str(error)


def test_missing_targets_or_outputs_are_config_errors(store: Store) -> None:
    assert "targets=" in str(_config_error(store, WORKED, targets=None))


def test_reserved_language_is_refused(store: Store) -> None:
    data = _bilingual().assign(lang=["en", "en", "en", "gap", "gap", "gap"])
    error = _config_error(store, data, evaluator_config={"sommelier": {"language_column": "lang"}})
    assert "reserved" in str(error)


def test_other_model_types_are_not_claimed(store: Store) -> None:
    with pytest.raises(MlflowException):
        evaluate_in_run(store, WORKED, model_type="classifier", evaluators=["sommelier"])
