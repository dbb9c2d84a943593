"""Generation throughput: batched vs one prompt at a time, same model, same prompts.

Builds the seeded tiny Llama used by the tests (no download), formats 64
tool-calling prompts with its chat template (about 260 tokens each), and times
``run_generation`` end to end (tokenise, generate, parse, append + fsync per
batch, final atomic rewrite) at several batch sizes, interleaving the
configurations over several rounds so machine noise hits them alike.

    python benchmarks/bench_generation.py [--rounds 3] [--threads 1,2]
        [--max-new-tokens 32] [--batch-sizes 1,8,32]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "generation")]

from generation_helpers import corpus, make_examples  # noqa: E402

from sommelier_mlflow._json import loads  # noqa: E402
from sommelier_mlflow.data import Decoding  # noqa: E402
from sommelier_mlflow.generation import HFGenerator, run_generation  # noqa: E402
from tests.support.tiny_models import build_tiny_llama, build_tokenizer  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _completions(out: Path) -> dict[str, str]:
    texts = {}
    for path in sorted((out / "generations").glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            row = loads(line)
            texts[row["example_id"]] = row["raw_text"]
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=_ints, default=[1, 2])
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--batch-sizes", type=_ints, default=[1, 8, 32])
    args = parser.parse_args()

    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tokenizer = build_tokenizer(root / "tokenizer", corpus())
        model_dir = build_tiny_llama(root / "model", tokenizer, seed=0)
        examples = make_examples(tokenizer, 32)
        lengths = [
            len(tokenizer(e.prompt_text, add_special_tokens=False)["input_ids"]) for e in examples
        ]
        print(
            f"{len(examples)} prompts, {min(lengths)}-{max(lengths)} tokens "
            f"(mean {statistics.mean(lengths):.0f}); max_new_tokens={args.max_new_tokens}; "
            f"torch {torch.__version__}, transformers {transformers.__version__}"
        )
        for threads in args.threads:
            generator = HFGenerator(model_dir, num_threads=threads)
            generator.generate([examples[0].prompt_text or ""], max_new_tokens=4)  # warm-up
            rates: dict[int, list[float]] = {size: [] for size in args.batch_sizes}
            cpu_rates: dict[int, list[float]] = {size: [] for size in args.batch_sizes}
            outputs: dict[int, dict[str, str]] = {}
            for round_index in range(args.rounds):
                for size in args.batch_sizes:
                    out = root / f"out-{threads}-{size}-{round_index}"
                    decoding = Decoding(max_new_tokens=args.max_new_tokens, batch_size=size)
                    start, cpu_start = time.perf_counter(), time.process_time()
                    run_generation(
                        examples,
                        generator,
                        decoding=decoding,
                        model_kind="base",
                        out_dir=out,
                        progress=False,
                    )
                    rates[size].append(len(examples) / (time.perf_counter() - start))
                    cpu_rates[size].append(len(examples) / (time.process_time() - cpu_start))
                    outputs[size] = _completions(out)
            baseline = statistics.median(rates[args.batch_sizes[0]])
            print(f"\ntorch threads = {threads}, {args.rounds} rounds")
            print(
                "| batch size | examples/s (median) | min-max | speed-up "
                "| examples per CPU-s (median) | same text as bs=1 |"
            )
            print("|---:|---:|---:|---:|---:|---:|")
            reference = outputs[args.batch_sizes[0]]
            for size in args.batch_sizes:
                median = statistics.median(rates[size])
                same = sum(outputs[size][key] == text for key, text in reference.items())
                print(
                    f"| {size} | {median:.1f} | {min(rates[size]):.1f}-{max(rates[size]):.1f} "
                    f"| {median / baseline:.2f}x | {statistics.median(cpu_rates[size]):.1f} "
                    f"| {same}/{len(reference)} |"
                )


if __name__ == "__main__":
    main()
