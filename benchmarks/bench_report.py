"""End-to-end cost of the evaluation layer on a 20,000-example, two-language split.

Run: ``python benchmarks/bench_report.py`` from the repository root.

Builds a synthetic formatted split (``--roots`` English roots plus one French
translation of each) and hand-rolled base and adapter generations with a
realistic mix of outcomes (right calls, wrong names, wrong arguments, calls
wrapped in prose, refusals, truncated JSON), then times the whole path the
product runs after generation:

1. ``score_run`` for each arm (join, digest checks, re-parse, scoring, slices,
   matched-pair gap bootstrap);
2. ``write_evaluation_report`` for each arm (checks and writes the file);
3. ``run_comparison`` from the two files (reads and re-checks both reports,
   gate, per-slice delta bootstraps, McNemar, JSON + Markdown written).

Building the synthetic data is not timed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sommelier_mlflow._json import sha256_text
from sommelier_mlflow.data import (
    Decoding,
    GenerationRecord,
    ModelIdentity,
    ModelKind,
    TestExample,
    TestSplit,
)
from sommelier_mlflow.evaluation import run_comparison, score_run, write_evaluation_report
from sommelier_mlflow.toolcalls import parse_tool_call

DECODING = Decoding(max_new_tokens=256, batch_size=16)
IDENTITY = ModelIdentity("bench/base", "r1", "bench/base", "r1")
ADAPTER = {"source": "bench/adapter", "sha256": "0" * 64}
CITIES = ("Paris", "Oslo", "Rome", "Lima", "Kyoto", "Quito", "Accra", "Perth")


def gold_call(rng: random.Random) -> dict[str, Any]:
    kind = rng.randrange(3)
    if kind == 0:
        return {
            "name": "get_weather",
            "arguments": {"city": rng.choice(CITIES), "units": rng.choice(["c", "f"])},
        }
    if kind == 1:
        return {
            "name": "book_table",
            "arguments": {
                "restaurant": f"R{rng.randrange(500)}",
                "people": rng.randrange(1, 9),
                "options": {"terrace": rng.random() < 0.5, "tags": ["quiet", "late"]},
            },
        }
    return {
        "name": "convert",
        "arguments": {"amount": rng.randrange(1, 1000), "from": "EUR", "to": "USD"},
    }


def completion(rng: random.Random, gold: dict[str, Any], skill: float) -> str:
    """One synthetic completion; ``skill`` shifts the outcome mix towards right calls."""
    roll = rng.random()
    text = json.dumps(gold)
    if roll < 0.55 + 0.3 * skill:
        return text
    if roll < 0.65 + 0.25 * skill:
        return f"Sure, here is the call: {text} Let me know."
    if roll < 0.75 + 0.18 * skill:
        wrong = dict(gold["arguments"])
        wrong[next(iter(wrong))] = "???"
        return json.dumps({"name": gold["name"], "arguments": wrong})
    if roll < 0.85 + 0.1 * skill:
        return json.dumps({"name": gold["name"] + "_v2", "arguments": gold["arguments"]})
    if roll < 0.93 + 0.05 * skill:
        return text[: len(text) // 2]
    return "I am sorry, I cannot call a tool for that."


def build(roots: int, seed: int) -> tuple[TestSplit, dict[str, list[GenerationRecord]]]:
    rng = random.Random(seed)
    examples: list[TestExample] = []
    tools = [{"name": "get_weather", "parameters": {"city": {"type": "string"}}}]
    for index in range(roots):
        gold = gold_call(rng)
        for language, source in (("en", None), ("fr", f"en-{index:06d}")):
            example_id = f"{language}-{index:06d}"
            prompt = f"<|system|>{json.dumps(tools)}<|user|>{language} request {index}<|assistant|>"
            examples.append(
                TestExample(
                    example_id=example_id,
                    language=language,
                    query=f"{language} request {index}",
                    tools=tools,
                    gold_call=gold,
                    source_example_id=source,
                    prompt_text=prompt,
                    prompt_sha256=sha256_text(prompt),
                )
            )
    split = TestSplit(path="bench_split.jsonl", sha256="b" * 64, examples=tuple(examples))
    arms: dict[str, list[GenerationRecord]] = {}
    for kind, skill in (("base", 0.0), ("adapter", 1.0)):
        records = []
        for example in examples:
            penalty = 0.2 if example.language == "fr" else 0.0
            raw = completion(rng, example.gold_call, max(0.0, skill - penalty))
            parsed = parse_tool_call(raw)
            assert example.prompt_sha256 is not None
            records.append(
                GenerationRecord(
                    example_id=example.example_id,
                    model_kind=kind,  # type: ignore[arg-type]
                    language=example.language,
                    prompt_sha256=example.prompt_sha256,
                    raw_text=raw,
                    parse_status=parsed.status,
                    parsed_call=parsed.call,
                    decoding=DECODING.to_dict(),
                )
            )
        arms[kind] = records
    return split, arms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--roots", type=int, default=10_000, help="English roots (x2 examples)")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    split, arms = build(args.roots, args.seed)
    timings: dict[str, tuple[float, float]] = {}

    def clock() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def since(start: tuple[float, float]) -> tuple[float, float]:
        wall, cpu = clock()
        return wall - start[0], cpu - start[1]

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        paths = {}
        kinds: tuple[ModelKind, ...] = ("base", "adapter")
        for kind in kinds:
            start = clock()
            run = score_run(
                split,
                arms[kind],
                model_kind=kind,
                model_identity=IDENTITY,
                adapter=ADAPTER if kind == "adapter" else None,
                decoding=DECODING,
                seed=args.seed,
                resamples=args.resamples,
            )
            timings[f"score_run ({kind})"] = since(start)
            start = clock()
            paths[kind] = write_evaluation_report(out / kind / "evaluation_report.json", run)
            timings[f"write_evaluation_report ({kind})"] = since(start)
        start = clock()
        artifacts = run_comparison(
            paths["base"],
            paths["adapter"],
            out / "comparison",
            seed=args.seed,
            resamples=args.resamples,
        )
        timings["run_comparison (read x2, gate, deltas, write json+md)"] = since(start)
        sizes = {
            "evaluation_report.json (base)": paths["base"].stat().st_size,
            "comparison_report.json": artifacts.json_path.stat().st_size,
            "comparison_report.md": artifacts.markdown_path.stat().st_size,
        }
        overall = artifacts.report.slices["overall"]

    print(f"python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"examples: {len(split.examples)} ({args.roots} en roots + {args.roots} fr pairs)")
    print(f"resamples per interval: {args.resamples}")
    print(f"  {'stage':<56} {'wall s':>7} {'cpu s':>7}")
    for label, (wall, cpu) in timings.items():
        print(f"  {label:<56} {wall:7.3f} {cpu:7.3f}")
    total_wall = sum(wall for wall, _ in timings.values())
    total_cpu = sum(cpu for _, cpu in timings.values())
    print(f"  {'total':<56} {total_wall:7.3f} {total_cpu:7.3f}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    for label, size in sizes.items():
        print(f"  {label:<40} {size / 1e6:6.2f} MB")
    delta = overall.delta.interval("full_call_exact_match")
    print(
        "overall full_call_exact_match delta "
        f"{delta.estimate:+.4f} [{delta.lower:+.4f}, {delta.upper:+.4f}], "
        f"McNemar p = {overall.mcnemar.p_value:.3g}"
    )


if __name__ == "__main__":
    main()
