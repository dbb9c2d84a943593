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

It also copies the first questions of BFCL's four multi-turn categories (with
their ground truth and the function docs of the classes they involve) and
writes ``trajectories_base.jsonl`` and ``trajectories_adapter.jsonl``: per
question, per user turn, the arm's output at each step (one JSON call per
step, then a sentence that ends the turn). They follow the ground truth
except for the mistakes :data:`MISTAKES` names per arm: a wrong argument in
the last turn, a call where the ground truth makes none (which BFCL's
leaderboard does not check), a step of broken JSON before the right one.
``import-bfcl --category multi_turn_base,...`` reads the multi-turn questions;
``score --scoring bfcl --precomputed trajectories_<arm>.jsonl`` runs them.

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
MULTI_TURN_CATEGORIES = (
    "multi_turn_base",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
    "multi_turn_long_context",
)
DEFAULT_SEED = 20261202
DEFAULT_PER_CATEGORY = 6
MULTI_TURN_PER_CATEGORY = 2
#: Each arm's deliberate mistakes, by question; every other question follows the ground truth.
MISTAKES = {
    "base": {
        "multi_turn_base_0": "broken_step",
        "multi_turn_base_1": "wrong_argument",
        "multi_turn_miss_func_0": "call_where_none_expected",
        "multi_turn_miss_param_0": "call_where_none_expected",
        "multi_turn_miss_param_1": "wrong_argument",
        "multi_turn_long_context_1": "wrong_argument",
    },
    "adapter": {"multi_turn_base_1": "wrong_argument"},
}
ANSWER = "Done: that is what you asked for."
ASK = "I cannot do that with what I have; could you tell me more?"
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


def _step_texts(calls: list[dict[str, Any]], mistake: str | None, last: bool) -> list[str]:
    """One turn's outputs: a call per step, then the sentence that ends the turn."""
    if not calls:
        return [ASK]
    steps = [json.dumps([call]) for call in calls]
    if mistake == "wrong_argument" and last:
        call = calls[-1]
        steps[-1] = json.dumps(_wrong_value([call]))
    if mistake == "broken_step" and last:
        steps.insert(0, '[{"name": "' + calls[0]["name"] + '", "arguments": {')
    return [*steps, ANSWER]


def _trajectory(question: dict[str, Any], gold: list[list[str]], mistake: str | None) -> Any:
    """An arm's outputs on one multi-turn question: the ground truth, but for ``mistake``."""
    from sommelier_mlflow.toolcalls import parse_gold_call

    environment = {"involved_classes": question["involved_classes"]}
    turns = [[parse_gold_call(text, environment) for text in turn] for turn in gold]
    texts = [
        _step_texts(calls, mistake, index == len(turns) - 1) for index, calls in enumerate(turns)
    ]
    empty = next((index for index, calls in enumerate(turns) if not calls), None)
    if mistake == "call_where_none_expected" and empty is not None:
        # Eager: it acts before the user has said what is missing, and again when told.
        later = next(calls for calls in turns[empty:] if calls)
        texts[empty] = [json.dumps([later[0]]), ANSWER]
    return texts


def _multi_turn(args: argparse.Namespace, data: Path) -> dict[str, list[dict[str, Any]]]:
    """Copy the multi-turn questions and their function docs; each arm's trajectories."""
    from sommelier_mlflow.data import BFCL_MULTI_TURN_FUNC_DOCS

    trajectories: dict[str, list[dict[str, Any]]] = {"base": [], "adapter": []}
    docs: set[str] = set()
    for category in MULTI_TURN_CATEGORIES:
        name = f"BFCL_v4_{category}.json"
        questions = _first_lines(args.bfcl_data / name, MULTI_TURN_PER_CATEGORY)
        answers = _first_lines(args.bfcl_data / "possible_answer" / name, len(questions))
        (data / name).write_text("\n".join(questions) + "\n", encoding="utf-8")
        (data / "possible_answer" / name).write_text("\n".join(answers) + "\n", encoding="utf-8")
        for line, answer in zip(questions, answers, strict=True):
            question = json.loads(line)
            docs.update(BFCL_MULTI_TURN_FUNC_DOCS[cls] for cls in question["involved_classes"])
            gold = json.loads(answer)["ground_truth"]
            for kind, rows in trajectories.items():
                mistake = MISTAKES[kind].get(question["id"])
                turns = _trajectory(question, gold, mistake)
                rows.append({"example_id": question["id"], "turns": turns})
    (data / "multi_turn_func_doc").mkdir(exist_ok=True)
    for doc in sorted(docs):
        text = (args.bfcl_data / "multi_turn_func_doc" / doc).read_text(encoding="utf-8")
        (data / "multi_turn_func_doc" / doc).write_text(text, encoding="utf-8")
    return trajectories


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
    for kind, trajectories in _multi_turn(args, data).items():
        text = "".join(json.dumps(row, sort_keys=True) + "\n" for row in trajectories)
        (args.out / f"trajectories_{kind}.jsonl").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
