"""What deciding preregistered claims adds to ``compare``: time, and proof nothing else moved.

Run: ``python benchmarks/bench_claims.py`` from the repository root
(options: ``--roots``, ``--resamples``, ``--repeats``).

The arms are the synthetic 20,000-example split of ``bench_report.py`` (10,000
English roots and their French translations). Both reports are scored and
written once; then ``run_comparison`` runs alternately without and with a
claims file of six claims (superiority and non-inferiority on ``overall``,
``en`` and ``fr``), ``--repeats`` times each, interleaved so that load from
other processes falls on both alike. The claims are decided from the same
draws as the intervals, so the extra work is counting draws below a threshold
and Holm's adjustment; the script checks that every section of the report
except ``claims`` is byte-identical with and without claims before it prints
any time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import ADAPTER, DECODING, IDENTITY, build

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.evaluation import (
    check_claims,
    decide_claims,
    paired_bootstrap_draws,
    read_claims,
    run_comparison,
    score_run,
)
from sommelier_mlflow.evaluation import write_evaluation_report as write_report

CLAIMS = [
    {
        "id": f"{slice_name}-{kind}",
        "slice": slice_name,
        "metric": metric,
        "kind": kind,
        "margin": margin,
    }
    for slice_name in ("overall", "en", "fr")
    for kind, metric, margin in (
        ("superiority", "full_call_exact_match", 0.0),
        ("non_inferiority", "argument_f1", 0.01),
    )
]


def claimed_metric_names(report: dict[str, object]) -> list[str]:
    identity = report["identity"]
    assert isinstance(identity, dict)
    return list(identity["metric_names"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--roots", type=int, default=10_000)
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    split, arms = build(args.roots, 0)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        paths = {}
        for kind in ("base", "adapter"):
            run = score_run(
                split,
                arms[kind],
                model_kind=kind,  # type: ignore[arg-type]
                model_identity=IDENTITY,
                adapter=ADAPTER if kind == "adapter" else None,
                decoding=DECODING,
                resamples=args.resamples,
            )
            paths[kind] = write_report(out / kind / "evaluation_report.json", run)
        claims_path = out / "claims.json"
        claims_path.write_text(
            json.dumps({"schema_version": "sommelier_mlflow.claims.v1", "claims": CLAIMS}),
            encoding="utf-8",
        )
        times: dict[str, list[tuple[float, float]]] = {"without": [], "with": []}
        reports = {}
        for repeat in range(args.repeats):
            for label in ("without", "with") if repeat % 2 == 0 else ("with", "without"):
                wall, cpu = time.perf_counter(), time.process_time()
                claims = read_claims(claims_path) if label == "with" else None
                artifacts = run_comparison(
                    paths["base"],
                    paths["adapter"],
                    out / label,
                    resamples=args.resamples,
                    claims=claims,
                )
                times[label].append((time.perf_counter() - wall, time.process_time() - cpu))
                reports[label] = artifacts.report.to_json()

        # The claims' own work in isolation (robust to machine load, unlike the
        # wall-clock difference of two 2-second runs): read + check + decide, on
        # draws of the comparison's shape (3 slices x resamples x 5 metrics).
        spec = read_claims(claims_path)
        names = claimed_metric_names(reports["with"])
        rng = np.random.default_rng(0)
        draws = {}
        for slice_name in ("overall", "en", "fr"):
            num = rng.integers(0, 2, size=(500, len(names)))
            ones = np.ones_like(num)
            draws[slice_name] = paired_bootstrap_draws(
                num, ones, num[::-1], ones, resamples=args.resamples, seed=1, metric_names=names
            )
        loops = 200
        cpu = time.process_time()
        for _ in range(loops):
            spec = read_claims(claims_path)
            check_claims(
                spec,
                slices=("overall", "en", "fr"),
                metric_names=names,
                seed=0,
                resamples=args.resamples,
            )
            decide_claims(spec, draws)
        decide_ms = 1000 * (time.process_time() - cpu) / loops

    plain, claimed = reports["without"], reports["with"]
    assert set(claimed) - set(plain) == {"claims"}
    for key in plain:
        assert canonical_json(plain[key]) == canonical_json(claimed[key]), key

    print(
        f"python {platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"examples: {len(split.examples)}, resamples {args.resamples}, "
        f"{len(CLAIMS)} claims, best of {args.repeats} (interleaved)"
    )
    best = {
        label: (min(w for w, _ in runs), min(c for _, c in runs)) for label, runs in times.items()
    }
    for label in ("without", "with"):
        wall, cpu = best[label]
        print(f"  run_comparison {label:<8} claims: wall {wall:6.3f} s   cpu {cpu:6.3f} s")
    wall_pct = 100 * (best["with"][0] / best["without"][0] - 1)
    cpu_pct = 100 * (best["with"][1] / best["without"][1] - 1)
    print(f"  difference of the best runs: wall {wall_pct:+.1f}%   cpu {cpu_pct:+.1f}%")
    share = 100 * decide_ms / 1000 / best["without"][1]
    print(
        f"  claims alone (read + check + decide {len(CLAIMS)} claims): {decide_ms:.2f} ms cpu "
        f"= {share:.2f}% of compare's cpu time (target < 10%)"
    )
    print("  every report section except 'claims' is byte-identical with and without claims")
    print(
        f"  verdict: {claimed['claims']['verdict']}; "
        + ", ".join(f"{row['id']}={row['decision']}" for row in claimed["claims"]["claims"])
    )


if __name__ == "__main__":
    main()
