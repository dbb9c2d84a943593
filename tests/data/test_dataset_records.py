"""Evaluation-dataset records as test splits, both ways, without MLflow (the data layer)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sommelier_mlflow.data import (
    DatasetRef,
    TestExample,
    dataset_records,
    read_dataset_records,
)
from sommelier_mlflow.errors import DataError, InvariantViolationError
from tests.cli.cli_helpers import examples

SOURCE = "mlflow-dataset:tool-calls"
REF = DatasetRef(name="tool-calls", dataset_id="d-" + "0" * 32, digest="0a1b2c3d")


def _stored(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records as a store hands them back: each with an id, in the store's order."""
    return [{"record_id": f"r-{index}", **row} for index, row in reversed(list(enumerate(rows)))]


def _read(records: list[dict[str, Any]], **options: Any) -> list[TestExample]:
    return list(read_dataset_records(records, source=SOURCE, dataset=REF, **options).examples)


def _error(records: list[dict[str, Any]], exc: type[Exception] = DataError, **options: Any) -> str:
    with pytest.raises(exc) as info:
        _read(records, **options)
    return str(info.value)


def test_records_read_back_as_the_examples_they_were_written_from() -> None:
    written = [replace(e, slice_values={"topic": "weather"}) for e in examples()]
    records = _stored(dataset_records(written, source="test.jsonl"))
    split = read_dataset_records(records, source=SOURCE, dataset=REF, slice_by=["topic"])
    assert split.dataset == REF and split.path == SOURCE
    assert list(split.examples) == sorted(written, key=lambda example: example.example_id)
    # The digest is over the rows, so the store's record order does not change it.
    again = read_dataset_records(records[::-1], source=SOURCE, dataset=REF, slice_by=["topic"])
    assert again.sha256 == split.sha256


def test_a_prompt_keeps_the_template_variables_it_was_rendered_with() -> None:
    kwargs = {"enable_thinking": False}
    written = [
        replace(e, prompt_format="native", chat_template_kwargs=kwargs)
        for e in examples()
        if e.prompt_text is not None
    ]
    records = _stored(dataset_records(written, source="test.jsonl"))
    assert all(record["inputs"]["chat_template_kwargs"] == kwargs for record in records)
    assert [e.chat_template_kwargs for e in _read(records)] == [kwargs] * len(written)


def test_a_record_of_plain_mlflow_needs_only_the_documented_keys() -> None:
    tools = [{"name": "get_time", "description": "Time in a city", "parameters": {}}]
    record = {
        "record_id": "r-abc",
        "inputs": {"query": "time in Oslo?", "tools": tools},
        "expectations": {"gold_calls": [], "other_scorer": "kept out"},
        "tags": {"mlflow.user": "ana", "team": "search"},
    }
    (example,) = _read([record], slice_by=["team"])
    assert (example.example_id, example.language, example.gold_calls) == ("r-abc", "en", ())
    assert example.slice_values == (("team", "search"),)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda r: r["inputs"].pop("query"), "record r-0: missing inputs.query"),
        (lambda r: r["inputs"].pop("tools"), "record r-0: missing inputs.tools"),
        (lambda r: r.pop("expectations"), "record r-0: give the gold answer as exactly one"),
        (lambda r: r["inputs"].update(system="be brief"), "record r-0: unknown input 'system'"),
        (lambda r: r["expectations"].update(gold_call={"name": "nope"}), "record r-0:"),
        (lambda r: r["tags"].update(language="overall"), "record r-0: language 'overall'"),
        (lambda r: r.update(inputs="query"), "record r-0: inputs must be an object"),
    ],
)
def test_a_record_without_what_a_row_needs_is_refused_naming_it(edit: Any, message: str) -> None:
    (record,) = _stored(dataset_records(examples()[:1], source="test.jsonl"))
    edit(record)
    assert message in _error([record])


def test_split_wide_rules_name_the_records() -> None:
    records = _stored(dataset_records(examples(), source="test.jsonl"))
    records[1]["tags"]["example_id"] = records[0]["tags"]["example_id"]
    assert "duplicate example_id" in (text := _error(records))
    assert "first at record r-" in text
    dangling = _stored(dataset_records(examples(), source="test.jsonl"))
    root = next(r for r in dangling if "source_example_id" not in r["tags"])
    dangling.remove(root)
    assert "(source_example_id) is not in this split" in _error(dangling)
    missing_slice = _stored(dataset_records(examples(), source="test.jsonl"))
    assert "missing slice field 'topic'" in _error(missing_slice, slice_by=["topic"])


def test_an_edited_prompt_no_longer_matching_its_digest_is_exit_5() -> None:
    records = _stored(dataset_records(examples()[:1], source="test.jsonl"))
    records[0]["inputs"]["prompt_text"] += " (edited)"
    message = _error(records, InvariantViolationError)
    assert message.startswith(f"{SOURCE}: record r-0: prompt_sha256")


def test_an_empty_dataset_is_refused() -> None:
    assert "has no records" in _error([])


def test_two_examples_asking_the_same_are_refused_before_mlflow_merges_them() -> None:
    first = examples()[0]
    twin = replace(first, example_id="twin", gold_call={"name": "fetch_weather", "arguments": {}})
    with pytest.raises(DataError, match=r"examples '.+' and 'twin' have the same inputs"):
        dataset_records([first, twin], source="test.jsonl")
