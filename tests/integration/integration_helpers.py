"""Data and builders shared by the integration tests (imported as a plain module)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
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


#: Outputs no tracking store holds as they are: a NUL (PostgreSQL refuses it) and
#: lone surrogates (no UTF-8 encoding), in prose, in a decoded call's argument
#: (JSON's ``\u0000`` escape) and in a call's name.
UNSTORABLE_OUTPUTS = {
    "e1": '{"name": "get_weather", "arguments": {"city": "Paris\\u0000", "units": "celsius"}}',
    "e2": "sunny\x00 in Paris",
    "e3": "Oslo \ud800 is \udfff cold",
    "e4": '{"name": "get_weather\ud800", "arguments": {"city": "Rome", "units": "celsius"}}',
    "f1": "Il fait beau\x00\ud83d\ude00",
    "f3": text(weather("Oslo")),
}


def unstorable_arm(kind: str, *, resamples: int = 50) -> tuple[TestSplit, ScoredRun]:
    """An arm scored in process whose outputs are :data:`UNSTORABLE_OUTPUTS`.

    The request of ``e2`` holds a NUL as well (a split's JSON may escape one).
    Lone surrogates cannot be written to a generations file, so the arm lives
    in memory only, as it does for a caller of the Python API.
    """
    rows = [
        replace(example, query=example.query + "\x00") if example.example_id == "e2" else example
        for example in examples()
    ]
    split = TestSplit(path="unstorable.jsonl", sha256="0" * 64, examples=tuple(rows))
    scored = score_run(
        split,
        records(split, UNSTORABLE_OUTPUTS, kind),
        model_kind=kind,  # type: ignore[arg-type]
        model_identity=IDENTITY,
        adapter=None if kind == "base" else {"source": "/models/adapter", "sha256": ADAPTER_SHA},
        resamples=resamples,
    )
    return split, scored


def check_unstorable_run(client: Any, run_id: str, experiment_id: str, workdir: Path) -> None:
    """A run logged from :func:`unstorable_arm` holds every output, escaped by the one rule.

    Checked as a teammate reads it back: the traces (root span, ``TOOL`` span,
    previews, assessments), the per-example table artifact and the params.
    """
    from mlflow.artifacts import download_artifacts

    from sommelier_mlflow.integration._store_text import store_text

    expected = {example_id: store_text(raw) for example_id, raw in UNSTORABLE_OUTPUTS.items()}
    assert client.get_run(run_id).data.params["note"] == "a\\u0000b\\ud800"
    table = download_artifacts(
        run_id=run_id,
        artifact_path="sommelier/examples.json",
        dst_path=str(workdir),
        tracking_uri=client.tracking_uri,
    )
    document = json.loads(Path(table).read_text(encoding="utf-8"))
    column = {name: index for index, name in enumerate(document["columns"])}
    shown = {row[column["example_id"]]: row[column["raw_text"]] for row in document["data"]}
    assert shown == expected
    traces = client.search_traces(locations=[experiment_id], run_id=run_id, include_spans=True)
    by_id = {trace.info.request_metadata["sommelier.example_id"]: trace for trace in traces}
    assert set(by_id) == set(expected)
    for example_id, trace in by_id.items():
        root = trace.data.spans[0]
        assert root.outputs["raw_output"] == expected[example_id], example_id
        assert trace.info.response_preview == expected[example_id]
        assessments = {item.name: item for item in trace.info.assessments}
        assert assessments["raw_output"].value == expected[example_id]
    e2 = by_id["e2"]
    assert e2.data.spans[0].inputs["query"] == "query e2\\u0000"
    assert e2.info.request_preview == "query e2\\u0000"
    (tool,) = by_id["e1"].data.spans[1:]
    assert tool.name == "get_weather"
    assert tool.inputs == {"city": "Paris\\u0000", "units": "celsius"}
