"""Score static outputs with ``mlflow.genai.evaluate`` and the sommelier scorers.

Run: ``python examples/genai_scorers.py``. Prints each metric's mean and the exact micro
``argument_f1`` recovered from the summed count scorers.
"""

from __future__ import annotations

import json
from typing import Any

from sommelier_mlflow.scorers import genai_evaluate, micro_argument_f1


def call(name: str, city: str, units: str = "celsius") -> dict[str, Any]:
    return {"name": name, "arguments": {"city": city, "units": units}}


def rows() -> list[dict[str, Any]]:
    cases = [
        (json.dumps(call("get_weather", "Paris")), call("get_weather", "Paris")),
        (json.dumps(call("get_weather", "Paris", "kelvin")), call("get_weather", "Paris")),
        (json.dumps(call("fetch_weather", "Oslo")), call("get_weather", "Oslo")),
        ("The weather in Rome is sunny.", call("get_weather", "Rome")),
    ]
    return [
        {
            "inputs": {"query": f"weather request {i}"},
            "outputs": output,
            "expectations": {"gold_call": gold},
        }
        for i, (output, gold) in enumerate(cases)
    ]


def main() -> dict[str, float]:
    result = genai_evaluate(rows())
    metrics = dict(result.metrics)
    for name in ("valid_json_rate", "function_name_accuracy", "full_call_exact_match"):
        print(f"{name}/mean = {metrics[f'{name}/mean']}")
    print(f"argument_f1 (micro, exact) = {micro_argument_f1(metrics)}")
    return metrics


if __name__ == "__main__":
    main()
