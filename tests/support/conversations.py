"""A small conversation split in the OpenAI shape, as a team's held-out fine-tuning data reads.

Four conversations, every assistant turn an example: a single tool step and
a text answer after its result (``c1``), two tool steps under a system
message (``c2``), parallel calls answered by ``tool_call_id`` (``c3``), and
a German conversation whose tool result names only the tool, as TRL's
format writes it, with a second user request after the answer (``c4``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sommelier_mlflow._json import dumps_line
from sommelier_mlflow.data import TEST_EXAMPLE_SCHEMA

TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    {
        "name": "search_flights",
        "description": "Find flights to a destination.",
        "parameters": {
            "type": "object",
            "properties": {"destination": {"type": "string"}},
            "required": ["destination"],
        },
    },
    {
        "name": "book_hotel",
        "description": "Book a hotel.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "nights": {"type": "integer"}},
            "required": ["city", "nights"],
        },
    },
]


def _call(name: str, arguments: dict[str, Any], call_id: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return {"id": call_id, **call} if call_id else call


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _calls(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


def _text(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _result(content: str, **key: str) -> dict[str, Any]:
    return {"role": "tool", "content": content, **key}


#: (conversation id, language, the whole conversation) of each held-out conversation.
CONVERSATIONS: list[tuple[str, str, list[dict[str, Any]]]] = [
    (
        "c1",
        "en",
        [
            _user("What's the weather in Oslo?"),
            _calls(_call("get_weather", {"city": "Oslo"}, "call_1")),
            _result('{"temp_c": 3}', tool_call_id="call_1"),
            _text("It is 3 °C in Oslo."),
        ],
    ),
    (
        "c2",
        "en",
        [
            {"role": "system", "content": "You plan trips."},
            _user("Find me a flight to Paris, then book two nights there."),
            _calls(_call("search_flights", {"destination": "Paris"}, "f1")),
            _result('{"flight": "AF123"}', tool_call_id="f1"),
            _calls(_call("book_hotel", {"city": "Paris", "nights": 2}, "h1")),
            _result('{"booking": "H-9"}', tool_call_id="h1"),
            _text("Flight AF123 found and hotel booked (H-9)."),
        ],
    ),
    (
        "c3",
        "en",
        [
            _user("Weather in Oslo and in Bergen, please."),
            _calls(
                _call("get_weather", {"city": "Oslo"}, "a"),
                _call("get_weather", {"city": "Bergen"}, "b"),
            ),
            _result('{"temp_c": 3}', tool_call_id="a"),
            _result('{"temp_c": 7}', tool_call_id="b"),
            _text("Oslo has 3 °C, Bergen 7 °C."),
        ],
    ),
    (
        "c4",
        "de",
        [
            _user("Wie ist das Wetter in Berlin?"),
            _calls(_call("get_weather", {"city": "Berlin"})),
            _result('{"temp_c": 5}', name="get_weather"),
            _text("In Berlin sind es 5 °C."),
            _user("Und in München?"),
            _calls(_call("get_weather", {"city": "München"})),
        ],
    ),
]


def conversation_rows() -> list[dict[str, Any]]:
    """One native split row per assistant turn of every conversation, in conversation order."""
    rows = []
    for conversation_id, language, messages in CONVERSATIONS:
        turn = 0
        for index, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            turn += 1
            gold = [
                {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
                for call in message.get("tool_calls", [])
            ]
            rows.append(
                {
                    "schema_version": TEST_EXAMPLE_SCHEMA,
                    "example_id": f"{conversation_id}-t{turn}",
                    "language": language,
                    "messages": messages[:index],
                    "conversation_id": conversation_id,
                    "turn": turn,
                    "tools": TOOLS,
                    "gold_calls": gold,
                }
            )
    return rows


def write_conversation_split(path: Path, rows: list[dict[str, Any]] | None = None) -> Path:
    """Write the conversation split (or ``rows``) as JSONL at ``path``."""
    path.write_bytes(b"".join(dumps_line(row) for row in rows or conversation_rows()))
    return path
