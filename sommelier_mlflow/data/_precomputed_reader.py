"""The reader of completions made outside this package, which re-parses every one.

Outputs collected by other tools arrive as JSONL, CSV or Parquet tables of
``{example_id, raw_text}`` rows. Any parse stored beside them is not trusted
(parsers differ in leniency), so only the raw text is read and this
package's parser reads it; the rows are checked like every other input
(unknown fields, duplicate ids and empty files are refused, naming file and
line).

A multi-turn question (BFCL's ``multi_turn_*``) has no single output: its
producer writes one *trajectory* row per question, ``{"example_id", "turns":
[[step raw text, ...], ...]}``, the model's raw output at each step of each
user turn, in order (:func:`read_trajectories`). Each of those two readers
reads one kind of row and refuses the other, naming both lines. A split may
hold both kinds of example (BFCL imported with single-turn and multi-turn
categories), so :func:`read_precomputed_outputs` reads a file mixing them,
each row by its shape, and checks each against its example's kind: one file
re-scores the whole split.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sommelier_mlflow.data._jsonl import iter_jsonl_objects
from sommelier_mlflow.data._row_checks import _kind, _Line
from sommelier_mlflow.data._schemas import TestExample, TestSplit
from sommelier_mlflow.errors import DataError, DependencyError
from sommelier_mlflow.toolcalls import ParseStatus, parse_tool_call

__all__ = [
    "PrecomputedGeneration",
    "read_precomputed",
    "Trajectory",
    "read_trajectories",
    "PrecomputedOutputs",
    "read_precomputed_outputs",
]

_PRECOMPUTED_REQUIRED: Final = frozenset({"example_id", "raw_text"})
_PRECOMPUTED_OPTIONAL: Final = frozenset({"language", "prompt_sha256"})
_TRAJECTORY_FIELDS: Final = frozenset({"example_id", "turns"})
# What tells the two row kinds apart, and how messages name them.
_RAW_TEXT_ROW: Final = "an output row ({example_id, raw_text})"
_TRAJECTORY_ROW: Final = "a trajectory row ({example_id, turns})"


@dataclass(frozen=True, slots=True)
class PrecomputedGeneration:
    """A completion produced elsewhere, re-parsed with this package's parser.

    Attributes:
        example_id: The test example it answers.
        raw_text: The completion exactly as supplied.
        language: The language the file claims, if it gave one; callers join on
            ``example_id`` and should check it against the test split.
        parse_status: This package's parse of ``raw_text``.
        parsed_call: The parsed call when ``parse_status == "ok"``.
        prompt_sha256: The digest of the prompt the producer answered, if the
            file gave one; callers check it against the example's prompt.
    """

    example_id: str
    raw_text: str
    language: str | None
    parse_status: ParseStatus
    parsed_call: dict[str, Any] | None
    prompt_sha256: str | None = None


def _csv_rows(name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """CSV rows keyed by the header; line numbers count the header as line 1.

    An empty ``language`` cell means "not given" (CSV has no null); every
    other cell is kept as the exact string, empty ``raw_text`` included. A
    UTF-8 byte-order mark (spreadsheets write one) is not part of the first
    column's name; a column named twice is refused, since either cell could be
    the one meant; a cell is as long as it needs to be, as in JSONL and Parquet.
    """
    import csv

    try:
        handle = open(name, encoding="utf-8-sig", newline="")  # noqa: SIM115 - closed below
    except OSError as exc:
        raise DataError(f"cannot read the file: {exc.strerror or exc}", path=name) from exc
    # The csv module's field limit (128 KiB) is process-wide: raised for this read only.
    limit = csv.field_size_limit(sys.maxsize)
    try:
        with handle:
            lines = list(enumerate(csv.reader(handle, strict=True), start=1))
    except (csv.Error, UnicodeDecodeError) as exc:
        raise DataError(f"not a readable UTF-8 CSV file: {exc}", path=name) from exc
    finally:
        csv.field_size_limit(limit)
    if not lines:
        return
    header = lines[0][1]
    for column in header:
        if header.count(column) > 1:
            raise DataError(
                f"column {column!r} appears twice in the header; keep one", path=name, line=1
            )
    for index, cells in lines[1:]:
        if len(cells) != len(header):
            raise DataError(f"{len(cells)} cells for {len(header)} columns", path=name, line=index)
        row: dict[str, Any] = dict(zip(header, cells, strict=True))
        if row.get("language") == "":
            del row["language"]
        yield index, row


def _parquet_rows(name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Parquet rows as dicts; row numbers start at 1, a null ``language`` is "not given"."""
    try:
        import pandas as pd

        records = pd.read_parquet(name).to_dict(orient="records")
    except ImportError as exc:
        raise DependencyError(
            f"reading {name} needs pandas with pyarrow: pip install pyarrow"
        ) from exc
    except (OSError, ValueError) as exc:  # UnicodeDecodeError too: strings that are not UTF-8
        raise DataError(f"not a readable Parquet file: {exc}", path=name) from exc
    for index, record in enumerate(records, start=1):
        row = {str(key): value for key, value in record.items()}
        if "language" in row and (row["language"] is None or row["language"] != row["language"]):
            del row["language"]  # None or NaN: the column exists but this row has no value
        yield index, row


@dataclass(frozen=True, slots=True)
class Trajectory:
    """A multi-turn question's outputs made elsewhere: the raw text of every step of every turn.

    Attributes:
        example_id: The multi-turn example it answers.
        turns: Per user turn, the model's raw output at each step, in order
            (a turn may hold no step).
    """

    example_id: str
    turns: tuple[tuple[str, ...], ...]


def _refuse_other_kind(src: _Line, kind: str, first_line: int | None, wanted: str) -> None:
    """Refuse a row that is not of the kind this reader reads, naming the file's kind.

    Args:
        src: The row.
        kind: What the row is (:data:`_RAW_TEXT_ROW` or :data:`_TRAJECTORY_ROW`).
        first_line: The line of the file's first row of the reader's kind, if any yet.
        wanted: What the reader reads.
    """
    if kind == wanted:
        return
    if first_line is not None:
        raise src.error(
            f"this is {kind} but line {first_line} is {wanted}; this reader reads one kind: "
            "read a file mixing both with read_precomputed_outputs(path, split=...), as "
            "score --precomputed does"
        )
    if kind == _TRAJECTORY_ROW:
        raise src.error(
            f"this is {kind}: the outputs of a multi-turn question, step by step; they are "
            "scored against a multi-turn split (read_trajectories), not as one output per example"
        )
    raise src.error(
        f"this is {kind}, not {wanted}: a multi-turn question's outputs are a list of turns, "
        "each a list of the model's raw output at each step"
    )


def _precomputed_rows(name: str) -> Iterator[tuple[int, dict[str, Any]]]:
    suffix = Path(name).suffix.lower()
    if suffix == ".csv":
        return _csv_rows(name)
    if suffix in (".parquet", ".pq"):
        return _parquet_rows(name)
    return iter_jsonl_objects(name)


def read_precomputed(path: str | os.PathLike[str]) -> list[PrecomputedGeneration]:
    """Read completions made outside this package: ``{example_id, raw_text}`` rows.

    Optional fields: ``language`` and ``prompt_sha256`` (the digest of the
    prompt the producer answered), which callers check against the split.

    Any stored parse in such a file is not trusted (different parsers are
    differently lenient), so only the raw text is accepted and it is parsed
    here with ``sommelier.parser.v1``. JSONL is the native form; a ``.csv``
    (header row) or ``.parquet`` file with the same columns is read the same
    way, because outputs collected by other tools often arrive as tables.

    Raises:
        DataError: On a malformed row, a missing or unknown field, a duplicate
            ``example_id`` or an empty file.
    """
    name = os.fspath(path)
    results: list[PrecomputedGeneration] = []
    lines: dict[str, int] = {}
    for line_no, row in _precomputed_rows(name):
        src = _Line(name, line_no, row)
        kind = _TRAJECTORY_ROW if "turns" in row else _RAW_TEXT_ROW
        first = lines[results[0].example_id] if results else None
        _refuse_other_kind(src, kind, first, _RAW_TEXT_ROW)
        generation = _output_row(src, row)
        _first_time(src, generation.example_id, lines)
        results.append(generation)
    if not results:
        raise DataError("generations file is empty", path=name)
    return results


def _output_row(src: _Line, row: Mapping[str, Any]) -> PrecomputedGeneration:
    """One ``{example_id, raw_text}`` row, checked, its text parsed by this package."""
    src.exact_fields(_PRECOMPUTED_REQUIRED, _PRECOMPUTED_OPTIONAL)
    example_id = src.string("example_id")
    raw_text = src.string("raw_text", non_empty=False)
    language = src.language(default=None) if "language" in row else None
    prompt_sha256 = src.string("prompt_sha256") if "prompt_sha256" in row else None
    parsed = parse_tool_call(raw_text)
    return PrecomputedGeneration(
        example_id=example_id,
        raw_text=raw_text,
        language=language,
        parse_status=parsed.status,
        parsed_call=parsed.call,
        prompt_sha256=prompt_sha256,
    )


def _first_time(src: _Line, example_id: str, lines: dict[str, int]) -> None:
    """Refuse an ``example_id`` a row already answered; else remember this row's line."""
    earlier = lines.get(example_id)
    if earlier is not None:
        raise src.error(f"duplicate example_id {example_id!r} (first at line {earlier})")
    lines[example_id] = src.line


def _checked_turns(src: _Line) -> tuple[tuple[str, ...], ...]:
    turns = src.require("turns")
    if not isinstance(turns, list) or not turns:
        raise src.error(
            f"field 'turns' must be a non-empty list of turns (each a list of step outputs), "
            f"got {_kind(turns)}"
        )
    for index, turn in enumerate(turns):
        if not isinstance(turn, list) or not all(isinstance(step, str) for step in turn):
            raise src.error(
                f"turns[{index}] must be a list of strings (the model's raw output at each step)"
            )
    return tuple(tuple(turn) for turn in turns)


def _check_against_split(
    src: _Line, trajectory: Trajectory, examples: Mapping[str, TestExample], split: str
) -> None:
    """The trajectory answers a multi-turn example of the split, in at most its turns."""
    example = examples.get(trajectory.example_id)
    if example is None:
        raise src.error(f"example_id {trajectory.example_id!r} is not in the test split {split}")
    if example.multi_turn is None:
        raise src.error(
            f"example {trajectory.example_id!r} is not a multi-turn example; its output is "
            "one {example_id, raw_text} row"
        )
    expected = len(example.multi_turn["user_turns"])
    # Fewer turns is a run cut short (BFCL's forced quit at its step limit): the
    # checker fails the turns it never reached. More cannot answer the question.
    if len(trajectory.turns) > expected:
        raise src.error(
            f"example {trajectory.example_id!r} has {expected} user turns but the trajectory "
            f"holds {len(trajectory.turns)}; give one list of step outputs per user turn"
        )


def read_trajectories(
    path: str | os.PathLike[str], *, split: TestSplit | None = None
) -> list[Trajectory]:
    """Read multi-turn outputs made elsewhere: one ``{example_id, turns}`` JSON line per question.

    ``turns`` holds, per user turn, the model's raw output at each step (a
    list of strings, possibly empty). JSON lines only: a turn is a list, which
    a CSV cell or a Parquet column of text cannot hold without another encoding.

    Args:
        path: The JSONL file.
        split: The test split the trajectories answer; when given, each must
            name a multi-turn example of it and hold one list per user turn.

    Raises:
        DataError: A malformed or mistyped row, a missing or unknown field, an
            output row ({example_id, raw_text}) in the file, a duplicate
            ``example_id``, an empty file, or (with ``split``) a row that does
            not answer a multi-turn example or holds more turns than it has;
            naming file and line.
    """
    name = os.fspath(path)
    if Path(name).suffix.lower() in (".csv", ".parquet", ".pq"):
        raise DataError(
            "multi-turn trajectories are read from JSON lines only ({example_id, turns} per "
            "line); write them as .jsonl",
            path=name,
        )
    lines: dict[str, int] = {}
    trajectories: list[Trajectory] = []
    examples = split.by_id() if split is not None else {}
    for line_no, row in iter_jsonl_objects(name):
        src = _Line(name, line_no, row)
        kind = _TRAJECTORY_ROW if "turns" in row else _RAW_TEXT_ROW
        first = lines[trajectories[0].example_id] if trajectories else None
        _refuse_other_kind(src, kind, first, _TRAJECTORY_ROW)
        trajectory = _trajectory_row(src)
        _first_time(src, trajectory.example_id, lines)
        if split is not None:
            _check_against_split(src, trajectory, examples, split.path)
        trajectories.append(trajectory)
    if not trajectories:
        raise DataError("trajectories file is empty", path=name)
    return trajectories


def _trajectory_row(src: _Line) -> Trajectory:
    """One ``{example_id, turns}`` row, checked."""
    src.exact_fields(_TRAJECTORY_FIELDS, frozenset())
    return Trajectory(example_id=src.string("example_id"), turns=_checked_turns(src))


@dataclass(frozen=True, slots=True)
class PrecomputedOutputs:
    """A split's outputs made elsewhere, single-turn and multi-turn, from one file.

    Attributes:
        outputs: The ``{example_id, raw_text}`` rows, in file order: single-turn examples.
        trajectories: The ``{example_id, turns}`` rows, in file order: multi-turn questions.
    """

    outputs: tuple[PrecomputedGeneration, ...]
    trajectories: tuple[Trajectory, ...]


def read_precomputed_outputs(
    path: str | os.PathLike[str], *, split: TestSplit
) -> PrecomputedOutputs:
    """Read outputs made elsewhere for ``split``, each row by its shape.

    A row with ``turns`` is a trajectory (:func:`read_trajectories`), any
    other an output row (:func:`read_precomputed`); both kinds may share one
    file, in any order, so a split mixing single-turn rows and multi-turn
    questions is re-scored from one file (a played arm's ``trajectories.jsonl``
    appended to its single-turn outputs). Each row must answer its example's
    kind. A CSV or Parquet file holds output rows only (a turn is a list).
    Ids the split lacks among output rows, and examples no row answers, are
    the caller's to report, as with :func:`read_precomputed`.

    Raises:
        DataError: A row :func:`read_precomputed` or :func:`read_trajectories`
            (with ``split``) refuses, an output row for a multi-turn question,
            an ``example_id`` in two rows of either kind, a trajectory in a CSV
            or Parquet file, or an empty file; naming file and line.
    """
    name = os.fspath(path)
    table = Path(name).suffix.lower() in (".csv", ".parquet", ".pq")
    lines: dict[str, int] = {}
    outputs: list[PrecomputedGeneration] = []
    trajectories: list[Trajectory] = []
    examples = split.by_id()
    for line_no, row in _precomputed_rows(name):
        src = _Line(name, line_no, row)
        if "turns" in row:
            if table:
                raise src.error(
                    f"this is {_TRAJECTORY_ROW}; multi-turn trajectories are read from JSON "
                    "lines only: write the file as .jsonl"
                )
            trajectory = _trajectory_row(src)
            _first_time(src, trajectory.example_id, lines)
            _check_against_split(src, trajectory, examples, split.path)
            trajectories.append(trajectory)
            continue
        generation = _output_row(src, row)
        _first_time(src, generation.example_id, lines)
        example = examples.get(generation.example_id)
        if example is not None and example.multi_turn is not None:
            raise src.error(
                f"example {generation.example_id!r} is a multi-turn question but this is "
                f"{_RAW_TEXT_ROW}; give it {_TRAJECTORY_ROW}: the model's raw output at each "
                "step of each user turn"
            )
        outputs.append(generation)
    if not outputs and not trajectories:
        raise DataError("precomputed outputs file is empty", path=name)
    return PrecomputedOutputs(tuple(outputs), tuple(trajectories))
