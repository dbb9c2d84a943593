"""A few steps of LoRA training on the demo base, with tool-call metrics on the loss's step axis.

Run it from the repository root (offline, CPU, a few minutes)::

    python examples/train_lora_with_callback.py --steps 24 --every 4 --max-examples 20

By default it trains on the offline demo: the committed base model
(``examples/demo/model/base_model``, verified by digest as the demo does) and
the demo's prepared splits (``.cache/demo/splits-<key>/``, prepared from the
bundled raw data when absent, exactly as ``examples/demo/run.py`` prepares
them); ``--base-model`` and ``--splits`` point it at your own. The trainer's own
``MLflowCallback`` logs the loss; ``SommelierCallback`` logs
``tooleval/<slice>/<metric>`` into the same run at the same steps (the base at
step 0, adapter disabled), so the MLflow UI draws the learning curve of tool
calling beside the loss. Every evaluation's report is in the run under
``sommelier/checkpoints/step-<n>/evaluation_report.json``; the adapter is
saved to ``<output-dir>/adapter`` (default ``sommelier_out/train_lora/adapter``,
in the folder the repository's ``.gitignore`` already ignores).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any, Final

import mlflow
import torch
from peft import LoraConfig, get_peft_model
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    Trainer,
    TrainingArguments,
    set_seed,
)

from sommelier_mlflow.data import format_examples, read_test_split, render_target
from sommelier_mlflow.training import SommelierCallback

DEMO: Final = Path(__file__).resolve().parent / "demo"
#: Where the outputs go unless ``--output-dir`` says otherwise: the CLI's ignored output folder.
DEFAULT_OUTPUT_DIR: Final = "sommelier_out/train_lora"


class ToolCallRows(torch.utils.data.Dataset[dict[str, Any]]):
    """Rendered prompt + canonical gold call + EOS; the loss is on the call only."""

    def __init__(self, split: Path, tokenizer: Any, max_tokens: int = 384) -> None:
        self.rows = []
        for example in format_examples(read_test_split(split).examples, tokenizer):
            prompt = tokenizer(example.prompt_text, add_special_tokens=False)["input_ids"]
            target = tokenizer(render_target(example.gold_call), add_special_tokens=False)
            ids = [*prompt, *target["input_ids"], tokenizer.eos_token_id]
            if len(ids) <= max_tokens:
                self.rows.append((ids, len(prompt)))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, Any]:
        ids, prompt = self.rows[index]
        return {"input_ids": ids, "labels": [-100] * prompt + ids[prompt:]}


def pad_batch(pad_id: int) -> Any:
    def collate(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        width = max(len(row["input_ids"]) for row in rows)
        out: dict[str, list[list[int]]] = {"input_ids": [], "attention_mask": [], "labels": []}
        for row in rows:
            pad = width - len(row["input_ids"])
            out["input_ids"].append(row["input_ids"] + [pad_id] * pad)
            out["attention_mask"].append([1] * len(row["input_ids"]) + [0] * pad)
            out["labels"].append(row["labels"] + [-100] * pad)
        return {key: torch.tensor(value) for key, value in out.items()}

    return collate


def lora_model(base_model: str | Path, seed: int = 0) -> Any:
    """The base with a fresh LoRA adapter, its initial weights drawn from ``seed``.

    ``Trainer`` seeds only when it is built, after the adapter exists, so the
    seed is set here first: otherwise every run starts from other LoRA weights
    and its learning curve cannot be reproduced.
    """
    set_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32)
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"])
    with warnings.catch_warnings():
        # peft 0.21 probes transformers' deprecated ``is_gradient_checkpointing``.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        return get_peft_model(base, lora)


def demo_inputs() -> tuple[Path, Path]:
    """The demo's committed base model and its prepared splits folder.

    The same call as ``examples/demo/run.py``: every committed file is checked
    against the manifest (a missing or altered one raises ``DependencyError``,
    never retrains) and the splits are prepared into ``.cache/demo`` if absent.
    """
    if str(DEMO) not in sys.path:
        sys.path.insert(0, str(DEMO))
    from build_model import demo_assets

    assets = demo_assets()
    return Path(assets.base_model_dir), Path(assets.splits_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--base-model", default=None, help="base model folder (default: the demo's, committed)"
    )
    parser.add_argument(
        "--splits",
        default=None,
        help="folder with train.jsonl and test.jsonl (default: the demo's, prepared if absent)",
    )
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--every", type=int, default=4, help="evaluate every N steps")
    parser.add_argument("--max-examples", type=int, default=40, help="roots in the fixed subset")
    parser.add_argument("--output-dir", default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args(argv)
    if args.base_model is None or args.splits is None:
        demo_model, demo_splits = demo_inputs()
        args.base_model = args.base_model or demo_model
        args.splits = args.splits or demo_splits

    torch.set_num_threads(1)  # the demo model is tiny: one thread is fastest on a busy CPU
    tokenizer = AutoTokenizer.from_pretrained(args.base_model)
    model = lora_model(args.base_model, seed=0)
    splits = Path(args.splits)
    callback = SommelierCallback(
        splits / "test.jsonl",
        tokenizer=tokenizer,
        max_examples=args.max_examples,
        every_n_steps=args.every,
        max_new_tokens=96,
        batch_size=16,
    )
    training = TrainingArguments(
        output_dir=args.output_dir,
        max_steps=args.steps,
        per_device_train_batch_size=8,
        learning_rate=2e-3,
        logging_steps=1,
        save_strategy="no",
        report_to=["mlflow"],  # the loss goes to the same run as tooleval/...
        run_name="train-lora-with-callback",
        use_cpu=True,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(
        model=model,
        args=training,
        train_dataset=ToolCallRows(splits / "train.jsonl", tokenizer),
        data_collator=pad_batch(tokenizer.pad_token_id),
        processing_class=tokenizer,
        callbacks=[callback],
    )
    with mlflow.start_run(run_name="train-lora-with-callback") as run:
        trainer.train()
        model.save_pretrained(Path(args.output_dir) / "adapter")
    for step, report in sorted(callback.reports.items()):
        value = report.metrics["full_call_exact_match"]
        print(
            f"step {step:>3} {report.identity.model_kind:<8} full_call_exact_match "
            f"{value.value:.3f} ({value.numerator}/{value.denominator})"
        )
    print(f"MLflow run {run.info.run_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
