"""``score --scoring bfcl --precomputed FILE`` on a split mixing single-turn and multi-turn rows.

The bundled BFCL example imported with its single-turn and its multi-turn
categories is one split; one file holds both arms' kinds of output, each row
read by its shape: the single-turn ``{example_id, raw_text}`` rows and the
multi-turn ``{example_id, turns}`` trajectories, interleaved. Scoring it must
give every example the scores it gets when each part is scored on its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sommelier_mlflow._json import dumps_line, loads
from sommelier_mlflow.cli import main
from sommelier_mlflow.data import BFCL_DEFAULT_CATEGORIES, read_generations
from sommelier_mlflow.evaluation import read_evaluation_report
from sommelier_mlflow.generation import TRAJECTORIES_NAME
from tests.cli.cli_helpers import BFCL_EXAMPLE, bfcl_example_score_args, bfcl_example_split
from tests.support.bfcl_multi_turn import MULTI_TURN_CATEGORIES, require_bfcl

Scores = dict[tuple[str, str], tuple[int, int]]


def _rows(path: Path) -> list[dict[str, object]]:
    return [loads(line) for line in path.read_bytes().splitlines()]


def _mixed_file(path: Path, kind: str) -> Path:
    """The example's single-turn outputs and multi-turn trajectories, one line of each in turn."""
    outputs = _rows(BFCL_EXAMPLE / f"outputs_{kind}.jsonl")
    trajectories = _rows(BFCL_EXAMPLE / f"trajectories_{kind}.jsonl")
    mixed = [row for pair in zip(trajectories, outputs, strict=False) for row in pair]
    mixed += outputs[len(trajectories) :]
    path.write_bytes(b"".join(dumps_line(row) for row in mixed))
    return path


def _score(split: Path, precomputed: Path, out: Path) -> int:
    args = bfcl_example_score_args(split, "base", "outputs", out)
    args[args.index("--precomputed") + 1] = str(precomputed)
    return main(args)


def _scores(folder: Path) -> Scores:
    """Every example's ``(numerator, denominator)`` per metric, as its report holds them."""
    report = read_evaluation_report(folder / "evaluation_report.json")
    return {
        (example_id, name): (
            int(report.numerators[row, column]),
            int(report.denominators[row, column]),
        )
        for row, example_id in enumerate(report.example_ids)
        for column, name in enumerate(report.metric_names)
    }


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mixed split scored from one file, and its two parts each from its own file."""
    require_bfcl()
    root = tmp_path_factory.mktemp("bfcl_mixed")
    mixed = bfcl_example_split(root / "mixed", (*BFCL_DEFAULT_CATEGORIES, *MULTI_TURN_CATEGORIES))
    assert _score(mixed, _mixed_file(root / "mixed.jsonl", "base"), root / "scored") == 0
    single = bfcl_example_split(root / "single")
    assert _score(single, BFCL_EXAMPLE / "outputs_base.jsonl", root / "single_scored") == 0
    multi = bfcl_example_split(root / "multi", MULTI_TURN_CATEGORIES)
    trajectories = BFCL_EXAMPLE / "trajectories_base.jsonl"
    assert _score(multi, trajectories, root / "multi_scored") == 0
    return root


def test_one_file_scores_a_mixed_split_as_its_parts_scored_apart(scored: Path) -> None:
    mixed = _scores(scored / "scored")
    single, multi = _scores(scored / "single_scored"), _scores(scored / "multi_scored")
    assert len({example_id for example_id, _ in mixed}) == 30 + 8
    assert not set(single) & set(multi)
    parts = single | multi
    assert set(parts) <= set(mixed)
    # Every example scored as apart; a metric its part does not have is 0/0 on it.
    assert mixed == {key: parts.get(key, (0, 0)) for key in mixed}
    assert any(value != (0, 0) for key, value in multi.items() if key[1] == "bfcl_turn_accuracy")
    report = read_evaluation_report(scored / "scored" / "evaluation_report.json")
    apart = [
        read_evaluation_report(scored / name / "evaluation_report.json")
        for name in ("single_scored", "multi_scored")
    ]
    for name, value in report.metrics.items():  # the overall counts add up
        counted = [part.metrics[name] for part in apart if name in part.metrics]
        assert value.numerator == sum(v.numerator for v in counted), name
        assert value.denominator == sum(v.denominator for v in counted), name


def test_an_arms_generations_and_trajectories_make_its_one_file_again(
    scored: Path, tmp_path: Path
) -> None:
    # What docs/bfcl.md says to do with a played mixed arm's folder: its single-turn
    # records as output rows, then its trajectories.jsonl.
    arm = scored / "scored"
    records = [
        r for path in sorted(arm.glob("generations/*.jsonl")) for r in read_generations(path)
    ]
    rows = [
        dumps_line({"example_id": r.example_id, "raw_text": r.raw_text})
        for r in records
        if r.turns is None
    ]
    again = tmp_path / "again.jsonl"
    again.write_bytes(b"".join(rows) + (arm / TRAJECTORIES_NAME).read_bytes())
    split = next(scored.glob("mixed/*.formatted.jsonl"))
    assert _score(split, again, tmp_path / "rescored") == 0
    for path in sorted(arm.glob("generations/*.jsonl")):
        assert (tmp_path / "rescored" / "generations" / path.name).read_bytes() == path.read_bytes()
    # Or the arm's generations folder itself, as it stands.
    args = bfcl_example_score_args(split, "base", "outputs", tmp_path / "from_folder")
    args[args.index("--precomputed") : args.index("--precomputed") + 2] = [
        "--generations",
        str(arm / "generations"),
    ]
    assert main(args) == 0
    assert _scores(tmp_path / "from_folder") == _scores(arm)


@pytest.mark.parametrize(
    ("swap", "fragment"),
    [
        ("trajectory", "example 'simple_python_0' is not a multi-turn example"),
        (
            "output",
            "example 'multi_turn_base_0' is a multi-turn question but this is an output row",
        ),
    ],
)
def test_a_row_of_the_other_kind_than_its_example_is_refused_naming_it_and_its_line(
    scored: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], swap: str, fragment: str
) -> None:
    lines = _mixed_file(tmp_path / "mixed.jsonl", "base").read_bytes().splitlines(keepends=True)
    rows = [loads(line) for line in lines]
    if swap == "trajectory":  # a single-turn example given a trajectory
        index = next(i for i, r in enumerate(rows) if r["example_id"] == "simple_python_0")
        rows[index] = {"example_id": "simple_python_0", "turns": [["[]"]]}
    else:  # a multi-turn question given one output
        index = next(i for i, r in enumerate(rows) if r["example_id"] == "multi_turn_base_0")
        rows[index] = {"example_id": "multi_turn_base_0", "raw_text": "[]"}
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"".join(dumps_line(row) for row in rows))
    split = next(scored.glob("mixed/*.formatted.jsonl"))
    capsys.readouterr()
    assert _score(split, bad, tmp_path / "refused") == 2
    error = capsys.readouterr().err
    assert f"{bad}:{index + 1}: " in error and fragment in error, error
    assert not (tmp_path / "refused" / "evaluation_report.json").exists()
