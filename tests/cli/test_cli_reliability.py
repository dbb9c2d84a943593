"""What a hostile user tried on the commands (issue 13): each case failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.cli import main
from tests.cli.cli_helpers import examples, write_fixture


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    return write_fixture(tmp_path / "in")


def _deep_call(depth: int) -> str:
    """A valid tool call whose arguments nest ``depth`` levels."""
    inner: str = '"x"'
    for _ in range(depth - 1):
        inner = '{"a":' + inner + "}"
    return '{"name":"get_weather","arguments":' + inner + "}"


def _precomputed(path: Path, raw_text: str) -> Path:
    rows = [{"example_id": ex.example_id, "raw_text": raw_text} for ex in examples()]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _score_args(files: dict[str, Path], out: Path, *source: str) -> list[str]:
    return [
        "score",
        "--test-split",
        str(files["split"]),
        *source,
        "--model-kind",
        "base",
        "--model",
        "tiny/model",
        "--max-new-tokens",
        "32",
        "--batch-size",
        "2",
        "--out",
        str(out),
        "--resamples",
        "50",
    ]


@pytest.mark.parametrize("depth", [255, 300, 1000])
def test_deep_valid_output_is_scored_and_written(
    files: dict[str, Path], tmp_path: Path, depth: int
) -> None:
    raw = _deep_call(depth)
    source = _precomputed(tmp_path / "deep.jsonl", raw)
    out = tmp_path / "p"
    assert main(_score_args(files, out, "--precomputed", str(source))) == 0
    report = json.loads((out / "evaluation_report.json").read_text())
    assert report["metrics"]["valid_json_rate"]["numerator"] == 8
    assert report["metrics"]["function_name_accuracy"]["numerator"] == 8
    assert report["metrics"]["full_call_exact_match"]["numerator"] == 0
    written = (out / "generations" / "en.jsonl").read_text(encoding="utf-8").splitlines()
    assert [loads(line)["raw_text"] for line in written] == [raw] * 4
    # The written generations score again, through the other path of `score`.
    again = tmp_path / "g"
    assert main(_score_args(files, again, "--generations", str(out / "generations"))) == 0
    rescored = json.loads((again / "evaluation_report.json").read_text())
    assert rescored["metrics"] == report["metrics"]
