"""``calls`` mode parse + score throughput against the single-call scorer, on the same texts.

Run: ``python benchmarks/bench_calls.py [--n 100000]``. Target: ``calls`` mode
(``parse_tool_calls`` + the seven metrics) within 2x the single-call scorer's
time per record (``parse_tool_call`` + the five metrics) on the texts of
``bench_scoring.py``. A second, informational line times a parallel-call
workload (reordered, duplicated, partly wrong multi-call answers and abstention
examples) that only ``calls`` mode can score.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from bench_scoring import synthetic

from sommelier_mlflow.toolcalls import (
    CALLS_METRIC_NAMES,
    METRIC_NAMES,
    compute_calls_metrics,
    compute_metrics,
    parse_tool_call,
    parse_tool_calls,
)


def single(rows: list[tuple[str, Any]]) -> dict[str, tuple[int, int]]:
    # Streamed, as the evaluation layer scores: each text is parsed as the scorer
    # reaches it, inside the batch where the cycle collector is paused.
    records = (
        {"parse_status": result.status, "parsed_call": result.call, "gold_call": gold}
        for text, gold in rows
        for result in (parse_tool_call(text),)
    )
    metrics = compute_metrics(records)
    return {name: (metrics[name].numerator, metrics[name].denominator) for name in METRIC_NAMES}


def calls(rows: list[tuple[str, Any]]) -> dict[str, tuple[int, int]]:
    records = (
        {
            "parse_status": result.status,
            "parsed_calls": result.calls,
            "gold_calls": gold if isinstance(gold, list) else [gold],
        }
        for text, gold in rows
        for result in (parse_tool_calls(text),)
    )
    metrics = compute_calls_metrics(records)
    return {
        name: (metrics[name].numerator, metrics[name].denominator) for name in CALLS_METRIC_NAMES
    }


def parallel(n: int, seed: int = 11) -> list[tuple[str, list[dict[str, Any]]]]:
    """Multi-call and abstention rows: the workload ``calls`` mode exists for."""
    rng = random.Random(seed)
    base = synthetic(n, seed)
    rows: list[tuple[str, list[dict[str, Any]]]] = []
    for index in range(n):
        width = rng.choice([0, 1, 2, 2, 3])
        gold = [base[(index + k) % n][1] for k in range(width)]
        predicted = json.loads(json.dumps(gold))
        roll = rng.random()
        if roll < 0.4:
            rng.shuffle(predicted)
        elif roll < 0.6 and predicted:
            predicted[-1]["arguments"]["guests"] += 1
            predicted.reverse()
        elif roll < 0.7 and predicted:
            predicted.append(predicted[0])
        elif roll < 0.8:
            predicted = predicted[:-1]
        elif roll < 0.9:
            rows.append((json.dumps(predicted)[:-3], gold))
            continue
        else:
            rows.append(("No tool applies here.", gold))
            continue
        rows.append(("Calling: " + json.dumps(predicted), gold))
    return rows


def _best_of(func: Any, rows: Any, repeats: int) -> tuple[float, Any]:
    best = float("inf")
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = func(rows)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rows = synthetic(args.n)
    single_s, single_result = _best_of(single, rows, args.repeats)
    calls_s, calls_result = _best_of(calls, rows, args.repeats)
    # On one-call golds the calls-mode set match must agree with full-call exact
    # match, except that the calls parser accepts a top-level multi-call array.
    assert calls_result["call_set_exact_match"][1] == single_result["full_call_exact_match"][1]
    parallel_rows = parallel(args.n)
    parallel_s, _ = _best_of(calls, parallel_rows, args.repeats)
    print(f"records: {args.n:,} (best of {args.repeats})")
    print(f"{'scorer':<40}{'seconds':>10}{'records/s':>12}")
    print(
        f"{'single-call (parser.v1, five metrics)':<40}{single_s:>10.3f}{args.n / single_s:>12,.0f}"
    )
    print(f"{'calls mode, same texts':<40}{calls_s:>10.3f}{args.n / calls_s:>12,.0f}")
    print(f"{'calls mode, parallel workload':<40}{parallel_s:>10.3f}{args.n / parallel_s:>12,.0f}")
    print(f"calls / single time ratio on the same texts: {calls_s / single_s:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
