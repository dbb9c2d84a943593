"""Build the bundled conversations example: OpenAI fine-tuning JSONL and two arms' Hermes outputs.

Forty short invented conversations, written as a team holds its fine-tuning
data (OpenAI's format: ``messages`` with assistant ``tool_calls`` whose
``arguments`` are JSON strings, ``tool`` results answering them by id, and
``tools``): one tool step then an answer, two steps in a row, parallel calls,
a follow-up question after an answer, small talk answered in text, and a few
in French. ``prepare --input-format openai`` turns every assistant turn into
one example (``<conversation_id>:<turn>``), so the turns that read a tool
result and must answer in text are measured too.

Two sets of precomputed outputs in Hermes format (``<tool_call>{...}</tool_call>``,
plain text for a text turn) stand for a base model and its adapter: the base
model often calls the tool again after its result, drops a parallel call,
gets an argument wrong or answers in prose where a call was due; the adapter
does so less often. Nothing needs a model: ``score -P output_format=hermes
-P scoring=calls -P precomputed=...`` scores them.

Every choice is drawn from one seeded ``random.Random`` and rows are written
with sorted keys, so the same seed always gives the same bytes.

Usage::

    python examples/conversations/make_example.py --out examples/conversations [--seed N]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

DEFAULT_SEED = 20261204
CONVERSATIONS = 40

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount between two currencies.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "base": {"type": "string"},
                    "quote": {"type": "string"},
                },
                "required": ["amount", "base", "quote"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "book_table",
            "description": "Reserve a restaurant table.",
            "parameters": {
                "type": "object",
                "properties": {
                    "restaurant": {"type": "string"},
                    "people": {"type": "integer"},
                },
                "required": ["restaurant", "people"],
            },
        },
    },
]
SYSTEM = "You are a concise travel assistant. Use the tools when they help."
CITIES = ["Paris", "Lyon", "Oslo", "Rome", "Lisbon", "Vienna", "Quebec", "Dakar"]
CURRENCIES = ["EUR", "USD", "CAD", "CHF", "JPY"]
RESTAURANTS = ["Chez Nous", "La Mer", "Le Jardin", "Bistro 21"]
SKIES = ["sunny", "cloudy", "rainy", "windy"]
SMALL_TALK = [
    ("Thanks, that is all for today.", "You're welcome, have a good trip!"),
    ("Can you tell me a joke about clouds?", "Clouds never pay rent: they just hang around."),
    ("What is the capital of Peru?", "Lima is the capital of Peru."),
]
SMALL_TALK_FR = [
    ("Merci, ce sera tout.", "Avec plaisir, bon voyage !"),
    ("Quelle est la capitale du Pérou ?", "La capitale du Pérou est Lima."),
]
#: The shape of conversation ``i`` is ``SHAPES[i % 5]``; conversations 6-10 and 26-30 are in
#: French (their two-step one excepted).
SHAPES = ("single", "two_steps", "parallel", "follow_up", "small_talk")


class _Chat:
    """One conversation being written: messages and the running call id."""

    def __init__(self, system: bool) -> None:
        self.messages: list[dict[str, Any]] = (
            [{"role": "system", "content": SYSTEM}] if system else []
        )
        self._ids = 0

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def say(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def call(self, *calls: tuple[str, dict[str, Any], dict[str, Any]]) -> None:
        """An assistant turn calling each ``(name, arguments, result)``, then their results."""
        ids = []
        for _ in calls:
            self._ids += 1
            ids.append(f"call_{self._ids}")
        self.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for call_id, (name, arguments, _) in zip(ids, calls, strict=True)
                ],
            }
        )
        for call_id, (_, _, result) in zip(ids, calls, strict=True):
            self.messages.append(
                {"role": "tool", "tool_call_id": call_id, "content": json.dumps(result)}
            )


def _weather(rng: random.Random, city: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A weather call for ``city`` and the result its tool returns."""
    return (
        "get_weather",
        {"city": city},
        {"temp_c": rng.randint(-5, 32), "sky": rng.choice(SKIES)},
    )


def _conversation(index: int, rng: random.Random) -> dict[str, Any]:
    """Conversation ``index`` (0-based): its shape and language follow from ``index``."""
    shape = SHAPES[index % len(SHAPES)]
    french = index // 5 in (1, 5) and shape != "two_steps"
    chat = _Chat(system=index % 2 == 0)
    city, other = rng.sample(CITIES, 2)
    if shape == "single":
        weather = _weather(rng, city)
        chat.user(f"Quel temps fait-il à {city} ?" if french else f"What's the weather in {city}?")
        chat.call(weather)
        temp, sky = weather[2]["temp_c"], weather[2]["sky"]
        chat.say(f"{temp} °C à {city}." if french else f"It is {temp} °C and {sky} in {city}.")
    elif shape == "two_steps":
        base, quote = rng.sample(CURRENCIES, 2)
        amount = rng.choice([20, 50, 120, 300])
        restaurant, people = rng.choice(RESTAURANTS), rng.randint(2, 6)
        chat.user(
            f"How much is {amount} {base} in {quote}? If it is under 100, "
            f"book {restaurant} for {people}."
        )
        value = round(amount * rng.uniform(0.5, 1.5), 2)
        chat.call(
            ("convert_currency", {"amount": amount, "base": base, "quote": quote}, {"value": value})
        )
        chat.call(("book_table", {"restaurant": restaurant, "people": people}, {"confirmed": True}))
        chat.say(f"{amount} {base} is {value} {quote}; your table at {restaurant} is booked.")
    elif shape == "parallel":
        first, second = _weather(rng, city), _weather(rng, other)
        chat.user(
            f"Compare la météo à {city} et à {other}."
            if french
            else f"Compare the weather in {city} and {other}."
        )
        chat.call(first, second)
        warmer = city if first[2]["temp_c"] >= second[2]["temp_c"] else other
        chat.say(f"Il fait plus chaud à {warmer}." if french else f"{warmer} is warmer.")
    elif shape == "follow_up":
        first, second = _weather(rng, city), _weather(rng, other)
        chat.user(f"Météo à {city} ?" if french else f"Weather in {city}?")
        chat.call(first)
        chat.say(f"{first[2]['temp_c']} °C {'à' if french else 'in'} {city}.")
        chat.user(f"Et à {other} ?" if french else f"And in {other}?")
        chat.call(second)
        chat.say(f"{second[2]['temp_c']} °C {'à' if french else 'in'} {other}.")
    else:
        question, answer = rng.choice(SMALL_TALK_FR if french else SMALL_TALK)
        chat.user(question)
        chat.say(answer)
    record: dict[str, Any] = {"id": f"chat-{index + 1:02d}", "messages": chat.messages}
    record["tools"] = TOOLS
    if french:
        record["language"] = "fr"
    return record


def build_conversations(seed: int) -> list[dict[str, Any]]:
    """The example's conversations, one seeded stream for all of them."""
    rng = random.Random(seed)
    return [_conversation(index, rng) for index in range(CONVERSATIONS)]


def assistant_turns(record: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(example_id, gold calls)`` of every assistant turn, as ``prepare`` numbers them."""
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for message in record["messages"]:
        if message["role"] != "assistant":
            continue
        gold = [
            {
                "name": call["function"]["name"],
                "arguments": json.loads(call["function"]["arguments"]),
            }
            for call in message.get("tool_calls") or []
        ]
        turns.append((f"{record['id']}:{len(turns) + 1}", gold))
    return turns


def _hermes(calls: list[dict[str, Any]]) -> str:
    """Calls as a Hermes-format model writes them: one ``<tool_call>`` JSON object each."""
    return "\n".join(f"<tool_call>{json.dumps(call)}</tool_call>" for call in calls)


def _answer(
    gold: list[dict[str, Any]], previous: list[dict[str, Any]], rng: random.Random, skill: float
) -> str:
    """One arm's output for a turn: right with probability ``skill``, else a typical mistake."""
    if rng.random() < skill:
        return _hermes(gold) if gold else "Here is what I found."
    if not gold:
        # After a tool result the weak model calls the tool again instead of answering.
        return _hermes(previous or [{"name": "get_weather", "arguments": {"city": "Paris"}}])
    calls = json.loads(json.dumps(gold))
    mistake = rng.choice(["drop", "argument", "prose"])
    if mistake == "drop" and len(calls) > 1:
        calls.pop()
    elif mistake == "prose":
        return "Let me check that for you."
    else:
        key = sorted(calls[0]["arguments"])[0]
        value = calls[0]["arguments"][key]
        calls[0]["arguments"][key] = value + 1 if isinstance(value, int) else "?"
    return _hermes(calls)


def build_outputs(records: list[dict[str, Any]], seed: int, skill: float) -> list[dict[str, Any]]:
    """``{example_id, raw_text}`` for every assistant turn, from one seeded stream per arm."""
    rng = random.Random(seed)
    rows = []
    for record in records:
        previous: list[dict[str, Any]] = []
        for example_id, gold in assistant_turns(record):
            rows.append({"example_id": example_id, "raw_text": _answer(gold, previous, rng, skill)})
            previous = gold or previous
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    """JSONL with sorted keys, written atomically (temp + rename) so a crash leaves no half file."""
    text = "".join(
        json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        for row in rows
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def main(argv: list[str] | None = None) -> None:
    """Write the conversations and both arms' outputs under ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    records = build_conversations(args.seed)
    _write(args.out / "data" / "conversations.jsonl", records)
    _write(args.out / "outputs_base.jsonl", build_outputs(records, args.seed + 1, skill=0.5))
    _write(args.out / "outputs_adapter.jsonl", build_outputs(records, args.seed + 2, skill=0.85))
    print(f"wrote {len(records)} conversations and two output sets to {args.out}")


if __name__ == "__main__":
    main()
