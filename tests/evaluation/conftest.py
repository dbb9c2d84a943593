"""Builders for the evaluation tests: hand-made splits, generations and scored reports.

The golden data set is small enough to score by hand (see test_comparison_report.py
for the expected counts): four English roots, four French translations of them, one
native French row and one French row whose root is missing from the split.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest

from sommelier_mlflow._json import sha256_text
from sommelier_mlflow.data import Decoding, GenerationRecord, ModelIdentity, TestExample, TestSplit
from sommelier_mlflow.evaluation import ScoredRun, score_run
from tests.evaluation.report_docs import doc
from tests.support.examples import formatted_example
from tests.support.generation_records import parsed_generation

DECODING = Decoding(max_new_tokens=64, batch_size=4)
IDENTITY = ModelIdentity(
    base_model="tiny/base-model",
    base_revision="rev-base",
    tokenizer="tiny/base-model",
    tokenizer_revision="rev-tok",
)
ADAPTER = {"source": "runs:/0123/adapter", "sha256": "ab" * 32}
SPLIT_SHA = "5" * 64

G1 = {"name": "get_weather", "arguments": {"city": "Paris", "units": "celsius"}}
G2 = {"name": "get_weather", "arguments": {"city": "Oslo", "units": "celsius"}}
G3 = {"name": "book_table", "arguments": {"restaurant": "Chez Nous", "people": 2}}
G4 = {"name": "convert", "arguments": {"amount": 10, "from": "EUR", "to": "USD"}}


def call(name: str, arguments: Mapping[str, Any]) -> str:
    return json.dumps({"name": name, "arguments": arguments})


def example(
    example_id: str,
    gold: Mapping[str, Any],
    *,
    language: str = "en",
    source: str | None = None,
    prompt: str | None = None,
) -> TestExample:
    return formatted_example(
        example_id, gold=gold, language=language, source=source, prompt=prompt
    )


def make_split(examples: Iterable[TestExample], sha: str = SPLIT_SHA) -> TestSplit:
    return TestSplit(path="test_split.jsonl", sha256=sha, examples=tuple(examples))


def generation(
    ex: TestExample,
    raw_text: str,
    *,
    model_kind: str = "base",
    decoding: Decoding = DECODING,
) -> GenerationRecord:
    return parsed_generation(ex, raw_text, model_kind=model_kind, decoding=decoding.to_dict())


def generations(
    split: TestSplit,
    texts: Mapping[str, str],
    *,
    model_kind: str = "base",
    decoding: Decoding = DECODING,
) -> list[GenerationRecord]:
    by_id = split.by_id()
    return [
        generation(by_id[example_id], text, model_kind=model_kind, decoding=decoding)
        for example_id, text in texts.items()
    ]


def golden_examples() -> list[TestExample]:
    return [
        example("en-1", G1),
        example("en-2", G2),
        example("en-3", G3),
        example("en-4", G4),
        example("fr-1", G1, language="fr", source="en-1"),
        example("fr-2", G2, language="fr", source="en-2"),
        example("fr-3", G3, language="fr", source="en-3"),
        example("fr-4", G4, language="fr", source="en-4"),
        example("fr-5", G2, language="fr"),  # native French row, no root
        example("fr-6", G1, language="fr", source="en-9"),  # root not in the split
    ]


BASE_TEXTS = {
    "en-1": call("get_weather", G1["arguments"]),
    "en-2": call("get_weather", {"city": "Oslo", "units": "kelvin"}),
    "en-3": call("book_table", G3["arguments"]),
    "en-4": "I cannot help with that.",
    "fr-1": call("weather", G1["arguments"]),
    "fr-2": '{"name": "get_weather", "arguments": {',
    "fr-3": call("book_table", G3["arguments"]),
    "fr-4": call("convert", {"amount": 10, "from": "EUR"}),
    "fr-5": '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {}}]',
    "fr-6": call("get_weather", G1["arguments"]),
}

ADAPTER_TEXTS = {
    "en-1": call("get_weather", G1["arguments"]),
    "en-2": call("get_weather", G2["arguments"]),
    "en-3": call("book_table", {"restaurant": "Chez Nous", "people": "2"}),
    "en-4": call("convert", G4["arguments"]),
    "fr-1": call("get_weather", G1["arguments"]),
    "fr-2": call("get_weather", G2["arguments"]),
    "fr-3": call("book_table", G3["arguments"]),
    "fr-4": "Sure! " + call("convert", G4["arguments"]) + " Done.",
    "fr-5": call("get_weather", {"city": "Oslo"}),
    "fr-6": "Il fait beau.",
}


class Kit:
    """Builders handed to tests through the ``kit`` fixture."""

    DECODING = DECODING
    IDENTITY = IDENTITY
    ADAPTER = ADAPTER
    SPLIT_SHA = SPLIT_SHA
    BASE_TEXTS = BASE_TEXTS
    ADAPTER_TEXTS = ADAPTER_TEXTS
    G1, G2, G3, G4 = G1, G2, G3, G4

    call = staticmethod(call)
    example = staticmethod(example)
    make_split = staticmethod(make_split)
    generation = staticmethod(generation)
    generations = staticmethod(generations)
    golden_examples = staticmethod(golden_examples)

    @staticmethod
    def golden_split(
        edit: Callable[[list[TestExample]], list[TestExample]] | None = None,
        sha: str = SPLIT_SHA,
    ) -> TestSplit:
        rows = golden_examples()
        return make_split(edit(rows) if edit else rows, sha)

    @staticmethod
    def score(
        split: TestSplit,
        texts: Mapping[str, str],
        model_kind: str = "base",
        *,
        decoding: Decoding = DECODING,
        identity: ModelIdentity = IDENTITY,
        languages: Sequence[str] | None = None,
        seed: int = 0,
        resamples: int = 200,
        scoring: str = "single",
        slice_by: Sequence[str] = (),
    ) -> ScoredRun:
        return score_run(
            split,
            generations(split, texts, model_kind=model_kind, decoding=decoding),
            model_kind=model_kind,  # type: ignore[arg-type]
            model_identity=identity,
            adapter=ADAPTER if model_kind == "adapter" else None,
            decoding=decoding,
            languages=languages,
            seed=seed,
            resamples=resamples,
            scoring=scoring,
            slice_by=slice_by,
        )

    @staticmethod
    def golden_reports(resamples: int = 200) -> tuple[dict[str, Any], dict[str, Any]]:
        split = Kit.golden_split()
        base = doc(Kit.score(split, BASE_TEXTS, "base", resamples=resamples))
        adapter = doc(Kit.score(split, ADAPTER_TEXTS, "adapter", resamples=resamples))
        return base, adapter

    @staticmethod
    def with_prompt(rows: list[TestExample], example_id: str, prompt: str) -> list[TestExample]:
        return [
            replace(row, prompt_text=prompt, prompt_sha256=sha256_text(prompt))
            if row.example_id == example_id
            else row
            for row in rows
        ]


@pytest.fixture(scope="session")
def kit() -> type[Kit]:
    return Kit
