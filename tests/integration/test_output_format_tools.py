"""A format whose values are untyped text, typed by the tool's schema, registered from here.

Formats like Qwen3-Coder's XML write ``<parameter=days>3</parameter>``: the
text alone cannot say whether ``3`` is the integer 3 or the string "3". The
decoder receives the example's tools (``decode(text, tools)``) and asks
:func:`~sommelier_mlflow.toolcalls.parameter_type` for the parameter's JSON
Schema type; this module's ``kv`` format (``name(k=v, ...)``) does exactly
that, and ``score --output-format kv`` scores a split with it, no other change.
"""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import sha256_text
from sommelier_mlflow.cli import main
from sommelier_mlflow.data import TestExample, write_test_split
from sommelier_mlflow.toolcalls import (
    PARSER_VERSION,
    CallsParseResult,
    OutputFormat,
    Tools,
    parameter_type,
    register_output_format,
    unregister_output_format,
)
from tests.cli.cli_helpers import declared_score_args, write_jsonl
from tests.integration.integration_helpers import Store, evaluate_in_run

NAME = "kv"
# xlam's flat parameters, as rows hold them: "int" is JSON Schema's "integer".
TOOLS = [
    {
        "name": "get_forecast",
        "description": "Forecast for a city",
        "parameters": {"city": {"type": "str"}, "days": {"type": "int"}},
    }
]
_CALL = re.compile(r"\s*([A-Za-z_]\w*)\((.*)\)\s*", re.DOTALL)


def decode_kv(text: str, tools: Tools) -> CallsParseResult:
    """``name(k=v, k=v)``: every value is text, typed by the called tool's schema."""
    match = _CALL.fullmatch(text)
    if match is None:
        return CallsParseResult("no_json")
    name, body = match.groups()
    arguments: dict[str, Any] = {}
    for item in filter(None, (part.strip() for part in body.split(","))):
        key, equals, value = item.partition("=")
        if not equals:
            return CallsParseResult("invalid_json")
        if parameter_type(tools, name, key.strip()) == "integer":
            if re.fullmatch(r"-?[0-9]+", value.strip()) is None:
                return CallsParseResult("invalid_shape")  # not an integer: refused, not guessed
            arguments[key.strip()] = int(value)
        else:
            arguments[key.strip()] = value.strip()
    return CallsParseResult("ok", ({"name": name, "arguments": arguments},))


@pytest.fixture
def kv() -> Iterator[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the current form is registered without a warning
        register_output_format(
            OutputFormat(NAME, "name(k=v, ...), typed by the tools.", decode_kv, "kv.v1")
        )
    yield NAME
    unregister_output_format(NAME)


def _example(index: int, city: str, days: int) -> TestExample:
    prompt = f"<user>forecast {city} {days}</user>"
    return TestExample(
        example_id=f"en-{index}",
        language="en",
        query=f"{days}-day forecast for {city}",
        tools=TOOLS,
        gold_call={"name": "get_forecast", "arguments": {"city": city, "days": days}},
        prompt_text=prompt,
        prompt_sha256=sha256_text(prompt),
    )


def test_a_format_types_untyped_values_by_the_tools_through_score(kv: str, tmp_path: Path) -> None:
    examples = [_example(0, "Paris", 3), _example(1, "Oslo", 2), _example(2, "1984", 1)]
    split = write_test_split(tmp_path / "split.jsonl", examples)
    outputs = {
        "en-0": "get_forecast(city=Paris, days=3)",  # days is an integer parameter: 3
        "en-1": "get_forecast(city=Oslo, days=two)",  # not an integer: refused
        "en-2": "get_forecast(city=1984, days=1)",  # city is a string parameter: "1984"
    }
    rows = [{"example_id": key, "raw_text": text} for key, text in outputs.items()]
    precomputed = write_jsonl(tmp_path / "outputs.jsonl", rows)
    out = tmp_path / "out"
    args = [*declared_score_args(Path(split)), "--precomputed", str(precomputed)]
    assert main([*args, "--output-format", kv, "--out", str(out), "--resamples", "20"]) == 0

    report = json.loads((out / "evaluation_report.json").read_text())
    assert report["identity"]["parser_version"] == f"{PARSER_VERSION}+kv.v1"
    rows_by_id = {row["example_id"]: row for row in report["per_example"]}
    assert {key: row["parse_status"] for key, row in rows_by_id.items()} == {
        "en-0": "ok",
        "en-1": "invalid_shape",
        "en-2": "ok",
    }
    # Both read calls match their gold exactly, which canonical JSON allows only if
    # days is the integer 3 (not "3") and city the string "1984" (not 1984).
    exact = report["metrics"]["full_call_exact_match"]
    assert (exact["numerator"], exact["denominator"]) == (2, 3)


def test_parameter_type_reads_either_tool_shape_and_never_guesses() -> None:
    schema_tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}, "u": {"type": ["integer", "string"]}},
                },
            },
        }
    ]
    assert parameter_type(schema_tools, "f", "n") == "integer"
    assert parameter_type(schema_tools, "f", "u") == ("integer", "string")
    assert parameter_type(TOOLS, "get_forecast", "days") == "integer"
    assert parameter_type(TOOLS, "get_forecast", "city") == "string"
    # Not offered, not declared, or any value: no type, so nothing is guessed.
    assert parameter_type(TOOLS, "get_weather", "days") is None
    assert parameter_type(TOOLS, "get_forecast", "hours") is None
    assert parameter_type([{"name": "g", "parameters": {"x": {"type": "Any"}}}], "g", "x") is None
    assert parameter_type([{"name": "g", "parameters": "broken"}, "junk"], "g", "x") is None  # type: ignore[list-item]


def test_the_evaluator_reads_a_tools_column_for_the_decoder(kv: str, store: Store) -> None:
    import pandas as pd

    gold = {"name": "get_forecast", "arguments": {"city": "Paris", "days": 3}}
    text = "get_forecast(city=Paris, days=3)"
    frame = pd.DataFrame({"output": [text, text], "gold": [gold, gold]})
    config = {"sommelier": {"output_format": kv}}
    untyped, _ = evaluate_in_run(store, frame, evaluator_config=config)
    assert untyped.metrics["overall/full_call_exact_match"] == 0.0  # days read as "3"
    frame["tools"] = [json.dumps(TOOLS)] * 2
    typed, _ = evaluate_in_run(store, frame, evaluator_config=config)
    assert typed.metrics["overall/full_call_exact_match"] == 1.0


def test_score_predictions_and_the_genai_scorers_hand_the_tools_over(kv: str) -> None:
    from sommelier_mlflow.integration import score_predictions
    from sommelier_mlflow.scorers import sommelier_scorers

    gold = {"name": "get_forecast", "arguments": {"city": "Paris", "days": 3}}
    text = "get_forecast(city=Paris, days=3)"
    scored = score_predictions([text, text], [gold, gold], tools=[TOOLS, json.dumps(TOOLS)])
    exact = scored.report.metrics["full_call_exact_match"]
    assert (exact.numerator, exact.denominator) == (0, 2)  # json cannot read it at all
    scored = score_predictions(
        [text, text], [gold, gold], tools=[TOOLS, json.dumps(TOOLS)], output_format=kv
    )
    exact = scored.report.metrics["full_call_exact_match"]
    assert (exact.numerator, exact.denominator) == (2, 2)
    # Without the tools the decoder cannot type days: "3" is not the gold's 3.
    untyped = score_predictions([text], [gold], output_format=kv).report
    assert untyped.metrics["full_call_exact_match"].numerator == 0
    scorers = {built.name: built for built in sommelier_scorers(output_format=kv)}
    full_call = scorers["full_call_exact_match"]
    expectations = {"gold_call": gold}
    assert full_call(outputs=text, expectations=expectations, inputs={"tools": TOOLS}) is True
    assert full_call(outputs=text, expectations=expectations) is False
