"""Scorers for ``mlflow.genai.evaluate``: a scoring mode's strict tool-call metrics, offline.

Example::

    from sommelier_mlflow.scorers import genai_evaluate, micro_argument_f1

    rows = [
        {
            "inputs": {"query": "Weather in Paris?"},
            "outputs": '{"name": "get_weather", "arguments": {"city": "Paris"}}',
            "expectations": {"gold_call": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        },
    ]
    result = genai_evaluate(rows)  # all seven scorers, SQLite-safe worker count
    result.metrics["full_call_exact_match/mean"]
    micro_argument_f1(result.metrics)  # exact micro F1 from the two summed count scorers

Importing this module imports MLflow. See
:mod:`sommelier_mlflow.integration._scorers` for the accepted ``outputs`` and
``expectations`` shapes and how each logged metric reads.
"""

from __future__ import annotations

from sommelier_mlflow.integration._scorers import (
    F1_DENOMINATOR_METRIC,
    F1_NUMERATOR_METRIC,
    GENAI_MAX_WORKERS_ENV,
    SAFE_GENAI_MAX_WORKERS,
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

__all__ = [
    "F1_DENOMINATOR_METRIC",
    "F1_NUMERATOR_METRIC",
    "GENAI_MAX_WORKERS_ENV",
    "SAFE_GENAI_MAX_WORKERS",
    "argument_exact_match",
    "argument_f1",
    "argument_f1_denominator",
    "argument_f1_numerator",
    "full_call_exact_match",
    "function_name_accuracy",
    "genai_evaluate",
    "micro_argument_f1",
    "safe_genai_env",
    "sommelier_scorers",
    "valid_json_rate",
]
