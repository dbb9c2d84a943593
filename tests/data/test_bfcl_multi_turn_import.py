"""import-bfcl --categories multi_turn_*: each BFCL multi-turn question becomes one multi-turn row.

The first tests import BFCL v4's own data (the pinned ``bfcl-eval`` wheel,
unpacked by ``tests/support/bfcl_reference.py``); the others write small
BFCL-shaped folders to show what is skipped, counted and named.
"""

from __future__ import annotations

import json
import runpy
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import (
    BFCL_MULTI_TURN_CATEGORIES,
    BFCL_MULTI_TURN_FUNC_DOCS,
    DatasetRef,
    MultiTurnProblem,
    TestExample,
    TestSplit,
    dataset_records,
    format_examples,
    import_bfcl,
    is_multi_turn,
    read_dataset_records,
    read_test_split,
    sample_examples,
    write_test_split,
)
from sommelier_mlflow.errors import ConfigError, DataError, InputError
from tests.data.data_helpers import WEATHER_TOOL, WriteLines, native_row
from tests.support.bfcl_reference import bfcl_package_root
from tests.support.chat_templates import specimen_tokenizer


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def bfcl_data() -> Path:
    return bfcl_package_root() / "bfcl_eval" / "data"


@pytest.fixture(scope="module")
def imported(bfcl_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bfcl") / "multi_turn.jsonl"
    import_bfcl(bfcl_data, out, categories=list(BFCL_MULTI_TURN_CATEGORIES))
    return out


@pytest.fixture(scope="module")
def split(imported: Path) -> TestSplit:
    return read_test_split(imported, slice_by=["category"])


def test_the_four_categories_import_as_800_rows_carrying_turns_tools_answers_and_environment(
    bfcl_data: Path, imported: Path
) -> None:
    rows = _lines(imported)
    assert Counter(row["category"] for row in rows) == dict.fromkeys(
        BFCL_MULTI_TURN_CATEGORIES, 200
    )
    summary = json.loads(imported.with_name("multi_turn.drop_summary.json").read_text())
    assert summary["kept"] == dict.fromkeys(BFCL_MULTI_TURN_CATEGORIES, 200)
    assert "dropped_questions" not in summary
    assert set(summary["func_docs"]) == {
        "gorilla_file_system.json",
        "math_api.json",
        "message_api.json",
        "posting_api.json",
        "ticket_api.json",
        "trading_bot.json",
        "travel_booking.json",
        "vehicle_control.json",
    }
    by_id = {row["example_id"]: row for row in rows}
    functions = {
        name: {doc["name"] for doc in _lines(bfcl_data / "multi_turn_func_doc" / file)}
        for name, file in BFCL_MULTI_TURN_FUNC_DOCS.items()
    }
    for category in BFCL_MULTI_TURN_CATEGORIES:
        name = f"BFCL_v4_{category}.json"
        questions = _lines(bfcl_data / name)
        answers = _lines(bfcl_data / "possible_answer" / name)
        for question, answer in zip(questions, answers, strict=True):
            row = by_id[question["id"]]
            turns = row["multi_turn"]
            assert row["messages"] == question["question"][0] == turns["user_turns"][0]
            assert turns["user_turns"] == question["question"]
            assert turns["gold_turns"] == answer["ground_truth"]  # verbatim strings
            assert row["gold_calls"] == [] and row["language"] == "en"
            assert turns["environment"] == {
                "initial_config": question["initial_config"],
                "involved_classes": question["involved_classes"],
                "long_context": category == "multi_turn_long_context",
            }
            # Offered: the classes' functions, minus the excluded, minus the held-back ones.
            held = question.get("missed_function", {})
            assert {
                turn: [tool["name"] for tool in tools]
                for turn, tools in turns["added_tools"].items()
            } == held
            every = {name for cls in question["involved_classes"] for name in functions[cls]}
            assert {tool["name"] for tool in row["tools"]} == every - set(
                question.get("excluded_function", [])
            ) - {name for names in held.values() for name in names}
    # miss_func_0 holds `sort` back until turn 3 (an empty user turn) and never offers `cp`.
    row = by_id["multi_turn_miss_func_0"]
    names = {tool["name"] for tool in row["tools"]}
    assert "sort" not in names and "cp" not in names and "cd" in names
    (added,) = row["multi_turn"]["added_tools"]["3"]
    assert added["name"] == "sort" and added["parameters"]["type"] == "object"  # JSON Schema
    assert row["multi_turn"]["user_turns"][3] == []
    assert row["multi_turn"]["gold_turns"][3] == ["sort('final_report.pdf')"]


def test_the_class_to_doc_file_mapping_is_bfcls_own(bfcl_data: Path) -> None:
    constants = runpy.run_path(str(bfcl_data.parent / "constants" / "executable_backend_config.py"))
    theirs = constants["MULTI_TURN_FUNC_DOC_FILE_MAPPING"]
    assert {name: theirs[name] for name in BFCL_MULTI_TURN_FUNC_DOCS} == BFCL_MULTI_TURN_FUNC_DOCS


def test_the_split_reads_back_row_for_row_with_its_category_slice(
    imported: Path, split: TestSplit
) -> None:
    assert [example.to_json() for example in split.examples] == _lines(imported)
    assert all(is_multi_turn(example) for example in split.examples)
    assert {dict(e.slice_values)["category"] for e in split.examples} == set(
        BFCL_MULTI_TURN_CATEGORIES
    )
    # --max-examples: a sample stratified by category keeps the rows whole.
    sample = sample_examples(split.examples, 8, seed=3, slice_by=["category"], scoring="calls")
    assert len(sample.examples) == 8
    assert [dict(e.slice_values)["category"] for e in sample.examples].count("multi_turn_base") == 2
    kept = {example.example_id: example for example in split.examples}
    assert all(example == kept[example.example_id] for example in sample.examples)


def test_every_multi_turn_row_round_trips_through_mlflow_dataset_records(split: TestSplit) -> None:
    records = dataset_records(split.examples, source=split.path)
    first = records[0]
    # The expected calls are an answer: an expectation, never an input a model is shown.
    assert "gold_turns" not in first["inputs"]["multi_turn"]
    assert first["expectations"]["gold_turns"] == split.examples[0].multi_turn["gold_turns"]
    stored = [{"record_id": f"r-{index}", **record} for index, record in enumerate(records)]
    ref = DatasetRef(name="bfcl", dataset_id="d-" + "0" * 32, digest="00")
    back = read_dataset_records(
        stored, source="mlflow-dataset:bfcl", dataset=ref, slice_by=["category"]
    )
    assert sorted(split.examples, key=lambda e: e.example_id) == list(back.examples)


def test_formatting_renders_the_first_turn_as_a_conversation_row_and_keeps_the_turns(
    split: TestSplit, tmp_path: Path
) -> None:
    chosen = [split.examples[0], split.examples[250]]  # a base and a miss_func question
    tokenizer = specimen_tokenizer(tmp_path / "tok", "qwen25")
    formatted = format_examples(chosen, tokenizer)
    # The first step's prompt is the one the same messages and tools get as a conversation row.
    plain = format_examples([replace(chosen[0], multi_turn=None)], tokenizer)
    assert formatted[0].prompt_sha256 == plain[0].prompt_sha256
    assert chosen[0].messages is not None
    assert chosen[0].messages[0]["content"] in formatted[0].prompt_text
    out = write_test_split(tmp_path / "formatted.jsonl", formatted)
    back = read_test_split(out, slice_by=["category"])
    assert [e.multi_turn for e in back.examples] == [e.multi_turn for e in chosen]
    assert [e.prompt_sha256 for e in back.examples] == [e.prompt_sha256 for e in formatted]


# --- What a multi-turn row must hold -------------------------------------------------------

FIRST = [{"role": "user", "content": "Go to the documents folder."}]
SECOND = [{"role": "user", "content": "And list it."}]


def _multi_turn(**overrides: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "user_turns": [FIRST, SECOND],
        "added_tools": {},
        "gold_turns": [["get_weather(city='Paris')"], []],
        "environment": {
            "initial_config": {"WeatherAPI": {}},
            "involved_classes": ["WeatherAPI"],
            "long_context": False,
        },
    }
    value.update(overrides)
    return value


def _row(**overrides: Any) -> dict[str, Any]:
    row = native_row("q-1", gold_calls=[], messages=FIRST, multi_turn=_multi_turn())
    del row["query"]
    row.update(overrides)
    return row


def test_a_multi_turn_row_is_an_ordinary_row_plus_its_field(write_lines: WriteLines) -> None:
    (example,) = read_test_split(write_lines([_row(), native_row("plain")])).examples[:1]
    assert is_multi_turn(example) and example.multi_turn == _multi_turn()
    assert example.query == FIRST[0]["content"]  # the label of a conversation row
    plain = read_test_split(write_lines([native_row("plain")])).examples[0]
    assert not is_multi_turn(plain) and "multi_turn" not in plain.to_json()


SECOND_TOOL = {"name": "get_time", "parameters": {"type": "object", "properties": {}}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"multi_turn": []}, "'multi_turn' must be an object with exactly"),
        ({"multi_turn": {**_multi_turn(), "extra": 1}}, "'multi_turn' must be an object"),
        ({"multi_turn": _multi_turn(user_turns=[])}, "non-empty list of turns"),
        (
            {"multi_turn": _multi_turn(user_turns=[FIRST, [{"role": "assistant", "content": ""}]])},
            "'multi_turn.user_turns'[1] message 0 must be exactly",
        ),
        ({"multi_turn": _multi_turn(user_turns=[FIRST, "hi"])}, "must be a list of user messages"),
        ({"messages": SECOND}, "'messages' must be the first user turn"),
        ({"gold_calls": [{"name": "get_weather", "arguments": {}}]}, "'gold_calls' must be []"),
        ({"multi_turn": _multi_turn(added_tools={"2": [SECOND_TOOL]})}, "not a turn index"),
        ({"multi_turn": _multi_turn(added_tools={"01": [SECOND_TOOL]})}, "not a turn index"),
        ({"multi_turn": _multi_turn(added_tools={"-1": [SECOND_TOOL]})}, "not a turn index"),
        ({"multi_turn": _multi_turn(added_tools={"1": []})}, "non-empty list of tools"),
        (
            {"multi_turn": _multi_turn(added_tools={"1": [WEATHER_TOOL]})},
            "tool name 'get_weather' is offered twice",
        ),
        ({"multi_turn": _multi_turn(gold_turns=[[]])}, "one list of call strings per user turn"),
        ({"multi_turn": _multi_turn(gold_turns=[[{}], []])}, "one list of call strings"),
        (
            {"multi_turn": _multi_turn(environment={"initial_config": {}})},
            "'multi_turn.environment' must be an object with exactly",
        ),
        (
            {
                "multi_turn": _multi_turn(
                    environment={"initial_config": [], "involved_classes": ["A"], "long_context": 0}
                )
            },
            "initial_config' must be an object",
        ),
        (
            {
                "multi_turn": _multi_turn(
                    environment={"initial_config": {}, "involved_classes": [], "long_context": 0}
                )
            },
            "involved_classes' must be a non-empty list",
        ),
        (
            {
                "multi_turn": _multi_turn(
                    environment={"initial_config": {}, "involved_classes": ["A"], "long_context": 0}
                )
            },
            "long_context' must be true or false",
        ),
    ],
)
def test_a_bad_multi_turn_row_is_refused_naming_file_line_and_field(
    write_lines: WriteLines, change: dict[str, Any], message: str
) -> None:
    path = write_lines([native_row("plain"), _row(**change)])
    with pytest.raises(DataError) as info:
        read_test_split(path)
    assert info.value.line == 2 and info.value.path == str(path)
    assert message in str(info.value)


def test_the_constructor_checks_the_field_too() -> None:
    with pytest.raises(InputError, match="'messages' must be the first user turn"):
        TestExample(
            "q", "en", "", [WEATHER_TOOL], gold_calls=[], messages=SECOND, multi_turn=_multi_turn()
        )
    added = TestExample(
        "q",
        "en",
        "",
        [WEATHER_TOOL],
        gold_calls=[],
        messages=FIRST,
        multi_turn=_multi_turn(added_tools={"1": [SECOND_TOOL]}),
    )
    assert added.to_json()["multi_turn"]["added_tools"] == {"1": [SECOND_TOOL]}


# --- Questions that are skipped, counted and named -----------------------------------------


def _doc(name: str, *params: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"{name} in the file system.",
        "parameters": {
            "type": "dict",
            "properties": {param: {"type": "string"} for param in params},
            "required": list(params),
        },
        "response": {"type": "dict", "properties": {}},
    }


def _question(qid: str, turns: list[Any], **fields: Any) -> dict[str, Any]:
    return {
        "id": qid,
        "question": turns,
        "initial_config": {"GorillaFileSystem": {"root": {}}},
        "path": [],
        "involved_classes": ["GorillaFileSystem"],
        **fields,
    }


def _write(path: Path, rows: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


GOOD = _question("multi_turn_base_0", [FIRST, SECOND], excluded_function=["rm"])
GOOD_ANSWER = ["cd(folder='documents')", "sort('report.txt')"], ["ls()"]
BAD: list[tuple[dict[str, Any], list[Any], str, str]] = [
    (
        _question("multi_turn_base_1", [FIRST, SECOND]),
        [["cd folder='documents'"], []],
        "unparsable_ground_truth",
        "turn 0: \"cd folder='documents'\" is not Python call syntax",
    ),
    (
        _question("multi_turn_base_2", [FIRST], involved_classes=["WeatherAPI"]),
        [[]],
        "unknown_class",
        "involved class 'WeatherAPI' has no function docs",
    ),
    (
        _question("multi_turn_base_3", [FIRST, SECOND]),
        [[]],
        "turn_count_mismatch",
        "the question has 2 turns and its ground truth 1 turns",
    ),
    (
        _question("multi_turn_base_4", [FIRST, []], missed_function={"1": ["chmod"]}),
        [[], []],
        "unknown_held_back_function",
        "missed_function['1'] names 'chmod', which no involved class has",
    ),
    (
        _question("multi_turn_base_5", [FIRST, SECOND]),
        [["cd(folder=open('x'))"], []],
        "unparsable_ground_truth",
        "has an argument that is not a literal",
    ),
    (
        _question("multi_turn_base_6", [FIRST, SECOND]),
        [["cd(path='x')"], []],
        "unparsable_ground_truth",
        "passes 'path', which is not a parameter of 'cd'",
    ),
    (
        _question("multi_turn_base_7", [[], SECOND]),
        [[], []],
        "unreadable_question",
        "turn 0 is empty but adds no function",
    ),
    (
        _question("multi_turn_base_9", [FIRST, SECOND], missed_function={"1": ["sort"]}),
        [[], ["sort('report.txt')"]],
        "unreadable_question",
        "turn 1 is not empty but is where held-back functions arrive",
    ),
]


@pytest.fixture
def small_data(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    name = "BFCL_v4_multi_turn_base.json"
    _write(folder / name, [GOOD, *(question for question, *_ in BAD)])
    _write(
        folder / "possible_answer" / name,
        [
            {"id": GOOD["id"], "ground_truth": list(GOOD_ANSWER)},
            *({"id": q["id"], "ground_truth": gold} for q, gold, *_ in BAD),
        ],
    )
    docs = [_doc("cd", "folder"), _doc("ls"), _doc("sort", "file_name"), _doc("rm", "file_name")]
    _write(folder / "multi_turn_func_doc" / "gorilla_file_system.json", docs)
    return folder


def test_questions_that_cannot_be_played_are_counted_and_named_in_the_drop_summary(
    small_data: Path, tmp_path: Path
) -> None:
    result = import_bfcl(small_data, tmp_path / "mt.jsonl", categories=["multi_turn_base"])
    (row,) = result.rows
    assert row["example_id"] == "multi_turn_base_0"
    assert [tool["name"] for tool in row["tools"]] == ["cd", "ls", "sort"]  # rm is excluded
    summary = json.loads(result.drop_summary_path.read_text(encoding="utf-8"))
    dropped = summary["dropped"]["multi_turn_base"]
    assert dropped["unparsable_ground_truth"] == 3
    assert (dropped["unknown_class"], dropped["turn_count_mismatch"]) == (1, 1)
    assert (dropped["unknown_held_back_function"], dropped["unreadable_question"]) == (1, 2)
    assert summary["read"] == {"multi_turn_base": 9}
    assert summary["kept"] == {"multi_turn_base": 1}
    named = summary["dropped_questions"]
    assert [(item["id"], item["line"], item["reason"]) for item in named] == [
        (question["id"], line, reason) for line, (question, _, reason, _) in enumerate(BAD, 2)
    ]
    for item, (_, _, _, detail) in zip(named, BAD, strict=True):
        assert detail in item["detail"]
    read_test_split(result.split_path, slice_by=["category"])  # an ordinary split


@pytest.mark.parametrize(
    ("call", "detail"),
    [
        ("cd(*names)", "unpacks a sequence (*)"),
        ("cd(**names)", "unpacks a mapping (**)"),
        ("cd(folder='a', folder='b')", "passes 'folder' twice"),
        ("cd('a', 'b')", "passes 2 positional arguments; 'cd' has 1"),
        ("os.cd(folder='a')", "is not one call of a function by its name"),
        ("cd(folder='a'); ls()", "is not Python call syntax"),
        ("chmod(mode='x')", "calls 'chmod', which none of the involved classes has"),
        ("cd(folder={1, 2})", "is not a JSON value"),
        ("cd(folder=1e999)", "is not a JSON value"),
    ],
)
def test_a_ground_truth_call_is_read_without_evaluating_it_and_refused_when_it_is_no_plain_call(
    small_data: Path, tmp_path: Path, call: str, detail: str
) -> None:
    name = "BFCL_v4_multi_turn_base.json"
    question = _question("multi_turn_base_1", [FIRST, SECOND])
    _write(small_data / name, [GOOD, question])
    _write(
        small_data / "possible_answer" / name,
        [
            {"id": GOOD["id"], "ground_truth": list(GOOD_ANSWER)},
            {"id": question["id"], "ground_truth": [["ls()"], [call]]},
        ],
    )
    result = import_bfcl(small_data, tmp_path / "mt.jsonl", categories=["multi_turn_base"])
    (dropped,) = result.summary["dropped_questions"]
    assert dropped["reason"] == "unparsable_ground_truth"
    assert dropped["detail"].startswith(f"turn 1: {call!r} ") and detail in dropped["detail"]


def test_strict_stops_at_the_first_skipped_question_with_exit_2(
    small_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mt.jsonl"
    argv = ["import-bfcl", str(small_data), "--categories", "multi_turn_base", "--out", str(out)]
    assert main([*argv, "--strict"]) == 2
    error = capsys.readouterr().err
    assert "BFCL_v4_multi_turn_base.json:2" in error
    assert "'multi_turn_base_1' is skipped: unparsable_ground_truth" in error
    assert not out.exists()
    assert main(argv) == 0
    assert "multi_turn_base: 1 kept, 8 skipped" in capsys.readouterr().out


def test_answers_that_do_not_line_up_with_the_questions_stop_the_import(
    small_data: Path, tmp_path: Path
) -> None:
    answers = small_data / "possible_answer" / "BFCL_v4_multi_turn_base.json"
    rows = _lines(answers)
    _write(answers, [rows[1], rows[0], *rows[2:]])
    with pytest.raises(DataError, match="does not line up with question 'multi_turn_base_0'"):
        import_bfcl(small_data, tmp_path / "mt.jsonl", categories=["multi_turn_base"])
    assert not (tmp_path / "mt.jsonl").exists()


def test_the_execution_check_hook_drops_what_it_names_with_its_reason(
    small_data: Path, tmp_path: Path
) -> None:
    name = "BFCL_v4_multi_turn_base.json"
    for path, row in (
        (small_data / name, {**GOOD, "id": "multi_turn_base_8"}),
        (
            small_data / "possible_answer" / name,
            {"id": "multi_turn_base_8", "ground_truth": [[], []]},
        ),
    ):
        _write(path, [*_lines(path), row])
    seen: list[str] = []

    def check(row: Mapping[str, Any]) -> MultiTurnProblem | None:
        seen.append(row["example_id"])
        if row["example_id"] != "multi_turn_base_0":
            return None
        return MultiTurnProblem("ground_truth_does_not_execute", "turn 1: ls() failed")

    out = tmp_path / "mt.jsonl"
    result = import_bfcl(small_data, out, categories=["multi_turn_base"], check_multi_turn=check)
    assert seen == ["multi_turn_base_0", "multi_turn_base_8"]  # only rows the static checks kept
    assert [row["example_id"] for row in result.rows] == ["multi_turn_base_8"]
    assert result.summary["dropped"]["multi_turn_base"]["ground_truth_does_not_execute"] == 1
    assert result.summary["dropped_questions"][0] == {
        "category": "multi_turn_base",
        "id": "multi_turn_base_0",
        "line": 1,
        "reason": "ground_truth_does_not_execute",
        "detail": "turn 1: ls() failed",
    }
    with pytest.raises(DataError, match="ground_truth_does_not_execute: turn 1: ls"):
        import_bfcl(
            small_data, out, categories=["multi_turn_base"], check_multi_turn=check, strict=True
        )
    with pytest.raises(ConfigError, match="gave reason 'oops'"):
        import_bfcl(
            small_data,
            out,
            categories=["multi_turn_base"],
            check_multi_turn=lambda row: MultiTurnProblem("oops", "?"),
        )
