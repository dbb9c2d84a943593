"""``--scoring bfcl`` against BFCL's own AST checker, side by side on the same outputs.

Run: ``python benchmarks/bench_bfcl.py [--repeats 3]``. Needs PyPI once: BFCL's
wheel (``bfcl-eval``, no dependencies) is fetched and cached by
``tests/support/bfcl_reference.py``, which also loads its checker.

Workload: the 1,240 questions of BFCL's five default categories, imported by
``import_bfcl`` from the wheel's own data, each with the outputs
``tests/support/bfcl_reference.derived_outputs`` derives from its possible
answers (14 per call question, 4 per irrelevance question: 14,960 outputs),
written as the raw text a Hermes-format model (``--output-format hermes``)
would emit: one ``<tool_call>`` block per call, prose to abstain, and an
unclosed block for the undecodable one.

Timed, best of ``--repeats``:

- ours: decode every raw text (the ``hermes`` decoder) and judge it with
  :func:`check_bfcl`, each question's answer key built once, as scoring does;
- BFCL: its ``ast_checker`` (and, on irrelevance, its empty-output rule) on the
  already decoded calls, already in its own ``[{name: arguments}]`` shape, so
  BFCL is charged for checking only.

Target: ours at least 3x faster. The run also checks that both reach the
same conclusion on every output (``BfclVerdict.bfcl_passed``).
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

from sommelier_mlflow.data import BFCL_DEFAULT_CATEGORIES, import_bfcl  # noqa: E402
from sommelier_mlflow.toolcalls._bfcl import BfclGold, check_bfcl  # noqa: E402
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes  # noqa: E402
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


def run_ours(questions: list[Any]) -> list[bool]:
    verdicts = []
    for gold_calls, texts in questions:
        gold = BfclGold(gold_calls)
        for text in texts:
            parsed = decode_hermes(text)
            calls = (
                None
                if parsed.status in ("invalid_json", "invalid_shape")
                else parsed.predicted_calls
            )
            verdicts.append(check_bfcl(calls, gold).bfcl_passed)
    return verdicts


def run_decode(questions: list[Any]) -> list[Any]:
    return [decode_hermes(text) for _, texts in questions for text in texts]


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


def best(fn: Any, repeats: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tmp", default="/tmp/sommelier-bench-bfcl.jsonl")
    args = parser.parse_args()
    ours_q, theirs_q, reference = workload(Path(args.tmp))
    # BFCL receives calls in its own shape, converted before the clock starts.
    theirs_q = [
        (c, f, a, [None if o is None else [{x["name"]: x["arguments"]} for x in o] for o in outs])
        for c, f, a, outs in theirs_q
    ]
    outputs = sum(len(texts) for _, texts in ours_q)
    ours_s, ours_v = best(lambda: run_ours(ours_q), args.repeats)
    bfcl_s, bfcl_v = best(lambda: run_bfcl(theirs_q, reference), args.repeats)
    decode_s, _ = best(lambda: run_decode(ours_q), args.repeats)
    same = sum(a == b for a, b in zip(ours_v, bfcl_v, strict=True))
    print(f"questions: {len(ours_q)}, outputs: {outputs}")
    print(f"ours (decode + score): {ours_s:.3f} s  ({outputs / ours_s:,.0f} outputs/s)")
    print(f"  of which decoding alone: {decode_s:.3f} s")
    print(f"BFCL ast_checker (score only): {bfcl_s:.3f} s  ({outputs / bfcl_s:,.0f} outputs/s)")
    print(f"ratio: {bfcl_s / ours_s:.2f}x (target >= 3x)")
    print(f"same conclusion as BFCL: {same}/{outputs}")


if __name__ == "__main__":
    main()
