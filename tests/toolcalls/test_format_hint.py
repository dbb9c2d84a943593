from __future__ import annotations

import json
from typing import Any

import pytest

from sommelier_mlflow.toolcalls import (
    FormatMismatch,
    format_diagnosis,
    parse_tool_call,
    parse_tool_calls,
    syntax_found,
)
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._decode_llama3 import decode_llama3_json
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from sommelier_mlflow.toolcalls._format_hint import FormatHint
from sommelier_mlflow.toolcalls._format_hint import format_hint as hint_from_statuses

DECODERS = {
    "json": lambda text, _tools: parse_tool_calls(text),
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
    statuses = [decoders[chosen](text, ()).status for text in texts]
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
    hint = format_hint(
        [LLAMA] * 3, "json", {**DECODERS, "json": lambda text, _tools: parse_tool_call(text)}
    )
    assert hint == FormatHint("json", "llama3_json", 3, 3)


def diagnosis(texts: list[str], chosen: str) -> tuple[FormatHint | None, FormatMismatch | None]:
    statuses = [DECODERS[chosen](text, ()).status for text in texts]
    return format_diagnosis(texts, statuses, chosen, DECODERS)


def test_bare_json_read_as_hermes_is_a_mismatch_with_the_counts() -> None:
    # The user's BFCL run: no <tool_call> anywhere, the calls written as bare JSON.
    hint, mismatch = diagnosis([JSON] * 7 + [PROSE] * 3, "hermes")
    assert mismatch == FormatMismatch("hermes", 10, 0, "json", 7)
    assert mismatch.to_dict() == {
        "output_format": "hermes",
        "outputs": 10,
        "syntax_found": 0,
        "other_format": "json",
        "other_reads_calls": 7,
    }
    assert mismatch.message.startswith(
        "--output-format hermes found its call syntax in 0 of 10 outputs, while json reads "
        "tool calls in 7 of them"
    )
    assert hint == FormatHint("hermes", "json", 7, 10)  # the hint fires beside it


def test_a_mismatch_needs_the_syntax_in_under_a_fifth_and_more_calls_elsewhere() -> None:
    # 1 of 10 outputs with hermes' syntax (a broken block counts: the syntax is there).
    broken = "<tool_call>{</tool_call>"
    _, mismatch = diagnosis([broken] + [JSON] * 2 + [PROSE] * 7, "hermes")
    assert mismatch == FormatMismatch("hermes", 10, 1, "json", 2)
    hint, mismatch = diagnosis([HERMES] * 2 + [JSON] * 8, "hermes")  # exactly a fifth
    assert mismatch is None and hint is not None
    # Other formats read no more outputs than the chosen one found its syntax in.
    _, mismatch = diagnosis([HERMES] + [JSON] + [PROSE] * 8, "hermes")
    assert mismatch is None
    assert diagnosis([PROSE] * 10, "hermes") == (None, None)  # nothing reads a call anywhere
    assert diagnosis(["[]"] * 10, "json") == (None, None)  # an explicit "no call" shows syntax
    assert diagnosis([], "json") == (None, None)


def test_the_few_outputs_read_elsewhere_still_warn_when_the_chosen_syntax_is_absent() -> None:
    # A model that mostly writes prose: one JSON call in ten is read as "no call" by hermes.
    hint, mismatch = diagnosis([JSON] + [PROSE] * 9, "hermes")
    assert hint is None  # a tenth is under the hint's fifth
    assert mismatch == FormatMismatch("hermes", 10, 0, "json", 1)


@pytest.mark.parametrize(
    "counts",
    [
        ("hermes", 10, 2, "json", 8),  # the syntax in a fifth of the outputs
        ("hermes", 10, 1, "json", 1),  # read elsewhere no more often than the syntax is found
        ("hermes", 10, 1, "json", 10),  # more than the outputs without the syntax
        ("hermes", 10, 0, "hermes", 5),  # "another" format that is the chosen one
        ("hermes", 10, -1, "json", 5),
    ],
)
def test_counts_the_rule_cannot_produce_are_refused(counts: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        FormatMismatch(*counts)


def test_syntax_found_counts_every_status_but_no_json() -> None:
    assert syntax_found(["ok", "no_json", "invalid_json", "invalid_shape", "no_json"]) == 3
