from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.data import (
    DROP_REASONS,
    DROP_SUMMARY_SCHEMA,
    PrepareResult,
    prepare,
    read_test_split,
)
from sommelier_mlflow.errors import ConfigError, DataError
from tests.data.data_helpers import WriteLines

TOOLS = json.dumps(
    [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {"city": {"type": "str", "description": "City"}},
        }
    ]
)
SIZES = {"train": 3, "validation": 1, "test": 2}


def answers(city: str) -> str:
    return json.dumps([{"name": "get_weather", "arguments": {"city": city}}])


CITIES = ["Paris", "Lyon", "Nice", "Lille", "Metz", "Brest"]


def root(example_id: Any, city: str, **overrides: Any) -> dict[str, Any]:
    key = "id" if isinstance(example_id, int) else "example_id"
    row = {
        key: example_id,
        "query": f"What is the weather in {city} today?",
        "tools": TOOLS,
        "answers": answers(city),
    }
    row.update(overrides)
    return row


def pair(
    example_id: str, root_id: Any, city: str, language: str = "fr", **extra: Any
) -> dict[str, Any]:
    row = {
        "example_id": example_id,
        "source_example_id": root_id,
        "language": language,
        "query": f"Quel temps fait-il à {city} aujourd'hui ?",
        "tools": TOOLS,
        "answers": answers(city),
    }
    row.update(extra)
    return row


def raw_rows() -> list[dict[str, Any]]:
    """Six valid English roots, one row per drop reason, and French/German pairs."""
    rows: list[dict[str, Any]] = [root(f"r{i}", city) for i, city in enumerate(CITIES[:5], 1)]
    rows.append(root(7, "Brest"))  # integer `id`, stringified to "7"
    rows += [
        root("d-missing", "X", query="   "),
        root("d-short", "X", query="hi?"),
        root("d-long", "X", query="weather " * 40),
        root("d-tools-json", "X", tools="[{'name': 'get_weather'}]"),
        root("d-tools-shape", "X", tools=json.dumps({"name": "get_weather"})),
        root("d-answers-json", "X", answers='[{"name": "get_weather", "arguments": {}},]'),
        root("d-answers-empty", "X", answers="[]"),
        root("d-answers-unoffered", "X", answers=json.dumps([{"name": "t", "arguments": {}}])),
        root(
            "d-multi",
            "Paris",
            query="Weather in Paris and in Lyon?",
            answers=json.dumps(
                [
                    {"name": "get_weather", "arguments": {"city": "Paris"}},
                    {"name": "get_weather", "arguments": {"city": "Lyon"}},
                ]
            ),
        ),
        root("d-dup", "Paris", query="  WHAT is the   weather in PARIS today?"),
        pair("r1-fr", "r1", "Paris"),
        pair("r2-fr", "r2", "Lyon"),
        pair("x-fr", "nope", "Paris"),
        pair("multi-fr", "d-multi", "Paris"),
        pair("chain-de", "r1-fr", "Paris", "de"),
        pair("r3-fr-tools", "r3", "Nice", tools=TOOLS.replace(", ", ",")),
        pair("r3-fr-answers", "r3", "Nice", answers=answers("Nice").replace(" ", "")),
        pair("r3-fr", "r3", "Nice"),
        pair("r1-fr-bis", "r1", "Paris", query="Quel temps à Paris ?"),
        pair("r4-fr", "r4", "Lille", query="quel temps fait-il à LYON aujourd'hui ?"),
        pair("7-de", 7, "Brest", "de", query="Wie ist das Wetter in Brest heute?"),
    ]
    return rows


def run(
    write_lines: WriteLines, tmp_path: Path, seed: int = 11, name: str = "out"
) -> PrepareResult:
    raw = write_lines(raw_rows())
    return prepare(
        raw, tmp_path / name, seed=seed, split_sizes=SIZES, min_query_chars=5, max_query_chars=100
    )


def ids(result: PrepareResult, split: str) -> list[str]:
    return [example.example_id for example in result.splits[split]]


def test_drop_reasons_are_counted_exactly(write_lines: WriteLines, tmp_path: Path) -> None:
    summary = run(write_lines, tmp_path).summary
    nonzero = {
        language: {reason: n for reason, n in counts.items() if n}
        for language, counts in summary["dropped"].items()
    }
    assert nonzero == {
        "en": {
            "missing_query": 1,
            "query_too_short": 1,
            "query_too_long": 1,
            "invalid_tools_json": 1,
            "invalid_tools_shape": 1,
            "invalid_answers_json": 1,
            "invalid_answers_shape": 2,
            "multi_call_answer": 1,
            "duplicate_query": 1,
        },
        "fr": {
            "missing_root": 2,
            "tools_mismatch": 1,
            "answers_mismatch": 1,
            "duplicate_pair": 1,
            "duplicate_query": 1,
        },
        "de": {"missing_root": 1},
    }
    assert summary["read"] == {"de": 2, "en": 16, "fr": 9}
    assert summary["kept"] == {"de": 1, "en": 6, "fr": 3}
    assert summary["unassigned"] == {"de": 0, "en": 0, "fr": 0}
    for language in summary["languages"]:
        accounted = (
            sum(summary["dropped"][language].values())
            + summary["kept"][language]
            + summary["unassigned"][language]
        )
        assert accounted == summary["read"][language]
    assert list(summary["dropped"]["en"]) == list(DROP_REASONS)


def test_splits_have_the_requested_roots_and_pairs_follow(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    result = run(write_lines, tmp_path)
    all_roots = {"r1", "r2", "r3", "r4", "r5", "7"}
    seen: set[str] = set()
    for split, size in SIZES.items():
        examples = result.splits[split]
        roots = [e for e in examples if e.source_example_id is None]
        pairs = [e for e in examples if e.source_example_id is not None]
        assert len(roots) == size
        assert examples[: len(roots)] == tuple(roots)  # roots first, then their pairs
        root_order = [e.example_id for e in roots]
        assert all(p.source_example_id in root_order for p in pairs)
        positions = [root_order.index(str(p.source_example_id)) for p in pairs]
        assert positions == sorted(positions)
        seen.update(root_order)
        assert result.summary["splits"][split]["en"] == size
    assert seen == all_roots
    kept_pairs = {
        e.example_id for split in SIZES for e in result.splits[split] if e.source_example_id
    }
    assert kept_pairs == {"r1-fr", "r2-fr", "r3-fr", "7-de"}


def test_rows_are_native_and_readable(write_lines: WriteLines, tmp_path: Path) -> None:
    result = run(write_lines, tmp_path)
    for split, path in result.split_paths.items():
        assert path == tmp_path / "out" / f"{split}.jsonl"
        if result.splits[split]:
            assert read_test_split(path).examples == result.splits[split]
    example = next(e for s in SIZES for e in result.splits[s] if e.example_id == "r3")
    assert example.tools == json.loads(TOOLS)
    assert example.gold_call == {"name": "get_weather", "arguments": {"city": "Nice"}}
    line = json.loads(result.split_paths["train"].read_text().splitlines()[0])
    assert line["schema_version"] == "sommelier_mlflow.test_example.v1"
    assert len(line["gold_calls"]) == 1


def test_same_seed_same_bytes_other_seed_other_split(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    first = run(write_lines, tmp_path, seed=11, name="a")
    again = run(write_lines, tmp_path, seed=11, name="b")
    other = run(write_lines, tmp_path, seed=12, name="c")
    for name in ("train.jsonl", "validation.jsonl", "test.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert [ids(first, s) for s in SIZES] == [ids(again, s) for s in SIZES]
    assert [ids(first, s) for s in SIZES] != [ids(other, s) for s in SIZES]
    assert other.summary["dropped"] == first.summary["dropped"]


def test_drop_summary_file(write_lines: WriteLines, tmp_path: Path) -> None:
    raw = write_lines(raw_rows())
    result = prepare(
        raw, tmp_path / "o", seed=5, split_sizes=SIZES, min_query_chars=5, max_query_chars=100
    )
    on_disk = json.loads(result.drop_summary_path.read_text())
    assert result.drop_summary_path == tmp_path / "o" / "drop_summary.json"
    assert on_disk == result.summary
    assert on_disk["schema_version"] == DROP_SUMMARY_SCHEMA
    assert on_disk["seed"] == 5
    assert on_disk["input"] == {
        "file": raw.name,
        "sha256": hashlib.sha256(raw.read_bytes()).hexdigest(),
        "rows": 27,
    }
    assert on_disk["requested_split_sizes"] == SIZES
    assert on_disk["query_chars"] == {"min": 5, "max": 100}
    assert on_disk["splits"]["train"] == {
        "de": on_disk["splits"]["train"]["de"],
        "en": 3,
        "fr": on_disk["splits"]["train"]["fr"],
    }


def test_surplus_roots_and_their_pairs_are_unassigned(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    rows = [root("a", "Paris"), root("b", "Lyon"), root("c", "Nice"), pair("c-fr", "c", "Nice")]
    sizes = {"train": 1, "validation": 0, "test": 1}
    result = prepare(write_lines(rows), tmp_path / "o", seed=3, split_sizes=sizes)
    placed = set(ids(result, "train") + ids(result, "test"))
    unassigned_root = ({"a", "b", "c"} - placed).pop()
    assert result.summary["unassigned"]["en"] == 1
    assert result.summary["unassigned"]["fr"] == (1 if unassigned_root == "c" else 0)
    assert (tmp_path / "o" / "validation.jsonl").read_bytes() == b""


def test_cross_split_duplicate(write_lines: WriteLines, tmp_path: Path) -> None:
    # Two roots, one per split: the French row of "a" repeats root "b"'s text,
    # so it would put b's query into a's split.
    rows = [
        root("a", "Paris"),
        root("b", "Lyon"),
        pair("a-fr", "a", "Paris", query="What is the weather in LYON today?"),
    ]
    sizes = {"train": 1, "validation": 0, "test": 1}
    result = prepare(write_lines(rows), tmp_path / "o", seed=0, split_sizes=sizes)
    assert result.summary["dropped"]["fr"]["cross_split_duplicate"] == 1
    assert result.summary["kept"] == {"en": 2, "fr": 0}


def test_translation_identical_to_its_root_is_kept(write_lines: WriteLines, tmp_path: Path) -> None:
    rows = [
        root("a", "Paris"),
        pair("a-fr", "a", "Paris", query="What is the weather in Paris today?"),
    ]
    sizes = {"train": 0, "validation": 0, "test": 1}
    result = prepare(write_lines(rows), tmp_path / "o", seed=0, split_sizes=sizes)
    assert ids(result, "test") == ["a", "a-fr"]


def test_too_few_roots_writes_nothing(write_lines: WriteLines, tmp_path: Path) -> None:
    raw = write_lines(raw_rows())
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="only 6 valid root rows, but the split sizes ask for 7"):
        prepare(
            raw,
            out,
            seed=1,
            split_sizes={"train": 5, "validation": 1, "test": 1},
            min_query_chars=5,
            max_query_chars=100,
        )
    assert not out.exists()
    # Without the length limits the short and long queries are valid roots too.
    with pytest.raises(ConfigError, match=re.escape("multi_call_answer 1, duplicate_query 1.")):
        prepare(raw, out, seed=1, split_sizes={"train": 9, "validation": 0, "test": 0})
    assert not out.exists()


def test_malformed_raw_file_writes_nothing(write_lines: WriteLines, tmp_path: Path) -> None:
    raw = write_lines([root("a", "Paris"), "{not json\n"])
    out = tmp_path / "out"
    with pytest.raises(DataError, match=f"^{raw}:2: "):
        prepare(raw, out, seed=1, split_sizes=SIZES)
    assert not out.exists()


def test_existing_outputs_survive_a_failed_run(write_lines: WriteLines, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "train.jsonl").write_bytes(b"previous\n")
    with pytest.raises(ConfigError):
        prepare(write_lines([root("a", "Paris")]), out, seed=1, split_sizes=SIZES)
    assert sorted(p.name for p in out.iterdir()) == ["train.jsonl"]
    assert (out / "train.jsonl").read_bytes() == b"previous\n"


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        ({"query": "q", "tools": TOOLS, "answers": "[]"}, "no usable 'example_id' or 'id'"),
        (root("a", "Paris", language="mcnemar"), "reserved"),
        (root("a", "Paris", source_example_id=1.5), "source_example_id must be"),
        (root("a", "Paris", source_example_id="a"), "points at the row itself"),
        (root(True, "Paris"), "no usable"),
    ],
)
def test_bad_raw_rows_name_their_line(
    write_lines: WriteLines, tmp_path: Path, row: dict[str, Any], fragment: str
) -> None:
    raw = write_lines([root("z", "Lyon"), row])
    with pytest.raises(DataError) as info:
        prepare(raw, tmp_path / "o", seed=1, split_sizes=SIZES)
    assert str(info.value).startswith(f"{raw}:2: ") and fragment in str(info.value)
    assert not (tmp_path / "o").exists()


def test_duplicate_raw_id(write_lines: WriteLines, tmp_path: Path) -> None:
    raw = write_lines([root(1, "Paris"), root("1", "Lyon")])
    with pytest.raises(DataError, match=f"^{raw}:2: duplicate example id '1'"):
        prepare(raw, tmp_path / "o", seed=1, split_sizes=SIZES)


def test_translation_in_its_roots_language(write_lines: WriteLines, tmp_path: Path) -> None:
    raw = write_lines([root("a", "Paris"), pair("a-en", "a", "Paris", "en")])
    with pytest.raises(DataError, match=f"^{raw}:2: .*same language"):
        prepare(raw, tmp_path / "o", seed=1, split_sizes=SIZES)


def test_empty_raw_file(write_lines: WriteLines, tmp_path: Path) -> None:
    raw = write_lines([])
    with pytest.raises(DataError, match="empty"):
        prepare(raw, tmp_path / "o", seed=1, split_sizes=SIZES)


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"seed": True}, "seed"),
        ({"seed": -1}, "seed"),
        ({"split_sizes": {"train": 1, "test": 1}}, "split_sizes must map"),
        ({"split_sizes": {"train": 1, "validation": -1, "test": 1}}, "non-negative"),
        ({"split_sizes": {"train": 0, "validation": 0, "test": 0}}, "all zero"),
        ({"min_query_chars": 10, "max_query_chars": 5}, "larger than"),
        ({"max_query_chars": 2.5}, "max_query_chars"),
    ],
)
def test_bad_configuration(tmp_path: Path, kwargs: dict[str, Any], fragment: str) -> None:
    arguments: dict[str, Any] = {"seed": 1, "split_sizes": SIZES}
    arguments.update(kwargs)
    # The configuration is checked before the (missing) file is even opened.
    with pytest.raises(ConfigError, match=fragment):
        prepare(tmp_path / "missing.jsonl", tmp_path / "o", **arguments)


# --------------------------------------------------------------- --keep-multi-call

MULTI_ANSWERS = json.dumps(
    [
        {"name": "get_weather", "arguments": {"city": "Paris"}},
        {"name": "get_weather", "arguments": {"city": "Lyon"}},
    ]
)


def multi_rows() -> list[dict[str, Any]]:
    return [
        root("one", "Paris"),
        root("two", "Lyon", query="Weather in Paris and in Lyon?", answers=MULTI_ANSWERS),
        root("none", "X", query="Tell me a joke about clouds", answers="[]"),
        root("bad", "X", answers=json.dumps([{"name": "get_weather", "arguments": {}}, 3])),
        pair(
            "two-fr", "two", "Lyon", query="Quel temps à Paris et à Lyon ?", answers=MULTI_ANSWERS
        ),
        pair("none-fr", "none", "X", query="Raconte une blague sur les nuages", answers="[]"),
        # A translation whose answers differ by one byte still breaks the exact-root rule.
        pair("two-de", "two", "Lyon", "de", answers=MULTI_ANSWERS.replace(", ", ",")),
    ]


def test_default_still_drops_multi_call_and_empty_answers(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    raw = write_lines(multi_rows())
    result = prepare(
        raw, tmp_path / "o", seed=1, split_sizes={"train": 0, "validation": 0, "test": 1}
    )
    # "bad" has two elements, so the length check drops it before its shape is looked at
    assert result.summary["dropped"]["en"]["multi_call_answer"] == 2
    assert result.summary["dropped"]["en"]["invalid_answers_shape"] == 1  # "none"
    assert "keep_multi_call" not in result.summary
    assert [e.gold_calls for e in result.splits["test"]] == [
        ({"name": "get_weather", "arguments": {"city": "Paris"}},)
    ]


def test_keep_multi_call_keeps_parallel_and_abstention_rows(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    raw = write_lines(multi_rows())
    result = prepare(
        raw,
        tmp_path / "o",
        seed=1,
        split_sizes={"train": 0, "validation": 0, "test": 3},
        keep_multi_call=True,
    )
    summary = result.summary
    assert summary["keep_multi_call"] is True
    assert summary["dropped_total"]["multi_call_answer"] == 0
    assert summary["dropped"]["en"]["invalid_answers_shape"] == 1  # a bad element still drops
    assert summary["dropped"]["de"]["answers_mismatch"] == 1  # exact-root rule unchanged
    calls = {e.example_id: len(e.gold_calls) for e in result.splits["test"]}
    assert calls == {"one": 1, "two": 2, "none": 0, "two-fr": 2, "none-fr": 0}
    split = read_test_split(result.split_paths["test"])
    assert {e.example_id: len(e.gold_calls) for e in split.examples} == calls
    on_disk = json.loads(result.drop_summary_path.read_text())
    assert on_disk["keep_multi_call"] is True


def test_keep_multi_call_must_be_a_boolean(write_lines: WriteLines, tmp_path: Path) -> None:
    raw = write_lines(multi_rows())
    with pytest.raises(ConfigError, match="keep_multi_call"):
        prepare(raw, tmp_path / "o", seed=1, split_sizes=SIZES, keep_multi_call="yes")  # type: ignore[arg-type]
