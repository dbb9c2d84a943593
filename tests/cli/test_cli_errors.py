"""What a failure says: the exit code under `mlflow run`, the flag meant when one is misspelled."""

from __future__ import annotations

from pathlib import Path

import pytest

from sommelier_mlflow.cli import main
from tests.cli.cli_helpers import score_args
from tests.support.mlflow_run import mlflow_run_process


@pytest.fixture
def under_mlflow_run(tracking_uri: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real run in a fresh store, set as ``MLFLOW_RUN_ID`` the way `mlflow run` sets it."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    run_id: str = client.create_run(client.create_experiment("errors")).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", run_id)
    return run_id


def test_under_mlflow_run_an_error_line_states_its_exit_code(
    under_mlflow_run: str,
    files: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema_version": "nope"}\n')
    args = score_args(files, "base", tmp_path / "out")
    args[args.index("--test-split") + 1] = str(bad)
    assert main(args) == 2
    assert capsys.readouterr().err.startswith(f"error (exit code 2): {bad}")

    missing = tmp_path / "nowhere"
    evaluate = ["evaluate", "--test-split", str(files["split"]), "--model", str(missing)]
    assert main([*evaluate, "--model-kind", "base", "--out", str(tmp_path / "e")]) == 3
    assert capsys.readouterr().err.startswith("error (exit code 3): ")


def test_in_a_shell_the_error_line_leaves_the_code_to_the_exit_status(
    tracking_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.jsonl"
    args = ["score", "--test-split", str(missing), "--generations", str(tmp_path)]
    assert main([*args, "--model-kind", "base", "--model", "m"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {missing}")


def test_a_misspelled_mlproject_parameter_names_the_closest_one(
    under_mlflow_run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`-P max_exampels=10` reaches the command as `--max_exampels 10`."""
    with pytest.raises(SystemExit) as exited:
        main(
            ["main", "--test-split", "s", "--model", "m", "--adapter", "a", "--max_exampels", "10"]
        )
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: sommelier-mlflow main ")
    assert (
        "sommelier-mlflow main: error (exit code 2): unknown parameter 'max_exampels': "
        "did you mean 'max_examples' (--max-examples)?"
    ) in err


def test_a_misspelled_flag_names_the_closest_flag_and_an_unknown_one_says_so(
    tracking_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["compare", "--base-report", "b", "--adapter-report", "a", "--resampels", "9"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "error: unknown option --resampels: did you mean --resamples?" in err
    with pytest.raises(SystemExit):
        main(["backends", "--zzz"])
    err = capsys.readouterr().err
    assert "unknown option --zzz: this command has no such option" in err
    assert "`sommelier-mlflow backends --help` lists its options" in err


def test_a_near_miss_of_a_renamed_flag_names_the_parameter_not_the_old_flag(
    under_mlflow_run: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`backend_optio` is closest to the old `--backend-option`, which no MLproject declares."""
    args = ["evaluate", "--test-split", "s", "--model-kind", "base", "--backend_optio", "x=1"]
    with pytest.raises(SystemExit) as exited:
        main(args)
    assert exited.value.code == 2
    assert (
        "unknown parameter 'backend_optio': did you mean 'backend_options' (--backend-options)?"
    ) in capsys.readouterr().err


@pytest.mark.slow
def test_mlflow_run_with_a_misspelled_parameter(tmp_path: Path) -> None:
    """The real `mlflow run`: it exits 1, the command's line says 2 and the parameter meant."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = mlflow_run_process(
        uri, tmp_path, "evaluate", test_split="split.jsonl", max_exampels="10"
    )
    assert result.returncode == 1  # MLflow wraps the command's failure (README says so)
    assert (
        "error (exit code 2): unknown parameter 'max_exampels': did you mean 'max_examples'"
    ) in result.stderr
