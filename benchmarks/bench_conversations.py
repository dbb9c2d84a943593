"""Read + format + score conversation turns vs single-turn rows, per example (issue 32).

Run: ``python benchmarks/bench_conversations.py [--n 100000] [--prompt-format sommelier]``.
Both splits hold ``n`` examples with the same tools, gold calls and outputs;
the conversation split's rows carry the history before each assistant turn
(a system message, the user request, earlier calls and their tool results:
turns 1 to 4 of four-turn conversations) where the single-turn rows carry
the request alone. Each run reads the split file, renders every prompt with
the demo tokenizer's chat template and scores the outputs in ``calls`` mode,
with the conversation slices on for the conversation split. Target: the
conversation split costs at most 1.5x per example.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from sommelier_mlflow._json import canonical_json, dumps_line
from sommelier_mlflow.data import (
    TEST_EXAMPLE_SCHEMA,
    conversation_slice_values,
    format_examples,
    read_test_split,
)
from sommelier_mlflow.evaluation import AnsweredExample, BootstrapSettings, score_completions

DEMO_TOKENIZER = Path(__file__).resolve().parents[1] / "examples" / "demo" / "model" / "base_model"
TOOLS = [
    {
        "name": name,
        "description": f"{name} tool",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    }
    for name in ("get_weather", "book_hotel", "search_flights", "find_restaurant")
]
TURNS = 4


def _call(rng: random.Random) -> dict[str, Any]:
    return {
        "name": rng.choice(TOOLS)["name"],
        "arguments": {"city": rng.choice(["Oslo", "Paris", "Rome"]), "days": rng.randint(1, 5)},
    }


def rows(n: int, conversations: bool, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` rows: four assistant turns per conversation, each calling one tool."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(out) < n:
        conversation = len(out) // TURNS
        request = f"Plan trip {conversation}: weather, hotel, flights and dinner."
        history: list[dict[str, Any]] = [
            {"role": "system", "content": "You plan trips."},
            {"role": "user", "content": request},
        ]
        for turn in range(1, TURNS + 1):
            if len(out) == n:
                break
            gold = _call(rng)
            row: dict[str, Any] = {
                "schema_version": TEST_EXAMPLE_SCHEMA,
                "example_id": f"c{conversation}-t{turn}",
                "tools": TOOLS,
                "gold_calls": [gold],
            }
            if conversations:
                row["messages"] = list(history)
                row["conversation_id"] = f"c{conversation}"
                row["turn"] = turn
            else:
                row["query"] = request
            out.append(row)
            call_id = f"call{turn}"
            history += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": gold}],
                },
                {"role": "tool", "tool_call_id": call_id, "content": '{"ok": true}'},
            ]
    return out


def run(path: Path, tokenizer: Any, prompt_format: str) -> float:
    """Seconds (CPU) to read, format and score the split at ``path``."""
    start = time.process_time()
    split = read_test_split(path)
    formatted = format_examples(split.examples, tokenizer, prompt_format=prompt_format)
    completions = [
        AnsweredExample(
            example_id=example.example_id,
            language=example.language,
            source_example_id=None,
            gold_call=None,
            raw_text=canonical_json(list(example.gold_calls)),
            prompt_sha256=example.prompt_sha256,
            gold_calls=example.gold_calls,
            slice_values=conversation_slice_values(example.messages),
            tools=example.tools,
        )
        for example in formatted
    ]
    scored = score_completions(
        completions,
        bootstrap=BootstrapSettings(seed=0, resamples=100, confidence=0.95),
        gap_scope="base",
        scoring="calls",
    )
    assert scored.metrics["call_set_exact_match"].numerator == len(completions)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--prompt-format", default="sommelier", choices=["sommelier", "native"])
    args = parser.parse_args()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DEMO_TOKENIZER)
    with tempfile.TemporaryDirectory() as folder:
        paths = {}
        for label, conversational in (("single-turn", False), ("conversation", True)):
            paths[label] = Path(folder) / f"{label}.jsonl"
            paths[label].write_bytes(
                b"".join(dumps_line(row) for row in rows(args.n, conversational))
            )
        best = {label: float("inf") for label in paths}
        for _ in range(args.repeats):  # interleaved, so a load change hits both alike
            for label, path in paths.items():
                best[label] = min(best[label], run(path, tokenizer, args.prompt_format))
    print(f"examples: {args.n:,} ({args.prompt_format} prompts; read + format + score, best of "
          f"{args.repeats}, CPU)")  # fmt: skip
    print(f"{'split':<16}{'CPU s':>10}{'examples/s':>14}")
    for label, seconds in best.items():
        print(f"{label:<16}{seconds:>10.3f}{args.n / seconds:>14,.0f}")
    print(f"conversation / single-turn: {best['conversation'] / best['single-turn']:.2f}x")


if __name__ == "__main__":
    main()
