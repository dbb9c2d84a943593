from __future__ import annotations

import json
import socket
from pathlib import Path

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from sommelier_mlflow._json import dumps_line, loads
from sommelier_mlflow.errors import ConfigError, TrackingError
from sommelier_mlflow.evaluation import EvaluationReport
from sommelier_mlflow.integration import (
    MAX_METRICS_PER_BATCH,
    REDACTED,
    check_tracking_server,
    comparison_metric_keys,
    evaluation_metric_keys,
    log_comparison_run,
    log_evaluation_run,
    log_metrics_batch,
    log_params,
    redact,
)
from sommelier_mlflow.integration._primitives import log_test_split_input
from sommelier_mlflow.toolcalls import METRIC_NAMES, PARSER_VERSION
from tests.integration.integration_helpers import DECODING, Arms, Store

FAKE_TOKEN = "hf_FakeTokenForTestsOnly0123456789abcdef"


def _new_run(store: Store) -> str:
    return MlflowClient().create_run(store.experiment_id).info.run_id


def _download(run_id: str, path: str, tmp_path: Path) -> Path:
    return Path(
        mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path=path, dst_path=tmp_path)
    )


def _all_logged_text(run_id: str, tmp_path: Path) -> str:
    """Everything a run exposes: params, tags, inputs and every artifact file's bytes."""
    run = MlflowClient().get_run(run_id)
    parts = [json.dumps(run.data.params), json.dumps(run.data.tags)]
    for dataset_input in run.inputs.dataset_inputs:
        parts.append(dataset_input.dataset.source)
        parts.append(dataset_input.dataset.name)
    root = _download(run_id, "", tmp_path / "all")
    for path in sorted(root.rglob("*")):
        if path.is_file():
            parts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(parts)


@pytest.fixture
def outputs_dir(tmp_path: Path, arms: Arms) -> Path:
    """A local output directory like the CLI's: generations per slice."""
    directory = tmp_path / "out"
    (directory / "generations").mkdir(parents=True)
    for language in ("en", "fr"):
        rows = [
            {"example_id": e.example_id, "raw_text": e.raw_text, "language": e.language}
            for e in arms.base.examples
            if e.language == language
        ]
        (directory / "generations" / f"{language}.jsonl").write_bytes(
            b"".join(dumps_line(row) for row in rows)
        )
    return directory


def test_evaluation_run_records_metrics_params_tags_input_and_artifacts(
    store: Store, arms: Arms, outputs_dir: Path, tmp_path: Path
) -> None:
    run_id = _new_run(store)
    keys = log_evaluation_run(
        arms.base_typed,
        run_id=run_id,
        artifact_files=sorted(path for path in outputs_dir.rglob("*") if path.is_file()),
        artifacts_root=outputs_dir,
        test_split_path=arms.split_path,
        split=arms.split,
        table_rows=arms.base.table_rows(),
        params={"max_examples": 6},
    )
    run = MlflowClient().get_run(run_id)

    assert keys == evaluation_metric_keys(arms.base_typed)
    assert run.data.metrics == keys
    assert run.data.metrics["en/valid_json_rate"] == 0.75
    assert run.data.metrics["en/counts/valid_json_rate.numerator"] == 3.0
    assert run.data.metrics["en/counts/valid_json_rate.denominator"] == 4.0
    assert run.data.metrics["overall/counts/argument_f1.numerator"] == 14.0
    assert run.data.metrics["overall/counts/argument_f1.denominator"] == 20.0
    assert run.data.metrics["gap/fr/pairs"] == 2.0

    assert run.data.params == {
        "base_model": "tiny/base-model",
        "base_revision": "rev-1",
        "tokenizer": "tiny/base-model",
        "tokenizer_revision": "rev-1",
        "adapter_source": "None",
        "adapter_sha256": "None",
        "parser_version": PARSER_VERSION,
        "decoding.temperature": "0.0",
        "decoding.do_sample": "False",
        "decoding.max_new_tokens": str(DECODING["max_new_tokens"]),
        "decoding.batch_size": str(DECODING["batch_size"]),
        "bootstrap.seed": "0",
        "bootstrap.resamples": "300",
        "bootstrap.confidence": "0.95",
        "bootstrap.method": arms.base_report["bootstrap"]["method"],
        "max_examples": "6",
    }
    assert run.data.tags["sommelier.model_kind"] == "base"
    assert run.data.tags["sommelier.parser_version"] == PARSER_VERSION
    assert run.data.tags["sommelier.test_split_sha256"] == arms.split.sha256

    (dataset_input,) = run.inputs.dataset_inputs
    assert dataset_input.dataset.digest == arms.split.sha256[:16]
    assert dataset_input.dataset.name == "test.jsonl"
    assert json.loads(dataset_input.dataset.source) == {"uri": str(arms.split_path.resolve())}
    assert json.loads(dataset_input.dataset.profile)["num_rows"] == len(arms.split.examples)
    assert {(tag.key, tag.value) for tag in dataset_input.tags} == {("mlflow.data.context", "test")}

    report = loads(_download(run_id, "sommelier/evaluation_report.json", tmp_path).read_bytes())
    assert report == arms.base_report
    generations = _download(run_id, "sommelier/generations/fr.jsonl", tmp_path).read_bytes()
    assert generations == (outputs_dir / "generations" / "fr.jsonl").read_bytes()
    table = json.loads(_download(run_id, "sommelier/examples.json", tmp_path).read_text())
    assert table["columns"][:3] == ["example_id", "language", "parse_status"]
    rows = [dict(zip(table["columns"], row, strict=True)) for row in table["data"]]
    assert [row["example_id"] for row in rows] == ["e1", "e2", "e3", "e4", "f1", "f3"]
    assert rows[3]["parse_status"] == "no_json"
    assert rows[0]["full_call_correct"] is True
    assert (rows[1]["argument_f1_numerator"], rows[1]["argument_f1_denominator"]) == (2, 4)
    assert json.loads(run.data.tags["mlflow.loggedArtifacts"]) == [
        {"path": "sommelier/examples.json", "type": "table"}
    ]


def test_comparison_run_records_keys_reports_and_chart(
    store: Store, arms: Arms, tmp_path: Path
) -> None:
    run_id = _new_run(store)
    keys = log_comparison_run(arms.comparison_typed, run_id=run_id, params={"note": "ci"})
    run = MlflowClient().get_run(run_id)

    assert run.data.metrics == keys == comparison_metric_keys(arms.comparison_typed)
    assert run.data.metrics["mcnemar/overall/p_value"] == pytest.approx(0.125)
    assert run.data.tags["sommelier.model_kind"] == "comparison"
    assert run.data.tags["sommelier.test_split_sha256"] == arms.split.sha256
    assert run.data.params["adapter_sha256"] == "ab" * 32
    assert run.data.params["bootstrap.resamples"] == "300"
    assert run.data.params["note"] == "ci"

    report = loads(_download(run_id, "sommelier/comparison_report.json", tmp_path).read_bytes())
    assert report == arms.comparison
    markdown = _download(run_id, "sommelier/comparison_report.md", tmp_path).read_text()
    assert "full_call_exact_match" in markdown
    chart = _download(run_id, "sommelier/comparison.png", tmp_path).read_bytes()
    assert chart.startswith(b"\x89PNG\r\n\x1a\n") and len(chart) > 10_000
    gaps = _download(run_id, "sommelier/gaps.png", tmp_path).read_bytes()
    assert gaps.startswith(b"\x89PNG\r\n\x1a\n") and len(gaps) > 10_000


def test_metric_batches_respect_mlflows_limit(store: Store) -> None:
    run_id = _new_run(store)
    metrics = {f"overall/synthetic/m{index:04d}": float(index) for index in range(2_345)}
    calls = log_metrics_batch(run_id, metrics)
    assert calls == 3  # 1000 + 1000 + 345
    assert MAX_METRICS_PER_BATCH == 1000
    assert MlflowClient().get_run(run_id).data.metrics == metrics


def test_all_keys_of_a_run_go_in_one_request(store: Store, arms: Arms) -> None:
    run_id = _new_run(store)
    assert log_metrics_batch(run_id, evaluation_metric_keys(arms.base_typed)) == 1
    assert log_metrics_batch(run_id, {}) == 0


def test_params_are_flattened_batched_and_refused_on_change(store: Store) -> None:
    run_id = _new_run(store)
    params = {f"p{index:03d}": index for index in range(150)}
    logged = log_params(run_id, {"decoding": {"batch_size": 8}, "langs": ["en", "fr"], **params})
    assert logged["decoding.batch_size"] == "8"
    assert logged["langs"] == '["en","fr"]'
    assert len(MlflowClient().get_run(run_id).data.params) == 152
    with pytest.raises(ConfigError, match="MLflow refused to log params"):
        log_params(run_id, {"p000": "different"})


def test_secrets_never_reach_the_tracking_store(
    store: Store,
    arms: Arms,
    outputs_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env_token = "envsecret-TOKEN-value-987654321"
    monkeypatch.setenv("HF_TOKEN", env_token)
    leaky_uri = "https://alice:pa55w0rd-xyz@hub.example.com/org/adapter"
    (outputs_dir / "run.log").write_text(
        f"loaded with token {env_token} and {FAKE_TOKEN} from {leaky_uri}\n", encoding="utf-8"
    )
    report = json.loads(json.dumps(arms.adapter_report))
    report["identity"]["adapter"]["source"] = leaky_uri

    run_id = _new_run(store)
    log_evaluation_run(
        EvaluationReport.from_json(report),
        run_id=run_id,
        artifact_files=sorted(path for path in outputs_dir.rglob("*") if path.is_file()),
        artifacts_root=outputs_dir,
        test_split_path=arms.split_path,
        split=arms.split,
        table_rows=[{"example_id": "x", "raw_text": f"token={env_token}"}],
        params={"hf_token": FAKE_TOKEN, "model_uri": leaky_uri, "note": f"HF_TOKEN={env_token}"},
    )
    logged = _all_logged_text(run_id, tmp_path)

    for secret in (env_token, FAKE_TOKEN, "pa55w0rd-xyz", "alice:"):
        assert secret not in logged
    params = MlflowClient().get_run(run_id).data.params
    assert params["hf_token"] == REDACTED
    assert params["adapter_source"] == f"https://{REDACTED}@hub.example.com/org/adapter"
    assert params["model_uri"] == f"https://{REDACTED}@hub.example.com/org/adapter"
    # The local files stay untouched; only the logged copies are scrubbed.
    assert env_token in (outputs_dir / "run.log").read_text(encoding="utf-8")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_unreachable_server_is_a_tracking_error_without_credentials(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    uri = f"http://bob:hunter2-secret@127.0.0.1:{_closed_port()}"

    with pytest.raises(TrackingError, match="cannot reach the MLflow tracking server") as probe:
        check_tracking_server(uri, timeout=5)
    assert probe.value.exit_code == 3
    assert "hunter2" not in str(probe.value)

    with pytest.raises(TrackingError, match="unreachable") as logging_error:
        log_metrics_batch("0" * 32, {"overall/valid_json_rate": 1.0}, client=MlflowClient(uri))
    assert "hunter2" not in str(logging_error.value)
    assert logging_error.value.__cause__ is None  # the original message holds the password


def test_unusable_local_store_is_a_tracking_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(TrackingError):
        check_tracking_server(f"sqlite:///{blocker / 'mlflow.db'}")


def test_reachable_store_passes_the_probe(store: Store) -> None:
    assert check_tracking_server(store.uri) == store.uri


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("https://user:pw@host/x", f"https://{REDACTED}@host/x"),
        ("postgresql://u:p@db:5432/mlflow", f"postgresql://{REDACTED}@db:5432/mlflow"),
        (f"--hf_token={FAKE_TOKEN}", f"--hf_token={REDACTED}"),
        ("see hf_abcdefghijklmnopqrstuvwxyz012345 here", f"see {REDACTED} here"),
        ("https://host/x?api_key=s3cr3t&page=2", f"https://host/x?api_key={REDACTED}&page=2"),
        ("max_new_tokens=64 tokenizer=gpt2", "max_new_tokens=64 tokenizer=gpt2"),
        ("file:///tmp/adapter", "file:///tmp/adapter"),
    ],
)
def test_redact(raw: str, clean: str) -> None:
    assert redact(raw) == clean


def test_report_metric_names_are_all_logged(store: Store, arms: Arms) -> None:
    run_id = _new_run(store)
    log_metrics_batch(run_id, evaluation_metric_keys(arms.adapter_typed))
    metrics = MlflowClient().get_run(run_id).data.metrics
    for name in METRIC_NAMES:
        assert metrics[f"overall/{name}"] == 1.0
        assert metrics[f"fr/counts/{name}.numerator"] == metrics[f"fr/counts/{name}.denominator"]


def test_a_run_that_loses_the_race_to_insert_its_split_is_linked_to_the_winners_row(
    store: Store, arms: Arms
) -> None:
    """Runs logging one split at once race to insert its dataset row: MLflow checks, then inserts.

    Here another writer commits the same row between MLflow's check and its
    insert, as a concurrent run does (on SQLite the loser's insert fails on the
    key, exit 2 before the fix); the run must end up linked to that one row.
    """
    import sqlite3

    from mlflow.store.tracking.dbmodels.models import SqlDataset
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    database = store.uri.removeprefix("sqlite:///")
    experiment_id = MlflowClient().create_experiment("split-insert-race")
    run_id = MlflowClient().create_run(experiment_id).info.run_id
    columns = (
        "experiment_id, name, digest, dataset_source_type, dataset_source, "
        "dataset_schema, dataset_profile"
    )
    raced: list[str] = []

    def another_run_inserts_first(session: Session, *_: object) -> None:
        for row in session.new:
            if isinstance(row, SqlDataset) and not raced:
                raced.append(row.name)
                values = [getattr(row, column) for column in columns.split(", ")]
                other = sqlite3.connect(database)
                with other:  # commits
                    other.execute(
                        f"INSERT INTO datasets (dataset_uuid, {columns}) "
                        "VALUES ('winner', ?, ?, ?, ?, ?, ?, ?)",
                        values,
                    )
                other.close()

    event.listen(Session, "before_flush", another_run_inserts_first)
    try:
        digest = log_test_split_input(arms.split_path, run_id=run_id, split=arms.split)
    finally:
        event.remove(Session, "before_flush", another_run_inserts_first)
    assert raced == ["test.jsonl"]
    (dataset_input,) = MlflowClient().get_run(run_id).inputs.dataset_inputs
    assert dataset_input.dataset.digest == digest
    with sqlite3.connect(database) as check:
        rows = check.execute(
            "SELECT dataset_uuid FROM datasets WHERE experiment_id = ?", (experiment_id,)
        ).fetchall()
    assert rows == [("winner",)]
