"""What ``mlflow.models.evaluate`` adds around the ``sommelier`` evaluator.

Run: ``python benchmarks/bench_evaluator.py [--n 10000] [--repeats 3]``.

The same static predictions are scored twice per repeat, in one process:

* directly, with ``score_predictions`` (the function the evaluator calls:
  parse, score, slices, matched-pair gap with its paired bootstrap, per-row table);
* through ``mlflow.models.evaluate(..., evaluators=["sommelier"])`` into a run of
  a local SQLite tracking store, which adds MLflow's dataset handling and input
  logging plus the evaluator's own logging (metrics in one batch, the report, the
  per-example table via ``log_table``).

The store, the experiment and one warm-up evaluation (plugin discovery, lazy
imports) are outside the timings. The script checks that both paths report the
same metrics before printing the overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
import warnings
from typing import Any

TOOLS = ["get_weather", "convert_currency", "book_hotel", "search_flights", "create_event"]
CONFIG = {"language_column": "lang", "example_id_column": "id", "source_example_id_column": "root"}


def synthetic(n: int, seed: int = 11) -> dict[str, list[Any]]:
    """Half English roots, half French translations, with a realistic outcome mix."""
    rng = random.Random(seed)
    roots = n // 2
    columns: dict[str, list[Any]] = {"id": [], "lang": [], "root": [], "output": [], "gold": []}
    golds = []
    for index in range(roots):
        golds.append(
            {
                "name": rng.choice(TOOLS),
                "arguments": {
                    "city": rng.choice(["Paris", "Oslo", "Rome", "Lyon"]),
                    "guests": rng.randint(1, 4),
                    "filters": {"max_price": rng.randint(50, 500), "tags": ["quiet"][: index % 2]},
                },
            }
        )
    for index in range(n):
        gold = golds[index % roots]
        french = index >= roots
        roll = rng.random() + (0.1 if french else 0.0)
        predicted = json.loads(json.dumps(gold))
        if roll < 0.55:
            output = json.dumps(predicted)
        elif roll < 0.7:
            predicted["arguments"]["guests"] += 1
            output = "Sure! " + json.dumps(predicted)
        elif roll < 0.8:
            predicted["name"] = "lookup"
            output = json.dumps([predicted])
        elif roll < 0.9:
            output = json.dumps(predicted)[:-5]
        else:
            output = "I cannot help with that."
        columns["id"].append(f"{'fr' if french else 'en'}-{index % roots:06d}")
        columns["lang"].append("fr" if french else "en")
        columns["root"].append(f"en-{index % roots:06d}" if french else None)
        columns["output"].append(output)
        columns["gold"].append(gold)
    return columns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    warnings.simplefilter("ignore")  # MLflow's own deprecation noise is not measured here
    import mlflow
    import pandas as pd

    from sommelier_mlflow.integration import score_predictions

    columns = synthetic(args.n)
    frames = {
        "JSON strings": pd.DataFrame({**columns, "gold": [json.dumps(g) for g in columns["gold"]]}),
        "dicts": pd.DataFrame(columns),
    }
    config = {**CONFIG, "resamples": args.resamples}

    with tempfile.TemporaryDirectory(prefix="bench-evaluator-") as tmp:
        mlflow.set_tracking_uri(f"sqlite:///{tmp}/mlflow.db")
        experiment = mlflow.create_experiment("bench", artifact_location=f"file://{tmp}/artifacts")

        def through_mlflow(data: Any) -> tuple[float, float, dict[str, float]]:
            with mlflow.start_run(experiment_id=experiment):
                start, cpu = time.perf_counter(), time.process_time()
                result = mlflow.models.evaluate(
                    data=data,
                    predictions="output",
                    targets="gold",
                    model_type="tool-calling",
                    evaluators=["sommelier"],
                    evaluator_config={"sommelier": config},
                )
                elapsed = time.perf_counter() - start
                return elapsed, time.process_time() - cpu, dict(result.metrics)

        through_mlflow(frames["dicts"].head(20))  # warm-up: plugin discovery, lazy imports

        timings: dict[str, list[list[float]]] = {}
        for label, frame in frames.items():
            direct_times, mlflow_times, direct_cpu, mlflow_cpu = [], [], [], []
            for _ in range(args.repeats):
                start, cpu = time.perf_counter(), time.process_time()
                direct = score_predictions(
                    list(frame["output"]),
                    list(frame["gold"]),
                    example_ids=columns["id"],
                    languages=columns["lang"],
                    source_example_ids=columns["root"],
                    resamples=args.resamples,
                )
                direct_times.append(time.perf_counter() - start)
                direct_cpu.append(time.process_time() - cpu)
                elapsed, elapsed_cpu, metrics = through_mlflow(frame)
                mlflow_times.append(elapsed)
                mlflow_cpu.append(elapsed_cpu)
                if metrics != direct.metrics:
                    raise SystemExit("the two paths disagree on the metrics")
            timings[label] = [direct_times, mlflow_times, direct_cpu, mlflow_cpu]

    print(f"rows: {args.n} ({args.n // 2} matched pairs), resamples: {args.resamples}")
    for label, (direct_times, mlflow_times, direct_cpu, mlflow_cpu) in timings.items():
        overheads = [m - d for m, d in zip(mlflow_times, direct_times, strict=True)]
        cpu_overheads = [m - d for m, d in zip(mlflow_cpu, direct_cpu, strict=True)]
        print(f"gold calls as {label}:")
        print(f"  direct score_predictions : {', '.join(f'{t:.2f}' for t in direct_times)} s")
        print(f"  mlflow.models.evaluate   : {', '.join(f'{t:.2f}' for t in mlflow_times)} s")
        print(
            f"  MLflow overhead, wall    : {', '.join(f'{t:.2f}' for t in overheads)} s "
            f"(median {statistics.median(overheads):.2f} s; target < 3 s)"
        )
        print(
            f"  MLflow overhead, CPU     : {', '.join(f'{t:.2f}' for t in cpu_overheads)} s "
            f"(median {statistics.median(cpu_overheads):.2f} s)"
        )


if __name__ == "__main__":
    main()
