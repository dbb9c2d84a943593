"""SommelierCallback with a real transformers Trainer, real peft and a real MLflow store."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import orjson
import pytest

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.data import (
    TestExample,
    read_test_split,
    render_target,
    sample_examples,
    write_test_split,
)
from sommelier_mlflow.errors import ConfigError, InputError, InvariantViolationError
from tests.generation.generation_helpers import corpus, make_examples
from tests.support.tiny_models import build_tiny_llama, build_tokenizer

STEPS = 4


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    root = tmp_path_factory.mktemp("tiny-train")
    tokenizer = build_tokenizer(root / "tokenizer", corpus())
    model_dir = build_tiny_llama(root / "model", tokenizer, seed=0)
    tokenizer.save_pretrained(model_dir)
    return model_dir, tokenizer


@pytest.fixture(scope="module")
def split_file(tmp_path_factory: pytest.TempPathFactory, tiny_pair: tuple[Path, Any]) -> Path:
    path = tmp_path_factory.mktemp("split") / "test.jsonl"
    write_test_split(path, make_examples(tiny_pair[1], 6))
    return path


class _Rows:
    """Prompt + canonical call + EOS, the prompt masked out of the loss, fixed length."""

    def __init__(self, tokenizer: Any, length: int = 64) -> None:
        import torch

        self.items = []
        for example in make_examples(tokenizer, 8):
            prompt = tokenizer(example.prompt_text, add_special_tokens=False)["input_ids"]
            target = tokenizer(render_target(example.gold_call), add_special_tokens=False)[
                "input_ids"
            ]
            ids = [*prompt, *target, tokenizer.eos_token_id][-length:]
            labels = [-100] * max(0, len(ids) - len(target) - 1) + ids[-len(target) - 1 :]
            pad = length - len(ids)
            self.items.append(
                {
                    "input_ids": torch.tensor(ids + [tokenizer.pad_token_id] * pad),
                    "attention_mask": torch.tensor([1] * len(ids) + [0] * pad),
                    "labels": torch.tensor(labels + [-100] * pad),
                }
            )

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.items[index]


def _train(
    model_dir: Path, tokenizer: Any, out: Path, callbacks: list[Any], save_steps: int = 0
) -> tuple[list[float], dict[str, Any]]:
    """A few LoRA steps (dropout on, so the RNG matters); the losses and final weights.

    ``save_steps`` > 0 saves a checkpoint every that many steps (none by default).
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.2, target_modules=["q_proj", "v_proj"])
    with warnings.catch_warnings():
        # peft 0.21 probes transformers' deprecated ``is_gradient_checkpointing``.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        model = get_peft_model(base, config)
    args = TrainingArguments(
        output_dir=str(out),
        max_steps=STEPS,
        per_device_train_batch_size=4,
        learning_rate=5e-3,
        logging_steps=1,
        report_to="none",
        save_strategy="steps" if save_steps else "no",
        save_steps=save_steps or 500,
        use_cpu=True,
        seed=7,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=_Rows(tokenizer),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    weights = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    return losses, weights


def test_callback_logs_per_step_and_does_not_perturb_training(
    tmp_path: Path, tiny_pair: tuple[Path, Any], split_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow
    import torch
    from mlflow.tracking import MlflowClient

    from sommelier_mlflow.training import SommelierCallback

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model_dir, tokenizer = tiny_pair
    plain_losses, plain_weights = _train(model_dir, tokenizer, tmp_path / "plain", [])
    callback = SommelierCallback(
        split_file, max_examples=4, seed=3, max_new_tokens=12, batch_size=4, every_n_steps=2
    )
    with mlflow.start_run() as run:
        losses, weights = _train(model_dir, tokenizer, tmp_path / "with", [callback])

    # Identical training: every loss and every final trainable weight, bit for bit.
    assert len(losses) == STEPS and losses == plain_losses
    assert weights.keys() == plain_weights.keys()
    assert all(torch.equal(weights[name], plain_weights[name]) for name in weights)

    # Base once at step 0 (adapter disabled), then every 2 steps; the end is not repeated.
    assert sorted(callback.reports) == [0, 2, 4]
    assert callback.reports[0].identity.model_kind == "base"
    assert callback.reports[4].identity.model_kind == "adapter"
    ids = {step: list(r.example_ids) for step, r in callback.reports.items()}
    assert ids[0] == ids[2] == ids[4] and len(ids[0]) == 8  # 4 roots + their translations
    # The subset is `--max-examples`'s seeded, stratified sample of the split, not its own draw.
    sample = sample_examples(read_test_split(split_file).examples, 4, seed=3)
    assert sorted(ids[0]) == sorted(e.example_id for e in sample.examples)

    client = MlflowClient()
    history = client.get_metric_history(run.info.run_id, "tooleval/overall/valid_json_rate")
    assert sorted(m.step for m in history) == [0, 2, 4]
    counts = client.get_metric_history(
        run.info.run_id, "tooleval/en/counts/full_call_exact_match.denominator"
    )
    assert {m.value for m in counts} == {4.0}
    stored = client.get_run(run.info.run_id)
    assert stored.data.tags["sommelier.callback.subset_sha256"]
    assert stored.data.params["sommelier.callback.examples"] == "8"
    listed = [
        f.path for f in client.list_artifacts(run.info.run_id, "sommelier/checkpoints/step-2")
    ]
    assert listed == ["sommelier/checkpoints/step-2/evaluation_report.json"]
    local = tmp_path / "with" / "sommelier" / "step-2" / "evaluation_report.json"
    assert canonical_json(callback.reports[2].to_json()) == canonical_json(
        orjson.loads(local.read_bytes())
    )

    # Each evaluated checkpoint is a LoggedModel of this run and step, carrying its metrics
    # (the Models tab lists them; search_logged_models ranks them).
    models = client.search_logged_models(
        experiment_ids=[run.info.experiment_id],
        filter_string=f"tags.`sommelier.training_run_id` = '{run.info.run_id}'",
    )
    by_step = {int(m.tags["sommelier.checkpoint_step"]): m for m in models}
    assert sorted(by_step) == [0, 2, 4]
    assert by_step[0].tags["sommelier.model_kind"] == "base"
    assert by_step[4].tags["sommelier.adapter_source"] == "training:step-4"
    assert by_step[2].name.endswith("-step-2")
    assert by_step[2].tags["mlflow.model.isExternal"] == "true"
    on_model = {m.key: m for m in client.get_logged_model(by_step[2].model_id).metrics}
    exact = on_model["tooleval/overall/full_call_exact_match"]
    assert exact.step == 2 and exact.run_id == run.info.run_id
    assert exact.value == callback.reports[2].metrics["full_call_exact_match"].value
    outputs = {o.model_id: o.step for o in client.get_run(run.info.run_id).outputs.model_outputs}
    assert outputs == {m.model_id: step for step, m in by_step.items()}

    # The leaderboard takes the training run's checkpoint models as its family (base: step 0)
    # and records its ranking on each of them.
    from sommelier_mlflow.cli import main

    training = run.info.run_id
    args = ["compare", "--base-run-id", training, "--adapter-runs-from-parent", training]
    args += ["--resamples", "100", "--out", str(tmp_path / "board"), "--mlflow"]
    assert main(args) == 0
    ranked = {step: client.get_logged_model(by_step[step].model_id).tags for step in (2, 4)}
    assert sorted(tags["sommelier.leaderboard.rank"] for tags in ranked.values()) == ["1", "2"]
    assert all(tags["sommelier.leaderboard.of"] == "2" for tags in ranked.values())
    assert "sommelier.leaderboard.rank" not in client.get_logged_model(by_step[0].model_id).tags


def test_a_row_the_mode_cannot_read_fails_before_the_first_step(
    tmp_path: Path, tiny_pair: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import TrainerCallback

    from sommelier_mlflow.training import SommelierCallback

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model_dir, tokenizer = tiny_pair
    rows = make_examples(tokenizer, 2)
    two = {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}
    first = rows[0]
    broken = TestExample(first.example_id, "en", first.query, first.tools, gold_calls=[two, two])
    path = tmp_path / "split.jsonl"
    write_test_split(path, [broken, *rows[2:]])
    callback = SommelierCallback(path, max_new_tokens=4)
    steps: list[int] = []

    class _Count(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            steps.append(1)

    with pytest.raises(InputError, match=rows[0].example_id):
        _train(model_dir, tokenizer, tmp_path / "out", [callback, _Count()])
    assert steps == []


def _blocked_callback(tmp_path: Path, split_file: Path, **options: Any) -> Any:
    """A callback evaluating every 2 steps whose folder cannot be created (a file is in the way)."""
    from sommelier_mlflow.training import SommelierCallback

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the callback's folder should go")
    return SommelierCallback(
        split_file,
        max_examples=2,
        max_new_tokens=4,
        every_n_steps=2,
        output_dir=blocker / "sommelier",
        **options,
    )


def test_a_failing_evaluation_warns_and_training_still_saves_its_checkpoints(
    tmp_path: Path, tiny_pair: tuple[Path, Any], split_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The callback's folder cannot be created (a file is in the way): every evaluation fails.

    Each failure is one warning naming its step and the error; the trainer runs
    every step and saves every checkpoint, with the same losses as without the callback.
    """
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model_dir, tokenizer = tiny_pair
    callback = _blocked_callback(tmp_path, split_file)
    out = tmp_path / "train"
    with pytest.warns(UserWarning, match="SommelierCallback") as caught:
        losses, _ = _train(model_dir, tokenizer, out, [callback], save_steps=2)

    assert len(losses) == STEPS
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    assert callback.reports == {}
    assert sorted(callback.failures) == [0, 2, 4]  # the base, then every 2 steps; no repeat
    messages = [str(w.message) for w in caught if "SommelierCallback" in str(w.message)]
    assert len(messages) == 3
    for step, message in zip((0, 2, 4), messages, strict=True):
        assert f"at step {step} failed" in message
        assert "not-a-folder" in message  # the error itself, naming the path
        assert "fail_on_error=True" in message


def test_fail_on_error_stops_training_at_the_failing_evaluation(
    tmp_path: Path, tiny_pair: tuple[Path, Any], split_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model_dir, tokenizer = tiny_pair
    callback = _blocked_callback(tmp_path, split_file, evaluate_base=False, fail_on_error=True)
    out = tmp_path / "train"
    with pytest.raises(OSError, match="not-a-folder"):
        _train(model_dir, tokenizer, out, [callback], save_steps=2)
    assert not list(out.glob("checkpoint-*"))  # step 2's evaluation ran before its save
    assert callback.failures == {}
    # The run the callback started is not left active (on_train_end never came): it failed.
    assert mlflow.active_run() is None
    (run,) = MlflowClient().search_runs(
        [e.experiment_id for e in MlflowClient().search_experiments()]
    )
    assert run.info.status == "FAILED"


def test_chat_template_kwargs_render_the_subset_and_reach_the_report(
    tmp_path: Path, tiny_pair: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from sommelier_mlflow.training import SommelierCallback

    with pytest.raises(ConfigError, match="may not set tools"):
        SommelierCallback(tmp_path / "any.jsonl", chat_template_kwargs={"tools": []})
    with pytest.raises(ConfigError, match="--template-date must be a calendar date"):
        SommelierCallback(tmp_path / "any.jsonl", template_date="26 Jul 2024")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    model_dir, tokenizer = tiny_pair
    unformatted = [
        TestExample(e.example_id, e.language, e.query, e.tools, gold_calls=list(e.gold_calls))
        for e in make_examples(tokenizer, 2)
    ]
    path = write_test_split(tmp_path / "split.jsonl", unformatted)
    pinned = {"date_string": "26 Jul 2024"}
    callback = SommelierCallback(
        path,
        max_new_tokens=4,
        at_end=False,
        on_evaluate=False,
        chat_template_kwargs=pinned,
        template_date="2024-07-26",
    )
    _train(model_dir, tokenizer, tmp_path / "out", [callback])
    assert sorted(callback.reports) == [0]
    assert callback.reports[0].identity.chat_template_kwargs == pinned
    identity = callback.reports[0].to_json()["identity"]
    assert (identity["chat_template_kwargs"], identity["template_date"]) == (pinned, "2024-07-26")


def test_closing_an_evaluation_generator_lets_go_of_the_model_without_freeing_it(
    tiny_pair: tuple[Path, Any],
) -> None:
    """The callback closes the generator that borrowed the trainer's model after each evaluation.

    Closing only forgets the model: a closed generator refuses to generate, and
    the model the trainer holds decodes exactly as before.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from sommelier_mlflow.training._callback import _TrainingModelGenerator

    model_dir, tokenizer = tiny_pair
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer.padding_side = "left"
    prompts = [example.prompt_text or "" for example in make_examples(tokenizer, 2)]
    generator = _TrainingModelGenerator(model, tokenizer, {}, keep_special_tokens=False)
    with torch.no_grad():
        before = generator.generate(prompts, max_new_tokens=6)
    generator.close()
    generator.close()
    with pytest.raises(InvariantViolationError, match="after the evaluation ended"):
        generator.generate(prompts, max_new_tokens=6)
    again = _TrainingModelGenerator(model, tokenizer, {}, keep_special_tokens=False)
    with torch.no_grad():
        assert again.generate(prompts, max_new_tokens=6) == before
