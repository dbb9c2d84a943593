"""Prompts past the model's context through the CLI: refused, or skipped and gated (issue 29 #2).

The fixture's split has one translation (``fr-2``) whose query is long enough
that its prompt does not fit a tiny Llama declaring a small
``max_position_embeddings``; every other prompt fits with room for the new tokens.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import format_examples, sample_examples, write_test_split
from tests.cli.cli_helpers import compare_args, examples, tiny_arms
from tests.support.openai_stub import running_stub
from tests.support.tiny_models import build_lora_adapter, build_tiny_llama

LONG = "fr-2"
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The CLI's tiny arms, a split with one long prompt, and a model it does not fit."""
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("context")
    arms: dict[str, Any] = dict(tiny_arms(root))
    rows = [replace(ex, prompt_text=None, prompt_sha256=None) for ex in examples()]
    rows = [replace(r, query=r.query + " please" * 60) if r.example_id == LONG else r for r in rows]
    arms["long_split"] = write_test_split(root / "long.jsonl", rows)
    tokenizer = AutoTokenizer.from_pretrained(arms["model"])
    formatted = format_examples(rows, tokenizer)
    lengths = {
        e.example_id: len(tokenizer(e.prompt_text, add_special_tokens=False)["input_ids"])
        for e in formatted
    }
    rest = max(n for example_id, n in lengths.items() if example_id != LONG)
    assert lengths[LONG] > rest
    arms["limit"] = rest + NEW_TOKENS  # the longest of the rest fits exactly
    arms["short"] = build_tiny_llama(
        root / "short", tokenizer, max_position_embeddings=arms["limit"]
    )
    arms["short_adapter"] = build_lora_adapter(arms["short"], root / "short_adapter", seed=1)
    return arms


def _evaluate(split: Path, model: Path, out: Path, *extra: str) -> list[str]:
    return [
        *("evaluate", "--test-split", str(split), "--model", str(model)),
        *("--model-kind", "base", "--max-new-tokens", str(NEW_TOKENS), "--batch-size", "4"),
        *("--resamples", "50", "--num-threads", "1", "--log-traces", "false"),
        *("--out", str(out), *extra),
    ]


def _seed_keeping_long() -> int:
    """A seed whose sample of 3 of the 4 roots keeps the long prompt's root (6 rows)."""
    return next(
        s
        for s in range(50)
        if LONG in {e.example_id for e in sample_examples(examples(), 3, seed=s).examples}
    )


def _report(folder: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((folder / "evaluation_report.json").read_text())
    return document


def test_an_overlong_prompt_stops_the_run_before_any_generation_file(
    tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(_evaluate(tiny["long_split"], tiny["short"], out))
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"1 of {len(examples())} prompts" in err and repr(LONG) in err
    assert f"context of {tiny['limit']} tokens" in err and "--skip-overlong" in err
    assert "Traceback" not in err
    assert not out.exists() or not [p for p in out.rglob("*") if p.is_file()]


def test_skip_overlong_scores_the_rest_and_the_report_lists_the_skipped_id(
    tiny: dict[str, Any], tmp_path: Path, tracking_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    out = tmp_path / "out"
    sample = ("--max-examples", "3", "--seed", str(_seed_keeping_long()))
    args = _evaluate(tiny["long_split"], tiny["short"], out, "--skip-overlong", *sample)
    assert main([*args, "--mlflow"]) == 0
    assert f"skipping 1 of 6 prompts past the model's context of {tiny['limit']}" in (
        capsys.readouterr().err
    )
    report = _report(out)
    assert report["identity"]["skip_overlong"] == {
        "context_length": tiny["limit"],
        "example_ids": [LONG],
    }
    ids = [row["example_id"] for row in report["per_example"]]
    assert len(ids) == 6 - 1 and LONG not in ids
    generated = [
        json.loads(line)["example_id"]
        for path in (out / "generations").glob("*.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert sorted(generated) == sorted(ids)
    client = MlflowClient(tracking_uri=tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name("sommelier").experiment_id])
    assert run.data.params["overlong.skipped"] == "1"
    assert run.data.params["overlong.context_length"] == str(tiny["limit"])
    assert run.data.params["sample.rule"] == "stratified_proportional.v1"
    assert run.data.params["sample.seed"] == sample[-1]
    assert run.data.params["sample.strata"] == "language"
    assert run.data.params["sample.roots"] == "4"


def test_main_samples_and_skips_alike_in_both_arms_side_by_side_and_on_resume(
    tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = _seed_keeping_long()
    out = tmp_path / "main"
    argv = [
        *("main", "--test-split", str(tiny["long_split"]), "--model", str(tiny["short"])),
        *("--adapter", str(tiny["short_adapter"]), "--max-new-tokens", str(NEW_TOKENS)),
        *("--batch-size", "4", "--resamples", "50", "--log-traces", "false"),
        *("--max-examples", "3", "--seed", str(seed)),
        *("--parallel-arms", "true", "--num-threads", "2", "--out", str(out)),
    ]
    assert main(argv) == 2  # both arms refuse before generating; reported once
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "1 of 6 prompts" in err and repr(LONG) in err, err
    assert not [p for p in out.rglob("*") if p.is_file()]
    argv.append("--skip-overlong")
    assert main(argv) == 0, capsys.readouterr().err
    first = {
        arm: (out / arm / "evaluation_report.json").read_bytes() for arm in ("base", "adapter")
    }
    base, adapter = (_report(out / arm)["identity"] for arm in ("base", "adapter"))
    assert base["skip_overlong"] == adapter["skip_overlong"]
    assert base["skip_overlong"]["example_ids"] == [LONG]
    assert base["sample"] == adapter["sample"]
    assert base["sample"]["seed"] == seed and base["sample"]["max_examples"] == 3
    assert (out / "comparison" / "comparison_report.json").is_file()
    # Resumed: every generation is found on disk and the reports come out the same.
    assert main(argv) == 0, capsys.readouterr().err
    for arm, data in first.items():
        assert (out / arm / "evaluation_report.json").read_bytes() == data


def test_an_arm_that_could_skip_is_not_compared_with_one_that_could_not(
    tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    split, model = tiny["split"], tiny["model"]  # nothing is too long here
    assert main(_evaluate(split, model, tmp_path / "base", "--skip-overlong", "true")) == 0
    adapter = _evaluate(split, model, tmp_path / "adapter", "--adapter", str(tiny["adapter"]))
    adapter[adapter.index("base")] = "adapter"
    assert main(adapter) == 0
    capsys.readouterr()
    assert main(compare_args(tmp_path / "base", tmp_path / "adapter", tmp_path / "cmp")) == 4
    err = capsys.readouterr().err
    assert "skip_overlong differs" in err
    assert not (tmp_path / "cmp").exists()


def _served(root: Path, max_model_len: int | None) -> list[dict[str, Any]]:
    entry: dict[str, Any] = {"id": "tiny", "object": "model", "root": str(root), "parent": None}
    if max_model_len is not None:
        entry["max_model_len"] = max_model_len  # as vLLM lists it
    return [entry]


def test_the_server_backend_takes_its_limit_from_the_servers_model_list(
    tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = ("--backend", "server", "--served-model", "tiny")
    with running_stub(_served(tiny["model"], tiny["limit"])) as stub:
        argv = _evaluate(tiny["long_split"], tiny["model"], tmp_path / "a", *served)
        code = main([*argv, "--base-url", stub.url])
        err = capsys.readouterr().err
        assert code == 2, err
        assert repr(LONG) in err and f"context of {tiny['limit']} tokens" in err
        assert stub.requests == []  # nothing was sent
        argv = _evaluate(tiny["long_split"], tiny["model"], tmp_path / "b", *served)
        assert main([*argv, "--base-url", stub.url, "--skip-overlong"]) == 0
    assert _report(tmp_path / "b")["identity"]["skip_overlong"]["example_ids"] == [LONG]
    with running_stub(_served(tiny["model"], None)) as stub:  # a server that does not say
        argv = _evaluate(tiny["long_split"], tiny["model"], tmp_path / "c", *served)
        assert main([*argv, "--base-url", stub.url]) == 0


def test_skipping_every_prompt_is_refused_rather_than_evaluating_nothing(
    tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _evaluate(tiny["long_split"], tiny["short"], tmp_path / "out", "--skip-overlong")
    argv[argv.index("--max-new-tokens") + 1] = str(tiny["limit"])  # no room for any prompt
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"all {len(examples())} prompts exceed the model's context" in err
    assert not (tmp_path / "out").exists()
