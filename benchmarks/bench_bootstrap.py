"""Vectorised paired bootstrap vs a plain Python loop, on synthetic tool-call components.

Run: ``python benchmarks/bench_bootstrap.py`` from the repository root
(``--clustered`` times only the clustered bootstrap against the unclustered one).

Both implementations compute the same statistic (per metric, ratio-of-sums of arm b
minus arm a over the same resampled rows) but draw different random indices, so
their intervals agree only statistically; the script prints the largest bound
difference as a sanity check. The loop is timed on fewer resamples than the
vectorised code where a full run would take minutes, and its time is scaled
linearly to the full resample count (each resample costs the same).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sommelier_mlflow.evaluation._seeds import derive_seed
from sommelier_mlflow.evaluation._stats import PairedBootstrapResult, paired_bootstrap

METRICS = (
    "valid_json_rate",
    "function_name_accuracy",
    "argument_exact_match",
    "argument_f1",
    "full_call_exact_match",
)
IntArray = NDArray[np.int64]


def synthetic_arm(
    rng: np.random.Generator, gold_pairs: IntArray, skill: float
) -> tuple[IntArray, IntArray]:
    """Components of one arm with the shape and dependencies of the real metrics."""
    n = gold_pairs.shape[0]
    valid = rng.random(n) < 0.90 + 0.08 * skill
    name_ok = valid & (rng.random(n) < 0.85 + 0.1 * skill)
    predicted = np.where(valid, np.maximum(gold_pairs + rng.integers(-1, 2, n), 1), 0)
    matched = np.where(
        valid, rng.binomial(np.minimum(predicted, gold_pairs), 0.75 + 0.2 * skill), 0
    )
    args_ok = valid & (matched == gold_pairs) & (predicted == gold_pairs)
    full_ok = name_ok & args_ok
    num = np.column_stack([valid, name_ok, args_ok, 2 * matched, full_ok]).astype(np.int64)
    den = np.column_stack(
        [np.ones(n), np.ones(n), np.ones(n), predicted + gold_pairs, np.ones(n)]
    ).astype(np.int64)
    return num, den


def python_loop_bootstrap(
    num_a: list[list[int]],
    den_a: list[list[int]],
    num_b: list[list[int]],
    den_b: list[list[int]],
    *,
    resamples: int,
    seed: int,
    confidence: float = 0.95,
) -> list[tuple[float, float]]:
    """Straightforward reference: draw indices with random.Random, sum per metric."""
    rnd = random.Random(seed)
    n = len(num_a)
    m = len(num_a[0])
    diffs: list[list[float]] = [[] for _ in range(m)]
    for _ in range(resamples):
        indices = [rnd.randrange(n) for _ in range(n)]
        for j in range(m):
            sna = sda = snb = sdb = 0
            for i in indices:
                sna += num_a[i][j]
                sda += den_a[i][j]
                snb += num_b[i][j]
                sdb += den_b[i][j]
            value_a = sna / sda if sda else 0.0
            value_b = snb / sdb if sdb else 0.0
            diffs[j].append(value_b - value_a)
    alpha = (1.0 - confidence) / 2.0
    bounds = []
    for column in diffs:
        lower, upper = np.quantile(column, [alpha, 1.0 - alpha], method="linear")
        bounds.append((float(lower), float(upper)))
    return bounds


def bench(n: int, resamples: int, loop_resamples: int, seed: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    gold_pairs = rng.integers(1, 6, n)
    num_a, den_a = synthetic_arm(rng, gold_pairs, skill=0.0)
    num_b, den_b = synthetic_arm(rng, gold_pairs, skill=0.5)
    comparison_seed = derive_seed(seed, f"bench/{n}")

    def run() -> PairedBootstrapResult:
        return paired_bootstrap(
            num_a,
            den_a,
            num_b,
            den_b,
            resamples=resamples,
            seed=comparison_seed,
            metric_names=METRICS,
        )

    # First call in the process pays one-off costs (BLAS start-up, page faults);
    # report it separately from the steady state (best of `repeats`).
    start = time.perf_counter()
    result = run()
    cold_s = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        again = run()
        times.append(time.perf_counter() - start)
        assert again == result, "same seed must give the same result"
    vector_s = min(times)
    tracemalloc.start()
    run()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    lists = [array.tolist() for array in (num_a, den_a, num_b, den_b)]
    start = time.perf_counter()
    loop_bounds = python_loop_bootstrap(*lists, resamples=loop_resamples, seed=comparison_seed)
    loop_measured_s = time.perf_counter() - start
    loop_full_s = loop_measured_s * resamples / loop_resamples

    bound_gap = max(
        max(abs(iv.lower - lo), abs(iv.upper - hi))
        for iv, (lo, hi) in zip(result.intervals, loop_bounds, strict=True)
    )
    return {
        "n": n,
        "resamples": resamples,
        "cold_s": cold_s,
        "vector_s": vector_s,
        "peak_mb": peak / 2**20,
        "loop_resamples": loop_resamples,
        "loop_measured_s": loop_measured_s,
        "loop_full_s": loop_full_s,
        "speedup": loop_full_s / vector_s,
        "cold_speedup": loop_full_s / cold_s,
        "bound_gap": bound_gap,
        "f1_estimate": result.interval("argument_f1").estimate,
    }


def bench_clustered(n: int, resamples: int, seed: int, repeats: int) -> dict[str, float]:
    """The conversation bootstrap (2-8 turns per conversation) vs the turn-level one, same rows.

    The clustered call includes everything ``compare`` adds for conversations:
    labelling the rows, summing components per conversation, and the
    resampling itself (over fewer, larger units).
    """
    rng = np.random.default_rng(seed)
    gold_pairs = rng.integers(1, 6, n)
    num_a, den_a = synthetic_arm(rng, gold_pairs, skill=0.0)
    num_b, den_b = synthetic_arm(rng, gold_pairs, skill=0.5)
    turns = rng.integers(2, 9, size=n)
    labels = np.repeat([f"conv-{i}" for i in range(n)], turns)[:n]
    comparison_seed = derive_seed(seed, f"bench/clustered/{n}")
    timings: dict[str, float] = {}
    for name, clusters in (("turns", None), ("conversations", labels)):
        times = []
        for _ in range(repeats + 1):  # the first call warms up
            start = time.perf_counter()
            paired_bootstrap(
                num_a,
                den_a,
                num_b,
                den_b,
                resamples=resamples,
                seed=comparison_seed,
                metric_names=METRICS,
                clusters=clusters,
            )
            times.append(time.perf_counter() - start)
        timings[name] = min(times[1:])
    return {
        "n": n,
        "conversations": len(set(labels.tolist())),
        "turns_s": timings["turns"],
        "conversations_s": timings["conversations"],
        "ratio": timings["conversations"] / timings["turns"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument(
        "--loop-resamples-small",
        type=int,
        default=2000,
        help="resamples the Python loop runs on 1,000 pairs (default: all of them)",
    )
    parser.add_argument(
        "--loop-resamples-large",
        type=int,
        default=100,
        help="resamples the Python loop runs on 20,000 pairs; scaled linearly to --resamples",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5, help="timed vectorised runs (best kept)")
    parser.add_argument("--clustered", action="store_true", help="only the clustered timing")
    args = parser.parse_args()

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, "
        f"{os.cpu_count()} CPUs, {platform.machine()}"
    )
    clustered = bench_clustered(20_000, args.resamples, args.seed, args.repeats)
    print(
        f"clustered bootstrap, {clustered['n']:,} turns in {clustered['conversations']:,} "
        f"conversations, {args.resamples} resamples (best of {args.repeats}): "
        f"turn-level {clustered['turns_s']:.3f} s, "
        f"conversations {clustered['conversations_s']:.3f} s, "
        f"ratio {clustered['ratio']:.2f}x (target <= 1.5x): "
        f"{'PASS' if clustered['ratio'] <= 1.5 else 'FAIL'}"
    )
    if args.clustered:
        return
    rows = [
        bench(
            n,
            args.resamples,
            min(loop_resamples, args.resamples),
            args.seed,
            args.repeats,
        )
        for n, loop_resamples in (
            (1_000, args.loop_resamples_small),
            (20_000, args.loop_resamples_large),
        )
    ]
    header = (
        f"{'pairs':>7} {'resamples':>9} {'numpy s':>8} {'cold s':>7} {'peak MB':>8} "
        f"{'loop s (measured on R)':>24} {'loop s @full':>12} {'speedup':>8} "
        f"{'cold spd':>8} {'|bound diff|':>12}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        measured = f"{row['loop_measured_s']:.2f} on {int(row['loop_resamples'])}"
        print(
            f"{int(row['n']):>7} {int(row['resamples']):>9} {row['vector_s']:>8.3f} "
            f"{row['cold_s']:>7.3f} {row['peak_mb']:>8.1f} {measured:>24} "
            f"{row['loop_full_s']:>12.1f} {row['speedup']:>7.0f}x {row['cold_speedup']:>7.0f}x "
            f"{row['bound_gap']:>12.4f}"
        )
    worst = min(row["speedup"] for row in rows)
    print(
        f"minimum steady-state speedup {worst:.0f}x (target >= 50x): "
        f"{'PASS' if worst >= 50 else 'FAIL'}"
    )
    print(
        "loop s @full = loop seconds measured on R resamples x (resamples / R); "
        "numpy s = best of --repeats; cold s = first call in the process"
    )


if __name__ == "__main__":
    main()
