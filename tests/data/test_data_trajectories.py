"""Multi-turn outputs made elsewhere: ``{example_id, turns}`` rows, read only as they should be.

Alone in a file (``read_trajectories``) or beside single-turn output rows
(``read_precomputed_outputs``, each row read by its shape and checked against
its example's kind).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.data import (
    PrecomputedOutputs,
    Trajectory,
    read_precomputed,
    read_precomputed_outputs,
    read_test_split,
    read_trajectories,
)
from tests.data.data_helpers import WriteLines, expect_error, native_row

FIRST = [{"role": "user", "content": "Go to the documents folder."}]
SECOND = [{"role": "user", "content": "And list it."}]


def trajectory(example_id: str = "q-1", turns: Any = None) -> dict[str, Any]:
    return {"example_id": example_id, "turns": [["cd(folder='documents')", "done"], []]} | (
        {} if turns is None else {"turns": turns}
    )


def multi_turn_row(example_id: str = "q-1") -> dict[str, Any]:
    row = native_row(example_id, gold_calls=[], messages=FIRST)
    del row["query"]
    row["multi_turn"] = {
        "user_turns": [FIRST, SECOND],
        "added_tools": {},
        "gold_turns": [["get_weather(city='Paris')"], []],
        "environment": {
            "initial_config": {},
            "involved_classes": ["WeatherAPI"],
            "long_context": False,
        },
    }
    return row


def test_trajectories_are_read_turn_by_turn_and_step_by_step(write_lines: WriteLines) -> None:
    path = write_lines([trajectory("q-1"), trajectory("q-2", [[""], ["a", "b", "c"]])])
    assert read_trajectories(path) == [
        Trajectory("q-1", (("cd(folder='documents')", "done"), ())),
        Trajectory("q-2", (("",), ("a", "b", "c"))),
    ]


@pytest.mark.parametrize(
    ("row", "fragment"),
    [
        (trajectory(turns=[]), "field 'turns' must be a non-empty list of turns"),
        (trajectory(turns="done"), "field 'turns' must be a non-empty list of turns"),
        (trajectory(turns=["done"]), "turns[0] must be a list of strings"),
        (trajectory(turns=[["a"], [1]]), "turns[1] must be a list of strings"),
        (trajectory(turns=[["a"], [None]]), "turns[1] must be a list of strings"),
        ({**trajectory(), "language": "en"}, "unknown field 'language'"),
        ({"turns": [[]]}, "missing field 'example_id'"),
        ({**trajectory(), "example_id": ""}, "field 'example_id' is empty"),
        (trajectory("q-0"), "duplicate example_id 'q-0' (first at line 1)"),
    ],
)
def test_a_malformed_trajectory_row_is_refused_naming_file_and_line(
    write_lines: WriteLines, row: dict[str, Any], fragment: str
) -> None:
    path = write_lines([trajectory("q-0"), row])
    expect_error(path, 2, fragment, reader=read_trajectories)


def test_a_file_mixing_outputs_and_trajectories_is_refused_by_both_readers(
    write_lines: WriteLines,
) -> None:
    output = {"example_id": "s-1", "raw_text": "{}"}
    mixed = write_lines([trajectory("q-1"), output])
    expect_error(mixed, 2, "line 1 is a trajectory row", reader=read_trajectories)
    expect_error(mixed, 1, "scored against a multi-turn split", reader=read_precomputed)
    other = write_lines([output, trajectory("q-1")])
    expect_error(other, 2, "but line 1 is an output row", reader=read_precomputed)
    expect_error(other, 1, "not a trajectory row", reader=read_trajectories)


def test_trajectories_are_json_lines_only_and_never_empty(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    table = tmp_path / "outputs.csv"
    table.write_text("example_id,turns\nq-1,[]\n", encoding="utf-8")
    expect_error(table, None, "JSON lines only", reader=read_trajectories)
    expect_error(write_lines([]), None, "empty", reader=read_trajectories)


def test_with_the_split_each_trajectory_answers_a_multi_turn_example_turn_for_turn(
    write_lines: WriteLines,
) -> None:
    split = read_test_split(write_lines([multi_turn_row("q-1"), native_row("s-1")]))
    read = partial(read_trajectories, split=split)
    assert read(write_lines([trajectory("q-1")])) == [
        Trajectory("q-1", (("cd(folder='documents')", "done"), ()))
    ]
    # Fewer turns: a run cut short (BFCL's forced quit), which the checker fails.
    assert read(write_lines([trajectory("q-1", [["a"]])])) == [Trajectory("q-1", (("a",),))]
    expect_error(
        write_lines([trajectory("q-1", [["a"], [], ["b"]])]),
        1,
        "'q-1' has 2 user turns but the trajectory holds 3",
        reader=read,
    )
    expect_error(
        write_lines([trajectory("s-1")]), 1, "'s-1' is not a multi-turn example", reader=read
    )
    expect_error(write_lines([trajectory("q-9")]), 1, "'q-9' is not in the test split", reader=read)


def test_one_file_mixing_both_kinds_is_read_row_by_row_against_the_split(
    write_lines: WriteLines,
) -> None:
    split = read_test_split(
        write_lines([native_row("s-1"), multi_turn_row("q-1"), native_row("s-2")])
    )
    path = write_lines(
        [
            {"example_id": "s-2", "raw_text": "{}"},
            trajectory("q-1"),
            {"example_id": "s-1", "raw_text": ""},
        ]
    )
    read = read_precomputed_outputs(path, split=split)
    assert isinstance(read, PrecomputedOutputs)
    assert [(row.example_id, row.raw_text) for row in read.outputs] == [("s-2", "{}"), ("s-1", "")]
    assert read.outputs == tuple(
        read_precomputed(
            write_lines(
                [{"example_id": "s-2", "raw_text": "{}"}, {"example_id": "s-1", "raw_text": ""}]
            )
        )
    )
    assert read.trajectories == (Trajectory("q-1", (("cd(folder='documents')", "done"), ())),)


@pytest.mark.parametrize(
    ("rows", "line", "fragment"),
    [
        # A row of the other kind than its example, named with its line.
        (
            [trajectory("q-1"), {"example_id": "q-1x", "raw_text": "{}"}, trajectory("s-1")],
            3,
            "example 's-1' is not a multi-turn example",
        ),
        (
            [{"example_id": "s-1", "raw_text": "{}"}, {"example_id": "q-1", "raw_text": "{}"}],
            2,
            "example 'q-1' is a multi-turn question but this is an output row",
        ),
        # One id answered twice, whatever the kinds.
        (
            [trajectory("q-1"), {"example_id": "q-1", "raw_text": "{}"}],
            2,
            "duplicate example_id 'q-1' (first at line 1)",
        ),
        (
            [{"example_id": "s-1", "raw_text": "{}"}, trajectory("s-1")],
            2,
            "duplicate example_id 's-1' (first at line 1)",
        ),
        # Each kind's own checks.
        ([trajectory("q-1", [["a"], [], ["b"]])], 1, "'q-1' has 2 user turns"),
        ([{"example_id": "s-1", "raw_text": "{}", "turn": 1}], 1, "unknown field 'turn'"),
        ([trajectory("q-9")], 1, "'q-9' is not in the test split"),
        ([], None, "precomputed outputs file is empty"),
    ],
)
def test_a_mixed_file_refuses_what_either_reader_refuses_and_a_row_of_the_wrong_kind(
    write_lines: WriteLines, rows: list[dict[str, Any]], line: int | None, fragment: str
) -> None:
    split = read_test_split(write_lines([native_row("s-1"), multi_turn_row("q-1")]))
    read = partial(read_precomputed_outputs, split=split)
    expect_error(write_lines(rows), line, fragment, reader=read)


def test_a_table_of_outputs_holds_no_trajectory(write_lines: WriteLines, tmp_path: Path) -> None:
    split = read_test_split(write_lines([native_row("s-1"), multi_turn_row("q-1")]))
    table = tmp_path / "outputs.csv"
    table.write_text("example_id,raw_text\ns-1,{}\n", encoding="utf-8")
    read = read_precomputed_outputs(table, split=split)
    assert ([row.example_id for row in read.outputs], read.trajectories) == (["s-1"], ())
    table.write_text("example_id,turns\nq-1,[]\n", encoding="utf-8")
    expect_error(table, 2, "JSON lines only", reader=partial(read_precomputed_outputs, split=split))
