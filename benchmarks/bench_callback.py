"""Cost of one SommelierCallback evaluation against the training step time, on the demo.

LoRA-trains the offline demo's base model (the demo build: no download) with
transformers' ``Trainer`` and the callback evaluating a fixed subset every
``--every`` steps, logged to a SQLite MLflow store in a temporary folder.
Reports the mean training step time (steps without an evaluation), and per
evaluation the generation seconds and the scoring + report + MLflow logging
seconds (the issue's target: under 1 s for 200 examples).

    python benchmarks/bench_callback.py [--steps 8] [--every 4] [--examples 200]
        [--max-new-tokens 96] [--batch-size 16] [--threads 2]
        [--base-model DIR --splits DIR]   # another model and splits than the demo's
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "examples")]

from train_lora_with_callback import ToolCallRows, pad_batch  # noqa: E402

from tests.support.vllm_server import build_demo_assets  # noqa: E402


class _StepClock:
    """Wall seconds of every optimizer step (begin to end), evaluation excluded."""

    def __init__(self) -> None:
        self.seconds: dict[int, float] = {}
        self._start = 0.0

    def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.seconds[state.global_step] = time.perf_counter() - self._start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--every", type=int, default=4)
    parser.add_argument("--examples", type=int, default=200, help="roots in the subset")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--base-model", default="", help="instead of the demo's base_model/")
    parser.add_argument("--splits", default="", help="instead of the demo's splits/")
    args = parser.parse_args()

    import mlflow
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from sommelier_mlflow.training import SommelierCallback

    torch.set_num_threads(args.threads)
    if args.base_model and args.splits:
        base_dir, splits_dir = Path(args.base_model), Path(args.splits)
    else:
        demo = build_demo_assets()
        base_dir, splits_dir = Path(demo.base_model_dir), Path(demo.splits_dir)
    with tempfile.TemporaryDirectory() as tmp:
        mlflow.set_tracking_uri(f"sqlite:///{Path(tmp) / 'mlflow.db'}")
        tokenizer = AutoTokenizer.from_pretrained(base_dir)
        base = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
            model = get_peft_model(base, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
        clock = type("Clock", (_StepClock, TrainerCallback), {})()
        callback = SommelierCallback(
            splits_dir / "test.jsonl",
            tokenizer=tokenizer,
            max_examples=args.examples,
            every_n_steps=args.every,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
        )
        training = TrainingArguments(
            output_dir=tmp,
            max_steps=args.steps,
            per_device_train_batch_size=8,
            learning_rate=2e-3,
            report_to="none",
            save_strategy="no",
            use_cpu=True,
            disable_tqdm=True,
            logging_steps=args.steps,
        )
        trainer = Trainer(
            model=model,
            args=training,
            train_dataset=ToolCallRows(splits_dir / "train.jsonl", tokenizer),
            data_collator=pad_batch(tokenizer.pad_token_id),
            processing_class=tokenizer,
            callbacks=[clock, callback],
        )
        with mlflow.start_run():
            trainer.train()
    steps = statistics.mean(clock.seconds.values())
    examples = len(next(iter(callback.reports.values())).example_ids)
    print(f"machine: {os.cpu_count()} CPUs, torch threads {args.threads}")
    print(f"training step (batch 8): mean {steps:.3f} s over {len(clock.seconds)} steps")
    print(f"callback evaluations: {examples} examples, max_new_tokens {args.max_new_tokens}")
    header = ("step", "kind", "generate s", "score+log s", "total s", "x step")
    print("{:>5} {:<8} {:>11} {:>12} {:>8} {:>7}".format(*header))
    for step, (generate, score) in sorted(callback.timings.items()):
        kind = callback.reports[step].identity.model_kind
        total = generate + score
        print(
            f"{step:>5} {kind:<8} {generate:>11.2f} {score:>12.3f} {total:>8.2f} "
            f"{total / steps:>7.1f}"
        )


if __name__ == "__main__":
    main()
