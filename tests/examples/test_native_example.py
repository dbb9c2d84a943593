"""The bundled native-format example: its data, scored as Hermes output through `mlflow run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.examples_helpers import score_and_compare_precomputed_arms
from tests.support.scripts import load_script

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "native"
DATA = EXAMPLE / "data"
FILES = ("test_split.jsonl", "outputs_base.jsonl", "outputs_adapter.jsonl")
#: Exact call sets out of 60 when decoded as Hermes output (``score --output-format hermes``).
BASE_EXACT = 29
ADAPTER_EXACT = 51


def test_the_committed_data_is_what_the_script_writes(tmp_path: Path) -> None:
    load_script("examples/native/make_example.py").main(["--out", str(tmp_path)])
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes(), name


@pytest.mark.slow
def test_hermes_outputs_score_and_compare_throughmlflow_run(tmp_path: Path) -> None:
    # Three `mlflow run`s (two arms, one comparison): the path a user takes (about a minute).
    runs = score_and_compare_precomputed_arms(
        f"sqlite:///{tmp_path / 'mlflow.db'}",
        tmp_path,
        test_split=DATA / "test_split.jsonl",
        outputs_dir=DATA,
        adapter=str(EXAMPLE / "adapter"),
        max_new_tokens="128",
        scoring="calls",
        output_format="hermes",
    )
    base, adapter = runs.base, runs.adapter
    assert base.tags["sommelier.parser_version"] == "sommelier.calls_parser.v1+hermes.v1"
    numerator = "overall/counts/call_set_exact_match.numerator"
    assert base.metrics["overall/counts/call_set_exact_match.denominator"] == 60
    assert base.metrics[numerator] == BASE_EXACT
    assert adapter.metrics[numerator] == ADAPTER_EXACT
    assert runs.compared["delta/overall/call_set_exact_match"] == pytest.approx(
        (ADAPTER_EXACT - BASE_EXACT) / 60
    )
