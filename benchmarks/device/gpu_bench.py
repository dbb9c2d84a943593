"""Both arms of 1,000 formatted prompts of an 8B shape on one GPU, with the ``hf`` backend.

Run by ``run_gpu_bench.sh`` (which installs what the machine lacks first).
Builds the shape locally in bfloat16 on the GPU (``benchmarks/shaped_models.py``:
seeded random weights, a tokenizer of the real vocabulary size, a rank-16 LoRA
on the attention projections), then times the product's generation path for
the base arm and the adapter arm (``run_generation``: length-sorted batches,
greedy, every completion exactly ``--max-new-tokens`` tokens) and prints
prompts/s, tokens/s and the wall time of both arms against the upstream
pipeline's 13.7 + 15.4 minutes for the same 1,000 prompts one at a time.

    python benchmarks/device/gpu_bench.py [--shape llama-3.1-8b] [--prompts 1000]
        [--max-new-tokens 128] [--batch-size 128] [--work DIR] [--json OUT]
    python benchmarks/device/gpu_bench.py --smoke   # CPU, a one-layer 0.5B shape, 4 prompts
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sommelier_mlflow._json import atomic_write_json  # noqa: E402
from tests.support.scripts import load_script  # noqa: E402

#: The upstream pipeline's reference run: 1,000 prompts of an 8B model on one L40S,
#: transformers one prompt at a time (minutes, base arm then adapter arm).
UPSTREAM_MINUTES = {"base": 13.7, "adapter": 15.4}
#: The target on an H200: both arms in at most this many seconds.
TARGET_SECONDS = 180.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="llama-3.1-8b")
    parser.add_argument("--prompts", type=int, default=1000)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--work", type=Path, default=None, help="where the model is built")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--smoke", action="store_true", help="CPU end-to-end check: one layer, 4 prompts, 8 tokens"
    )
    args = parser.parse_args(argv)

    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    shapes = load_script("benchmarks/shaped_models.py")
    bench = load_script("benchmarks/bench_generation.py")
    if args.smoke:
        device, dtype, layers = "cpu", "float32", 1
        args.shape, args.prompts, args.max_new_tokens, args.batch_size = "qwen2.5-0.5b", 4, 8, 4
    else:
        if not torch.cuda.is_available():
            print("no CUDA device: this measurement needs one GPU (or pass --smoke)")
            return 3
        device, dtype, layers = "cuda", "bfloat16", None
        print(
            f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}"
        )
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        model_dir = Path(tmp) / args.shape
        started = time.perf_counter()
        shapes.build_shaped_model(
            shapes.SHAPES[args.shape], model_dir, layers=layers, dtype=dtype, device=device
        )
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
        build_s = time.perf_counter() - started
        print(f"built {args.shape} ({dtype}, {device}) in {build_s:.0f} s")
        rows = bench.measure_arms(
            model_dir,
            model_dir / "adapter",
            bench.demo_prompts(args.prompts),
            {"hf batched": bench.Mode("hf", args.batch_size)},
            max_new_tokens=args.max_new_tokens,
            work_dir=Path(tmp) / "runs",
            device=device,
        )
    bench.print_rows(rows)
    total = sum(row.seconds for row in rows)
    upstream = sum(UPSTREAM_MINUTES.values()) * 60
    print(
        f"\nboth arms: {total:.0f} s wall ({total / 60:.2f} min) for "
        f"{args.prompts} prompts x {args.max_new_tokens} tokens each arm"
    )
    for row in rows:
        minutes = UPSTREAM_MINUTES[row.arm]
        print(
            f"  {row.arm}: {row.seconds:.0f} s, {row.prompts_per_s:.2f} prompts/s, "
            f"{row.tokens_per_s:.0f} tokens/s (upstream one at a time: {minutes} min)"
        )
    if args.smoke:
        print("smoke run: the path works end to end; its figures compare with nothing")
    else:
        print(
            f"upstream, one prompt at a time: {upstream / 60:.1f} min -> {upstream / total:.1f}x; "
            f"target both arms <= {TARGET_SECONDS:.0f} s: "
            f"{'met' if total <= TARGET_SECONDS else 'not met'}"
        )
    out = args.json or (Path(os.environ["OUT"]) / "gpu_bench.json" if "OUT" in os.environ else None)
    if out is not None:
        atomic_write_json(
            out,
            {
                "shape": args.shape,
                "device": device,
                "build_seconds": round(build_s, 1),
                "prompts": args.prompts,
                "max_new_tokens": args.max_new_tokens,
                "batch_size": args.batch_size,
                "rows": [
                    {
                        "arm": r.arm,
                        "seconds": round(r.seconds, 2),
                        "prompts_per_s": round(r.prompts_per_s, 3),
                        "tokens_per_s": round(r.tokens_per_s, 1),
                    }
                    for r in rows
                ],
                "both_arms_seconds": round(total, 1),
                "upstream_seconds": upstream,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
