"""``--scoring bfcl`` against BFCL's own AST checker, side by side on the same outputs.

Run: ``python benchmarks/bench_bfcl.py [--repeats 5]``. Needs PyPI once: BFCL's
wheel (``bfcl-eval``, no dependencies) is fetched and cached by
``tests/support/bfcl_reference.py``, which also loads its checker.

Workload: the 1,240 questions of BFCL's five default categories, imported by
``import_bfcl`` from the wheel's own data, each with the outputs
``tests/support/bfcl_reference.derived_outputs`` derives from its possible
answers (14 per call question, 4 per irrelevance question: 14,960 outputs),
written as the raw text a Hermes-format model (``--output-format hermes``)
would emit: one ``<tool_call>`` block per call, prose to abstain, and an
unclosed block for the undecodable one.

Timed, in CPU seconds (the VM is shared), best of ``--repeats``, the two
sides alternating so that a change of load hits both:

- ours: what ``score --scoring bfcl --output-format hermes`` does per example:
  each question's answer key built once (the mode's ``make_gold``), every raw
  text decoded (the mode's ``parse`` through the ``hermes`` format) and
  compared (``BfclMatch``: the AST rules), then the mode's metric
  components counted by ``score_components``;
- BFCL: its ``ast_checker`` (and, on irrelevance, its empty-output rule) on the
  already decoded calls, already in its own ``[{name: arguments}]`` shape, so
  BFCL is charged for checking only.

Both run with the cycle collector paused: scoring pauses it for its batch
(``sommelier_mlflow._gc``), and BFCL gets the same. Target: ours at least 3x
faster. The run also checks that both reach the same conclusion on every
output (``BfclVerdict.bfcl_passed``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sommelier_mlflow._gc import paused_gc  # noqa: E402
from sommelier_mlflow.data import BFCL_DEFAULT_CATEGORIES, import_bfcl  # noqa: E402
from sommelier_mlflow.toolcalls import output_format, scoring_mode  # noqa: E402
from sommelier_mlflow.toolcalls._score import score_components  # noqa: E402
from tests.support.bfcl_reference import (  # noqa: E402
    derived_outputs,
    load_bfcl,
    read_bfcl_category,
)

UNDECODABLE = '<tool_call>\n{"name": "broken", "arguments": {'


def hermes_text(calls: list[dict[str, Any]] | None) -> str:
    """The completion a Hermes-format model writes for ``calls`` (``None``: a broken one)."""
    if calls is None:
        return UNDECODABLE
    if not calls:
        return "None of the offered functions can answer that."
    return "\n".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls)


def workload(tmp: Path) -> tuple[list[Any], list[Any], Any]:
    """(questions for us, questions for BFCL, BFCL's reference), output by output aligned."""
    reference = load_bfcl()
    rows = {row["example_id"]: row for row in import_bfcl(reference.data_dir, tmp).rows}
    ours: list[tuple[list[Any], list[str]]] = []
    theirs: list[tuple[str, list[Any], list[Any], list[Any]]] = []
    for category in BFCL_DEFAULT_CATEGORIES:
        for question, answers in read_bfcl_category(reference.data_dir, category):
            texts, decoded = [], []
            for _, calls in derived_outputs(category, question["function"], answers):
                texts.append(hermes_text(calls))
                decoded.append(calls)
            ours.append((rows[question["id"]]["gold_calls"], texts))
            theirs.append((category, question["function"], answers, decoded))
    return ours, theirs, reference


MODE = scoring_mode("bfcl")
HERMES = output_format("hermes")


def run_ours(questions: list[Any]) -> list[bool]:
    mode, fmt = MODE, HERMES
    comparisons = []
    for gold_calls, texts in questions:
        gold = mode.make_gold(gold_calls)
        comparisons.extend(mode.match(mode.parse(text, fmt, ()), gold) for text in texts)
    score_components(comparisons, mode.metrics())
    return [comparison.verdict.bfcl_passed for comparison in comparisons]


def run_decode(questions: list[Any]) -> list[Any]:
    mode, fmt = MODE, HERMES
    return [mode.parse(text, fmt, ()) for _, texts in questions for text in texts]


def run_bfcl(questions: list[Any], reference: Any) -> list[bool]:
    checker, is_empty, python = reference.ast_checker, reference.is_empty_output, reference.python
    verdicts = []
    for category, functions, answers, outputs in questions:
        for output in outputs:
            if "irrelevance" in category:
                verdicts.append(output is None or is_empty(output))
            elif output is None:
                verdicts.append(False)
            else:
                result = checker(functions, output, answers, python, category, "stub")
                verdicts.append(bool(result["valid"]))
    return verdicts


def cpu_seconds(fn: Any) -> tuple[float, Any]:
    with paused_gc():
        start = time.process_time()
        result = fn()
        return time.process_time() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tmp", default="/tmp/sommelier-bench-bfcl.jsonl")
    args = parser.parse_args()
    ours_q, theirs_q, reference = workload(Path(args.tmp))
    # BFCL receives calls in its own shape, converted before the clock starts.
    theirs_q = [
        (c, f, a, [None if o is None else [{x["name"]: x["arguments"]} for x in o] for o in outs])
        for c, f, a, outs in theirs_q
    ]
    outputs = sum(len(texts) for _, texts in ours_q)
    times: dict[str, list[float]] = {"ours": [], "bfcl": [], "decode": []}
    for _ in range(args.repeats):
        seconds, ours_v = cpu_seconds(lambda: run_ours(ours_q))
        times["ours"].append(seconds)
        seconds, bfcl_v = cpu_seconds(lambda: run_bfcl(theirs_q, reference))
        times["bfcl"].append(seconds)
        times["decode"].append(cpu_seconds(lambda: run_decode(ours_q))[0])
    ours_s, bfcl_s, decode_s = (min(times[side]) for side in ("ours", "bfcl", "decode"))
    same = sum(a == b for a, b in zip(ours_v, bfcl_v, strict=True))
    print(f"questions: {len(ours_q)}, outputs: {outputs}, CPU seconds, best of {args.repeats}")
    print(f"ours (decode + score): {ours_s:.3f} s  ({outputs / ours_s:,.0f} outputs/s)")
    print(f"  of which decoding alone: {decode_s:.3f} s")
    print(f"BFCL ast_checker (score only): {bfcl_s:.3f} s  ({outputs / bfcl_s:,.0f} outputs/s)")
    print(f"ratio: {bfcl_s / ours_s:.2f}x (target >= 3x)")
    print(f"same conclusion as BFCL: {same}/{outputs}")


if __name__ == "__main__":
    main()
