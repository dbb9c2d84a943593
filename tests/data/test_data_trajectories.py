"""Multi-turn outputs made elsewhere: ``{example_id, turns}`` rows, read only as they should be."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.data import Trajectory, read_precomputed, read_test_split, read_trajectories
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
