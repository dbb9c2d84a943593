from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import dumps_line, sha256_text
from sommelier_mlflow.data import (
    Decoding,
    GenerationRecord,
    read_generation_prefix,
    read_generations,
    read_precomputed,
)
from sommelier_mlflow.data._jsonl import (
    JsonlPrefix,
    JsonlReader,
    iter_jsonl_objects,
    jsonl_valid_prefix,
)
from sommelier_mlflow.errors import ConfigError, DataError, InvariantViolationError
from tests.data.data_helpers import WriteLines, expect_error

DECODING = {"temperature": 0.0, "do_sample": False, "max_new_tokens": 64, "batch_size": 4}


def record(example_id: str = "ex-1", **overrides: Any) -> dict[str, Any]:
    raw = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    row = GenerationRecord(
        example_id=example_id,
        model_kind="base",
        language="en",
        prompt_sha256=sha256_text(f"prompt {example_id}"),
        raw_text=raw,
        parse_status="ok",
        parsed_call={"name": "get_weather", "arguments": {"city": "Paris"}},
        decoding=dict(DECODING),
    ).to_json()
    row.update(overrides)
    return row


# --------------------------------------------------------------------------- read_generations


def test_reads_generation_records(write_lines: WriteLines) -> None:
    rows = [
        record("a"),
        record("b", raw_text="no call", parse_status="no_json", parsed_call=None),
    ]
    records = read_generations(write_lines(rows))
    assert [r.to_json() for r in records] == rows


def test_generation_wrong_schema(write_lines: WriteLines) -> None:
    path = write_lines([record(schema_version="sommelier.generation.v2")])
    expect_error(path, 1, "unknown schema_version", reader=read_generations)


def test_generation_missing_schema(write_lines: WriteLines) -> None:
    row = record()
    del row["schema_version"]
    expect_error(write_lines([row]), 1, "missing schema_version", reader=read_generations)


@pytest.mark.parametrize("field", ["example_id", "language", "raw_text", "decoding", "parsed_call"])
def test_generation_missing_field(write_lines: WriteLines, field: str) -> None:
    row = record()
    del row[field]
    expect_error(write_lines([row]), 1, f"missing field {field!r}", reader=read_generations)


def test_generation_unknown_field(write_lines: WriteLines) -> None:
    path = write_lines([record(latency_ms=3)])
    expect_error(path, 1, "unknown field 'latency_ms'", reader=read_generations)


@pytest.mark.parametrize(
    ("decoding", "fragment"),
    [
        ({**DECODING, "temperature": 0}, "temperature must be 0.0"),
        ({**DECODING, "do_sample": True}, "do_sample"),
        ({**DECODING, "max_new_tokens": 0}, "max_new_tokens"),
        ({k: v for k, v in DECODING.items() if k != "batch_size"}, "missing ['batch_size']"),
        ("greedy", "decoding must be an object"),
    ],
)
def test_generation_bad_decoding(write_lines: WriteLines, decoding: Any, fragment: str) -> None:
    path = write_lines([record("a"), record("b", decoding=decoding)])
    expect_error(path, 2, fragment, reader=read_generations)


def test_generation_duplicate_example_id(write_lines: WriteLines) -> None:
    path = write_lines([record("a"), record("b"), record("a")])
    expect_error(path, 3, "duplicate example_id 'a'", reader=read_generations)


def test_generation_mixed_decoding_is_an_invariant_violation(write_lines: WriteLines) -> None:
    path = write_lines([record("a"), record("b", decoding={**DECODING, "batch_size": 8})])
    with pytest.raises(InvariantViolationError) as info:
        read_generations(path)
    assert str(info.value).startswith(f"{path}:2: ")
    assert info.value.exit_code == 5


def test_generation_mixed_model_kind(write_lines: WriteLines) -> None:
    path = write_lines([record("a"), record("b", model_kind="adapter")])
    expect_error(path, 2, "one generations file holds one arm", reader=read_generations)


def test_generation_unknown_model_kind(write_lines: WriteLines) -> None:
    expect_error(write_lines([record(model_kind="lora")]), 1, "model_kind", reader=read_generations)


def test_generation_status_and_call_disagree(write_lines: WriteLines) -> None:
    path = write_lines([record(parsed_call=None)])
    expect_error(path, 1, "parsed_call is not", reader=read_generations)
    path = write_lines([record(parse_status="invalid_json")])
    expect_error(path, 1, "parsed_call is not null", reader=read_generations)


def test_generation_unknown_parse_status(write_lines: WriteLines) -> None:
    path = write_lines([record(parse_status="repaired")])
    expect_error(path, 1, "parse_status must be one of", reader=read_generations)


def test_generation_bad_digest(write_lines: WriteLines) -> None:
    path = write_lines([record(prompt_sha256="abc")])
    expect_error(path, 1, "64 lowercase hex", reader=read_generations)


def test_generation_reserved_language(write_lines: WriteLines) -> None:
    expect_error(write_lines([record(language="gap")]), 1, "reserved", reader=read_generations)


def test_generation_empty_file(write_lines: WriteLines) -> None:
    expect_error(write_lines([]), None, "empty", reader=read_generations)


# --------------------------------------------------------------------------- read_precomputed


def test_generation_prefix_drops_a_torn_last_line(write_lines: WriteLines) -> None:
    path = write_lines([record("a"), record("b")])
    whole = path.read_bytes()
    path.write_bytes(whole[:-1])  # a killed writer left "b" without its newline
    prefix = read_generation_prefix(path)
    assert [r.example_id for r in prefix.records] == ["a"]
    assert prefix.lines == (whole.splitlines(keepends=True)[0],)
    assert (prefix.complete_bytes, prefix.size) == (len(prefix.lines[0]), len(whole) - 1)


def test_generation_prefix_of_an_empty_file_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "en.jsonl"
    path.write_bytes(b"")
    assert read_generation_prefix(path).records == ()


@pytest.mark.parametrize(
    ("lines", "line", "fragment"),
    [
        ([dumps_line(record("a")), b"{not json}\n"], 2, "not a JSON line"),
        ([dumps_line(record("a")), b'{"example_id": "x"}\n'], 2, "not a generation record"),
        ([dumps_line(record("a", parse_status="no_json"))], 1, "parsed_call is not null"),
        ([dumps_line(record("a")), dumps_line(record("a"))], 2, "duplicate example_id 'a'"),
    ],
)
def test_generation_prefix_refuses_a_bad_complete_line(
    tmp_path: Path, lines: list[bytes], line: int, fragment: str
) -> None:
    path = tmp_path / "en.jsonl"
    path.write_bytes(b"".join(lines))
    expect_error(path, line, fragment, reader=read_generation_prefix)


def test_precomputed_rows_are_reparsed(write_lines: WriteLines) -> None:
    path = write_lines(
        [
            {"example_id": "a", "raw_text": 'Sure: {"name": "f", "arguments": {"x": 1}}'},
            {"example_id": "b", "raw_text": "I cannot help", "language": "fr"},
            {"example_id": "c", "raw_text": '{"name": "f", "arguments": {"x": 1},}'},
        ]
    )
    a, b, c = read_precomputed(path)
    assert (a.parse_status, a.parsed_call) == ("ok", {"name": "f", "arguments": {"x": 1}})
    assert a.language is None
    assert (b.parse_status, b.parsed_call, b.language) == ("no_json", None, "fr")
    assert c.parse_status == "invalid_json"


def test_precomputed_stored_parse_is_refused(write_lines: WriteLines) -> None:
    path = write_lines([{"example_id": "a", "raw_text": "x", "parse_status": "ok"}])
    expect_error(path, 1, "unknown field 'parse_status'", reader=read_precomputed)


def test_precomputed_missing_raw_text(write_lines: WriteLines) -> None:
    path = write_lines([{"example_id": "a", "raw_text": "x"}, {"example_id": "b"}])
    expect_error(path, 2, "missing field 'raw_text'", reader=read_precomputed)


def test_precomputed_raw_text_not_a_string(write_lines: WriteLines) -> None:
    path = write_lines([{"example_id": "a", "raw_text": {"name": "f", "arguments": {}}}])
    expect_error(path, 1, "'raw_text' must be a string", reader=read_precomputed)


def test_precomputed_duplicate_example_id(write_lines: WriteLines) -> None:
    rows = [{"example_id": "a", "raw_text": "x"}, {"example_id": "a", "raw_text": "y"}]
    expect_error(write_lines(rows), 2, "duplicate example_id 'a'", reader=read_precomputed)


def test_precomputed_bad_language(write_lines: WriteLines) -> None:
    rows = [{"example_id": "a", "raw_text": "x", "language": "delta"}]
    expect_error(write_lines(rows), 1, "reserved", reader=read_precomputed)


def test_precomputed_empty_file(write_lines: WriteLines) -> None:
    expect_error(write_lines([]), None, "empty", reader=read_precomputed)


# --------------------------------------------------------------------------- resuming


def test_iterator_yields_line_numbers(write_lines: WriteLines) -> None:
    path = write_lines([{"a": 1}, {"a": 2}])
    assert list(iter_jsonl_objects(path)) == [(1, {"a": 1}), (2, {"a": 2})]


def test_prefix_of_a_complete_file(write_lines: WriteLines) -> None:
    path = write_lines([record("a"), record("b")])
    assert jsonl_valid_prefix(path) == JsonlPrefix(
        valid_bytes=path.stat().st_size, lines=2, torn_bytes=0
    )
    assert not jsonl_valid_prefix(path).torn


def test_prefix_of_an_empty_file(write_lines: WriteLines) -> None:
    assert jsonl_valid_prefix(write_lines([])) == JsonlPrefix(0, 0, 0)


def test_torn_tail_is_measured_and_resume_works(write_lines: WriteLines) -> None:
    done = dumps_line(record("a")) + dumps_line(record("b"))
    torn = dumps_line(record("c"))[:-25]
    path = write_lines([done + torn])
    # The readers refuse the torn file ...
    expect_error(path, 3, "cut off", reader=read_generations)
    # ... and the prefix says exactly what to keep.
    prefix = jsonl_valid_prefix(path)
    assert prefix == JsonlPrefix(valid_bytes=len(done), lines=2, torn_bytes=len(torn))
    assert prefix.torn
    with path.open("r+b") as handle:
        handle.truncate(prefix.valid_bytes)
        handle.seek(0, os.SEEK_END)
        handle.write(dumps_line(record("c")))
    assert [r.example_id for r in read_generations(path)] == ["a", "b", "c"]


def test_complete_record_without_newline_is_torn_for_resume(write_lines: WriteLines) -> None:
    # Appending after a line without its newline would glue two records, so it
    # is not counted as done even though a reader accepts it.
    last = dumps_line(record("b")).rstrip(b"\n")
    path = write_lines([dumps_line(record("a")) + last])
    assert jsonl_valid_prefix(path).torn_bytes == len(last)
    assert len(read_generations(path)) == 2


def test_corruption_before_the_tail_is_not_a_torn_tail(write_lines: WriteLines) -> None:
    path = write_lines([record("a"), "{oops\n", record("c")])
    with pytest.raises(DataError, match=f"^{path}:2: "):
        jsonl_valid_prefix(path)


def test_prefix_of_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        jsonl_valid_prefix(tmp_path / "none.jsonl")


def test_reader_digest_needs_a_full_read_and_reads_once(write_lines: WriteLines) -> None:
    path = write_lines([{"a": 1}])
    reader = JsonlReader(path)
    with pytest.raises(RuntimeError):
        _ = reader.sha256
    assert list(reader) == [(1, {"a": 1})]
    assert reader.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert reader.lines == 1
    with pytest.raises(RuntimeError):
        list(reader)


def test_decoding_records_a_backend_only_when_named() -> None:
    plain = Decoding(max_new_tokens=4, batch_size=2)
    assert "backend" not in plain.to_dict()  # reports written before backends read unchanged
    assert Decoding.from_dict(plain.to_dict()) == plain
    named = Decoding(max_new_tokens=4, batch_size=2, backend="hf")
    assert named.to_dict()["backend"] == "hf"
    assert Decoding.from_dict(named.to_dict()) == named
    assert named != plain
    with pytest.raises(ConfigError, match="backend"):
        Decoding.from_dict({**plain.to_dict(), "backend": None})
    with pytest.raises(ConfigError, match="backend"):
        Decoding(max_new_tokens=4, batch_size=2, backend=" ")
    with pytest.raises(ConfigError, match="unexpected"):
        Decoding.from_dict({**plain.to_dict(), "engine": "hf"})


def test_decoding_records_the_execution_loop_only_when_set() -> None:
    plain = Decoding(max_new_tokens=4, batch_size=2)
    assert "execution" not in plain.to_dict()  # single-turn runs keep their bytes
    loop = {"loop": "bfcl_multi_turn", "step_limit": 20, "output_format": "json"}
    played = Decoding(max_new_tokens=4, batch_size=2, execution=loop)
    assert played.to_dict()["execution"] == loop
    assert Decoding.from_dict(played.to_dict()) == played != plain
    with pytest.raises(ConfigError, match="execution"):
        Decoding.from_dict({**plain.to_dict(), "execution": None})
    with pytest.raises(ConfigError, match="execution"):
        Decoding(max_new_tokens=4, batch_size=2, execution={})


def test_a_multi_turn_record_keeps_its_turns_and_others_keep_their_bytes(
    write_lines: WriteLines,
) -> None:
    turns = [['[{"name": "ls", "arguments": {}}]', "Done."], []]
    rows = [
        record("a"),
        record(
            "b",
            raw_text='[{"name": "ls", "arguments": {}}]\nDone.',
            parse_status="invalid_json",
            parsed_call=None,
            turns=turns,
        ),
    ]
    records = read_generations(write_lines(rows))
    assert records[0].turns is None and "turns" not in records[0].to_json()
    assert records[1].turns == (tuple(turns[0]), ())
    assert [r.to_json() for r in records] == rows
    assert read_generation_prefix(write_lines(rows)).records == tuple(records)
    expect_error(write_lines([record("c", turns=["Done."])]), 1, "'turns'", reader=read_generations)


# --------------------------------------------------------------------------- precomputed tables


def test_precomputed_csv_reads_like_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "outputs.csv"
    path.write_text(
        "example_id,raw_text,language\n"
        'a,"Sure: {""name"": ""f"", ""arguments"": {""x"": 1}}",\n'
        'b,"line one\nline two",fr\n'
        "c,,en\n",
        encoding="utf-8",
    )
    a, b, c = read_precomputed(path)
    assert (a.example_id, a.parse_status, a.language) == ("a", "ok", None)
    assert a.parsed_call == {"name": "f", "arguments": {"x": 1}}
    assert (b.raw_text, b.language, b.parse_status) == ("line one\nline two", "fr", "no_json")
    assert (c.raw_text, c.language) == ("", "en")


def test_precomputed_csv_fails_closed(tmp_path: Path) -> None:
    path = tmp_path / "outputs.csv"
    path.write_text("example_id,raw_text,score\na,x,1\n", encoding="utf-8")
    expect_error(path, 2, "unknown field 'score'", reader=read_precomputed)
    path.write_text("example_id,raw_text\na,x\na,y\n", encoding="utf-8")
    expect_error(path, 3, "duplicate example_id 'a'", reader=read_precomputed)
    path.write_text("example_id,raw_text\na,x,extra\n", encoding="utf-8")
    expect_error(path, 2, "3 cells for 2 columns", reader=read_precomputed)
    path.write_text("example_id,raw_text\n", encoding="utf-8")
    expect_error(path, None, "empty", reader=read_precomputed)


def test_precomputed_parquet_reads_like_jsonl(tmp_path: Path) -> None:
    import pandas as pd

    path = tmp_path / "outputs.parquet"
    pd.DataFrame(
        {
            "example_id": ["a", "b"],
            "raw_text": ['{"name": "f", "arguments": {}}', "no call"],
            "language": [None, "fr"],
        }
    ).to_parquet(path)
    a, b = read_precomputed(path)
    assert (a.example_id, a.parse_status, a.language) == ("a", "ok", None)
    assert (b.example_id, b.parse_status, b.language) == ("b", "no_json", "fr")
    pd.DataFrame({"example_id": ["a"], "raw_text": [3]}).to_parquet(path)
    expect_error(path, 1, "'raw_text' must be a string", reader=read_precomputed)


# ------------------------------------------------------------------- hostile tables (issue 23)


def test_precomputed_csv_refuses_a_column_named_twice(tmp_path: Path) -> None:
    """Before: the last `raw_text` column was scored, silently."""
    path = tmp_path / "outputs.csv"
    path.write_text("example_id,raw_text,raw_text\na,first,second\n", encoding="utf-8")
    expect_error(path, 1, "column 'raw_text' appears twice", reader=read_precomputed)


def test_precomputed_csv_takes_long_cells_and_a_bom(tmp_path: Path) -> None:
    """Before: a cell over 128 KB failed (JSONL took it), and a BOM hid `example_id`."""
    long_text = "x" * 300_000
    path = tmp_path / "outputs.csv"
    path.write_bytes(f"\ufeffexample_id,raw_text\na,{long_text}\n".encode())
    (row,) = read_precomputed(path)
    assert (row.example_id, row.raw_text) == ("a", long_text)
    import csv

    assert csv.field_size_limit() == 131072  # the reader restores the process's limit


def test_precomputed_parquet_with_invalid_utf8_is_a_data_error(tmp_path: Path) -> None:
    """Before: a UnicodeDecodeError traceback from pandas (issue 23 #5)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "outputs.parquet"
    table = pa.table(
        {
            "example_id": pa.array([b"a"], type=pa.binary()).cast(pa.string(), safe=False),
            "raw_text": pa.array([b"\xff\xfe bad"], type=pa.binary()).cast(pa.string(), safe=False),
        }
    )
    pq.write_table(table, path)
    expect_error(path, None, "not a readable Parquet file", reader=read_precomputed)
