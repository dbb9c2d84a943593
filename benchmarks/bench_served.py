"""Served generation (vLLM) vs in-process transformers, same demo prompts, one run.

Starts the vLLM CPU server from ``.venv-vllm`` (``bash scripts/setup_vllm.sh``)
on the demo's base model (and, for ``--kind adapter``, its LoRA adapter), then
times ``run_generation`` end to end on the same formatted demo prompts through
three backends:

- ``served``: :class:`ServerGenerator` (concurrent requests, several prompts each);
- ``hf batched``: :class:`HFGenerator` at ``--hf-batch-size``;
- ``hf one at a time``: :class:`HFGenerator` at batch size 1.

Prompts/s and generated tokens/s are printed side by side, plus how many
completions agree with the one-at-a-time reference. Not timed: the vLLM
startup and the model load. Served and hf batched run twice and the faster
run counts (the first requests of a fresh server, and the first batches of
a fresh model, pay one-off costs for each new batch shape that a long
evaluation does not); one at a time runs once, after a short warm-up.

The server is started the way vLLM's CPU guide asks (tcmalloc and Intel
OpenMP preloaded), with a continuous batch of up to 512 sequences, async
scheduling, and no prefix caching (the demo prompts share no cacheable
prefix: the hit rate measured 0%, so hashing was pure cost); for the base
arm without LoRA support, which costs its worker about a third more per step
even for base requests. The prompts come from the demo's train split by
default: the test split has only 357, too few to keep a continuous batch full.

    python benchmarks/bench_served.py [--prompts 1000] [--split train]
        [--max-new-tokens 96] [--kind base|adapter] [--threads 1]
        [--url http://127.0.0.1:8000/v1]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sommelier_mlflow.data import (  # noqa: E402
    Decoding,
    format_examples,
    read_generations,
    read_test_split,
)
from sommelier_mlflow.generation import (  # noqa: E402
    HFGenerator,
    ServerGenerator,
    ServerTransport,
    TextGenerator,
    run_generation,
)
from tests.support.vllm_server import (  # noqa: E402
    ADAPTER_NAME,
    BASE_NAME,
    VllmServer,
    build_demo_assets,
    vllm_python,
)


def _texts(out: Path) -> dict[str, str]:
    return {
        r.example_id: r.raw_text
        for p in sorted((out / "generations").glob("*.jsonl"))
        for r in read_generations(p)
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--split", choices=["train", "validation", "test"], default="train")
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--kind", choices=["base", "adapter"], default="base")
    parser.add_argument("--hf-batch-size", type=int, default=16)
    parser.add_argument("--served-batch-size", type=int, default=None, help="default: all")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for hf")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--api-key", default="bench-key")
    parser.add_argument(
        "--vllm-args",
        default=(
            "--max-num-seqs 512 --max-num-batched-tokens 16384 --async-scheduling "
            "--no-enable-prefix-caching"
        ),
        help="extra server arguments (a started server only)",
    )
    args = parser.parse_args()

    import os

    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    torch.set_num_threads(args.threads)
    demo = build_demo_assets()
    adapter = demo.adapter_dir if args.kind == "adapter" else None
    server = None
    if args.url is None:
        python = vllm_python()
        if python is None:
            sys.exit("no .venv-vllm: run `bash scripts/setup_vllm.sh` first")
        tmp_log = Path(tempfile.mkdtemp()) / "vllm.log"
        server = VllmServer(
            python,
            demo.base_model_dir,
            demo.adapter_dir,
            tmp_log,
            args.api_key,
            lora=adapter is not None,
            extra_args=tuple(args.vllm_args.split()),
            kv_cache_gib=2,
        )
        started = time.perf_counter()
        server.start()
        print(f"vLLM ready in {time.perf_counter() - started:.0f} s (log {tmp_log})")
        url = server.url
    else:
        url = args.url
    os.environ["OPENAI_API_KEY"] = args.api_key
    try:

        def served_generator() -> ServerGenerator:
            return ServerGenerator(
                ServerTransport(url),
                served_model=BASE_NAME,
                served_adapter=ADAPTER_NAME if adapter else None,
                adapter=adapter,
                model=str(demo.base_model_dir),
                concurrency=args.concurrency,
            )

        local = HFGenerator(demo.base_model_dir, adapter=adapter, num_threads=args.threads)
        split = read_test_split(demo.splits_dir / f"{args.split}.jsonl")
        examples = format_examples(split.examples[: args.prompts], local.tokenizer)
        # (name, a fresh generator per attempt, batch, attempts): the best attempt counts.
        runs: list[tuple[str, Callable[[], TextGenerator], int, int]] = [
            ("served (vLLM)", served_generator, args.served_batch_size or len(examples), 2),
            ("hf batched", lambda: local, args.hf_batch_size, 2),
            ("hf one at a time", lambda: local, 1, 1),
        ]
        rows = []
        served_stats: dict[str, float] = {}
        with tempfile.TemporaryDirectory() as tmp:
            for name, make, batch, attempts in runs:
                decoding = Decoding(max_new_tokens=args.max_new_tokens, batch_size=batch)
                if attempts == 1:  # a short untimed warm-up instead of a second attempt
                    run_generation(
                        examples[:16],
                        make(),
                        decoding=decoding,
                        model_kind=args.kind,
                        out_dir=Path(tmp) / f"warm-up {name}",
                        progress=False,
                    )
                best: tuple[float, Path] | None = None
                for attempt in range(attempts):
                    generator = make()
                    out = Path(tmp) / f"{name} {attempt}"
                    started = time.perf_counter()
                    run_generation(
                        examples,
                        generator,
                        decoding=decoding,
                        model_kind=args.kind,
                        out_dir=out,
                        progress=False,
                    )
                    seconds = time.perf_counter() - started
                    if best is None or seconds < best[0]:
                        best = (seconds, out)
                        if isinstance(generator, ServerGenerator):
                            served_stats = generator.stats.metrics()
                assert best is not None
                texts = _texts(best[1])
                tokens = sum(
                    len(local.tokenizer(t, add_special_tokens=False)["input_ids"])
                    for t in texts.values()
                )
                rows.append((name, batch, best[0], texts, tokens))
        reference = rows[-1][3]
        batched_rate = len(examples) / rows[1][2]
        print(
            f"\n{len(examples)} demo prompts ({args.split} split, {args.kind}), "
            f"max_new_tokens={args.max_new_tokens}, "
            f"torch threads={args.threads}, {platform.processor() or platform.machine()}, "
            f"{os.cpu_count()} CPUs\n"
        )
        print("| backend | batch | seconds | prompts/s | tokens/s | vs hf batched | same text |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for name, batch, seconds, texts, tokens in rows:
            same = sum(texts[k] == reference[k] for k in reference)
            rate = len(examples) / seconds
            print(
                f"| {name} | {batch} | {seconds:.1f} | {rate:.2f} | {tokens / seconds:.0f} | "
                f"{rate / batched_rate:.2f}x | {same}/{len(reference)} |"
            )
        print(f"\nserver-side usage (best attempt): {served_stats}")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
