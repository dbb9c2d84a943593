"""The BFCL multi-turn execution loop: its own cost per step, batching, and the checker.

Run: ``python benchmarks/bench_bfcl_multi_turn.py [--questions 24] [--batch-size 8]
[--max-new-tokens 16] [--checker-questions 800] [--prefix-cache-tokens N]
[--skip-checker]``. Needs ``bfcl-eval`` installed
(``pip install --no-deps bfcl-eval==2026.3.23 mpmath``); no network.

Workload: BFCL v4's multi-turn questions imported by ``import_bfcl`` from the
installed package (``multi_turn_base``, ``_miss_func``, ``_miss_param``,
``_long_context``, 200 each), the demo's tiny model (its committed weights and
tokenizer; ``max_position_embeddings`` raised from 1,024 so BFCL's prompts of
4,000 to 20,000 demo-tokenizer tokens fit), the ``hf`` backend on CPU, greedy,
the ``sommelier`` prompt format, the ``json`` output format.

Measured:

1. The loop's own cost per step against the generation of that step. The run
   is timed as a whole; the backend's ``generate`` calls and the renderer
   (the chat template over the conversation so far) are timed by wrapping
   them; the rest (decoding each output, running its calls in the sandbox,
   building the next history, writing and fsyncing the journal, the context
   check) is the loop's. Per step = divided by the steps taken.
2. Wall time per step with the running conversations batched
   (``--batch-size``, default 8: each round's prompts in the runner's batches
   of similar length) against one conversation at a time (``batch_size`` 1),
   on the same questions. Target: batched at least 3x faster per step. With
   ``--prefix-cache-tokens``, both modes run the ``hf`` backend's prefix cache
   (each mode a fresh one), and the positions it gave and computed are printed;
   the two modes' ``trajectories.jsonl`` are compared byte for byte.
3. The checker (``check_trajectory``) per question on BFCL's ground-truth
   trajectories (one call per step, all of a turn in one step where it has more
   calls than BFCL's step limit), over ``--checker-questions`` questions.

Device: the backend's own choice unless ``--device``/``--dtype`` say otherwise
(CUDA when available, in bfloat16 there; float32 on CPU); the header prints
what ran, so a figure is never read against the wrong device. On CUDA, one
short generation before the timed modes initialises the libraries and loads
the kernels, which would otherwise be charged to the first mode only.
``--json PATH`` also writes the figures there (``benchmarks/device`` collects
them from a GPU machine that way).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sommelier_mlflow._json import atomic_write_json, loads  # noqa: E402
from sommelier_mlflow.data import (  # noqa: E402
    BFCL_MULTI_TURN_CATEGORIES,
    Decoding,
    TestExample,
    format_examples,
    import_bfcl,
    read_test_split,
)
from sommelier_mlflow.generation import (  # noqa: E402
    MULTI_TURN_JOURNAL_NAME,
    TRAJECTORIES_NAME,
    HFGenerator,
    MultiTurnLoop,
    loop_decoding,
    run_generation,
)
from sommelier_mlflow.toolcalls import BFCL_STEP_LIMIT, BfclSandbox  # noqa: E402
from sommelier_mlflow.toolcalls._bfcl_multi_turn import (  # noqa: E402
    check_trajectory,
    gold_turn_calls,
)

DEMO_MODEL = ROOT / "examples" / "demo" / "model" / "base_model"
#: The figures of a mode that are counts, not seconds (``--json`` writes them as integers).
COUNTS = frozenset({"steps", "generate_calls", "cache_hits", "cache_computed"})


def bfcl_data() -> Path:
    import bfcl_eval

    return Path(bfcl_eval.__file__).parent / "data"


def questions(folder: Path) -> list[TestExample]:
    """Every multi-turn question BFCL has, imported as a user imports them."""
    split = folder / "multi_turn.jsonl"
    import_bfcl(bfcl_data(), split, categories=list(BFCL_MULTI_TURN_CATEGORIES))
    return list(read_test_split(split, slice_by=("category",)).examples)


def spread(examples: Sequence[TestExample], count: int) -> list[TestExample]:
    """``count`` questions taken evenly across the categories, in split order."""
    by_category: dict[str, list[TestExample]] = {}
    for example in examples:
        by_category.setdefault(dict(example.slice_values)["category"], []).append(example)
    picked: list[TestExample] = []
    index = 0
    while len(picked) < count:
        for rows in by_category.values():
            if index < len(rows) and len(picked) < count:
                picked.append(rows[index])
        index += 1
    return picked


def long_context_demo_model(folder: Path) -> Path:
    shutil.copytree(DEMO_MODEL, folder)
    config = json.loads((folder / "config.json").read_text("utf-8"))
    config["max_position_embeddings"] = 65536
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


class Timed:
    """The backend, with the seconds its ``generate`` calls took added up."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def generate(self, prompts: Any, *, max_new_tokens: int) -> list[str]:
        started = time.perf_counter()
        out: list[str] = self.inner.generate(prompts, max_new_tokens=max_new_tokens)
        self.seconds += time.perf_counter() - started
        self.calls += 1
        return out

    def __getattr__(self, name: str) -> Any:
        if name in ("generate_details", "generate_for"):  # every batch through generate
            raise AttributeError(name)
        return getattr(self.inner, name)


def play(
    examples: Sequence[TestExample], generator: Any, batch_size: int, max_new_tokens: int, out: Path
) -> dict[str, float]:
    """One run of the loop; its wall time, generate and render seconds, and steps."""
    tokenizer = generator.tokenizer
    ready = format_examples(examples, tokenizer)
    rendering = {"seconds": 0.0}

    def render(step: Sequence[TestExample]) -> list[TestExample]:
        started = time.perf_counter()
        rendered = format_examples(step, tokenizer)
        rendering["seconds"] += time.perf_counter() - started
        return rendered

    timed = Timed(generator)
    decoding = loop_decoding(Decoding(max_new_tokens, batch_size), ready, "json")
    started = time.perf_counter()
    run_generation(
        ready,
        timed,
        decoding=decoding,
        model_kind="base",
        out_dir=out,
        progress=False,
        multi_turn=MultiTurnLoop(render, "json"),
    )
    wall = time.perf_counter() - started
    steps = sum(
        loads(line)["raw_text"] is not None
        for line in (out / MULTI_TURN_JOURNAL_NAME).read_bytes().splitlines()
    )
    return {
        "wall": wall,
        "generate": timed.seconds,
        "render": rendering["seconds"],
        "steps": float(steps),
        "generate_calls": float(timed.calls),
    }


def checker_seconds(examples: Sequence[TestExample]) -> tuple[float, int]:
    """CPU-clock seconds of ``check_trajectory`` over the ground truth, and how many passed."""
    passed = 0
    with BfclSandbox() as sandbox:
        trajectories = [  # one call per step; a turn longer than the step limit in one step
            [
                [[call] for call in turn] if len(turn) <= BFCL_STEP_LIMIT else [list(turn)]
                for turn in gold_turn_calls(example)
            ]
            for example in examples
        ]
        started = time.perf_counter()
        for example, trajectory in zip(examples, trajectories, strict=True):
            passed += check_trajectory(sandbox, example, trajectory).passed
        return time.perf_counter() - started, passed


def warm_up(model: Path, device: str | None, dtype: str | None, threads: int) -> None:
    """One short generation on the device, untimed, before either mode runs.

    CUDA creates its library handles and loads kernels on first use (about a
    second): left in, that would be charged to the batched mode alone. The
    engine is shared by key, so this loads the model once more at most and
    never touches either mode's prefix cache.
    """
    with HFGenerator(model, device=device, dtype=dtype, num_threads=threads) as generator:
        generator.generate(["warm up", "warm up the kernels"], max_new_tokens=4)


def header(generator: HFGenerator) -> dict[str, str]:
    """What ran: device, dtype, library versions, and the GPU's name on CUDA."""
    info = generator.runtime_info()
    if info["device"].startswith("cuda"):
        import torch

        info["gpu"] = str(torch.cuda.get_device_name(torch.device(info["device"])))
    return info


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=24)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--checker-questions", type=int, default=800)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--device", default=None, help="cpu, cuda, cuda:1...; default: CUDA when available"
    )
    parser.add_argument(
        "--dtype", default=None, help="default: the backend's (float32 on CPU, bfloat16 on CUDA)"
    )
    parser.add_argument(
        "--prefix-cache-tokens",
        type=int,
        default=None,
        help="the hf backend's prefix cache, in both modes (each with a fresh one)",
    )
    parser.add_argument(
        "--skip-checker", action="store_true", help="time the loop only, not the checker"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    print(f"load: {os.getloadavg()}")
    report: dict[str, Any] = {
        "questions": args.questions,
        "batch_size": args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "prefix_cache_tokens": args.prefix_cache_tokens,
        "modes": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        every = questions(folder)
        if not args.skip_checker:
            examined = spread(every, args.checker_questions)
            seconds, passed = checker_seconds(examined)
            print(
                f"checker: {seconds / len(examined) * 1000:.1f} ms per question over "
                f"{len(examined)} ground-truth trajectories ({passed} passed)"
            )
            report["checker_ms_per_question"] = round(seconds / len(examined) * 1000, 2)
        picked = spread(every, args.questions)
        model = long_context_demo_model(folder / "model")
        results: dict[str, dict[str, float]] = {}
        for label, batch in (("batched", args.batch_size), ("one at a time", 1)):
            with HFGenerator(
                model,
                device=args.device,
                dtype=args.dtype,
                num_threads=args.threads,
                prefix_cache_tokens=args.prefix_cache_tokens,
            ) as generator:
                if not results:
                    report["runtime"] = header(generator)
                    print("runtime: " + ", ".join(f"{k} {v}" for k, v in report["runtime"].items()))
                    if report["runtime"]["device"].startswith("cuda"):
                        warm_up(model, args.device, args.dtype, args.threads)
                results[label] = play(picked, generator, batch, args.max_new_tokens, folder / label)
                pool = generator._prefix_cache  # the benchmark reads the backend's own counts
                if pool is not None:
                    print(
                        f"{label}: prefix cache gave {pool.hits:,} prompt positions, "
                        f"computed {pool.computed:,}"
                    )
                    results[label]["cache_hits"] = float(pool.hits)
                    results[label]["cache_computed"] = float(pool.computed)
        same = (folder / "batched" / TRAJECTORIES_NAME).read_bytes() == (
            folder / "one at a time" / TRAJECTORIES_NAME
        ).read_bytes()
        print(f"trajectories of the two modes {'identical' if same else 'DIFFER'}")
        for label, r in results.items():
            steps = r["steps"]
            loop = r["wall"] - r["generate"] - r["render"]
            print(
                f"{label:>14}: {steps:.0f} steps, {r['generate_calls']:.0f} generate calls, "
                f"wall {r['wall'] / steps * 1000:.0f} ms/step = generate "
                f"{r['generate'] / steps * 1000:.0f} + render {r['render'] / steps * 1000:.1f} "
                f"+ loop {loop / steps * 1000:.1f} (decode, execute, journal)"
            )
            report["modes"][label] = {
                **{  # counts as integers, seconds to the millisecond
                    key: int(value) if key in COUNTS else round(value, 3)
                    for key, value in r.items()
                },
                "ms_per_step": round(r["wall"] / steps * 1000, 2),
            }
        batched, single = results["batched"], results["one at a time"]
        ratio = (single["wall"] / single["steps"]) / (batched["wall"] / batched["steps"])
        print(f"per step, batched is {ratio:.2f}x as fast as one conversation at a time")
        report["trajectories_identical"] = same
        report["batched_speedup_per_step"] = round(ratio, 3)
    print(f"load: {os.getloadavg()}")
    if args.json is not None:
        atomic_write_json(args.json, report)


if __name__ == "__main__":
    main()
