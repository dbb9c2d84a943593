"""What a hostile user tried on the commands (issue 13): each case failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.cli import main
from tests.cli.cli_helpers import (
    compare_args,
    declared_score_args,
    examples,
    score_args,
    write_jsonl,
)
from tests.support.net import free_port


def _deep_call(depth: int) -> str:
    """A valid tool call whose arguments nest ``depth`` levels."""
    inner: str = '"x"'
    for _ in range(depth - 1):
        inner = '{"a":' + inner + "}"
    return '{"name":"get_weather","arguments":' + inner + "}"


def _precomputed(path: Path, raw_text: str) -> Path:
    return write_jsonl(
        path, [{"example_id": ex.example_id, "raw_text": raw_text} for ex in examples()]
    )


def _score_args(files: dict[str, Path], out: Path, *source: str) -> list[str]:
    return [*declared_score_args(files["split"]), *source, "--out", str(out), "--resamples", "50"]


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


def _generations_args(files: dict[str, Path], out: Path, kind: str = "base") -> list[str]:
    return score_args(files, kind, out, resamples=50, revision=None)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_refused_score_changes_nothing_in_the_output_folder(
    files: dict[str, Path], tmp_path: Path
) -> None:
    out = tmp_path / "s"
    assert main(_generations_args(files, out)) == 0
    before = _snapshot(out)
    lying = tmp_path / "lying"
    lying.mkdir()
    for path in sorted(files["adapter"].glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        rows[0]["prompt_sha256"] = "0" * 64
        rows[0]["model_kind"] = "base"
        for row in rows:
            row["model_kind"] = "base"
        (lying / path.name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    code = main(
        [*_generations_args(files, out)[:4], str(lying), *_generations_args(files, out)[5:]]
    )
    assert code == 5
    assert _snapshot(out) == before
    assert [path.name for path in tmp_path.iterdir() if "staging" in path.name] == []


@pytest.mark.parametrize("command", ["score", "generations", "compare", "prepare"])
def test_unwritable_output_is_one_error_line_and_exit_2(
    files: dict[str, Path],
    tmp_path: Path,
    command: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    out = blocker / "out"  # below a plain file: every write fails with ENOTDIR
    if command == "score":
        source = _precomputed(tmp_path / "p.jsonl", "{}")
        args = _score_args(files, out, "--precomputed", str(source))
    elif command == "generations":
        args = _generations_args(files, out)
    elif command == "compare":
        assert main(_generations_args(files, tmp_path / "b")) == 0
        assert main(_generations_args(files, tmp_path / "a", "adapter")) == 0
        args = compare_args(tmp_path / "b", tmp_path / "a", out, "--resamples", "50")
    else:
        raw = Path(__file__).resolve().parents[2] / "examples" / "demo" / "data" / "raw.jsonl"
        args = ["prepare", "--raw", str(raw), "--out", str(out)]
        args += ["--train", "5", "--validation", "2", "--test", "3"]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("error: ") and str(blocker) in err[0]
    assert blocker.read_text(encoding="utf-8") == "not a folder"


def test_precomputed_missing_row_names_the_example(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"example_id": ex.example_id, "raw_text": "{}"} for ex in examples()]
    missing = rows.pop(3)["example_id"]
    source = write_jsonl(tmp_path / "partial.jsonl", rows)
    capsys.readouterr()
    assert main(_score_args(files, tmp_path / "x", "--precomputed", str(source))) == 2
    err = capsys.readouterr().err
    assert f"{missing!r}" in err
    assert not (tmp_path / "x").exists()


def test_duplicate_key_in_an_input_row_is_exit_2(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "dup.jsonl"
    rows = [json.dumps({"example_id": ex.example_id, "raw_text": "{}"}) for ex in examples()]
    rows[2] = rows[2][:-1] + ', "raw_text": "other"}'
    source.write_text("\n".join(rows) + "\n", encoding="utf-8")
    assert main(_score_args(files, tmp_path / "x", "--precomputed", str(source))) == 2
    assert "duplicate key 'raw_text'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra",
    [
        ["--seed", str(2**64)],
        ["--seed", "-1"],
        ["--resamples", str(2**64)],
        ["--resamples", "0"],
    ],
)
def test_seed_and_resamples_out_of_range_are_exit_2(
    files: dict[str, Path], tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*_generations_args(files, tmp_path / "x"), *extra])
    assert exit_info.value.code == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.fixture
def sqlite_tracking(tmp_path: Path, tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh SQLite store; artifacts land under the temporary working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "reliability")
    return tracking_uri


def _artifact_files(uri: str, run_id: str) -> set[str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found: set[str] = set()
    pending = [""]
    while pending:
        for item in client.list_artifacts(run_id, pending.pop() or None):
            if item.is_dir:
                pending.append(item.path)
            else:
                found.add(item.path)
    return found


def _only_run(uri: str) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("reliability")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    return str(runs[0].info.run_id)


def _plant_unrelated_files(folder: Path) -> None:
    (folder / ".ssh").mkdir(parents=True)
    (folder / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    (folder / "notes.txt").write_text("private notes\n")
    (folder / "blob.bin").write_bytes(bytes(range(256)) * 64)


def test_score_logs_exactly_the_files_it_wrote(
    files: dict[str, Path], tmp_path: Path, sqlite_tracking: str
) -> None:
    out = tmp_path / "u"
    _plant_unrelated_files(out)
    assert main([*_generations_args(files, out), "--mlflow"]) == 0
    logged = _artifact_files(sqlite_tracking, _only_run(sqlite_tracking))
    assert logged == {
        "sommelier/evaluation_report.json",
        "sommelier/examples.json",
        "sommelier/generations/en.jsonl",
        "sommelier/generations/fr.jsonl",
        "sommelier/test_split.formatted.jsonl",
    }
    assert (out / ".ssh" / "id_rsa").is_file()  # left alone locally, too


def test_prepare_logs_exactly_the_files_it_wrote(tmp_path: Path, sqlite_tracking: str) -> None:
    out = tmp_path / "prepared"
    _plant_unrelated_files(out)
    raw = Path(__file__).resolve().parents[2] / "examples" / "demo" / "data" / "raw.jsonl"
    args = ["prepare", "--raw", str(raw), "--out", str(out)]
    assert main([*args, "--train", "5", "--validation", "2", "--test", "3", "--mlflow"]) == 0
    logged = _artifact_files(sqlite_tracking, _only_run(sqlite_tracking))
    assert logged == {
        "sommelier/prepared/drop_summary.json",
        "sommelier/prepared/test.jsonl",
        "sommelier/prepared/train.jsonl",
        "sommelier/prepared/validation.jsonl",
    }


def test_runs_racing_to_create_an_experiment_all_get_it(
    sqlite_tracking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.cli._runs import top_run

    MlflowClient(sqlite_tracking).search_experiments()  # create the store's tables once
    failures: list[str] = []
    run_ids: list[str] = []
    for trial in range(3):
        monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", f"team-{trial}")
        barrier = threading.Barrier(8)

        def start_run(barrier: threading.Barrier) -> None:
            barrier.wait()
            try:
                with top_run("racer") as run_id:
                    run_ids.append(run_id)
            except Exception as exc:  # collected, so the test names what failed
                failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=start_run, args=(barrier,)) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    assert len(set(run_ids)) == 24


@pytest.mark.slow
def test_concurrent_runs_into_a_new_experiment_all_succeed(
    files: dict[str, Path], tmp_path: Path, sqlite_tracking: str
) -> None:
    import os
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    MlflowClient(sqlite_tracking).search_experiments()  # create the store's tables once
    env = {**os.environ, "MLFLOW_EXPERIMENT_NAME": "team"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sommelier_mlflow.cli",
                *_generations_args(files, tmp_path / f"out{index}"),
                "--mlflow",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(4)
    ]
    errors = [process.communicate(timeout=300)[1] for process in processes]
    assert [process.returncode for process in processes] == [0, 0, 0, 0], errors
    client = MlflowClient(sqlite_tracking)
    experiment = client.get_experiment_by_name("team")
    assert experiment is not None
    assert len(client.search_runs([experiment.experiment_id])) == 4


def test_compare_by_run_id_against_a_closed_port_exits_3_quickly(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys
    import time

    env = {**os.environ, "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{free_port()}"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    env.pop("MLFLOW_RUN_ID", None)
    started = time.monotonic()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sommelier_mlflow.cli",
            "compare",
            "--base-run-id",
            "a" * 32,
            "--adapter-run-id",
            "b" * 32,
            "--out",
            str(tmp_path / "c"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 3, result.stderr
    assert time.monotonic() - started < 30
    assert result.stderr.startswith("error: cannot reach the MLflow tracking server")
    assert not (tmp_path / "c").exists()  # nothing was done before the probe


@pytest.mark.parametrize("flag", ["--model", "--adapter"])
def test_credentials_in_model_urls_are_never_printed(
    files: dict[str, Path], tmp_path: Path, flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "https://ann:pw-s3cr3t-42@models.example.com/org/x"
    args = ["evaluate", "--test-split", str(files["split"])]
    if flag == "--model":
        args += ["--model-kind", "base", "--model", url]
    else:
        args += ["--model-kind", "adapter", "--model", str(tmp_path), "--adapter", url]
    capsys.readouterr()
    code = main([*args, "--out", str(tmp_path / "o")])
    printed = capsys.readouterr()
    assert code == 3, printed.err
    assert "models.example.com" in printed.err  # the message still says which source failed
    assert "pw-s3cr3t-42" not in printed.err + printed.out


def test_ui_hint_scrubs_and_names_the_right_action() -> None:
    from sommelier_mlflow.cli._runs import ui_hint

    http = ui_hint("https://bob:hunter2-pw@mlflow.example.com")
    assert "hunter2" not in http and "mlflow ui" not in http
    assert "mlflow.example.com" in http and "browser" in http
    local = ui_hint("sqlite:///tmp/mlruns.db")
    assert local == "open the UI: mlflow ui --backend-store-uri sqlite:///tmp/mlruns.db"


def test_mlflow_run_params_with_credentials_delete_the_run(
    files: dict[str, Path],
    tmp_path: Path,
    sqlite_tracking: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sqlite_tracking)
    experiment_id = client.create_experiment("reliability")
    # What `mlflow run -P model=https://user:pw@host/x` leaves before our command starts.
    run = client.create_run(experiment_id)
    client.log_param(run.info.run_id, "model", "https://ann:pw-s3cr3t-42@hub.example.com/x")
    client.log_param(run.info.run_id, "model_kind", "base")
    monkeypatch.setenv("MLFLOW_RUN_ID", run.info.run_id)
    capsys.readouterr()
    assert main(_generations_args(files, tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert "HF_TOKEN" in err and "mlflow gc" in err and "model" in err
    assert "pw-s3cr3t-42" not in err
    assert client.get_run(run.info.run_id).info.lifecycle_stage == "deleted"
    assert not (tmp_path / "o").exists()  # stopped before any work


def test_mlflow_run_params_without_credentials_are_accepted(
    files: dict[str, Path], tmp_path: Path, sqlite_tracking: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(sqlite_tracking)
    run = client.create_run(client.create_experiment("reliability"))
    client.log_param(run.info.run_id, "model", "Qwen/Qwen2.5-0.5B-Instruct")
    monkeypatch.setenv("MLFLOW_RUN_ID", run.info.run_id)
    assert main(_generations_args(files, tmp_path / "o")) == 0
    assert client.get_run(run.info.run_id).info.lifecycle_stage == "active"
