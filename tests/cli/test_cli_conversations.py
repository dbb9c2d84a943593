"""A held-out conversation split through the command line: format, evaluate, score, compare.

Every assistant turn of the split in ``tests/support/conversations.py`` is
an example; the tiny Llama and its LoRA answer them (badly: what is checked
is that the pipeline carries conversations through, with the ``turn:`` and
``after:`` slices on by default, not what the arms score).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.cli import main
from sommelier_mlflow.data import read_test_split
from sommelier_mlflow.integration._params import evaluation_params
from tests.support.conversations import CONVERSATIONS, TOOLS, write_conversation_split

CONVERSATION_SLICES = ["after:tool", "after:user", "turn:1", "turn:2+"]


@pytest.fixture(scope="module")
def arms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests.support.tiny_models import build_lora_adapter, build_tiny_llama, build_tokenizer

    root = tmp_path_factory.mktemp("conversations")
    split = write_conversation_split(root / "split.jsonl")
    texts = [canonical_json(TOOLS)] + [
        canonical_json(message) for _, _, messages in CONVERSATIONS for message in messages
    ]
    tokenizer = build_tokenizer(root / "tokenizer", texts)
    model = build_tiny_llama(root / "model", tokenizer, seed=0)
    adapter = build_lora_adapter(model, root / "adapter", seed=1)
    return {"split": split, "model": Path(model), "adapter": Path(adapter)}


def _evaluate(arms: dict[str, Path], out: Path, kind: str) -> list[str]:
    adapter = ["--adapter", str(arms["adapter"])] if kind == "adapter" else []
    return [
        *("evaluate", "--test-split", str(arms["split"]), "--model", str(arms["model"])),
        *("--model-kind", kind, *adapter, "--scoring", "calls", "--max-new-tokens", "6"),
        *("--batch-size", "4", "--resamples", "50", "--num-threads", "1"),
        *("--log-traces", "false", "--out", str(out)),
    ]


def _report(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_a_conversation_split_is_evaluated_scored_and_compared_turn_by_turn(
    arms: dict[str, Path], tmp_path: Path
) -> None:
    formatted = tmp_path / "formatted.jsonl"
    assert main(["format", "--test-split", str(arms["split"]), "--tokenizer", str(arms["model"]),
                 "--out", str(formatted)]) == 0  # fmt: skip
    rendered = read_test_split(formatted).by_id()
    # Each prompt holds the whole history it was rendered from.
    assert "Assistant calls: [" in (rendered["c2-t3"].prompt_text or "")
    assert 'Tool result (book_hotel): {"booking": "H-9"}' in (rendered["c2-t3"].prompt_text or "")

    for kind in ("base", "adapter"):
        assert main(_evaluate(arms, tmp_path / kind, kind)) == 0
    base = _report(tmp_path / "base" / "evaluation_report.json")
    assert base["identity"]["slice_by"] == ["calls", "turn", "after"]
    by_turn = {e["example_id"]: e["slice_values"] for e in base["per_example"]}
    assert by_turn["c1-t1"] == {"after": "user", "calls": "1", "turn": "1"}
    assert by_turn["c1-t2"] == {"after": "tool", "calls": "0", "turn": "2+"}
    assert by_turn["c4-t3"] == {"after": "user", "calls": "1", "turn": "2+"}
    slices = set(base["field_slices"])
    assert set(CONVERSATION_SLICES) <= slices
    assert base["field_slices"]["turn:1"]["examples"] == 4
    assert base["field_slices"]["after:tool"]["examples"] == 5
    assert evaluation_params(base)["conversation_turns"] == 10
    assert "conversation_turns" not in evaluation_params(
        {**base, "field_slices": {"calls:1": base["field_slices"]["calls:1"]}}
    )

    # Re-scoring the generations gives the same report; the gate passes on the same split.
    rescored = tmp_path / "rescored"
    assert main([
        "score", "--test-split", str(formatted), "--generations",
        str(tmp_path / "base" / "generations"), "--model-kind", "base", "--model",
        str(arms["model"]), "--scoring", "calls", "--resamples", "50", "--out", str(rescored),
    ]) == 0  # fmt: skip
    assert _report(rescored / "evaluation_report.json")["field_slices"] == base["field_slices"]
    out = tmp_path / "comparison"
    assert main([
        "compare", "--base-report", str(tmp_path / "base" / "evaluation_report.json"),
        "--adapter-report", str(tmp_path / "adapter" / "evaluation_report.json"),
        "--out", str(out),
    ]) == 0  # fmt: skip
    comparison = (out / "comparison" / "comparison_report.json").read_text(encoding="utf-8")
    for name in CONVERSATION_SLICES:
        assert f'"{name}"' in comparison
