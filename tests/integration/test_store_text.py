"""Text no tracking store holds (NUL, lone surrogates): one escaping rule where MLflow keeps text.

The raw text stays in ``generations/`` (see ``tests/cli`` and the team server
test); here, the rule itself and an arm logged into a real SQLite store.
"""

from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient

from sommelier_mlflow.evaluation import EvaluationReport
from sommelier_mlflow.integration import (
    arm_example_traces,
    log_evaluation_run,
    log_example_traces,
)
from sommelier_mlflow.integration._store_text import store_text, store_value
from tests.integration.integration_helpers import Store, check_unstorable_run, unstorable_arm

#: Texts with something to escape, at the start, the end and side by side.
_HOSTILE = ["\x00", "a\x00b", "\ud800", "x\udfffy", "\x00\ud800\x00", "é\x00", "\ud83d\ude00"]


def test_nul_and_lone_surrogates_become_their_json_escapes() -> None:
    assert store_text("a\x00b") == "a\\u0000b"
    assert store_text("x\ud800y\udfff") == "x\\ud800y\\udfff"
    # A surrogate pair held as two code points is two lone surrogates (no UTF-8
    # encoding); each is escaped, which reads as JSON's spelling of the pair.
    assert store_text("\ud83d\ude00") == "\\ud83d\\ude00"


def test_everything_else_is_left_as_it_is() -> None:
    kept = "tab\t nl\n \x01\x1f\x7f\x85 \ufeff \uffff \U0010ffff é 😀 \\u0000 \\ back"
    assert store_text(kept) == kept
    assert store_text("plain ascii") == "plain ascii"


def test_escaped_text_is_storable_and_escaping_is_idempotent_but_not_reversible() -> None:
    for text in _HOSTILE:
        once = store_text(text)
        once.encode("utf-8")  # a lone surrogate would raise here
        assert "\x00" not in once
        assert store_text(once) == once  # idempotent: nothing left to escape
        assert once != text  # visible: the reader sees that something was there
    # Not reversible (documented): text that already spelled the escape reads the same.
    assert store_text("\x00") == store_text("\\u0000") == "\\u0000"


def test_store_value_escapes_keys_and_values_at_any_depth() -> None:
    value = {"k\x00": ["v\ud800", ("t\x00", 1, 2.5, True, None)], "n": {"deep": "\x00"}}
    assert store_value(value) == {
        "k\\u0000": ["v\\ud800", ["t\\u0000", 1, 2.5, True, None]],
        "n": {"deep": "\\u0000"},
    }


def test_an_arm_with_unstorable_outputs_logs_them_escaped(store: Store, tmp_path: Path) -> None:
    split, scored = unstorable_arm("base")
    report = EvaluationReport.from_run(scored)
    client = MlflowClient()
    run_id = client.create_run(store.experiment_id).info.run_id
    log_evaluation_run(
        report,
        run_id=run_id,
        table_rows=scored.table_rows(),
        params={"note": "a\x00b\ud800"},
        client=client,
    )
    assert log_example_traces(run_id, arm_example_traces(report, scored, split)) == 6
    check_unstorable_run(client, run_id, store.experiment_id, tmp_path)


def test_generations_keep_the_raw_nul_while_traces_show_its_escape(
    store: Store, tmp_path: Path
) -> None:
    """An arm as ``score --mlflow`` logs it: its generations artifact is what was scored."""
    import mlflow

    from sommelier_mlflow.cli._options import DeclaredModel, ScoringOptions
    from sommelier_mlflow.cli._pipeline import score_generations
    from sommelier_mlflow.cli._runs import log_arm
    from sommelier_mlflow.data import read_generations
    from sommelier_mlflow.generation import BackendRequest
    from tests.cli.cli_helpers import BASE_OUTPUTS, write_arm, write_fixture

    files = write_fixture(tmp_path / "in")
    outputs = {**BASE_OUTPUTS, 3: "sunny\x00 in Lyon"}
    generations = write_arm(tmp_path / "nul", "base", outputs)
    scoring = ScoringOptions(resamples=50)
    declared = DeclaredModel("base", BackendRequest("tiny/model", "abc123"))
    arm = score_generations(
        scoring.read(files["split"]), generations, declared, tmp_path / "out", scoring
    )
    run_id = MlflowClient().create_run(store.experiment_id).info.run_id
    log_arm(arm, run_id, {})

    logged = mlflow.artifacts.download_artifacts(
        run_id=run_id, artifact_path="sommelier/generations/en.jsonl", dst_path=str(tmp_path)
    )
    raw = {record.example_id: record.raw_text for record in read_generations(logged)}
    assert raw["en-3"] == "sunny\x00 in Lyon"
    (trace,) = mlflow.search_traces(
        locations=[store.experiment_id],
        run_id=run_id,
        filter_string="tag.`sommelier.example_id` = 'en-3'",
        return_type="list",
    )
    assert trace.data.spans[0].outputs["raw_output"] == "sunny\\u0000 in Lyon"
