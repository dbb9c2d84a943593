"""Build the bundled BFCL example: a few BFCL v4 questions and two arms' outputs.

``data/`` holds the first questions of each default category, copied line
for line from BFCL v4's data folder (``bfcl_eval/data`` of the ``bfcl-eval``
package, Apache-2.0: see ``data/NOTICE``), in BFCL's own layout, so
``import-bfcl examples/bfcl/data`` reads them exactly as it reads the real
folder. ``outputs_base.jsonl`` and ``outputs_adapter.jsonl`` stand for a base
model and its adapter answering in the product's JSON format (a JSON array
of calls, ``[]`` to abstain): the base model gets a value wrong, drops a
parallel call, calls a tool on irrelevance questions and sometimes writes
broken JSON; the adapter does so less often. Choices come from one seeded
``random.Random``, so the same seed gives the same bytes.

Usage::

    python examples/bfcl/make_example.py BFCL_DATA_DIR --out examples/bfcl [--per-category N]
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")
DEFAULT_SEED = 20261202
DEFAULT_PER_CATEGORY = 6
NOTICE = """\
The files under this folder are excerpts of the Berkeley Function Calling
Leaderboard (BFCL) v4 data, as shipped in the bfcl-eval 2026.3.23 package
(bfcl_eval/data), copied without modification.

Copyright the Gorilla / BFCL authors (UC Berkeley Sky Computing Lab).
Licensed under the Apache License, Version 2.0 (the "License"); you may not
use these files except in compliance with the License. You may obtain a copy
of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
License for the specific language governing permissions and limitations
under the License.

Source: https://github.com/ShishirPatil/gorilla/tree/main/berkeley-function-call-leaderboard
"""


def _first_lines(path: Path, count: int) -> list[str]:
    with path.open(encoding="utf-8") as handle:
        return [line.rstrip("\n") for _, line in zip(range(count), handle, strict=False)]


def _first_value(values: list[Any]) -> Any:
    return next((value for value in values if value != ""), None)


def _correct(answers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    calls = []
    for answer in answers:
        ((name, params),) = answer.items()
        arguments = {p: _first_value(v) for p, v in params.items() if _first_value(v) is not None}
        calls.append({"name": name, "arguments": arguments})
    return calls


def _wrong_value(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    first = dict(calls[0]["arguments"])
    for key, value in first.items():
        if type(value) in (int, float) and type(value) is not bool:
            first[key] = value + 1
            break
        if isinstance(value, str):
            first[key] = value + " (approx.)"
            break
    return [{"name": calls[0]["name"], "arguments": first}, *calls[1:]]


def _output(rng: random.Random, question: dict[str, Any], answers: list[Any], skill: float) -> str:
    """One arm's raw output for a question; ``skill`` is its chance of each right choice."""
    if rng.random() > 0.9 + skill / 10:
        return '[{"name": "' + question["function"][0]["name"] + '", "arguments": {'  # broken
    if not answers:  # irrelevance
        if rng.random() < skill:
            return "[]"
        return json.dumps([{"name": question["function"][0]["name"], "arguments": {}}])
    calls = _correct(answers)
    if rng.random() >= skill:
        calls = calls[:-1] if len(calls) > 1 and rng.random() < 0.5 else _wrong_value(calls)
    if len(calls) > 1 and rng.random() < 0.5:
        calls = calls[::-1]  # order never matters
    return json.dumps(calls)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bfcl_data", type=Path, help="BFCL v4's data folder (bfcl_eval/data)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-category", type=int, default=DEFAULT_PER_CATEGORY)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    data = args.out / "data"
    (data / "possible_answer").mkdir(parents=True, exist_ok=True)
    (data / "NOTICE").write_text(NOTICE, encoding="utf-8")
    outputs: dict[str, list[dict[str, str]]] = {"base": [], "adapter": []}
    for category in CATEGORIES:
        name = f"BFCL_v4_{category}.json"
        questions = _first_lines(args.bfcl_data / name, args.per_category)
        (data / name).write_text("\n".join(questions) + "\n", encoding="utf-8")
        answers: list[Any] = [[] for _ in questions]
        if category != "irrelevance":
            lines = _first_lines(args.bfcl_data / "possible_answer" / name, args.per_category)
            (data / "possible_answer" / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
            answers = [json.loads(line)["ground_truth"] for line in lines]
        for line, expected in zip(questions, answers, strict=True):
            question = json.loads(line)
            for kind, skill in (("base", 0.55), ("adapter", 0.85)):
                raw = _output(rng, question, expected, skill)
                outputs[kind].append({"example_id": question["id"], "raw_text": raw})
    for kind, rows in outputs.items():
        text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in rows)
        (args.out / f"outputs_{kind}.jsonl").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
