"""The bundled native-format example: its data, scored as Hermes output through `mlflow run`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mlflow_run import mlflow_run
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
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_ids = {
        kind: mlflow_run(
            uri,
            tmp_path,
            "score",
            test_split=str(DATA / "test_split.jsonl"),
            precomputed=str(DATA / f"outputs_{kind}.jsonl"),
            model_kind=kind,
            model="example/precomputed-model",
            max_new_tokens="128",
            batch_size="1",
            scoring="calls",
            output_format="hermes",
            resamples="200",
            **({"adapter": str(EXAMPLE / "adapter")} if kind == "adapter" else {}),
        )
        for kind in ("base", "adapter")
    }
    compare_id = mlflow_run(
        uri,
        tmp_path,
        "compare",
        base_run_id=run_ids["base"],
        adapter_run_id=run_ids["adapter"],
        resamples="200",
    )
    client = MlflowClient(tracking_uri=uri)
    base = client.get_run(run_ids["base"]).data
    adapter = client.get_run(run_ids["adapter"]).data
    assert base.tags["sommelier.parser_version"] == "sommelier.calls_parser.v1+hermes.v1"
    numerator = "overall/counts/call_set_exact_match.numerator"
    assert base.metrics["overall/counts/call_set_exact_match.denominator"] == 60
    assert base.metrics[numerator] == BASE_EXACT
    assert adapter.metrics[numerator] == ADAPTER_EXACT
    compared = client.get_run(compare_id).data.metrics
    assert compared["delta/overall/call_set_exact_match"] == pytest.approx(
        (ADAPTER_EXACT - BASE_EXACT) / 60
    )
