"""The shared JSONL line reader: strict rows, and messages that say what the bytes are."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from sommelier_mlflow.data._jsonl import iter_jsonl_objects
from sommelier_mlflow.errors import DataError


def _read(path: Path) -> list[dict[str, object]]:
    return [row for _, row in iter_jsonl_objects(path)]


def test_duplicate_key_in_a_row_is_rejected_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"example_id":"a","q":1}\n{"example_id":"b","example_id":"c"}\n')
    with pytest.raises(DataError, match="duplicate key 'example_id'") as caught:
        _read(path)
    assert caught.value.exit_code == 2
    assert "rows.jsonl:2:" in str(caught.value)


def test_same_key_in_nested_objects_is_fine(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"name":"a","tools":[{"name":"x"},{"name":"y"}]}\n')
    assert _read(path)[0]["tools"] == [{"name": "x"}, {"name": "y"}]


def test_gzip_input_says_decompress_first(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl.gz"
    path.write_bytes(gzip.compress(b'{"a":1}\n' * 50))
    with pytest.raises(DataError, match=r"not UTF-8 text \(gzip\? decompress first\)") as caught:
        _read(path)
    assert "surrogates" not in str(caught.value)


def test_invalid_utf8_says_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a":"ok"}\n{"a":"caf\xe9"}\n')
    with pytest.raises(DataError, match="not UTF-8 text") as caught:
        _read(path)
    assert "rows.jsonl:2:" in str(caught.value)
    assert "surrogates" not in str(caught.value)


def test_big_integers_in_rows_stay_exact(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"n":18446744073709551617}\n{"n":18446744073709551616.0}\n')
    rows = _read(path)
    assert rows[0]["n"] == 18446744073709551617
    assert isinstance(rows[1]["n"], float)


def test_duplicate_key_on_an_unterminated_last_line_is_not_called_torn(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":1,"b":2}')
    with pytest.raises(DataError, match="duplicate key 'b'") as caught:
        _read(path)
    assert "cut off" not in str(caught.value)
