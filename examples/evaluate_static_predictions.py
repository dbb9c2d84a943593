"""Score model outputs you already have with ``mlflow.models.evaluate``.

Run: ``python examples/evaluate_static_predictions.py`` (logs to MLFLOW_TRACKING_URI, or
to ./mlflow.db). The rows are the metric spec's worked example in English plus French
translations of the same requests, so the run gets ``en``/``fr`` slices and a gap.
"""

from __future__ import annotations

import json

import mlflow
import pandas as pd


def gold(city: str) -> str:
    return json.dumps({"name": "get_weather", "arguments": {"city": city, "units": "celsius"}})


def rows() -> pd.DataFrame:
    outputs = [
        gold("Paris"),
        json.dumps({"name": "get_weather", "arguments": {"city": "Paris", "units": "kelvin"}}),
        json.dumps({"name": "fetch_weather", "arguments": {"city": "Oslo", "units": "celsius"}}),
        "The weather in Rome is sunny.",
    ]
    cities = ["Paris", "Paris", "Oslo", "Rome"]
    records = []
    for index, (output, city) in enumerate(zip(outputs, cities, strict=True)):
        records.append(
            {
                "example_id": f"en-{index}",
                "language": "en",
                "source_example_id": None,
                "output": output,
                "gold": gold(city),
            }
        )
        records.append(
            {
                "example_id": f"fr-{index}",
                "language": "fr",
                "source_example_id": f"en-{index}",
                "output": gold(city) if index < 2 else "Il fait beau.",
                "gold": gold(city),
            }
        )
    return pd.DataFrame(records)


def main() -> dict[str, float]:
    with mlflow.start_run(run_name="sommelier-static-predictions"):
        result = mlflow.models.evaluate(
            data=rows(),
            predictions="output",
            targets="gold",
            model_type="tool-calling",
            evaluators=["sommelier"],
            evaluator_config={
                "sommelier": {
                    "language_column": "language",
                    "example_id_column": "example_id",
                    "source_example_id_column": "source_example_id",
                    "resamples": 500,
                    "metrics": [{"name": "CountsMetric", "config": {"segments": "tokens"}}],
                }
            },
        )
    for key in ("overall/valid_json_rate", "overall/full_call_exact_match", "gap/fr/pairs"):
        print(f"{key} = {result.metrics[key]}")
    return dict(result.metrics)


if __name__ == "__main__":
    main()
