"""Strict JSON in, canonical JSON out: atomic writes, any nesting, exact big integers."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow._json import (
    JSONDecodeError,
    atomic_write_jsonl,
    canonical_json,
    dumps_line,
    dumps_pretty,
    field_dict,
    loads,
    loads_small,
    staged_folder,
)


@contextmanager
def _recursion_limit(limit: int) -> Iterator[None]:
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(limit)
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def test_atomic_writes_get_ordinary_file_permissions(tmp_path: Path) -> None:
    import os

    from sommelier_mlflow._json import atomic_write_json

    path = atomic_write_json(tmp_path / "report.json", {"a": 1})
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    assert os.stat(path).st_mode & 0o777 == os.stat(plain).st_mode & 0o777
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _nested(depth: int) -> dict[str, object]:
    value: dict[str, object] = {"leaf": "é"}
    for level in range(depth - 1):
        value = {f"k{level % 3}": value, "n": level}
    return value


@pytest.mark.parametrize("depth", [255, 300, 1000])
def test_every_writer_serialises_deep_values_exactly(depth: int, tmp_path: Path) -> None:
    value = _nested(depth)
    # The reference spelling: the standard library, whose nesting is bounded only by recursion.
    with _recursion_limit(10_000):
        line = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        pretty = json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False)
    assert dumps_line(value) == (line + "\n").encode("utf-8")
    assert dumps_pretty(value) == (pretty + "\n").encode("utf-8")
    assert canonical_json(loads(canonical_json(value))) == canonical_json(value)
    atomic_write_jsonl(tmp_path / "deep.jsonl", [value])
    assert (tmp_path / "deep.jsonl").read_bytes() == dumps_line(value)


def test_pretty_fallback_matches_orjson_on_shallow_values() -> None:
    from sommelier_mlflow._json import _dumps_deep

    value = {"b": [], "a": {}, "c": [1, {"x": None, "y": [True, 1.5, "ü"]}], "d": {"e": [[]]}}
    assert _dumps_deep(value, pretty=True) + "\n" == dumps_pretty(value).decode("utf-8")
    assert _dumps_deep(value, pretty=False) + "\n" == dumps_line(value).decode("utf-8")


BIG = ["18446744073709551617", "18446744073709551616", "-9223372036854775809"]


@pytest.mark.parametrize("text", BIG)
def test_integers_beyond_64_bits_keep_their_exact_spelling(text: str) -> None:
    value = loads(f'{{"n":{text}}}')
    assert value == {"n": int(text)}
    assert isinstance(value["n"], int)
    assert canonical_json(value) == f'{{"n":{text}}}'
    assert dumps_line(value) == f'{{"n":{text}}}\n'.encode()
    assert loads(text.encode()) == int(text)


def test_big_integer_is_not_its_float_neighbour() -> None:
    as_int = [
        canonical_json(loads(text)) for text in ("18446744073709551617", "18446744073709551616")
    ]
    as_float = canonical_json(loads("18446744073709551616.0"))
    assert len({*as_int, as_float}) == 3  # 1 != 1.0 holds beyond 64 bits as well
    assert canonical_json(loads("1")) != canonical_json(loads("1.0"))


@pytest.mark.parametrize("text", ['{"a":NaN,"n":123456789012345678901}', '{"n":1e999999}'])
def test_exact_path_stays_strict(text: str) -> None:
    with pytest.raises(JSONDecodeError):
        loads(text)


def test_duplicate_keys_are_rejected_on_request() -> None:
    assert loads('{"a":1,"a":2}') == {"a": 2}  # orjson's rule where we did not ask
    for text in ('{"a":1,"a":2}', '{"x":{"a":1,"\\u0061":2}}', '[{"k":1},{"k":2,"k":3}]'):
        with pytest.raises(JSONDecodeError, match="duplicate key"):
            loads(text, reject_duplicate_keys=True)
    # The same key in different objects is fine.
    assert loads('[{"k":1},{"k":2,"j":{"k":3}}]', reject_duplicate_keys=True)[1]["j"] == {"k": 3}


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2}',
        '{"x":{"a":1,"\\u0061":2}}',  # an escape spells the same key
        '{"a":"\\u003a","a":1}',  # an escaped colon must not hide the dropped key
        '{"a":1,"a":{"b":"x:y"}}',
        '[{"k":1},{"k":2,"k":3}]',
    ],
)
def test_the_hot_loop_loader_rejects_duplicate_keys_on_request(text: str) -> None:
    with pytest.raises(JSONDecodeError, match="duplicate key"):
        loads_small(text, reject_duplicate_keys=True)
    assert loads_small(text) == loads(text)  # and keeps orjson's rule otherwise


@pytest.mark.parametrize(
    "text", ['{"a":"12:30","b":{"a":"\\u003a"}}', '{"n":123456789012345678901,"m":{"n":1}}', "[]"]
)
def test_the_hot_loop_loader_keeps_documents_with_unique_keys(text: str) -> None:
    assert loads_small(text, reject_duplicate_keys=True) == loads(text)


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e16, allow_infinity=False))
def test_orjson_writes_every_float_from_1e16_up_with_an_exponent(magnitude: float) -> None:
    # loads_small relies on it: no "e+" in the written value, no float that
    # could have been an integer beyond 64 bits, so no walk of the value.
    assert b"e+" in orjson.dumps(magnitude)
    assert b"e+" in orjson.dumps(-magnitude)


@pytest.mark.parametrize(
    "text",
    [
        '{"n": 18446744073709551617}',
        '{"n": -9223372036854775809, "s": "no exponent here"}',
        "[" * 300 + "18446744073709551617" + "]" * 300,  # deeper than orjson writes
    ],
)
def test_the_hot_loop_loader_keeps_integers_beyond_64_bits_exact(text: str) -> None:
    value = loads_small(text, reject_duplicate_keys=True)
    assert value == loads(text)
    assert canonical_json(value) == canonical_json(json.loads(text))


@dataclass(frozen=True, slots=True)
class _Record:
    name: str
    count: int
    note: str | None = None


def test_field_dict_follows_the_declaration_and_skips_what_it_is_told() -> None:
    record = _Record("a", 2)
    assert list(field_dict(record).items()) == [("name", "a"), ("count", 2), ("note", None)]
    assert field_dict(record, skip={"name", "note"}) == {"count": 2}


def test_a_staged_result_that_cannot_all_be_moved_leaves_the_folder_as_it_was(
    tmp_path: Path,
) -> None:
    target = tmp_path / "out"
    (target / "c.json").mkdir(parents=True)  # the last file of the result cannot replace a folder
    (target / "b.json").write_text("old b")
    with pytest.raises(IsADirectoryError) as raised, staged_folder(target) as stage:
        for name in ("a.json", "b.json", "c.json"):
            (stage / name).write_text(f"new {name}")
    assert raised.value.filename == str(target / "c.json")
    assert sorted(path.name for path in target.iterdir()) == ["b.json", "c.json"]
    assert (target / "b.json").read_text() == "old b"
    assert [path.name for path in tmp_path.iterdir()] == ["out"]  # no staging folder left
