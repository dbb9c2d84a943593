"""A shared team tracking server: ``mlflow server`` on PostgreSQL with proxied artifacts.

Several people (here: processes) log into one new experiment at once, and the
server is restarted in the middle of a run. Everything is checked back
through ``MlflowClient``, the way a teammate would see it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.evaluation import (
    EvaluationReport,
    read_comparison_report,
    read_evaluation_report,
)
from sommelier_mlflow.integration import (
    arm_example_traces,
    comparison_metric_keys,
    evaluation_metric_keys,
    log_evaluation_run,
    log_example_traces,
)
from tests.cli.cli_helpers import score_args, write_fixture
from tests.integration.integration_helpers import check_unstorable_run, unstorable_arm
from tests.support.programs import require
from tests.support.team_server import MLFLOW, MlflowServer, Postgres, postgres_bin

pytestmark = pytest.mark.slow

PROJECT = Path(__file__).resolve().parents[2]
ARM_ARTIFACTS = {"sommelier/evaluation_report.json", "sommelier/generations"}


@pytest.fixture(scope="module")
def team_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    bin_dir = postgres_bin()
    require(bin_dir is not None, "PostgreSQL (`apt-get install postgresql`)")
    assert bin_dir is not None
    database = Postgres(bin_dir)
    database.start()
    root = tmp_path_factory.mktemp("team")
    server = MlflowServer(database.uri, root / "artifacts", root / "mlflow.log")
    try:
        server.start()
        yield server
    finally:
        server.stop()
        database.stop()


def _env(server: MlflowServer, experiment: str) -> dict[str, str]:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": server.url,
        "MLFLOW_EXPERIMENT_NAME": experiment,
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    env.pop("MLFLOW_RUN_ID", None)
    return env


def _main(demo: Any, max_examples: str) -> list[str]:
    """The demo's ``main`` (paths given, so a cached build is reused as it is)."""
    return [
        MLFLOW,
        "run",
        str(PROJECT),
        "-e",
        "main",
        "--env-manager",
        "local",
        "-P",
        f"model={demo.base_model_dir}",
        "-P",
        f"adapter={demo.adapter_dir}",
        "-P",
        f"test_split={demo.splits_dir / 'test.jsonl'}",
        "-P",
        f"max_examples={max_examples}",
        "-P",
        "resamples=200",
    ]


def _main_direct(demo: Any, max_examples: str) -> list[str]:
    """The same ``main`` pipeline through the package's CLI instead of ``mlflow run``.

    ``mlflow run`` resolves ``MLFLOW_EXPERIMENT_NAME`` with MLflow's own
    get-then-create, which fails with RESOURCE_ALREADY_EXISTS when another
    process creates the experiment in between (measured in CI: the score runs
    below won that race). That is MLflow's CLI, not this package; the
    package's own experiment resolution, tested here, survives the race.
    """
    return [
        sys.executable,
        "-m",
        "sommelier_mlflow.cli",
        "main",
        "--model",
        str(demo.base_model_dir),
        "--adapter",
        str(demo.adapter_dir),
        "--test-split",
        str(demo.splits_dir / "test.jsonl"),
        "--max-examples",
        max_examples,
        "--resamples",
        "200",
        "--mlflow",
    ]


def _score(files: dict[str, Path], kind: str, out: Path) -> list[str]:
    return [sys.executable, "-m", "sommelier_mlflow.cli", *score_args(files, kind, out), "--mlflow"]


def _check_arm(client: Any, run: Any, report_path: Path) -> None:
    """Every metric, the tags and the artifacts the local report says were logged."""
    report = loads(report_path.read_bytes())
    expected = evaluation_metric_keys(read_evaluation_report(report_path))
    assert run.info.status == "FINISHED"
    assert set(expected) <= set(run.data.metrics), set(expected) - set(run.data.metrics)
    for key, value in expected.items():
        assert run.data.metrics[key] == pytest.approx(value), key
    assert run.data.tags["sommelier.model_kind"] == report["identity"]["model_kind"]
    assert run.data.tags["sommelier.test_split_sha256"] == report["identity"]["test_split_sha256"]
    assert run.data.params["parser_version"] == report["identity"]["parser_version"]
    paths = {a.path for a in client.list_artifacts(run.info.run_id, "sommelier")}
    assert paths >= ARM_ARTIFACTS, paths


def test_main_and_four_concurrent_scores_into_a_new_experiment(
    team_server: MlflowServer, demo_assets: Any, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    files = write_fixture(tmp_path / "in")
    env = _env(team_server, "team-concurrent")
    processes = {
        "main": subprocess.Popen(
            _main_direct(demo_assets, "10"),
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    }
    for index, kind in enumerate(["base", "adapter", "base", "adapter"]):
        processes[f"score{index}"] = subprocess.Popen(
            _score(files, kind, tmp_path / f"score{index}"),
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    outputs = {}
    try:
        for name, process in processes.items():
            stdout, _ = process.communicate(timeout=1500)
            outputs[name] = stdout.decode(errors="replace")
    finally:  # a failure must not leave logging processes behind for the next test
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.communicate()
    for name, process in processes.items():
        assert process.returncode == 0, f"{name}:\n{outputs[name][-3000:]}"

    client = MlflowClient(tracking_uri=team_server.url)
    experiment = client.get_experiment_by_name("team-concurrent")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    by_id = {run.info.run_id: run for run in runs}
    assert len(runs) == 7  # 4 scores + main's parent and its 2 arms
    for index in range(4):
        run_id = re.search(r"logged to MLflow run ([0-9a-f]+)", outputs[f"score{index}"])
        assert run_id, outputs[f"score{index}"]
        _check_arm(
            client,
            by_id[run_id.group(1)],
            tmp_path / f"score{index}" / "evaluation_report.json",
        )
    # Two processes scored each identity at once: one LoggedModel each, with both runs' metrics.
    scores = {
        index: by_id[re.findall(r"logged to MLflow run ([0-9a-f]+)", outputs[f"score{index}"])[0]]
        for index in range(4)
    }
    for pair in ((0, 2), (1, 3)):
        models = {scores[index].data.tags["sommelier.logged_model_id"] for index in pair}
        assert len(models) == 1, models
        linked = client.get_logged_model(models.pop()).metrics
        assert {scores[index].info.run_id for index in pair} <= {m.run_id for m in linked}
    parent_id = re.search(r"MLflow parent run: ([0-9a-f]+)", outputs["main"])
    reports = re.search(r"^reports: (.+)$", outputs["main"], re.MULTILINE)
    assert parent_id and reports, outputs["main"][-3000:]
    out = Path(reports.group(1))
    parent = by_id[parent_id.group(1)]
    assert parent.info.status == "FINISHED"
    comparison = read_comparison_report(out / "comparison" / "comparison_report.json")
    expected = comparison_metric_keys(comparison)
    assert set(expected) <= set(parent.data.metrics)
    parent_artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "sommelier")}
    assert "sommelier/comparison_report.json" in parent_artifacts
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert sorted(r.info.run_name for r in children) == ["adapter", "base"]
    for child in children:
        _check_arm(client, child, out / child.info.run_name / "evaluation_report.json")


def test_a_server_restart_mid_run_never_leaves_a_half_logged_finished_run(
    team_server: MlflowServer, demo_assets: Any, tmp_path: Path
) -> None:
    from mlflow.tracking import MlflowClient

    env = _env(team_server, "team-restart")
    client = MlflowClient(tracking_uri=team_server.url)
    process = subprocess.Popen(
        _main(demo_assets, "20"),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 600
        while True:  # restart as soon as the first arm run exists: the run is mid-way
            experiment = client.get_experiment_by_name("team-restart")
            if experiment is not None:
                runs = client.search_runs([experiment.experiment_id])
                if any(r.info.run_name == "base" for r in runs):
                    break
            assert process.poll() is None, process.communicate()[0].decode()[-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.5)
        team_server.stop()
        time.sleep(3)
        team_server.start()
        stdout, _ = process.communicate(timeout=1500)
    finally:
        if process.poll() is None:
            process.kill()
        if team_server.process is None:
            team_server.start()
    output = stdout.decode(errors="replace")
    assert process.returncode in (0, 1), output[-3000:]  # `mlflow run` exits 1 on any failure
    if process.returncode != 0:  # ... and the command's line says which: unreachable server
        assert "error (exit code 3): " in output, output[-3000:]
    reports = re.search(r"^reports: (.+)$", output, re.MULTILINE)
    experiment = client.get_experiment_by_name("team-restart")
    runs = client.search_runs([experiment.experiment_id])
    assert runs
    for run in runs:
        if run.info.status != "FINISHED":
            continue
        # Whatever says FINISHED is complete: all keys, tags and artifacts.
        if run.info.run_name in ("base", "adapter"):
            assert reports, output[-3000:]
            _check_arm(
                client, run, Path(reports.group(1)) / run.info.run_name / "evaluation_report.json"
            )
        else:
            assert reports, output[-3000:]
            comparison = read_comparison_report(
                Path(reports.group(1)) / "comparison" / "comparison_report.json"
            )
            assert set(comparison_metric_keys(comparison)) <= set(run.data.metrics)
    if process.returncode == 0:
        assert all(run.info.status == "FINISHED" for run in runs)


def test_eight_concurrent_arms_with_nul_and_lone_surrogates_all_log_escaped(
    team_server: MlflowServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A NUL made PostgreSQL refuse an arm's traces (4 of a team's 8 arms failed).

    Eight arms log at once, each with outputs holding NUL and lone surrogates,
    through the same two calls every command makes (the run, then its traces).
    """
    from concurrent.futures import ThreadPoolExecutor

    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", team_server.url)  # as the commands run
    client = MlflowClient(tracking_uri=team_server.url)
    experiment_id = client.create_experiment("team-unstorable")
    arms = [unstorable_arm(kind) for kind in ("base", "adapter") * 4]

    def log(index: int) -> str:
        split, scored = arms[index]
        report = EvaluationReport.from_run(scored)
        run_id = client.create_run(experiment_id, run_name=f"arm-{index}").info.run_id
        log_evaluation_run(
            report,
            run_id=run_id,
            table_rows=scored.table_rows(),
            params={"note": "a\x00b\ud800"},
            client=client,
        )
        log_example_traces(run_id, arm_example_traces(report, scored, split), client=client)
        client.set_terminated(run_id)
        return run_id

    with ThreadPoolExecutor(max_workers=len(arms)) as pool:
        run_ids = list(pool.map(log, range(len(arms))))
    for index, run_id in enumerate(run_ids):
        assert client.get_run(run_id).info.status == "FINISHED"
        check_unstorable_run(client, run_id, experiment_id, tmp_path / f"arm-{index}")
