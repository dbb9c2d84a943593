"""The bundled demo dataset is reproducible and shaped the way prepare expects."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "demo" / "make_dataset.py"
COMMITTED = REPO / "examples" / "demo" / "data" / "raw.jsonl"

TYPE_CHECKS = {
    "str": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, float),
    "bool": lambda v: isinstance(v, bool),
    "List[str]": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    "Dict[str, Any]": lambda v: isinstance(v, dict),
}


def _script() -> ModuleType:
    return load_script("examples/demo/make_dataset.py")


@cache
def _rows() -> tuple[dict[str, Any], ...]:
    with COMMITTED.open(encoding="utf-8") as handle:
        return tuple(json.loads(line) for line in handle)


def _norm(query: str) -> str:
    return " ".join(query.split()).lower()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_regenerating_with_defaults_reproduces_the_committed_bytes(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "raw.jsonl"
    result = _run("--out", str(out))
    assert result.returncode == 0, result.stderr
    assert out.read_bytes() == COMMITTED.read_bytes()
    # The atomic write leaves no temporary sibling behind.
    assert [p.name for p in out.parent.iterdir()] == ["raw.jsonl"]


def test_seed_controls_the_output() -> None:
    module = _script()
    first = module.render_jsonl(module.build_rows(seed=7, n_english=120))
    again = module.render_jsonl(module.build_rows(seed=7, n_english=120))
    other = module.render_jsonl(module.build_rows(seed=8, n_english=120))
    assert first == again
    assert first != other
    english = [row for row in module.build_rows(seed=7, n_english=120) if row["language"] == "en"]
    assert len(english) == 120


def test_too_few_english_rows_is_a_usage_error(tmp_path: Path) -> None:
    out = tmp_path / "raw.jsonl"
    result = _run("--out", str(out), "--n-english", "10")
    assert result.returncode == 2
    assert "--n-english" in result.stderr
    assert not out.exists()


def test_file_is_small_and_rows_have_the_raw_shape() -> None:
    assert COMMITTED.stat().st_size < 6_000_000
    rows = _rows()
    ids = [row["example_id"] for row in rows]
    assert len(ids) == len(set(ids))
    for row in rows:
        assert set(row) == {
            "example_id",
            "language",
            "source_example_id",
            "query",
            "tools",
            "answers",
        }
        assert row["language"] in {"en", "fr"}
        assert row["example_id"].startswith(row["language"] + "-")
        assert isinstance(row["tools"], str) and isinstance(row["answers"], str)
        assert row["query"].strip() and "{" not in row["query"]


def test_counts_fall_in_the_expected_ranges() -> None:
    rows = _rows()
    english = [row for row in rows if row["language"] == "en"]
    french = [row for row in rows if row["language"] == "fr"]
    assert len(english) == 2000
    translated = {row["source_example_id"] for row in french}
    assert 0.75 <= len(french) / len(english) <= 0.88
    untranslated = [row for row in english if row["example_id"] not in translated]
    assert len(untranslated) >= 200

    multi = [row for row in rows if len(json.loads(row["answers"])) > 1]
    multi_en = [row for row in multi if row["language"] == "en"]
    assert 20 <= len(multi_en) <= 40
    assert 1 <= len(multi) - len(multi_en) < len(multi_en)
    assert all(len(json.loads(row["answers"])) == 2 for row in multi)


def test_duplicate_queries_are_few_and_are_true_duplicates() -> None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in _rows():
        groups[(row["language"], _norm(row["query"]))].append(row)
    duplicated = [group for group in groups.values() if len(group) > 1]
    extra = sum(len(group) - 1 for group in duplicated)
    assert 5 <= extra <= 30
    assert any(group[0]["language"] == "fr" for group in duplicated)
    for group in duplicated:
        assert len({row["answers"] for row in group}) == 1
        assert len({row["query"] for row in group}) == len(group)


def test_every_translation_joins_its_root_byte_for_byte() -> None:
    by_id = {row["example_id"]: row for row in _rows()}
    french = [row for row in by_id.values() if row["language"] == "fr"]
    assert french
    for row in french:
        root = by_id[row["source_example_id"]]
        assert root["language"] == "en"
        assert root["source_example_id"] is None
        assert row["example_id"][3:] == root["example_id"][3:]
        assert row["tools"] == root["tools"]
        assert row["answers"] == root["answers"]
        assert _norm(row["query"]) != _norm(root["query"])
    assert all(
        row["source_example_id"] is None for row in by_id.values() if row["language"] == "en"
    )


def test_answers_call_offered_tools_with_declared_well_typed_arguments() -> None:
    for row in _rows():
        tools = json.loads(row["tools"])
        names = [tool["name"] for tool in tools]
        assert 2 <= len(tools) <= 5
        assert len(names) == len(set(names))
        schemas = {tool["name"]: tool["parameters"] for tool in tools}
        calls = json.loads(row["answers"])
        assert calls and all(set(call) == {"name", "arguments"} for call in calls)
        for call in calls:
            params = schemas[call["name"]]
            arguments = call["arguments"]
            assert set(arguments) <= set(params), row["example_id"]
            required = {name for name, spec in params.items() if "default" not in spec}
            assert required <= set(arguments), row["example_id"]
            for name, value in arguments.items():
                assert TYPE_CHECKS[params[name]["type"]](value), (row["example_id"], name)


def test_tools_are_balanced_and_optional_arguments_vary() -> None:
    gold_counts: Counter[str] = Counter()
    present: Counter[tuple[str, str]] = Counter()
    declared: dict[str, dict[str, Any]] = {}
    for row in _rows():
        for tool in json.loads(row["tools"]):
            declared[tool["name"]] = tool["parameters"]
        for call in json.loads(row["answers"]):
            gold_counts[call["name"]] += 1
            present.update((call["name"], arg) for arg in call["arguments"])
    assert len(gold_counts) >= 12
    assert min(gold_counts.values()) >= 100
    types = {spec["type"] for params in declared.values() for spec in params.values()}
    assert types == set(TYPE_CHECKS)
    for tool, params in declared.items():
        for name, spec in params.items():
            if "default" in spec:
                # Optional: sometimes given, sometimes left to its default.
                assert 0 < present[(tool, name)] < gold_counts[tool], (tool, name)


@pytest.mark.parametrize("query", ["  Hello   World ", "hello world", "HELLO WORLD"])
def test_normalised_query_matches_case_and_whitespace_variants(query: str) -> None:
    assert _script().normalise_query(query) == "hello world"
