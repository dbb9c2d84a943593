"""Build the bundled ``calls``-mode example: parallel calls, abstention, English + French.

The split holds examples that expect zero calls (no offered tool fits: the
model should abstain), one call, or two to three parallel calls, each English
root with a French translation asking for the identical calls. Two sets of
precomputed outputs stand for a base model and its adapter: the base model
drops or duplicates parallel calls, swaps an argument, calls a tool on
abstention items and sometimes writes broken JSON; the adapter does so less
often. Nothing needs a model: ``score --precomputed --scoring calls`` scores
the outputs and ``compare`` compares the two arms.

Prompts are already formatted (``prompt_text`` + ``prompt_sha256``) with a
plain template, so the example needs no tokenizer. Every choice is drawn
from one seeded ``random.Random`` and rows are written with sorted keys, so
the same seed always gives the same bytes.

Usage::

    python examples/calls/make_example.py --out examples/calls/data [--seed N] [--roots N]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from pathlib import Path
from typing import Any

DEFAULT_SEED = 20261201
DEFAULT_ROOTS = 40

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"city": {"type": "str", "description": "City name"}},
    },
    {
        "name": "convert_currency",
        "description": "Convert an amount between two currencies.",
        "parameters": {
            "amount": {"type": "float", "description": "Amount to convert"},
            "from": {"type": "str", "description": "ISO code to convert from"},
            "to": {"type": "str", "description": "ISO code to convert to"},
        },
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
CITIES = ["Paris", "Lyon", "Oslo", "Rome", "Lisbon", "Vienna", "Quebec", "Dakar"]
CURRENCIES = ["EUR", "USD", "CAD", "CHF", "JPY", "XOF"]
RESTAURANTS = ["Chez Nous", "La Mer", "Le Jardin", "Bistro 21"]
CHITCHAT = [
    ("Tell me a joke about clouds.", "Raconte-moi une blague sur les nuages."),
    ("What is the capital of Peru?", "Quelle est la capitale du Pérou ?"),
    ("Write a haiku about autumn.", "Écris un haïku sur l'automne."),
    ("How do I boil an egg?", "Comment faire cuire un œuf ?"),
]


def _call(rng: random.Random) -> tuple[dict[str, Any], str, str]:
    """One gold call with its English and French request phrases."""
    kind = rng.choice(["weather", "currency", "table"])
    if kind == "weather":
        city = rng.choice(CITIES)
        return (
            {"name": "get_weather", "arguments": {"city": city}},
            f"the weather in {city}",
            f"la météo à {city}",
        )
    if kind == "currency":
        source, target = rng.sample(CURRENCIES, 2)
        amount = float(rng.choice([10, 25, 99.5, 250, 1200]))
        return (
            {
                "name": "convert_currency",
                "arguments": {"amount": amount, "from": source, "to": target},
            },
            f"{amount:g} {source} in {target}",
            f"{amount:g} {source} en {target}",
        )
    restaurant, people = rng.choice(RESTAURANTS), rng.randint(2, 6)
    return (
        {"name": "book_table", "arguments": {"restaurant": restaurant, "people": people}},
        f"a table for {people} at {restaurant}",
        f"une table pour {people} chez {restaurant}",
    )


def _prompt(query: str) -> str:
    tools = json.dumps(TOOLS, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return (
        "<|system|>\nAnswer with a JSON array of tool calls, [] if no tool applies.\n"
        f"Available tools:\n{tools}\n<|user|>\n{query}\n<|assistant|>\n"
    )


def _row(example_id: str, language: str, root: str | None, query: str, gold: Any) -> dict[str, Any]:
    prompt = _prompt(query)
    return {
        "schema_version": "sommelier_mlflow.test_example.v1",
        "example_id": example_id,
        "language": language,
        "source_example_id": root,
        "query": query,
        "tools": TOOLS,
        "gold_calls": gold,
        "prompt_text": prompt,
        "prompt_sha256": hashlib.sha256(prompt.encode("utf-8")).hexdigest(),
    }


def build_split(seed: int, roots: int) -> list[dict[str, Any]]:
    """English roots (0, 1, 2 or 3 gold calls) each followed by its French translation."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for index in range(roots):
        width = rng.choice([0, 1, 1, 2, 2, 3])
        if width == 0:
            english, french = rng.choice(CHITCHAT)
            gold: list[dict[str, Any]] = []
        else:
            parts = [_call(rng) for _ in range(width)]
            gold = [call for call, _, _ in parts]
            english = "I need " + " and ".join(en for _, en, _ in parts) + "."
            french = "Il me faut " + " et ".join(fr for _, _, fr in parts) + "."
        root_id = f"en-{index:03d}"
        rows.append(_row(root_id, "en", None, english, gold))
        rows.append(_row(f"fr-{index:03d}", "fr", root_id, french, gold))
    return rows


def _answer(gold: list[dict[str, Any]], rng: random.Random, skill: float) -> str:
    """A model's output: right with probability ``skill``, else one typical mistake."""
    calls = json.loads(json.dumps(gold))
    rng.shuffle(calls)  # order never matters
    if rng.random() < skill:
        return json.dumps(calls) if calls or rng.random() < 0.5 else "No tool applies here."
    if not gold:
        return rng.choice(
            [json.dumps([{"name": "get_weather", "arguments": {"city": "Paris"}}]), "[{"]
        )
    mistake = rng.choice(["drop", "duplicate", "argument", "broken", "prose"])
    if mistake == "drop" and len(calls) > 1:
        calls.pop()
    elif mistake == "duplicate":
        calls.append(calls[0])
    elif mistake == "argument":
        key = sorted(calls[0]["arguments"])[0]
        value = calls[0]["arguments"][key]
        calls[0]["arguments"][key] = value + 1 if isinstance(value, (int, float)) else "?"
    elif mistake == "broken":
        return json.dumps(calls)[:-2]
    else:
        return "Sure, I can help with that."
    return "Here you go: " + json.dumps(calls)


def build_outputs(rows: list[dict[str, Any]], seed: int, skill: float) -> list[dict[str, Any]]:
    """``{example_id, raw_text}`` rows for every example, from one seeded stream per arm."""
    rng = random.Random(seed)
    return [
        {"example_id": row["example_id"], "raw_text": _answer(row["gold_calls"], rng, skill)}
        for row in rows
    ]


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    text = "".join(
        json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        for row in rows
    )
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    parser.add_argument("--roots", type=int, default=DEFAULT_ROOTS)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = build_split(args.seed, args.roots)
    _write(args.out / "test_split.jsonl", rows)
    _write(args.out / "outputs_base.jsonl", build_outputs(rows, args.seed + 1, skill=0.45))
    _write(args.out / "outputs_adapter.jsonl", build_outputs(rows, args.seed + 2, skill=0.8))
    print(f"wrote {len(rows)} examples and two output sets to {args.out}")


if __name__ == "__main__":
    main()
