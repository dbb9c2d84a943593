"""BFCL multi-turn through the commands: trajectories re-scored, the loop under ``mlflow run``.

The fast test plays two questions with a scripted model (the loop's own
tests cover the loop), then re-scores the trajectories it wrote with
``score --precomputed``: the records must come back byte for byte, without
any model. The slow one runs the demo's tiny model through the loop on three
questions imported from BFCL's data, through ``mlflow run``.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import read_generations, write_test_split
from sommelier_mlflow.generation import MULTI_TURN_JOURNAL_NAME, TRAJECTORIES_NAME
from tests.generation.multi_turn_helpers import (
    ANSWER,
    DECODING,
    LS,
    ScriptedModel,
    demo_tokenizer,
    formatted,
    play,
    question,
)
from tests.support.bfcl_reference import bfcl_package_root
from tests.support.chat_templates import DEMO_TOKENIZER
from tests.support.mlflow_run import mlflow_run
from tests.support.openai_stub import running_stub

REPO = Path(__file__).resolve().parents[2]


def test_score_precomputed_trajectories_gives_back_the_played_records(tmp_path: Path) -> None:
    tokenizer = demo_tokenizer()
    examples = [question("a"), question("b", turns=3)]
    split = write_test_split(tmp_path / "split.jsonl", formatted(examples, tokenizer))
    played = tmp_path / "played"
    script = {"a": [LS, ANSWER, ANSWER], "b": [ANSWER, LS, LS, ANSWER, ANSWER]}
    play(examples, ScriptedModel(script), played, tokenizer=tokenizer)

    out = tmp_path / "scored"
    code = main(
        [
            *("score", "--test-split", str(split), "--slice-by", "category"),
            *("--precomputed", str(played / TRAJECTORIES_NAME), "--model", "tiny/model"),
            *("--model-kind", "base", "--scoring", "bfcl"),
            *("--max-new-tokens", str(DECODING.max_new_tokens)),
            *("--batch-size", str(DECODING.batch_size), "--out", str(out)),
        ]
    )
    assert code == 0
    scored = out / "generations" / "en.jsonl"
    assert scored.read_bytes() == (played / "generations" / "en.jsonl").read_bytes()
    assert [r.turns for r in read_generations(scored)] == [
        ((LS, ANSWER), (ANSWER,)),
        ((ANSWER,), (LS, LS, ANSWER), (ANSWER,)),
    ]
    assert (out / TRAJECTORIES_NAME).read_bytes() == (played / TRAJECTORIES_NAME).read_bytes()


def test_a_served_model_plays_the_questions_one_round_of_requests_per_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = {"a": [LS, ANSWER, ANSWER], "b": [LS, LS, ANSWER, ANSWER]}
    model = ScriptedModel(script)
    # Both first steps must be in flight at once: the server backend sends a round's
    # prompts concurrently (a sequential client would break the barrier after 20 s).
    first_round = threading.Barrier(2, timeout=20)

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        prompt = _only_prompt(body)
        if _steps_shown(prompt) == 0:
            first_round.wait()
        text = model.answer(prompt)
        choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
        return 200, {
            "id": "c",
            "object": "text_completion",
            "model": body["model"],
            "choices": [choice],
            "created": 0,
        }

    split = write_test_split(tmp_path / "split.jsonl", [question("a"), question("b")])
    served = [{"id": "demo", "object": "model", "root": str(DEMO_TOKENIZER), "parent": None}]
    out = tmp_path / "served"
    with running_stub(served, answer) as stub:
        code = main(
            [
                *("evaluate", "--test-split", str(split), "--model", str(DEMO_TOKENIZER)),
                *("--model-kind", "base", "--backend", "server", "--base-url", stub.url),
                *("--served-model", "demo", "--scoring", "bfcl", "--max-new-tokens", "16"),
                *("--batch-size", "8", "--resamples", "50", "--out", str(out)),
            ]
        )
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (out / TRAJECTORIES_NAME).read_text().splitlines()]
    assert rows == [
        {"example_id": "a", "turns": [[LS, ANSWER], [ANSWER]]},
        {"example_id": "b", "turns": [[LS, LS, ANSWER], [ANSWER]]},
    ]
    # Round after round: both questions' steps, then b's last one alone.
    shown = [_steps_shown(_only_prompt(request)) for request in stub.requests]
    assert shown == [0, 0, 1, 1, 2, 2, 3]


def _only_prompt(body: dict[str, Any]) -> str:
    """The one prompt of a completions request (the backend sends one per request)."""
    (prompt,) = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
    return str(prompt)


def _steps_shown(prompt: str) -> int:
    """How many assistant steps a ``sommelier`` prompt's transcript shows."""
    return prompt.count("Assistant calls:") + prompt.count("Assistant:")


# Three questions of one class (TradingBot), whose prompts are among the shortest
# BFCL has: about 4,300 tokens with the demo tokenizer.
_QUESTIONS = {"multi_turn_miss_func": ("multi_turn_miss_func_100", "multi_turn_miss_func_105")}
_BASE = ("multi_turn_base", ("multi_turn_base_100",))


def _bfcl_subset(folder: Path) -> Path:
    """A BFCL data folder holding only a few multi-turn questions (and every class's docs)."""
    source = bfcl_package_root() / "bfcl_eval" / "data"
    shutil.copytree(source / "multi_turn_func_doc", folder / "multi_turn_func_doc")
    (folder / "possible_answer").mkdir()
    wanted = {**_QUESTIONS, _BASE[0]: _BASE[1]}
    for category, ids in wanted.items():
        for name in (f"BFCL_v4_{category}.json", f"possible_answer/BFCL_v4_{category}.json"):
            lines = (source / name).read_text("utf-8").splitlines(keepends=True)
            kept = [line for line in lines if json.loads(line)["id"] in ids]
            assert len(kept) == len(ids), (name, ids)
            (folder / name).write_text("".join(kept), encoding="utf-8")
    return folder


def _long_context_demo_model(folder: Path) -> Path:
    """The demo's tiny model, configured to attend over BFCL's long prompts.

    Its weights and tokenizer are the committed ones; only
    ``max_position_embeddings`` grows from 1,024 (rotary positions have no
    learned table), so the loop meets prompts of several thousand tokens.
    """
    shutil.copytree(DEMO_TOKENIZER, folder)
    config = json.loads((folder / "config.json").read_text("utf-8"))
    config["max_position_embeddings"] = 16384
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


@pytest.mark.slow
def test_the_demo_model_plays_bfcl_questions_through_mlflow_run(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    split = tmp_path / "bfcl" / "multi_turn.jsonl"
    data = _bfcl_subset(tmp_path / "data")
    mlflow_run(
        uri,
        tmp_path,
        "import_bfcl",
        data_dir=str(data),
        out=str(split),
        categories="multi_turn_base,multi_turn_miss_func",
    )
    model = _long_context_demo_model(tmp_path / "model")
    run_id = mlflow_run(
        uri,
        tmp_path,
        "evaluate",
        test_split=str(split),
        model=str(model),
        model_kind="base",
        scoring="bfcl",
        max_new_tokens="8",
        batch_size="8",
        resamples="100",
        timeout=900,
    )
    client = MlflowClient(uri)
    # Scored as played: each question judged by BFCL's multi-turn rules.
    metrics = client.get_run(run_id).data.metrics
    assert metrics["overall/counts/bfcl_multi_turn_accuracy.denominator"] == 3
    assert metrics["overall/counts/bfcl_turn_accuracy.denominator"] == 2 + 3 + 3
    logged = {item.path for item in client.list_artifacts(run_id, "sommelier")}
    assert f"sommelier/{TRAJECTORIES_NAME}" in logged
    assert f"sommelier/{MULTI_TURN_JOURNAL_NAME}" in logged
    folder = Path(client.download_artifacts(run_id, "sommelier", str(tmp_path / "artifacts")))
    records = read_generations(folder / "generations" / "en.jsonl")
    assert sorted(r.example_id for r in records) == [
        "multi_turn_base_100",
        "multi_turn_miss_func_100",
        "multi_turn_miss_func_105",
    ]
    for record in records:  # every user turn has its list of step texts
        assert record.turns is not None and all(turn for turn in record.turns)
        assert record.decoding["execution"]["loop"] == "bfcl_multi_turn"

    # The trajectories re-score without the model, into the very same records.
    rescored = mlflow_run(
        uri,
        tmp_path,
        "score",
        test_split=str(folder / "test_split.formatted.jsonl"),
        precomputed=str(folder / TRAJECTORIES_NAME),
        model=str(model),
        model_kind="base",
        scoring="bfcl",
        max_new_tokens="8",
        batch_size="8",
        backend="hf",
    )
    again = Path(client.download_artifacts(rescored, "sommelier", str(tmp_path / "again")))
    assert (again / "generations" / "en.jsonl").read_bytes() == (
        folder / "generations" / "en.jsonl"
    ).read_bytes()
