"""Claims through the command line: verdict output, exit 6, exit 2/4, preregistration in MLflow."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from tests.cli.cli_helpers import compare_args, score_args, write_fixture

FR_GAIN = {
    "id": "fr-gain",
    "slice": "fr",
    "metric": "full_call_exact_match",
    "kind": "superiority",
    "margin": 0.0,
}
EN_LEAP = {
    "id": "en-leap",
    "slice": "en",
    "metric": "full_call_exact_match",
    "kind": "superiority",
    "margin": 0.9,
}


def _claims(path: Path, *claims: dict[str, Any], **extra: Any) -> Path:
    document = {"schema_version": "sommelier_mlflow.claims.v1", "claims": list(claims), **extra}
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _score(files: dict[str, Path], out: Path, kind: str, *extra: str) -> None:
    assert main([*score_args(files, kind, out), *extra]) == 0


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Both arms of the CLI fixture, scored once for the module: each arm's ``--out`` folder."""
    root = tmp_path_factory.mktemp("arms")
    files = write_fixture(root / "in")
    _score(files, root / "base", "base")
    _score(files, root / "adapter", "adapter")
    return {"base": root / "base", "adapter": root / "adapter"}


def _compare(arms: dict[str, Path], out: Path, *extra: str) -> int:
    return main(compare_args(arms["base"], arms["adapter"], out, "--resamples", "200", *extra))


def test_compare_prints_and_records_the_verdict(
    arms: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claims = _claims(tmp_path / "claims.json", FR_GAIN)
    assert _compare(arms, tmp_path / "cmp", "--claims", str(claims)) == 0
    out = capsys.readouterr().out
    assert "verdict: supported" in out
    assert "fr-gain" in out
    report = json.loads((tmp_path / "cmp" / "comparison" / "comparison_report.json").read_text())
    assert report["claims"]["verdict"] == "supported"
    markdown = (tmp_path / "cmp" / "comparison" / "comparison_report.md").read_text()
    assert "verdict SUPPORTED" in markdown


def test_empty_claims_option_means_no_claims(arms: dict[str, Path], tmp_path: Path) -> None:
    # The MLproject passes `--claims ''` when the parameter is left at its default.
    assert _compare(arms, tmp_path / "cmp", "--claims", "") == 0
    report = json.loads((tmp_path / "cmp" / "comparison" / "comparison_report.json").read_text())
    assert "claims" not in report


def test_fail_on_unsupported_exits_6_after_writing_the_reports(
    arms: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    claims = _claims(tmp_path / "claims.json", FR_GAIN, EN_LEAP)
    args = ("--claims", str(claims))
    assert _compare(arms, tmp_path / "lenient", *args) == 0
    code = _compare(arms, tmp_path / "strict", *args, "--fail-on-unsupported")
    captured = capsys.readouterr()
    assert code == 6
    assert "error: claim(s) not supported" in captured.err
    assert "en-leap" in captured.err and "fr-gain" not in captured.err
    assert "Traceback" not in captured.err
    report = json.loads((tmp_path / "strict" / "comparison" / "comparison_report.json").read_text())
    assert report["claims"]["verdict"] == "not_supported"


@pytest.mark.parametrize(
    ("claim", "extra", "code", "named"),
    [
        ({**FR_GAIN, "slice": "de"}, {}, 2, "unknown slice 'de'"),
        ({**FR_GAIN, "margin": -0.1}, {}, 2, "margin"),
        (FR_GAIN, {"seed": 9}, 4, "--seed 9"),
        (FR_GAIN, {"resamples": 999}, 4, "--resamples 999"),
    ],
)
def test_bad_claims_exit_with_their_code_and_write_nothing(
    arms: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    claim: dict[str, Any],
    extra: dict[str, Any],
    code: int,
    named: str,
) -> None:
    claims = _claims(tmp_path / "claims.json", claim, **extra)
    assert _compare(arms, tmp_path / "cmp", "--claims", str(claims)) == code
    assert named in capsys.readouterr().err
    assert not (tmp_path / "cmp" / "comparison" / "comparison_report.json").exists()


@pytest.mark.filterwarnings(
    "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"
)
def test_preregistration_through_mlflow(
    tmp_path: Path,
    tracking_uri: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "claims-cli")
    # Artifacts in the test's folder, not in ./mlruns of whoever runs the tests.
    MlflowClient(tracking_uri).create_experiment(
        "claims-cli", artifact_location=(tmp_path / "artifacts").as_uri()
    )
    claims = _claims(tmp_path / "claims.json", FR_GAIN, EN_LEAP)
    assert main(["claims", "register", str(claims)]) == 0
    registered = capsys.readouterr().out
    assert "sha256" in registered
    files = write_fixture(tmp_path / "in")
    _score(files, tmp_path / "base", "base", "--mlflow")
    _score(files, tmp_path / "adapter", "adapter", "--mlflow")
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("claims-cli")
    runs = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    ids = {run.data.tags.get("sommelier.model_kind"): run.info.run_id for run in runs}
    assert set(ids) == {"claims", "base", "adapter"}

    def compare(path: Path, *extra: str) -> int:
        return main(
            [
                "compare",
                "--base-run-id",
                ids["base"],
                "--adapter-run-id",
                ids["adapter"],
                "--out",
                str(tmp_path / f"cmp-{path.stem}"),
                "--resamples",
                "200",
                "--claims",
                str(path),
                "--require-registered",
                "--mlflow",
                *extra,
            ]
        )

    # A file edited after registration (here: one byte) is refused.
    edited = tmp_path / "edited.json"
    edited.write_bytes(claims.read_bytes() + b"\n")
    assert compare(edited) == 4
    assert "never registered" in capsys.readouterr().err

    assert compare(claims, "--fail-on-unsupported") == 6
    out = capsys.readouterr().out
    assert "preregistration: registered before the arms ran" in out
    comparison = client.search_runs(
        [experiment.experiment_id], filter_string="tags.`sommelier.model_kind` = 'comparison'"
    )
    (run,) = comparison
    assert run.data.tags["sommelier.verdict"] == "not_supported"
    assert run.data.tags["sommelier.claim.fr-gain"] == "supported"
    assert run.data.tags["sommelier.claim.en-leap"] == "not_supported"
    local = client.download_artifacts(
        run.info.run_id, "sommelier/comparison_report.json", str(tmp_path / "dl")
    )
    registration = json.loads(Path(local).read_text())["claims"]["registration"]
    assert registration["registered_before_arms"] is True
    assert registration["run_id"] == ids["claims"]
