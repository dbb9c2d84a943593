"""Integers beyond 64 bits in model output keep their exact value (issue 13 #10)."""

from __future__ import annotations

from sommelier_mlflow import compute_metrics, parse_tool_call

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
