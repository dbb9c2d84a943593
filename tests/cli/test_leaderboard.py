"""``compare`` with several adapters: a leaderboard with Holm over the family, files and MLflow."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from tests.cli.cli_helpers import (
    ADAPTER_OUTPUTS,
    BASE_OUTPUTS,
    score_args,
    write_arm,
    write_fixture,
)

# Three checkpoints: as good as the base, perfect, and half way.
CHECKPOINTS = {
    100: BASE_OUTPUTS,
    200: ADAPTER_OUTPUTS,
    300: {**BASE_OUTPUTS, 1: ADAPTER_OUTPUTS[1]},
}


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("family")
    files = write_fixture(root / "in")
    assert main(score_args(files, "base", root / "base")) == 0
    reports = {"base": root / "base" / "evaluation_report.json"}
    for step, outputs in CHECKPOINTS.items():
        args = score_args(files, "adapter", root / f"checkpoint-{step}")
        args[4] = str(write_arm(root / f"gen-{step}", "adapter", outputs))
        # Each checkpoint is its own adapter (its own weights, so its own LoggedModel).
        checkpoint_dir = root / f"adapter-{step}"
        shutil.copytree(files["adapter_dir"], checkpoint_dir)
        (checkpoint_dir / "adapter_model.safetensors").write_bytes(f"weights {step}".encode())
        args[-1] = str(checkpoint_dir)
        assert main(args) == 0
        reports[f"checkpoint-{step}"] = root / f"checkpoint-{step}" / "evaluation_report.json"
    return reports


def _family_args(arms: dict[str, Path]) -> list[str]:
    args = ["compare", "--base-report", str(arms["base"])]
    for step in CHECKPOINTS:
        args += ["--adapter-report", str(arms[f"checkpoint-{step}"])]
    return [*args, "--resamples", "300"]


def test_a_leaderboard_ranks_every_adapter_against_the_one_base(
    arms: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*_family_args(arms), "--out", str(tmp_path)]) == 0
    board = json.loads((tmp_path / "comparison" / "leaderboard.json").read_text())
    assert board["schema_version"] == "sommelier_mlflow.leaderboard.v1"
    assert [row["label"] for row in board["adapters"]] == [f"checkpoint-{s}" for s in CHECKPOINTS]
    assert [row["step"] for row in board["adapters"]] == [100, 200, 300]
    assert board["best"] == "checkpoint-200"
    rows = {row["label"]: row for row in board["adapters"]}
    assert rows["checkpoint-100"]["delta"]["full_call_exact_match"]["estimate"] == 0.0
    assert rows["checkpoint-100"]["p_value"] == 1.0 and not rows["checkpoint-100"]["better"]
    for row in board["adapters"]:
        assert row["adjusted_p_value"] >= row["p_value"]
        assert set(row["mcnemar"]) >= {"b", "c", "p_value"}
    # each pairwise comparison is written as the one-adapter command writes it
    for index in (1, 2, 3):
        assert (tmp_path / "comparison" / f"adapter-{index}" / "comparison_report.json").is_file()
    assert "winner's curse" in (tmp_path / "comparison" / "leaderboard.md").read_text()
    assert "checkpoint-200 **(best)**" in capsys.readouterr().out


def test_the_leaderboard_json_reads_back_to_its_table_and_a_damaged_one_is_refused(
    arms: dict[str, Path], tmp_path: Path
) -> None:
    from sommelier_mlflow.errors import DataError
    from sommelier_mlflow.evaluation import read_leaderboard, render_leaderboard_markdown

    assert main([*_family_args(arms), "--out", str(tmp_path)]) == 0
    folder = tmp_path / "comparison"
    document = read_leaderboard(folder / "leaderboard.json")
    assert render_leaderboard_markdown(document) == (folder / "leaderboard.md").read_text()
    damages = {
        "schema_version": lambda doc: doc.update(schema_version="sommelier_mlflow.leaderboard.v0"),
        "best": lambda doc: doc.update(best="checkpoint-999"),
        "adapters[1].p_value": lambda doc: doc["adapters"][1].pop("p_value"),
        "adapters[0].delta.full_call_exact_match": lambda doc: doc["adapters"][0]["delta"].clear(),
    }
    for field, damage in damages.items():
        broken = json.loads((folder / "leaderboard.json").read_text())
        damage(broken)
        path = tmp_path / "broken.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(DataError, match=rf"broken.json: {re.escape(field)}: "):
            read_leaderboard(path)


def test_claims_are_refused_on_a_family(arms: dict[str, Path], tmp_path: Path) -> None:
    claims = tmp_path / "claims.json"
    claims.write_text(
        json.dumps(
            {
                "schema_version": "sommelier_mlflow.claims.v1",
                "claims": [
                    {
                        "id": "a",
                        "slice": "overall",
                        "metric": "full_call_exact_match",
                        "kind": "superiority",
                        "margin": 0.0,
                    }
                ],
            }
        )
    )
    args = [*_family_args(arms), "--claims", str(claims), "--out", str(tmp_path / "o")]
    assert main(args) == 2
    assert not (tmp_path / "o").exists()


def _log_sweep(arms: dict[str, Path]) -> tuple[str, dict[str, str]]:
    """A sweep's parent run and, as its children, the base and checkpoint arm runs."""
    import mlflow
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.evaluation import read_evaluation_report
    from sommelier_mlflow.integration import log_evaluation_run

    client = MlflowClient()
    experiment = client.get_experiment_by_name("Default").experiment_id
    sweep = client.create_run(experiment, run_name="sweep").info.run_id
    runs: dict[str, str] = {}
    for label in ["base", *(f"checkpoint-{s}" for s in CHECKPOINTS)]:
        kind = "base" if label == "base" else "adapter"
        with mlflow.start_run(run_name=label) as run:
            mlflow.set_tags({"sommelier.model_kind": kind, "mlflow.parentRunId": sweep})
            # As `evaluate --mlflow` logs an arm: report, metrics, its LoggedModel.
            log_evaluation_run(read_evaluation_report(arms[label]), run_id=run.info.run_id)
        runs[label] = run.info.run_id
    return sweep, runs


def _sweep_args(sweep: str, runs: dict[str, str], out: Path) -> list[str]:
    args = ["compare", "--base-run-id", runs["base"], "--adapter-runs-from-parent", sweep]
    return [*args, "--resamples", "300", "--out", str(out)]


@pytest.mark.usefixtures("tracking_uri")
def test_a_sweep_parent_run_gives_the_family_and_the_best_run_is_tagged(
    arms: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    sweep, runs = _log_sweep(arms)
    assert main([*_sweep_args(sweep, runs, tmp_path / "o"), "--mlflow"]) == 0
    printed = capsys.readouterr().out
    everywhere = [e.experiment_id for e in client.search_experiments()]
    boards = client.search_runs(everywhere, "tags.`sommelier.model_kind` = 'leaderboard'")
    assert len(boards) == 1
    tags = boards[0].data.tags
    assert tags["sommelier.best_adapter_run_id"] == runs["checkpoint-200"]
    listed = {item.path for item in client.list_artifacts(boards[0].info.run_id, "sommelier")}
    assert {"sommelier/leaderboard.json", "sommelier/leaderboard.png"} <= listed
    children = client.search_runs(
        everywhere, f"tags.mlflow.parentRunId = '{boards[0].info.run_id}'"
    )
    assert len(children) == 3
    # Each adapter's LoggedModel carries its ranking: the best is rank 1.
    ranks = {}
    for label, run in runs.items():
        if label == "base":
            continue
        model_id = client.get_run(run).data.tags["sommelier.logged_model_id"]
        model_tags = client.get_logged_model(model_id).tags
        assert model_tags["sommelier.leaderboard.run_id"] == boards[0].info.run_id
        assert model_tags["sommelier.leaderboard.of"] == "3"
        assert float(model_tags["sommelier.leaderboard.adjusted_p_value"]) <= 1.0
        assert model_tags["sommelier.leaderboard.verdict"] in {"better", "not shown better"}
        ranks[label] = model_tags["sommelier.leaderboard.rank"]
    assert ranks == {"checkpoint-200": "1", "checkpoint-300": "2", "checkpoint-100": "3"}

    # `show` prints the leaderboard run's table, as compare printed it.
    table = (tmp_path / "o" / "comparison" / "leaderboard.md").read_text(encoding="utf-8")
    assert table in printed
    assert main(["show", boards[0].info.run_id]) == 0
    assert capsys.readouterr().out == table + "\n"


@pytest.mark.usefixtures("tracking_uri")
def test_a_deleted_sweep_run_is_refused_and_deleted_children_are_left_out(
    arms: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    sweep, runs = _log_sweep(arms)
    client.delete_run(sweep)
    assert main(_sweep_args(sweep, runs, tmp_path / "o")) == 2
    assert f"error: run {sweep} is deleted" in capsys.readouterr().err
    client.restore_run(sweep)
    client.delete_run(runs["checkpoint-200"])  # a deleted checkpoint is not in the family
    assert main(_sweep_args(sweep, runs, tmp_path / "o2")) == 0
    board = json.loads((tmp_path / "o2" / "comparison" / "leaderboard.json").read_text())
    assert [row["run_id"] for row in board["adapters"]] == [
        runs["checkpoint-100"],
        runs["checkpoint-300"],
    ]
