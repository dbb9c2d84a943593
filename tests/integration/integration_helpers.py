"""Data and builders shared by the integration tests (imported as a plain module)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sommelier_mlflow._json import sha256_text
from sommelier_mlflow.data import GenerationRecord, ModelIdentity, TestExample, TestSplit
from sommelier_mlflow.evaluation import ComparisonReport, EvaluationReport, ScoredRun, score_run
from tests.support.generation_records import parsed_generation

TOOLS = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "city": {"type": "str", "description": "City name."},
            "units": {"type": "str", "description": "celsius or fahrenheit."},
        },
    },
    {"name": "fetch_weather", "description": "Legacy weather tool.", "parameters": {}},
]


def weather(city: str, units: str = "celsius", name: str = "get_weather") -> dict[str, Any]:
    return {"name": name, "arguments": {"city": city, "units": units}}


def text(call: dict[str, Any]) -> str:
    return json.dumps(call)


# The worked example of the metrics spec (rows e1..e4) plus two French translations.
GOLD = {
    "e1": weather("Paris"),
    "e2": weather("Paris"),
    "e3": weather("Oslo"),
    "e4": weather("Rome"),
    "f1": weather("Paris"),
    "f3": weather("Oslo"),
}
ROOTS = {"f1": "e1", "f3": "e3"}
BASE_OUTPUTS = {
    "e1": text(weather("Paris")),
    "e2": text(weather("Paris", "kelvin")),
    "e3": text(weather("Oslo", name="fetch_weather")),
    "e4": "The weather in Rome is sunny.",
    "f1": "Il fait beau à Paris.",
    "f3": text(weather("Oslo")),
}
ADAPTER_OUTPUTS = {example_id: text(call) for example_id, call in GOLD.items()}
ADAPTER_SHA = "ab" * 32
DECODING = {"temperature": 0.0, "do_sample": False, "max_new_tokens": 64, "batch_size": 2}
IDENTITY = ModelIdentity("tiny/base-model", "rev-1", "tiny/base-model", "rev-1")


def examples() -> list[TestExample]:
    examples = []
    for example_id, gold in GOLD.items():
        prompt = f"prompt for {example_id}"
        examples.append(
            TestExample(
                example_id=example_id,
                language="fr" if example_id.startswith("f") else "en",
                query=f"query {example_id}",
                tools=TOOLS,
                gold_call=gold,
                source_example_id=ROOTS.get(example_id),
                prompt_text=prompt,
                prompt_sha256=sha256_text(prompt),
            )
        )
    return examples


def records(split: TestSplit, outputs: dict[str, str], kind: str) -> list[GenerationRecord]:
    return [
        parsed_generation(example, outputs[example.example_id], model_kind=kind, decoding=DECODING)
        for example in split.examples
    ]


def score_arms(split: TestSplit, *, resamples: int) -> tuple[ScoredRun, ScoredRun]:
    """The base and adapter arms of ``split`` (BASE_OUTPUTS, ADAPTER_OUTPUTS), scored in process.

    The session's ``arms`` fixture and the tests that register a metric of their
    own score the same two arms the same way; only the resample count differs.
    """
    base = score_run(
        split,
        records(split, BASE_OUTPUTS, "base"),
        model_kind="base",
        model_identity=IDENTITY,
        adapter=None,
        resamples=resamples,
    )
    adapter = score_run(
        split,
        records(split, ADAPTER_OUTPUTS, "adapter"),
        model_kind="adapter",
        model_identity=IDENTITY,
        adapter={"source": "/models/adapter", "sha256": ADAPTER_SHA},
        resamples=resamples,
    )
    return base, adapter


def evaluate_in_run(store: Store, data: Any, **kwargs: Any) -> tuple[Any, str]:
    """``mlflow.models.evaluate`` of ``data`` with the sommelier evaluator, in a fresh run.

    The evaluator tests all score a frame's ``output`` column against its
    ``gold`` column as ``tool-calling`` in a run of the store's experiment;
    ``kwargs`` add to or replace those options. Returns the result and the run id.
    """
    import mlflow

    options: dict[str, Any] = {
        "predictions": "output",
        "targets": "gold",
        "model_type": "tool-calling",
        "evaluators": ["sommelier"],
    }
    options.update(kwargs)
    with mlflow.start_run(experiment_id=store.experiment_id) as run:
        result = mlflow.models.evaluate(data=data, **options)
    return result, run.info.run_id


@dataclass(frozen=True)
class Arms:
    split_path: Path
    split: TestSplit
    base: ScoredRun
    adapter: ScoredRun
    base_report: dict[str, Any]
    adapter_report: dict[str, Any]
    comparison: dict[str, Any]
    base_typed: EvaluationReport
    adapter_typed: EvaluationReport
    comparison_typed: ComparisonReport


@dataclass(frozen=True)
class Store:
    uri: str
    experiment_id: str
    artifact_root: Path
