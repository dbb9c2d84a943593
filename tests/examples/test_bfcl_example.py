"""The bundled BFCL example: reproducible from BFCL's data, scored end to end by `mlflow run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.examples.examples_helpers import ComparedArms, score_and_compare_precomputed_arms
from tests.support.bfcl_multi_turn import MULTI_TURN_CATEGORIES, require_bfcl
from tests.support.bfcl_reference import bfcl_package_root
from tests.support.mlflow_run import mlflow_run
from tests.support.scripts import load_script
from tests.support.tiny_models import build_tokenizer

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "bfcl"
FILES = (
    "outputs_base.jsonl",
    "outputs_adapter.jsonl",
    "data/NOTICE",
    "data/BFCL_v4_simple_python.json",
    "data/BFCL_v4_irrelevance.json",
    "data/possible_answer/BFCL_v4_parallel_multiple.json",
    "trajectories_base.jsonl",
    "trajectories_adapter.jsonl",
    "data/BFCL_v4_multi_turn_miss_func.json",
    "data/possible_answer/BFCL_v4_multi_turn_long_context.json",
    "data/multi_turn_func_doc/gorilla_file_system.json",
    "data/multi_turn_func_doc/posting_api.json",
)


def test_the_committed_example_is_what_the_script_writes_from_bfcls_data(tmp_path: Path) -> None:
    data = bfcl_package_root() / "bfcl_eval" / "data"
    load_script("examples/bfcl/make_example.py").main([str(data), "--out", str(tmp_path)])
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (EXAMPLE / name).read_bytes(), name


def _imported_and_formatted(uri: str, cwd: Path, stem: str, **import_params: str) -> Path:
    """The example imported (``import_params``) and formatted by ``mlflow run``; the split."""
    # Any chat template renders the prompts: the outputs are precomputed.
    tokenizer = cwd / "tokenizer"
    build_tokenizer(tokenizer, ["Find the area of a triangle.", "What is the weather in Paris?"])
    split = cwd / "bfcl" / f"{stem}.jsonl"
    mlflow_run(
        uri, cwd, "import_bfcl", data_dir=str(EXAMPLE / "data"), out=str(split), **import_params
    )
    assert (cwd / "bfcl" / f"{stem}.drop_summary.json").is_file()
    formatted = cwd / "bfcl" / f"{stem}.formatted.jsonl"
    mlflow_run(
        uri,
        cwd,
        "format",
        test_split=str(split),
        tokenizer=str(tokenizer),
        slice_by="category",
        out=str(formatted),
    )
    return formatted


def _scored_and_compared(
    uri: str, cwd: Path, formatted: Path, outputs: str = "outputs"
) -> ComparedArms:
    """Both arms' ``examples/bfcl/<outputs>_<arm>.jsonl`` scored in BFCL mode, then compared."""
    return score_and_compare_precomputed_arms(
        uri,
        cwd,
        test_split=formatted,
        outputs_dir=EXAMPLE,
        adapter="bfcl-example-adapter",
        outputs=outputs,
        max_new_tokens="256",
        scoring="bfcl",
    )


@pytest.mark.slow
def test_the_example_imports_scores_and_compares_through_mlflow_run(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    runs = _scored_and_compared(uri, tmp_path, _imported_and_formatted(uri, tmp_path, "test"))
    base, adapter = runs.base.metrics, runs.adapter.metrics
    assert base["overall/counts/bfcl_ast_accuracy.denominator"] == 30
    assert base["overall/counts/bfcl_ast_accuracy.numerator"] == 19
    assert adapter["overall/counts/bfcl_ast_accuracy.numerator"] == 29
    assert base["overall/counts/bfcl_decode_rate.numerator"] == 28
    # The base arm's broken output on an irrelevance question: BFCL would count it.
    assert base["category:irrelevance/counts/bfcl_ast_accuracy.numerator"] == 3
    assert base["category:irrelevance/counts/bfcl_leaderboard_accuracy.numerator"] == 4
    assert base["category:parallel/counts/bfcl_ast_accuracy.denominator"] == 6
    compared = runs.compared
    assert compared["delta/overall/bfcl_ast_accuracy"] == pytest.approx((29 - 19) / 30)
    assert "delta/category:parallel_multiple/ci95/bfcl_ast_accuracy.lower" in compared
    assert 0.0 < compared["mcnemar/overall/p_value"] <= 1.0


@pytest.mark.slow
def test_the_multi_turn_trajectories_are_scored_and_compared_through_mlflow_run(
    tmp_path: Path,
) -> None:
    require_bfcl()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    categories = ",".join(MULTI_TURN_CATEGORIES)
    formatted = _imported_and_formatted(uri, tmp_path, "multi_turn", categories=categories)
    runs = _scored_and_compared(uri, tmp_path, formatted, outputs="trajectories")
    base, adapter = runs.base.metrics, runs.adapter.metrics
    assert base["overall/counts/bfcl_multi_turn_accuracy.numerator"] == 3
    assert base["overall/counts/bfcl_multi_turn_leaderboard_accuracy.numerator"] == 4
    assert base["overall/counts/bfcl_turn_accuracy.numerator"] == 30
    assert base["overall/counts/bfcl_turn_accuracy.denominator"] == 36
    assert adapter["overall/counts/bfcl_multi_turn_accuracy.numerator"] == 7
    assert base["overall/bfcl_overall"] == pytest.approx(0.375)
    assert adapter["overall/bfcl_overall"] == pytest.approx(0.875)
    compared = runs.compared
    assert compared["delta/overall/bfcl_overall"] == pytest.approx(0.5)
    assert compared["delta/overall/ci95/bfcl_overall.lower"] > 0.0
    assert compared["delta/overall/bfcl_multi_turn_accuracy"] == pytest.approx(0.5)
