"""Integers in outputs and gold calls: exact up to 308 digits, refused beyond, everywhere.

Issue 13 #10 made integers beyond 64 bits exact; issue 29 item 6 found that
the formats disagreed past that (the JSON formats refused an integer beyond
the double range, about 309 digits, pythonic read any, and a 3,600-digit hex
literal crashed scoring at Python's 4,300-digit ``str`` limit). One rule now:
at most ``MAX_INT_DIGITS`` digits are read, a longer integer is ``invalid_json``
in every format, and the gold-call readers refuse one.
"""

from __future__ import annotations

import json

import pytest

from sommelier_mlflow import compute_metrics, flatten_arguments, parse_tool_call
from sommelier_mlflow._json import (
    MAX_INT_DIGITS,
    JSONDecodeError,
    canonical_json,
    dumps_line,
    loads,
)
from sommelier_mlflow.errors import DataError
from sommelier_mlflow.toolcalls import (
    completion_text,
    compute_calls_metrics,
    gold_call_of,
    gold_calls_of,
    output_format,
    parse_tool_calls,
)

BIG = 18446744073709551617


def _record(output: str) -> dict[str, object]:
    parsed = parse_tool_call(output)
    return {
        "parse_status": parsed.status,
        "parsed_call": parsed.call,
        "gold_call": {"name": "f", "arguments": {"n": BIG}},
    }


def test_big_integer_argument_is_parsed_exactly() -> None:
    call = parse_tool_call(f'Sure: {{"name": "f", "arguments": {{"n": {BIG}}}}}').call
    assert call is not None and call["arguments"]["n"] == BIG
    assert isinstance(call["arguments"]["n"], int)


def test_only_the_exact_big_integer_matches() -> None:
    outputs = [
        f'{{"name":"f","arguments":{{"n":{BIG}}}}}',
        f'{{"name":"f","arguments":{{"n":{BIG - 1}}}}}',
        f'{{"name":"f","arguments":{{"n":{BIG - 1}.0}}}}',
    ]
    metrics = compute_metrics([_record(output) for output in outputs])
    assert metrics["argument_exact_match"].numerator == 1
    assert metrics["full_call_exact_match"].numerator == 1


def _in_format(fmt: str, number: str) -> str:
    """One call ``f(n=<number>)`` as a model writing ``fmt`` would answer."""
    arguments = f'{{"n": {number}}}'
    call = f'{{"name": "f", "arguments": {arguments}}}'
    function = {"name": "f", "arguments": arguments}
    return {
        "json": f"[{call}]",
        "hermes": f"<tool_call>\n{call}\n</tool_call>",
        "llama3_json": f"<|python_tag|>{call}",
        "mistral": f"[TOOL_CALLS] [{call}]",
        "openai": json.dumps({"tool_calls": [{"type": "function", "function": function}]}),
        "pythonic": f"[f(n={number})]",
        "qwen3_xml": f"<tool_call>\n<function=f>\n<parameter=n>\n{number}\n</parameter>\n"
        "</function>\n</tool_call>",
        "glm45": f"<tool_call>f\n<arg_key>n</arg_key>\n<arg_value>{number}</arg_value>\n"
        "</tool_call>",
        "harmony": f"<|channel|>commentary to=functions.f <|constrain|>json<|message|>{arguments}",
        "gemma4": f"<|tool_call>call:f{{n:{number}}}<tool_call|>",
        "functiongemma": f"<start_function_call>call:f{{n:{number}}}<end_function_call>",
        "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
        f"<|tool_call_argument_begin|>{arguments}<|tool_call_end|><|tool_calls_section_end|>",
        "deepseek_v31": "<\uff5ctool\u2581calls\u2581begin\uff5c>"
        "<\uff5ctool\u2581call\u2581begin\uff5c>f"
        f"<\uff5ctool\u2581sep\uff5c>{arguments}<\uff5ctool\u2581call\u2581end\uff5c>"
        "<\uff5ctool\u2581calls\u2581end\uff5c>",
        "phi4_mini_json": f"functools[{call}]",
        "llama4_pythonic": f"<|python_start|>[f(n={number})]<|python_end|>",
        "xlam": f"[{call}]",
    }[fmt]


#: ``n`` is an integer: the formats that type bare text by the schema read it as one.
_TOOLS = [{"name": "f", "parameters": {"n": {"type": "int"}}}]


def _decode(fmt: str, text: str) -> tuple[str, object]:
    decode = output_format(fmt).decode
    result = parse_tool_calls(text) if decode is None else decode(text, _TOOLS)
    return result.status, result.calls and result.calls[0]["arguments"]["n"]


FORMATS = ["json", "hermes", "llama3_json", "mistral", "openai", "pythonic"]
FORMATS += ["kimi_k2", "deepseek_v31", "phi4_mini_json", "llama4_pythonic", "xlam"]
FORMATS += ["qwen3_xml", "glm45", "harmony", "gemma4", "functiongemma"]
LONGEST = 10**MAX_INT_DIGITS - 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_the_longest_integer_exactly_and_refuses_a_longer_one(fmt: str) -> None:
    assert MAX_INT_DIGITS == 308  # the documented rule (docs/own-model.md, docs/formats.md)
    for value in (LONGEST, -LONGEST, 10**307):
        assert _decode(fmt, _in_format(fmt, str(value))) == ("ok", value)
    # 309 digits: below the largest double (orjson read it) and above it; 5,000
    # digits: beyond Python's own 4,300-digit limit for reading a decimal literal.
    for number in ("1" * 309, "9" * 309, "-" + "1" * 309, "1" * 5_000):
        assert _decode(fmt, _in_format(fmt, number)) == ("invalid_json", None), number[:12]


def test_the_single_call_parser_reads_the_same_integers() -> None:
    call = f'{{"name": "f", "arguments": {{"n": {LONGEST}}}}}'
    parsed = parse_tool_call(call).call
    assert parsed is not None and parsed["arguments"]["n"] == LONGEST
    for number in ("1" * 309, "9" * 400):
        assert parse_tool_call(f'{{"name": "f", "arguments": {{"n": {number}}}}}').status == (
            "invalid_json"
        )


def test_a_hex_integer_beyond_the_limit_is_invalid_json_and_scores_as_a_failure() -> None:
    # The probe's output: ~4,330 decimal digits read from 3,600 hex digits, which
    # decoded as ok and then crashed scoring (ValueError at Python's str limit).
    text = "[f(people=0x" + "f" * 3_600 + ")]"
    result = output_format("pythonic").decode(text)
    assert result.status == "invalid_json"
    metrics = compute_calls_metrics(
        [
            {
                "parse_status": result.status,
                "parsed_calls": result.calls,
                "gold_calls": [{"name": "f", "arguments": {"people": 3}}],
            }
        ]
    )
    assert (
        metrics["call_set_exact_match"].numerator,
        metrics["call_set_exact_match"].denominator,
    ) == (
        0,
        1,
    )
    assert output_format("pythonic").decode(f"[f(people={hex(LONGEST)})]").calls == (
        {"name": "f", "arguments": {"people": LONGEST}},
    )


def test_an_integer_beyond_pythons_str_limit_is_still_spelled_exactly() -> None:
    # A value built in Python (an evaluator's decoded output) may hold one: its
    # canonical JSON, flattening and JSONL line are exact, with no ValueError.
    huge = 10**5_000
    assert canonical_json({"n": huge}) == '{"n":1' + "0" * 5_000 + "}"
    assert canonical_json([-huge - 7]) == "[-1" + "0" * 4_999 + "7]"
    assert flatten_arguments({"n": huge}) == {"n": "1" + "0" * 5_000}
    assert dumps_line({"n": huge}) == b'{"n":1' + b"0" * 5_000 + b"}\n"
    # ... and reads back as no format reads it: refused.
    text = completion_text({"name": "f", "arguments": {"n": huge}})
    assert parse_tool_call(text).status == "invalid_json"


def test_a_gold_call_holding_a_longer_integer_is_refused_whichever_way_it_comes() -> None:
    longest = {"name": "f", "arguments": {"n": [LONGEST]}}
    assert gold_call_of(longest) == longest
    assert gold_call_of(json.dumps(longest)) == longest
    longer = {"name": "f", "arguments": {"n": [-(10**MAX_INT_DIGITS)]}}
    for value in (
        longer,
        json.dumps(longer),
        [longer],
        {"name": "f", "arguments": {"n": 10**5_000}},
    ):
        with pytest.raises(DataError, match="more than 308 digits"):
            gold_call_of(value, where="row 3: gold call")
    with pytest.raises(DataError, match="more than 308 digits"):
        gold_calls_of([longest, longer])


def test_the_strict_loader_says_why_it_refuses_a_long_number() -> None:
    assert loads(f"[{LONGEST}]") == [LONGEST]
    for text in ("[" + "1" * 309 + "]", "[" + "9" * 400 + "]"):
        with pytest.raises(JSONDecodeError, match="more than 308 digits"):
            loads(text)
