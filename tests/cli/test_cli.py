from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sommelier_mlflow.cli import build_parser, main
from tests.cli.cli_helpers import (
    ADAPTER_OUTPUTS,
    BASE_OUTPUTS,
    compare_args,
    declared_score_args,
    examples,
    logged_run_id,
    precomputed_rows,
    score_args,
    write_jsonl,
)
from tests.support.net import free_port


def _score(files: dict[str, Path], out: Path, kind: str, *extra: str) -> int:
    return main([*score_args(files, kind, out), *extra])


def test_score_and_compare_write_exact_reports(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _score(files, tmp_path / "base", "base") == 0
    assert _score(files, tmp_path / "adapter", "adapter") == 0
    base = json.loads((tmp_path / "base" / "evaluation_report.json").read_text())
    # Each language slice is the spec's worked example.
    for language in ("en", "fr"):
        metrics = base["slices"][language]["metrics"]
        assert metrics["valid_json_rate"] == {"value": 0.75, "numerator": 3, "denominator": 4}
        assert metrics["argument_f1"] == {"value": 10 / 14, "numerator": 10, "denominator": 14}
        assert metrics["full_call_exact_match"]["numerator"] == 1
    assert base["metrics"]["full_call_exact_match"] == {
        "value": 0.25,
        "numerator": 2,
        "denominator": 8,
    }
    code = main(
        compare_args(
            tmp_path / "base", tmp_path / "adapter", tmp_path / "cmp", "--resamples", "200"
        )
    )
    assert code == 0
    report = json.loads((tmp_path / "cmp" / "comparison" / "comparison_report.json").read_text())
    overall = report["slices"]["overall"]
    assert overall["delta"]["full_call_exact_match"]["value"] == pytest.approx(0.75)
    assert overall["mcnemar"]["b"] == 0 and overall["mcnemar"]["c"] == 6
    assert (tmp_path / "cmp" / "comparison" / "comparison_report.md").is_file()
    assert "comparison:" in capsys.readouterr().out


def test_bad_input_is_exit_2_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"schema_version": "nope"}\n')
    code = main(
        [
            "score",
            "--test-split",
            str(bad),
            "--generations",
            str(tmp_path),
            "--model-kind",
            "base",
            "--model",
            "m",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and str(bad) in err and "Traceback" not in err


def test_refused_comparison_is_exit_4_and_writes_nothing(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _score(files, tmp_path / "base", "base") == 0
    adapter = score_args(files, "adapter", tmp_path / "adapter")
    adapter[adapter.index("--model") + 1] = "another/model"  # an adapter of another base model
    assert main(adapter) == 0
    capsys.readouterr()
    code = main(compare_args(tmp_path / "base", tmp_path / "adapter", tmp_path / "cmp"))
    assert code == 4
    assert "model_identity.base_model" in capsys.readouterr().err
    assert not (tmp_path / "cmp" / "comparison" / "comparison_report.json").exists()


def test_prompt_digest_mismatch_is_exit_5(files: dict[str, Path], tmp_path: Path) -> None:
    path = files["base"] / "en.jsonl"
    lines = path.read_text().splitlines()
    first = json.loads(lines[0])
    first["prompt_sha256"] = "0" * 64
    path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert _score(files, tmp_path / "base", "base") == 5


def test_missing_model_is_exit_3(files: dict[str, Path], tmp_path: Path) -> None:
    code = main(
        [
            "evaluate",
            "--test-split",
            str(files["split"]),
            "--model",
            str(tmp_path / "nowhere"),
            "--model-kind",
            "base",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 3


def test_unknown_identity_is_refused(files: dict[str, Path], tmp_path: Path) -> None:
    code = main(
        [
            "score",
            "--test-split",
            str(files["split"]),
            "--generations",
            str(files["base"]),
            "--model-kind",
            "base",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert code == 2


def test_every_command_has_help() -> None:
    parser = build_parser()
    for command in ("prepare", "evaluate", "score", "compare", "main", "show"):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args([command, "--help"])
        assert exit_info.value.code == 0


def test_console_module_runs_as_a_process(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sommelier_mlflow.cli",
            "compare",
            "--base-report",
            "x.json",
            "--adapter-report",
            str(tmp_path / "missing.json"),
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "error:" in result.stderr and "Traceback" not in result.stderr


def test_unreachable_tracking_server_is_exit_3_before_any_work(
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    assert _score(files, tmp_path / "base", "base", "--mlflow") == 3
    assert "error:" in capsys.readouterr().err
    # The server is probed first (issue 13 #3): no work is done that could not be logged.
    assert not (tmp_path / "base").exists()


def test_precomputed_outputs_replay_through_the_runner(
    files: dict[str, Path], tmp_path: Path
) -> None:
    rows = precomputed_rows(BASE_OUTPUTS)
    precomputed = write_jsonl(tmp_path / "outputs.jsonl", rows)
    common = [
        "score",
        "--test-split",
        str(files["split"]),
        "--model-kind",
        "base",
        "--model",
        "tiny/model",
        "--revision",
        "abc123",
        "--resamples",
        "200",
    ]
    # The producer's decoding must be declared.
    assert main([*common, "--precomputed", str(precomputed), "--out", str(tmp_path / "x")]) == 2
    declared = ["--max-new-tokens", "32", "--batch-size", "2"]
    code = main(
        [*common, "--precomputed", str(precomputed), *declared, "--out", str(tmp_path / "p")]
    )
    assert code == 0
    assert main([*common, "--generations", str(files["base"]), "--out", str(tmp_path / "g")]) == 0
    replayed = json.loads((tmp_path / "p" / "evaluation_report.json").read_text())
    scored = json.loads((tmp_path / "g" / "evaluation_report.json").read_text())
    # Same completions, same declared decoding: the same report, byte for byte in every number.
    assert replayed["metrics"] == scored["metrics"]
    assert replayed["identity"] == scored["identity"]
    assert (tmp_path / "p" / "generations" / "fr.jsonl").read_bytes() == (
        files["base"] / "fr.jsonl"
    ).read_bytes()
    rows[0]["example_id"] = "nope"
    write_jsonl(precomputed, rows)
    assert (
        main([*common, "--precomputed", str(precomputed), *declared, "--out", str(tmp_path / "q")])
        == 2
    )


def test_score_needs_exactly_one_source(
    files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    precomputed = write_jsonl(tmp_path / "outputs.jsonl", precomputed_rows(BASE_OUTPUTS))
    common = declared_score_args(files["split"])
    both = ["--generations", str(files["base"]), "--precomputed", str(precomputed)]
    assert main([*common, *both, "--out", str(tmp_path / "both")]) == 2
    assert "both were given" in capsys.readouterr().err
    # What `mlflow run -e score` passes for a parameter left out: /dev/null.
    neither = ["--generations", "/dev/null", "--precomputed", "/dev/null"]
    assert main([*common, *neither, "--out", str(tmp_path / "neither")]) == 2
    assert "neither was given" in capsys.readouterr().err
    assert not (tmp_path / "both").exists() and not (tmp_path / "neither").exists()
    one = ["--generations", "/dev/null", "--precomputed", str(precomputed)]
    assert main([*common, *one, "--out", str(tmp_path / "one")]) == 0


def test_served_adapter_name_is_recorded_as_served(files: dict[str, Path], tmp_path: Path) -> None:
    precomputed = tmp_path / "adapter.csv"
    lines = ["example_id,raw_text"] + [
        f'{row["example_id"]},"{row["raw_text"].replace(chr(34), chr(34) * 2)}"'
        for row in precomputed_rows(ADAPTER_OUTPUTS)
    ]
    precomputed.write_text("\n".join(lines) + "\n")
    args = declared_score_args(files["split"], "adapter")
    args += ["--precomputed", str(precomputed), "--out", str(tmp_path / "served")]
    assert main([*args, "--adapter", "my-lora"]) == 0
    report = json.loads((tmp_path / "served" / "evaluation_report.json").read_text())
    assert report["identity"]["adapter"] == {
        "source": "served:my-lora",
        "sha256": "unverified:served-elsewhere",
    }
    assert report["metrics"]["full_call_exact_match"]["numerator"] == 8
    # Something that looks like a path must be there: a missing directory is exit 3.
    missing = str(tmp_path / "no-such-adapter")
    assert main([*args[:-1], str(tmp_path / "m"), "--adapter", missing]) == 3


@pytest.fixture
def logged_arms(
    files: dict[str, Path],
    tmp_path: Path,
    tracking_uri: str,
    capsys: pytest.CaptureFixture[str],
) -> tuple[str, dict[str, str]]:
    """Score both arms into a fresh SQLite store; return its URI and each arm's run id.

    The store stays the test's ``MLFLOW_TRACKING_URI``; the arms' folders are
    ``tmp_path / "base"`` and ``tmp_path / "adapter"``.
    """
    ids = {}
    for kind in ("base", "adapter"):
        assert _score(files, tmp_path / kind, kind, "--mlflow", "--log-traces", "false") == 0
        ids[kind] = logged_run_id(capsys.readouterr().out)
    return tracking_uri, ids


def _compare_runs(ids: dict[str, str], out: Path, *extra: str) -> int:
    """``compare`` of the two arms' runs by id, with the resamples the arms were scored with."""
    compare = ["compare", "--base-run-id", ids["base"], "--adapter-run-id", ids["adapter"]]
    return main([*compare, "--out", str(out), "--resamples", "200", *extra])


def test_show_prints_the_logged_summary_from_any_store(
    logged_arms: tuple[str, dict[str, str]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from sommelier_mlflow.cli._main_command import format_summary
    from sommelier_mlflow.cli._show import format_arm_summary
    from sommelier_mlflow.evaluation import read_comparison_report, read_evaluation_report

    uri, ids = logged_arms
    assert _compare_runs(ids, tmp_path / "cmp", "--mlflow") == 0
    comparison_id = logged_run_id(capsys.readouterr().out)

    # From another "machine": only the store's URI, passed explicitly.
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert main(["show", comparison_id, "--tracking-uri", uri]) == 0
    local = read_comparison_report(tmp_path / "cmp" / "comparison" / "comparison_report.json")
    assert capsys.readouterr().out == format_summary(local) + "\n"
    assert main(["show", ids["base"], "--tracking-uri", uri]) == 0
    shown = capsys.readouterr().out
    base = read_evaluation_report(tmp_path / "base" / "evaluation_report.json")
    assert shown == format_arm_summary(base) + "\n"
    lines = shown.splitlines()
    assert lines[2].split() == ["overall", "valid_json_rate", "0.750", "6/8"]
    assert "fr full_call_exact_match 0.250 1/4" in {" ".join(line.split()) for line in lines}

    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert main(["show", "0" * 32]) == 2
    assert "error:" in capsys.readouterr().err


def test_a_report_copied_over_a_runs_artifact_is_refused(
    logged_arms: tuple[str, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    from mlflow.tracking import MlflowClient

    uri, ids = logged_arms
    # The adapter's own, self-consistent report is copied over the base run's artifact.
    swapped = tmp_path / "swap" / "evaluation_report.json"
    swapped.parent.mkdir()
    shutil.copy(tmp_path / "adapter" / "evaluation_report.json", swapped)
    MlflowClient(uri).log_artifact(ids["base"], str(swapped), "sommelier")

    assert main(["show", ids["base"]]) == 5
    err = capsys.readouterr().err
    assert f"error: run {ids['base']}" in err and "sommelier.report_sha256" in err
    assert _compare_runs(ids, tmp_path / "cmp") == 5
    assert "replaced after logging" in capsys.readouterr().err
    assert not list((tmp_path / "cmp").rglob("comparison_report.*"))
    # A run logged before the digest tag existed is still held to its logged metrics.
    MlflowClient(uri).delete_tag(ids["base"], "sommelier.report_sha256")
    assert main(["show", ids["base"]]) == 5
    err = capsys.readouterr().err
    assert "but the run logged overall/" in err, err


def test_a_deleted_run_is_refused_by_show_and_compare_naming_it(
    logged_arms: tuple[str, dict[str, str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    uri, ids = logged_arms
    MlflowClient(uri).delete_run(ids["adapter"])  # in the trash: no longer anyone's result
    assert main(["show", ids["adapter"]]) == 2
    err = capsys.readouterr().err
    assert f"error: run {ids['adapter']} is deleted" in err
    assert f"mlflow runs restore --run-id {ids['adapter']}" in err
    assert _compare_runs(ids, tmp_path / "cmp") == 2
    assert f"error: run {ids['adapter']} is deleted" in capsys.readouterr().err
    assert not list((tmp_path / "cmp").rglob("comparison_report.*"))
    MlflowClient(uri).restore_run(ids["adapter"])
    assert main(["show", ids["adapter"]]) == 0


def test_progress_bars_are_quiet_off_a_terminal_unless_asked(
    files: dict[str, Path], tmp_path: Path
) -> None:
    import os

    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}"}
    env.pop("MLFLOW_RUN_ID", None)
    command = [sys.executable, "-m", "sommelier_mlflow.cli", "score", "--mlflow"]
    command += ["--test-split", str(files["split"]), "--generations", str(files["base"])]
    command += ["--model-kind", "base", "--model", "tiny/model", "--resamples", "100"]
    for flag, out in (([], "quiet"), (["--progress"], "loud")):
        result = subprocess.run(
            [*command, *flag, "--out", str(tmp_path / out)],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        assert result.returncode == 0, result.stderr[-2000:]
        assert ("log traces" in result.stderr) == bool(flag)
        assert "(8 traces)" in result.stdout


def test_precomputed_rows_are_matched_by_example_id_not_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two examples with one prompt each keep their own row's text (issue 23 #1).

    Keyed by prompt text, the second row overwrote the first: both examples were
    scored with one text, silently, exit 0.
    """
    import dataclasses

    from sommelier_mlflow.data import write_test_split

    originals = examples()
    shared = {ex.example_id: ex for ex in originals if ex.language == "en"}
    # Every French example gets its English root's prompt: same prompt, other row.
    same_prompt = [
        ex
        if ex.source_example_id is None
        else dataclasses.replace(
            ex,
            prompt_text=shared[ex.source_example_id].prompt_text,
            prompt_sha256=shared[ex.source_example_id].prompt_sha256,
        )
        for ex in originals
    ]
    split = write_test_split(tmp_path / "split.jsonl", same_prompt)
    rows = precomputed_rows(BASE_OUTPUTS)
    for row in rows:
        if row["example_id"].startswith("fr-"):
            row["raw_text"] = f"french answer {row['example_id']}"
    precomputed = write_jsonl(tmp_path / "outputs.jsonl", rows)
    args = [*declared_score_args(Path(split)), "--resamples", "50"]
    assert main([*args, "--precomputed", str(precomputed), "--out", str(tmp_path / "p")]) == 0
    written = {
        record["example_id"]: record["raw_text"]
        for name in ("en", "fr")
        for record in map(
            json.loads,
            (tmp_path / "p" / "generations" / f"{name}.jsonl").read_text().splitlines(),
        )
    }
    assert written == {row["example_id"]: row["raw_text"] for row in rows}
    report = json.loads((tmp_path / "p" / "evaluation_report.json").read_text())
    assert report["slices"]["en"]["metrics"]["full_call_exact_match"]["numerator"] == 1
    assert report["slices"]["fr"]["metrics"]["valid_json_rate"]["numerator"] == 0
    # A row that carries its prompt's digest is checked against the example's prompt.
    rows[1]["prompt_sha256"] = "0" * 64
    write_jsonl(precomputed, rows)
    capsys.readouterr()
    assert main([*args, "--precomputed", str(precomputed), "--out", str(tmp_path / "q")]) == 5
    err = capsys.readouterr().err
    assert "prompt_sha256" in err and rows[1]["example_id"] in err
    assert not (tmp_path / "q").exists()
