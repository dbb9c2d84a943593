"""The reader of the generation layer's own files, which refuses anything it cannot trust.

A ``generations/<slice>.jsonl`` file is what scoring joins to the test split,
so every row is checked as strictly as a split row: the schema version, every
field and its type, the parse the writer stored against its status, and the
decoding (greedy only, one decoding per file). :func:`read_generation_prefix`
reads the complete lines an interrupted run left behind, so the runner can
resume from them byte for byte.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sommelier_mlflow._json import JSONDecodeError, canonical_json, loads
from sommelier_mlflow.data._jsonl import iter_jsonl_objects, open_data_file
from sommelier_mlflow.data._provenance import Decoding, check_model_kind
from sommelier_mlflow.data._row_checks import _HEX64, _Line, _schema_of
from sommelier_mlflow.data._schemas import (
    GENERATION_FIELDS,
    GENERATION_OPTIONAL_FIELDS,
    GENERATION_SCHEMA,
    GenerationRecord,
)
from sommelier_mlflow.errors import ConfigError, DataError, InputError
from sommelier_mlflow.toolcalls import PARSE_STATUSES, is_tool_call

__all__ = ["read_generations", "GenerationPrefix", "read_generation_prefix"]


def _generation(src: _Line) -> GenerationRecord:
    _schema_of(src, (GENERATION_SCHEMA,))
    src.exact_fields(GENERATION_FIELDS, GENERATION_OPTIONAL_FIELDS)
    try:
        model_kind = check_model_kind(src.row["model_kind"])
    except InputError as exc:
        raise src.error(str(exc)) from None
    digest = src.row["prompt_sha256"]
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        raise src.error("field 'prompt_sha256' must be 64 lowercase hex digits")
    raw_text = src.string("raw_text", non_empty=False)
    status = src.row["parse_status"]
    if status not in PARSE_STATUSES:
        raise src.error(f"parse_status must be one of {', '.join(PARSE_STATUSES)}, got {status!r}")
    parsed = src.row["parsed_call"]
    if status == "ok" and not is_tool_call(parsed):
        raise src.error("parse_status is 'ok' but parsed_call is not a {name, arguments} call")
    if status != "ok" and parsed is not None:
        raise src.error(f"parse_status is {status!r} but parsed_call is not null")
    try:
        decoding = Decoding.from_dict(src.row["decoding"]).to_dict()
    except ConfigError as exc:
        raise src.error(str(exc)) from exc
    try:
        return GenerationRecord(
            example_id=src.string("example_id"),
            model_kind=model_kind,
            language=src.language(default=None),
            prompt_sha256=digest,
            raw_text=raw_text,
            parse_status=status,
            parsed_call=parsed,
            decoding=decoding,
            turns=_turns(src),
        )
    except InputError as exc:
        raise src.error(str(exc)) from exc


def _turns(src: _Line) -> tuple[tuple[str, ...], ...] | None:
    """A multi-turn record's ``turns``: a list of turns, each a list of step texts."""
    if "turns" not in src.row:
        return None
    turns = src.row["turns"]
    if not isinstance(turns, list) or not all(
        isinstance(turn, list) and all(isinstance(text, str) for text in turn) for turn in turns
    ):
        raise src.error("field 'turns' must be a list of turns, each a list of step texts")
    return tuple(tuple(turn) for turn in turns)


def read_generations(path: str | os.PathLike[str]) -> list[GenerationRecord]:
    """Read a ``generations/<slice>.jsonl`` file written by the generation layer.

    Beyond per-row validation, a file must come from one arm run: one
    ``model_kind`` and one decoding dict throughout.

    Raises:
        DataError: On a malformed or mistyped row, an unknown schema version, a
            duplicate ``example_id``, mixed ``model_kind`` or an empty file.
        InvariantViolationError: If the decoding dict differs between rows
            (greedy results are only comparable under one decoding).
    """
    records: list[GenerationRecord] = []
    lines: dict[str, int] = {}
    name = os.fspath(path)
    for line_no, row in iter_jsonl_objects(name):
        src = _Line(name, line_no, row)
        record = _generation(src)
        first = lines.get(record.example_id)
        if first is not None:
            raise src.error(f"duplicate example_id {record.example_id!r} (first at line {first})")
        if records:
            if record.model_kind != records[0].model_kind:
                raise src.error(
                    f"model_kind {record.model_kind!r} differs from {records[0].model_kind!r} "
                    "on line 1; one generations file holds one arm"
                )
            if canonical_json(record.decoding) != canonical_json(records[0].decoding):
                raise src.invariant(
                    f"decoding {canonical_json(record.decoding)} differs from line 1's "
                    f"{canonical_json(records[0].decoding)}; one run must use one decoding"
                )
        lines[record.example_id] = line_no
        records.append(record)
    if not records:
        raise DataError("generations file is empty", path=name)
    return records


@dataclass(frozen=True, slots=True)
class GenerationPrefix:
    """The complete records of a generations file an interrupted run left behind.

    Attributes:
        records: One record per complete line, in file order (line ``i + 1``).
        lines: Each record's line exactly as stored, newline included, so a
            resuming writer can check it would write the same bytes.
        complete_bytes: Length of the complete lines; truncate to it before appending.
        size: The file's length (larger than ``complete_bytes`` when the last
            line is torn).
    """

    records: tuple[GenerationRecord, ...]
    lines: tuple[bytes, ...]
    complete_bytes: int
    size: int


def read_generation_prefix(path: str | os.PathLike[str]) -> GenerationPrefix:
    """Read the complete lines of a generations file that a killed writer may have left torn.

    A last line without its newline is the torn write of a killed process: it
    is not read (the caller regenerates it). Every complete line must be a
    valid generation record, checked exactly as :func:`read_generations`
    checks one, and no example may occur twice. Unlike that reader, an empty
    file is fine (nothing was finished yet) and agreement with the run
    (its examples, arm and decoding) is the caller's to check.

    Raises:
        DataError: An unreadable file, or a complete line that is not JSON, not
            a generation record, or a repeated ``example_id``.
    """
    name = os.fspath(path)
    with open_data_file(name) as handle:
        data = handle.read()
    complete_end = data.rfind(b"\n") + 1
    # Split on b"\n" only: the writer escapes every other control character.
    lines = tuple(chunk + b"\n" for chunk in data[:complete_end].split(b"\n")[:-1])
    records: list[GenerationRecord] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        try:
            row = loads(line)
        except JSONDecodeError as exc:
            raise DataError(f"not a JSON line ({exc})", path=name, line=number) from exc
        if not isinstance(row, dict) or not (
            GENERATION_FIELDS <= row.keys() <= GENERATION_FIELDS | GENERATION_OPTIONAL_FIELDS
        ):
            found = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise DataError(f"not a generation record (fields {found})", path=name, line=number)
        src = _Line(name, number, row)
        record = _generation(src)
        first = first_line.setdefault(record.example_id, number)
        if first != number:
            raise src.error(f"duplicate example_id {record.example_id!r} (first at line {first})")
        records.append(record)
    return GenerationPrefix(tuple(records), lines, complete_end, len(data))
