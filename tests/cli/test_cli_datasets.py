"""``dataset push`` and ``--test-split mlflow-dataset:NAME`` end to end, on a real SQLite store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from tests.cli.cli_helpers import compare_args, logged_run_id, score_args, write_fixture


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One SQLite tracking store for the module (its schema migrations take seconds)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.delenv("MLFLOW_RUN_ID", raising=False)
        yield uri


def _score(
    files: dict[str, Path], kind: str, out: Path, dataset: str, *extra: str
) -> dict[str, object]:
    args = score_args(files, kind, out)
    args[args.index("--test-split") + 1] = f"mlflow-dataset:{dataset}"
    assert main([*args, *extra]) == 0
    identity = json.loads((out / "evaluation_report.json").read_text())["identity"]
    assert isinstance(identity, dict)
    return identity


def _compare(tmp_path: Path, base: Path, adapter: Path) -> int:
    return main(compare_args(base, adapter, tmp_path / "cmp", "--resamples", "100"))


def test_a_pushed_split_is_evaluated_by_name_and_the_gate_holds_its_digest(
    store_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.genai.datasets import get_dataset
    from mlflow.tracking import MlflowClient

    files = write_fixture(tmp_path / "in")
    assert main(["dataset", "push", str(files["split"]), "--name", "weather"]) == 0
    printed = capsys.readouterr().out
    assert "evaluation dataset 'weather': 8 records" in printed and store_uri in printed
    assert "--test-split mlflow-dataset:weather" in printed

    logged = ("--mlflow", "--log-traces", "false")
    base = _score(files, "base", tmp_path / "base", "weather", *logged)
    run_id = logged_run_id(capsys.readouterr().out)
    adapter = _score(files, "adapter", tmp_path / "adapter", "weather")
    pushed = get_dataset(name="weather")
    expected = {"name": "weather", "id": pushed.dataset_id, "digest": pushed.digest}
    assert base["dataset"] == adapter["dataset"] == expected
    tags = MlflowClient().get_run(run_id).data.tags
    assert {key: tags[f"sommelier.dataset.{key}"] for key in expected} == expected
    assert _compare(tmp_path, tmp_path / "base", tmp_path / "adapter") == 0
    capsys.readouterr()

    # Someone edits a record (a tag this product ignores): same rows, new MLflow digest.
    record = pushed.to_df().iloc[0]
    pushed.merge_records([{"inputs": record["inputs"], "tags": {"reviewed": "yes"}}])
    edited = _score(files, "adapter", tmp_path / "adapter-2", "weather")
    assert edited["test_split_sha256"] == base["test_split_sha256"]
    assert edited["dataset"] != base["dataset"]
    assert _compare(tmp_path, tmp_path / "base", tmp_path / "adapter-2") == 4
    assert "refusing to compare: dataset.digest differs" in capsys.readouterr().err


def test_bad_dataset_input_exits_with_the_store_and_what_to_do(
    store_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_fixture(tmp_path / "in")
    push = ["dataset", "push", str(files["split"]), "--name", "taken"]
    assert main(push) == 0
    assert main(push) == 2
    assert "already exists" in (err := capsys.readouterr().err) and "--replace" in err
    assert main([*push, "--replace"]) == 0
    assert "replaced (deleted) d-" in capsys.readouterr().out

    args = score_args(files, "base", tmp_path / "out")
    args[args.index("--test-split") + 1] = "mlflow-dataset:missing"
    assert main(args) == 3
    err = capsys.readouterr().err
    assert store_uri in err and "dataset push SPLIT --name missing" in err
    assert not (tmp_path / "out").exists()
