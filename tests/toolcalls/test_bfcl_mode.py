"""The registered ``bfcl`` scoring mode: decoding, the three metrics and BFCL's aggregation."""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import pytest

from sommelier_mlflow.errors import DataError
from sommelier_mlflow.toolcalls import (
    BFCL_METRIC_NAMES,
    BFCL_MODE,
    OutputFormat,
    bfcl_aggregate,
    output_format,
    register_output_format,
    scoring_mode,
)
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._modes import unregister_output_format

KEY = {
    "name": "get_weather",
    "arguments": {"city": {"acceptable": ["Paris"], "bfcl_type": ["string"], "required": True}},
}


def _score(text: str, gold: list[dict[str, Any]], fmt: str = "json") -> dict[str, tuple[int, int]]:
    mode = scoring_mode(BFCL_MODE)
    comparison = mode.match(mode.parse(text, output_format(fmt), ()), mode.make_gold(gold))
    return {metric.name: metric.component(comparison) for metric in mode.metrics()}


def test_the_mode_is_registered_with_its_metrics_slice_and_mcnemar_outcome() -> None:
    mode = scoring_mode(BFCL_MODE)
    assert tuple(metric.name for metric in mode.metrics()) == BFCL_METRIC_NAMES
    assert mode.default_slices == ("category",)
    assert mode.mcnemar_metric() == "bfcl_ast_accuracy"


@pytest.mark.parametrize(
    ("text", "gold", "expected"),
    [
        ('[{"name": "get_weather", "arguments": {"city": "paris"}}]', [KEY], (1, 1, 1)),
        ('[{"name": "get_weather", "arguments": {"city": "Rome"}}]', [KEY], (0, 1, 0)),
        ("I would need a weather tool for that.", [], (1, 1, 1)),  # prose: zero calls
        ("[]", [], (1, 1, 1)),
        ('[{"name": "get_weather", "arguments": {', [], (0, 0, 1)),  # BFCL would pass it
        ('[{"name": "get_weather", "arguments": {', [KEY], (0, 0, 0)),
    ],
)
def test_each_output_counts_once_per_metric(
    text: str, gold: list[dict[str, Any]], expected: tuple[int, int, int]
) -> None:
    scores = _score(text, gold)
    assert tuple(scores[name][0] for name in BFCL_METRIC_NAMES) == expected
    assert all(scores[name][1] == 1 for name in BFCL_METRIC_NAMES)


@pytest.fixture
def tagged_format() -> Iterator[str]:
    """A Hermes-style output format registered for the test only."""
    name = "test_bfcl_tagged"
    register_output_format(
        OutputFormat(name, "Hermes <tool_call> blocks.", decode=decode_hermes, version="t.v1")
    )
    yield name
    unregister_output_format(name)


def test_outputs_are_decoded_by_the_chosen_output_format(tagged_format: str) -> None:
    call = {"name": "get_weather", "arguments": {"city": "PARIS"}}
    tagged = f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    assert _score(tagged, [KEY], tagged_format)["bfcl_ast_accuracy"] == (1, 1)
    bare = json.dumps([call])  # no tag: the tagged format reads no call at all
    assert _score(bare, [KEY], tagged_format)["bfcl_ast_accuracy"] == (0, 1)
    assert _score(bare, [KEY], "json")["bfcl_ast_accuracy"] == (1, 1)


def test_a_gold_value_that_is_not_an_answer_key_is_refused_with_where() -> None:
    call = {"name": "get_weather", "arguments": {"city": "Paris"}}
    with pytest.raises(DataError, match=r"row 3: answer key get_weather.city must be"):
        scoring_mode(BFCL_MODE).gold_calls([call], "row 3")


def test_bfcls_aggregation_is_the_unweighted_mean_of_call_categories() -> None:
    aggregate = bfcl_aggregate(
        {"simple_python": (300, 400), "parallel": (100, 200), "irrelevance": (120, 240)}
    )
    assert aggregate.overall == Fraction(1, 2) * (Fraction(3, 4) + Fraction(1, 2))
    assert aggregate.call_categories == ("simple_python", "parallel")
    assert aggregate.irrelevance == {"irrelevance": (120, 240)}
    lines = aggregate.lines("bfcl_ast_accuracy")
    assert lines[0].startswith("BFCL's aggregation of bfcl_ast_accuracy")
    assert "overall AST accuracy  0.6250" in lines[1]
    assert lines[-1].strip() == "irrelevance (own line)  0.5000  (120/240)"
    assert bfcl_aggregate({"irrelevance": (1, 2)}).overall is None
    with pytest.raises(ValueError, match="no example"):
        bfcl_aggregate({"parallel": (0, 0)})
