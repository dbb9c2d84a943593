"""Build the bundled native-format example: a Qwen-style prompt and Hermes-format outputs.

Models of the Qwen and Hermes families are prompted with the tools inside
their chat template and answer with ``<tool_call>`` blocks, sometimes after
thinking in ``<think>…</think>``. This example holds a split already rendered
in such a template (``prompt_format: native``) and two sets of precomputed
outputs in that format, for a base model and its adapter. The base model
often writes bare JSON without the tags (no call, in this format), calls a
tool only while thinking, leaves a block unclosed or drops a parallel call;
the adapter does so less often. Nothing needs a model:
``score --precomputed --scoring calls --output-format hermes`` scores each arm
and ``compare`` compares them.

Every choice is drawn from one seeded ``random.Random`` and rows are written
with sorted keys, so the same seed always gives the same bytes.

Usage::

    python examples/native/make_example.py --out examples/native/data [--seed N] [--examples N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path
from typing import Any

from sommelier_mlflow.data import tool_schemas

DEFAULT_SEED = 20261202
DEFAULT_EXAMPLES = 60

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"city": {"type": "str", "description": "City name"}},
    },
    {
        "name": "book_table",
        "description": "Reserve a restaurant table.",
        "parameters": {
            "restaurant": {"type": "str", "description": "Restaurant name"},
            "people": {"type": "int", "description": "Number of guests"},
        },
    },
]
CITIES = ["Paris", "Lyon", "Oslo", "Rome", "Lisbon", "Vienna"]
RESTAURANTS = ["Chez Nous", "La Mer", "Le Jardin", "Bistro 21"]
CHITCHAT = ["Tell me a joke about clouds.", "Write a haiku about autumn.", "How do I boil an egg?"]


def _call(rng: random.Random) -> tuple[dict[str, Any], str]:
    if rng.random() < 0.5:
        city = rng.choice(CITIES)
        return {"name": "get_weather", "arguments": {"city": city}}, f"the weather in {city}"
    restaurant, people = rng.choice(RESTAURANTS), rng.randint(2, 6)
    call = {"name": "book_table", "arguments": {"restaurant": restaurant, "people": people}}
    return call, f"a table for {people} at {restaurant}"


def _prompt(query: str) -> str:
    """A chat template in the Qwen/Hermes manner: tools as JSON schemas in the system turn.

    The tools are shown as ``--prompt-format native`` passes them to a template:
    in the OpenAI tool shape, with JSON Schema types (``tool_schemas``).
    """
    schemas = "\n".join(json.dumps(tool, sort_keys=True) for tool in tool_schemas(TOOLS))
    return (
        "<|im_start|>system\nYou can call these tools, one JSON schema per line:\n"
        f"<tools>\n{schemas}\n</tools>\n"
        "Put each call in its own <tool_call></tool_call> block as "
        '{"name": ..., "arguments": {...}}.<|im_end|>\n'
        f"<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\n"
    )


def build_split(seed: int, examples: int) -> list[dict[str, Any]]:
    """Examples expecting zero, one or two calls, rendered in the native template."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for index in range(examples):
        width = rng.choice([0, 1, 1, 2])
        if width == 0:
            query, gold = rng.choice(CHITCHAT), []
        else:
            parts = [_call(rng) for _ in range(width)]
            gold = [call for call, _ in parts]
            query = "I need " + " and ".join(phrase for _, phrase in parts) + "."
        prompt = _prompt(query)
        rows.append(
            {
                "schema_version": "sommelier_mlflow.test_example.v1",
                "example_id": f"ex-{index:03d}",
                "language": "en",
                "query": query,
                "tools": TOOLS,
                "gold_calls": gold,
                "prompt_format": "native",
                "prompt_text": prompt,
                "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
            }
        )
    return rows


def _blocks(calls: list[dict[str, Any]]) -> str:
    return "\n".join(f"<tool_call>\n{json.dumps(call)}\n</tool_call>" for call in calls)


def _answer(gold: list[dict[str, Any]], rng: random.Random, skill: float) -> str:
    """A Hermes-format output: right with probability ``skill``, else one typical mistake."""
    thought = "<think>\nThe user asks for something a tool can do.\n</think>\n\n"
    if rng.random() < skill:
        if not gold:
            return "Here is one: why did the cloud stay home? It was feeling under the weather."
        return (thought if rng.random() < 0.5 else "") + _blocks(gold)
    if not gold:
        return _blocks([{"name": "get_weather", "arguments": {"city": "Paris"}}])
    mistake = rng.choice(["bare", "thinking", "unclosed", "drop", "argument"])
    if mistake == "bare":
        return json.dumps(gold[0])  # no tags: no call in this format
    if mistake == "thinking":
        return "<think>\nI would call " + _blocks(gold) + "\n</think>\n\nLet me know."
    if mistake == "unclosed":
        return _blocks(gold)[: -len("</tool_call>")]
    if mistake == "drop" and len(gold) > 1:
        return _blocks(gold[:1])
    wrong = json.loads(json.dumps(gold))
    key = sorted(wrong[0]["arguments"])[0]
    value = wrong[0]["arguments"][key]
    wrong[0]["arguments"][key] = value + 1 if isinstance(value, int) else value + "x"
    return _blocks(wrong)


def build_outputs(rows: list[dict[str, Any]], seed: int, skill: float) -> list[dict[str, Any]]:
    """``{example_id, raw_text}`` rows for every example, from one seeded stream per arm."""
    rng = random.Random(seed)
    return [
        {"example_id": row["example_id"], "raw_text": _answer(row["gold_calls"], rng, skill)}
        for row in rows
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--examples", type=int, default=DEFAULT_EXAMPLES)
    args = parser.parse_args(argv)
    rows = build_split(args.seed, args.examples)
    files = {
        "test_split.jsonl": rows,
        "outputs_base.jsonl": build_outputs(rows, args.seed + 1, skill=0.4),
        "outputs_adapter.jsonl": build_outputs(rows, args.seed + 2, skill=0.85),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():  # sorted keys, one compact line per row, then renamed
        dump = (
            json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            for row in content
        )
        staged = args.out / f".{name}.tmp"
        staged.write_text("".join(line + "\n" for line in dump), encoding="utf-8")
        staged.replace(args.out / name)
    print(f"wrote {len(rows)} examples and two output sets to {args.out}")


if __name__ == "__main__":
    main()
