"""Test splits as MLflow evaluation-dataset records, both ways, without MLflow.

An evaluation dataset stores records of ``inputs``, ``expectations`` and
``tags``. A test example maps onto one record:

``inputs``
    ``query`` (or, for a conversation row, ``messages``: the history before
    the assistant turn to predict) and ``tools`` (what the model is asked), and ``prompt_text``
    for a formatted example (the rendered prompt is then what the model sees),
    with the ``chat_template_kwargs`` it was rendered with, if any; for a
    multi-turn row, ``multi_turn`` without its ``gold_turns`` (the user
    turns, the tools added at a turn, the environment).
    No other input: an input the product did not render would change what
    the model is asked without the report knowing.
``expectations``
    ``gold_call`` (one call) or ``gold_calls`` (a list), and a multi-turn
    row's ``gold_turns`` (the expected calls per turn: an answer, so never an
    input a model could be shown). Other expectations (another scorer's) are
    left alone.
``tags``
    ``example_id`` (default: the record's id), ``language`` (default
    ``en``), ``source_example_id`` (the root a translation translates),
    ``prompt_sha256`` and ``prompt_format`` of a formatted example,
    ``conversation_id`` and ``turn`` (as its decimal text) of a conversation row, and any
    other tag named with ``--slice-by``; other tags are ignored.

The integration layer fetches the records and hands them here as plain
mappings; each becomes a native row checked by the very code that checks a
split file, with errors naming the record's id instead of a line.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data._row_checks import _Line
from sommelier_mlflow.data._schemas import (
    DEFAULT_PROMPT_FORMAT,
    TEST_EXAMPLE_SCHEMA,
    DatasetRef,
    TestExample,
    TestSplit,
)
from sommelier_mlflow.data._split_reader import checked_examples
from sommelier_mlflow.errors import DataError, InvariantViolationError

__all__ = ["DATASET_RECORD_TAGS", "read_dataset_records", "dataset_records"]

_INPUTS: Final = ("tools",)
_REQUESTS: Final = ("query", "messages")
_OPTIONAL_INPUTS: Final = (*_REQUESTS, "prompt_text", "chat_template_kwargs", "multi_turn")
# The part of a row's multi_turn that is an answer: an expectation, not an input.
_GOLD_TURNS: Final = "gold_turns"
_GOLD_KEYS: Final = ("gold_calls", "gold_call")
#: The record tags that map onto row fields; any other tag is a slice field
#: when ``--slice-by`` names it, and ignored otherwise.
DATASET_RECORD_TAGS: Final = (
    "example_id",
    "language",
    "source_example_id",
    "prompt_sha256",
    "prompt_format",
    "conversation_id",
    "turn",
)


class _Record(_Line):
    """A dataset record in the reader's checks: its errors name the record, not a line."""

    __slots__ = ("record_id",)

    def __init__(self, source: str, record_id: str, row: dict[str, Any]) -> None:
        super().__init__(source, 0, row)
        self.record_id = record_id

    @property
    def where(self) -> str:
        return f"record {self.record_id}"

    def error(self, message: str) -> DataError:
        return DataError(f"record {self.record_id}: {message}", path=self.path)

    def invariant(self, message: str) -> InvariantViolationError:
        return InvariantViolationError(f"{self.path}: record {self.record_id}: {message}")


def _section(source: str, record_id: str, record: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = record.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DataError(f"record {record_id}: {key} must be an object", path=source)
    return dict(value)


def _native_row(
    source: str, record: Mapping[str, Any], slice_by: tuple[str, ...]
) -> tuple[str, dict[str, Any]]:
    """One record as the native row it stands for, and the record's id."""
    record_id = record.get("record_id")
    if not isinstance(record_id, str) or not record_id:
        raise DataError(f"a record has no id ({record_id!r})", path=source)
    inputs = _section(source, record_id, record, "inputs")
    expectations = _section(source, record_id, record, "expectations")
    tags = _section(source, record_id, record, "tags")

    def refuse(message: str) -> DataError:
        return DataError(f"record {record_id}: {message}", path=source)

    for key in (*_INPUTS, *(() if any(k in inputs for k in _REQUESTS) else ("query",))):
        if key not in inputs:
            raise refuse(
                f"missing inputs.{key}; a test record needs inputs.query, inputs.tools and "
                "expectations.gold_call (or gold_calls)"
            )
    unknown = sorted(inputs.keys() - {*_INPUTS, *_OPTIONAL_INPUTS})
    if unknown:
        raise refuse(
            f"unknown input {unknown[0]!r}; a test record's inputs are "
            f"{', '.join((*_INPUTS, *_OPTIONAL_INPUTS))}"
        )
    gold = [key for key in _GOLD_KEYS if key in expectations]
    if len(gold) != 1:
        raise refuse(
            "give the gold answer as exactly one of expectations.gold_calls (a list of calls) "
            "or expectations.gold_call (one call)"
        )
    row: dict[str, Any] = {"schema_version": TEST_EXAMPLE_SCHEMA, "example_id": record_id}
    row.update(inputs)
    row[gold[0]] = expectations[gold[0]]
    if "multi_turn" in row or _GOLD_TURNS in expectations:
        if not isinstance(row.get("multi_turn"), Mapping) or _GOLD_TURNS not in expectations:
            raise refuse(
                "a multi-turn record needs inputs.multi_turn (an object) and "
                f"expectations.{_GOLD_TURNS} together"
            )
        row["multi_turn"] = {**row["multi_turn"], _GOLD_TURNS: expectations[_GOLD_TURNS]}
    for key in (*DATASET_RECORD_TAGS, *slice_by):
        if key in tags:
            row[key] = tags[key]
    turn = row.get("turn")
    if isinstance(turn, str) and turn.isascii() and turn.isdigit():
        row["turn"] = int(turn)  # tags hold strings; the row checks the number
    return record_id, row


def read_dataset_records(
    records: Iterable[Mapping[str, Any]],
    *,
    source: str,
    dataset: DatasetRef,
    slice_by: Iterable[str] = (),
) -> TestSplit:
    """Read an evaluation dataset's records as a test split, with a split file's checks.

    Args:
        records: Plain mappings with ``record_id``, ``inputs``,
            ``expectations`` and ``tags`` (see the module docstring).
        source: What messages call the dataset (``mlflow-dataset:NAME``).
        dataset: The dataset's name, id and digest, recorded in the split.
        slice_by: Declared slice fields, read from the records' tags.

    Returns:
        The examples in ``example_id`` order (a dataset's record order is the
        store's), and the SHA-256 of their native rows in that order.

    Raises:
        DataError: A record without the needed keys, or anything a split
            file would be refused for; the message names the record id.
        InvariantViolationError: A stored prompt that does not match its digest.
    """
    declared = tuple(slice_by)
    rows = sorted(
        (_native_row(source, record, declared) for record in records),
        key=lambda item: (str(item[1].get("example_id")), item[0]),
    )
    examples = checked_examples(
        (_Record(source, record_id, row) for record_id, row in rows), declared
    )
    if not examples:
        raise DataError("the dataset has no records; it needs at least one example", path=source)
    digest = sha256_text(canonical_json([row for _, row in rows]))
    return TestSplit(path=source, sha256=digest, examples=examples, dataset=dataset)


def dataset_records(examples: Sequence[TestExample], *, source: str) -> list[dict[str, Any]]:
    """The records that :func:`read_dataset_records` reads back as these examples.

    MLflow keys a dataset's records by their inputs (a second record with the
    same inputs updates the first), so two examples asking the same thing
    are refused rather than silently merged.

    Raises:
        DataError: Two examples with the same inputs, naming both.
    """
    records: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for example in examples:
        inputs: dict[str, Any] = (
            {"query": example.query, "tools": example.tools}
            if example.messages is None
            else {"messages": list(example.messages), "tools": example.tools}
        )
        tags: dict[str, str] = {"example_id": example.example_id, "language": example.language}
        if example.conversation_id is not None:
            tags["conversation_id"] = example.conversation_id
        if example.turn is not None:
            tags["turn"] = str(example.turn)
        if example.source_example_id is not None:
            tags["source_example_id"] = example.source_example_id
        if example.prompt_text is not None and example.prompt_sha256 is not None:
            inputs["prompt_text"] = example.prompt_text
            tags["prompt_sha256"] = example.prompt_sha256
            if example.prompt_format != DEFAULT_PROMPT_FORMAT:
                tags["prompt_format"] = example.prompt_format
            if example.chat_template_kwargs:  # an object: an input, as tags hold strings
                inputs["chat_template_kwargs"] = example.chat_template_kwargs
        tags.update(example.slice_values)
        multi_turn = dict(example.multi_turn or {})
        gold_turns = multi_turn.pop(_GOLD_TURNS, None)
        if multi_turn:
            inputs["multi_turn"] = multi_turn
        key = canonical_json(inputs)
        if key in seen:
            raise DataError(
                f"examples {seen[key]!r} and {example.example_id!r} have the same inputs "
                "(query or messages, tools and prompt); an evaluation dataset keeps one record "
                "per inputs, so one would replace the other: drop or change one of them",
                path=source,
            )
        seen[key] = example.example_id
        expectations: dict[str, Any] = (
            {"gold_call": example.gold_calls[0]}
            if len(example.gold_calls) == 1
            else {"gold_calls": list(example.gold_calls)}
        )
        if gold_turns is not None:
            expectations[_GOLD_TURNS] = gold_turns
        records.append({"inputs": inputs, "expectations": expectations, "tags": tags})
    return records
