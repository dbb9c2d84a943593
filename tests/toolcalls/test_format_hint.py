from __future__ import annotations

import json
from typing import Any

from sommelier_mlflow.toolcalls import parse_tool_call, parse_tool_calls
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._decode_llama3 import decode_llama3_json
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from sommelier_mlflow.toolcalls._format_hint import FormatHint
from sommelier_mlflow.toolcalls._format_hint import format_hint as hint_from_statuses

DECODERS = {
    "json": parse_tool_calls,
    "hermes": decode_hermes,
    "llama3_json": decode_llama3_json,
    "pythonic": decode_pythonic,
}
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
JSON = json.dumps(CALL)
HERMES = f"<tool_call>\n{JSON}\n</tool_call>"
PYTHONIC = "[get_weather(city='Paris')]"  # json refuses it
LLAMA = json.dumps({"name": "get_weather", "parameters": {"city": "Paris"}})  # json: invalid_shape
PROSE = "I cannot help with that."


def format_hint(texts: list[str], chosen: str, decoders: dict[str, Any]) -> FormatHint | None:
    statuses = [decoders[chosen](text).status for text in texts]
    return hint_from_statuses(texts, statuses, chosen, decoders)


def test_names_the_format_that_reads_the_missed_outputs_with_counts() -> None:
    texts = [PYTHONIC] * 318 + [JSON] * 30 + [PROSE] * 9
    hint = format_hint(texts, "json", DECODERS)
    assert hint == FormatHint("json", "pythonic", 318, 357)
    assert hint.message == (
        "318 of 357 outputs decode as pythonic; did you mean --output-format pythonic?"
    )


def test_a_format_read_as_no_call_everywhere_is_caught_too() -> None:
    hint = format_hint([LLAMA] * 6 + [HERMES] * 4, "hermes", DECODERS)
    assert hint == FormatHint("hermes", "llama3_json", 6, 10)  # json refuses "parameters"
    hint = format_hint([JSON] * 6 + [HERMES] * 4, "hermes", DECODERS)
    assert hint == FormatHint("hermes", "json", 6, 10)  # ties go to the first name


def test_silent_at_a_fifth_or_less_and_when_nothing_else_reads_them() -> None:
    assert format_hint([PYTHONIC] * 2 + [JSON] * 8, "json", DECODERS) is None  # exactly 1/5
    assert format_hint([PYTHONIC] * 3 + [JSON] * 8, "json", DECODERS) is not None
    assert format_hint(["{broken"] * 10, "json", DECODERS) is None  # no format reads it
    assert format_hint([PROSE] * 10, "hermes", DECODERS) is None
    assert format_hint(["[]"] * 10, "json", DECODERS) is None  # an explicit "no call" is an answer
    assert format_hint([HERMES] * 10, "hermes", DECODERS) is None
    assert format_hint([], "json", DECODERS) is None


def test_the_single_call_parser_can_be_the_chosen_decoder() -> None:
    hint = format_hint([LLAMA] * 3, "json", {**DECODERS, "json": parse_tool_call})
    assert hint == FormatHint("json", "llama3_json", 3, 3)
