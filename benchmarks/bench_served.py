"""Served generation (vLLM) vs in-process transformers, same demo prompts, one run.

Starts the vLLM CPU server from ``.venv-vllm`` (``bash scripts/setup_vllm.sh``)
on the demo's base model and LoRA adapter, then times ``run_generation`` end to
end on the same formatted demo prompts through three backends:

- ``served``: :class:`ServerGenerator` (concurrent requests, several prompts each);
- ``hf batched``: :class:`HFGenerator` at ``--hf-batch-size``;
- ``hf one at a time``: :class:`HFGenerator` at batch size 1.

Prompts/s and generated tokens/s are printed side by side, plus how many
completions agree with the one-at-a-time reference. The vLLM startup is not
timed; the model load of each ``HFGenerator`` is not timed either.

    python benchmarks/bench_served.py [--prompts 128] [--max-new-tokens 96]
        [--kind base|adapter] [--threads 1] [--url http://127.0.0.1:8000/v1]
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sommelier_mlflow.data import (  # noqa: E402
    Decoding,
    format_examples,
    read_generations,
    read_test_split,
)
from sommelier_mlflow.generation import HFGenerator, ServerGenerator, run_generation  # noqa: E402
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
    parser.add_argument("--prompts", type=int, default=128)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--kind", choices=["base", "adapter"], default="base")
    parser.add_argument("--hf-batch-size", type=int, default=16)
    parser.add_argument("--served-batch-size", type=int, default=128)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--threads", type=int, default=1, help="torch threads for hf")
    parser.add_argument("--url", default=None, help="use a running server instead of starting one")
    parser.add_argument("--api-key", default="bench-key")
    args = parser.parse_args()

    import os

    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(args.threads)
    demo = build_demo_assets()
    adapter = demo.adapter_dir if args.kind == "adapter" else None
    server = None
    if args.url is None:
        python = vllm_python()
        if python is None:
            sys.exit("no .venv-vllm: run `bash scripts/setup_vllm.sh` first")
        tmp_log = Path(tempfile.mkdtemp()) / "vllm.log"
        server = VllmServer(python, demo.base_model_dir, demo.adapter_dir, tmp_log, args.api_key)
        started = time.perf_counter()
        server.start()
        print(f"vLLM ready in {time.perf_counter() - started:.0f} s (log {tmp_log})")
        url = server.url
    else:
        url = args.url
    os.environ["OPENAI_API_KEY"] = args.api_key
    try:
        served = ServerGenerator(
            url,
            served_model=BASE_NAME,
            served_adapter=ADAPTER_NAME if adapter else None,
            adapter=adapter,
            model=str(demo.base_model_dir),
            concurrency=args.concurrency,
        )
        local = HFGenerator(demo.base_model_dir, adapter=adapter, num_threads=args.threads)
        split = read_test_split(demo.splits_dir / "test.jsonl")
        examples = format_examples(split.examples[: args.prompts], local.tokenizer)
        runs = [
            ("served (vLLM)", served, args.served_batch_size),
            ("hf batched", local, args.hf_batch_size),
            ("hf one at a time", local, 1),
        ]
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for name, generator, batch in runs:
                out = Path(tmp) / name.replace(" ", "_")
                started = time.perf_counter()
                run_generation(
                    examples,
                    generator,
                    decoding=Decoding(max_new_tokens=args.max_new_tokens, batch_size=batch),
                    model_kind=args.kind,
                    out_dir=out,
                    progress=False,
                )
                seconds = time.perf_counter() - started
                texts = _texts(out)
                tokens = sum(
                    len(local.tokenizer(t, add_special_tokens=False)["input_ids"])
                    for t in texts.values()
                )
                rows.append((name, batch, seconds, texts, tokens))
        reference = rows[-1][3]
        batched_rate = len(examples) / rows[1][2]
        print(
            f"\n{len(examples)} demo prompts ({args.kind}), max_new_tokens={args.max_new_tokens}, "
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
        print(f"\nserver-side usage: {served.stats.metrics()}")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
