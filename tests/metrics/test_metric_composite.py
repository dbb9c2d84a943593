from __future__ import annotations

from typing import Any

import pytest

from sommelier_mlflow.errors import MetricConfigError, MetricTypeError
from sommelier_mlflow.metrics import BaseMeasure, CompositeMeasure, CountsMeasure, JsonFormatMeasure


class Words(BaseMeasure[int]):
    def evaluate(self, text: str) -> dict[str, int]:
        return self.result(len(text.split()))


class EqualsGold(BaseMeasure[bool]):
    def evaluate(self, text: str, *, reference: Any = None) -> dict[str, bool]:
        return self.result(text == reference)


class TwoKeys(BaseMeasure[int]):
    """Reports two keys from one leaf, which only evaluation can see."""

    def evaluate(self, text: str) -> dict[str, int]:
        return {"Words": 1, "other": 2}


def test_add_and_remove_maintain_parent_pointers() -> None:
    words, counts = Words(), CountsMeasure()
    composite = CompositeMeasure()
    assert composite.add(words, counts) is composite
    assert words.parent is composite and counts.parent is composite
    assert list(composite.children) == [words, counts]
    composite.remove(words)
    assert words.parent is None and words.is_root
    assert list(composite.children) == [counts]
    with pytest.raises(MetricConfigError, match="not a direct child"):
        composite.remove(words)


def test_constructor_takes_children_and_no_parameters() -> None:
    words = Words()
    composite = CompositeMeasure(words)
    assert words.parent is composite
    with pytest.raises(MetricConfigError, match="takes no runtime parameters"):
        CompositeMeasure(children=[Words()])


def test_evaluate_merges_children_recursively() -> None:
    chars = CountsMeasure()
    chars.result_key = "chars"
    tokens = CountsMeasure(segments="tokens")
    tokens.result_key = "tokens"
    fmt = JsonFormatMeasure(expected_schema={"type": "object", "properties": {"a": {}}})
    root = CompositeMeasure(chars, CompositeMeasure(tokens, fmt))
    text = ' {"a": 1} '
    assert root.evaluate(text) == {"chars": 8, "tokens": 2, "JsonFormatMetric": {"a": True}}
    assert root.score(text) == root.evaluate(text)
    assert CompositeMeasure().evaluate("x") == {}


def test_reference_reaches_only_children_that_accept_it() -> None:
    root = CompositeMeasure(Words(), CompositeMeasure(EqualsGold()))
    assert root.evaluate("a b", reference="a b") == {"Words": 2, "EqualsGold": True}
    assert root.score("a b", reference="c") == {"Words": 2, "EqualsGold": False}
    assert root.evaluate("a b") == {"Words": 2, "EqualsGold": False}


def test_duplicate_result_keys_are_refused_when_adding() -> None:
    first, second = Words(), Words()
    composite = CompositeMeasure(first)
    with pytest.raises(MetricConfigError, match="would both report 'Words'") as info:
        composite.add(second)
    assert isinstance(info.value, ValueError)
    assert second.parent is None and list(composite.children) == [first]
    second.result_key = "words2"
    composite.add(second)
    assert composite.evaluate("x y") == {"Words": 2, "words2": 2}


def test_duplicate_keys_across_nested_composites_are_refused() -> None:
    root = CompositeMeasure(Words())
    inner = CompositeMeasure(Words())
    with pytest.raises(MetricConfigError, match="distinct result_key"):
        root.add(inner)
    assert inner.parent is None


def test_renaming_a_child_into_a_clash_is_refused() -> None:
    first, second = Words(), Words()
    second.result_key = "w2"
    CompositeMeasure(first, second)
    with pytest.raises(MetricConfigError, match="would both report"):
        second.result_key = "Words"
    assert second.result_key == "w2"


def test_duplicate_keys_found_at_evaluation_time() -> None:
    root = CompositeMeasure(Words(), TwoKeys())
    with pytest.raises(MetricConfigError, match="Both Words and TwoKeys reported 'Words'"):
        root.evaluate("a")


def test_add_is_all_or_nothing() -> None:
    taken = Words()
    CompositeMeasure(taken)
    fresh = CountsMeasure()
    composite = CompositeMeasure()
    with pytest.raises(MetricConfigError, match="already belongs to CompositeMeasure"):
        composite.add(fresh, taken)
    assert fresh.parent is None and list(composite.children) == []


def test_adding_twice_or_non_metrics_is_refused() -> None:
    words = Words()
    composite = CompositeMeasure(words)
    with pytest.raises(MetricConfigError, match="already a child"):
        composite.add(words)
    with pytest.raises(MetricTypeError, match="holds measures"):
        composite.add("Words")  # type: ignore[arg-type]


def test_cycles_are_refused() -> None:
    outer = CompositeMeasure()
    inner = CompositeMeasure()
    outer.add(inner)
    with pytest.raises(MetricConfigError, match="cycle"):
        outer.add(outer)
    with pytest.raises(MetricConfigError, match="cycle"):
        inner.add(outer)
    assert outer.parent is None and list(inner.children) == []


def test_parent_setter_moves_and_detaches() -> None:
    words = Words()
    first, second = CompositeMeasure(), CompositeMeasure()
    words.parent = first
    assert list(first.children) == [words]
    words.parent = second
    assert list(first.children) == [] and list(second.children) == [words]
    words.parent = None
    assert words.is_root and list(second.children) == []
    with pytest.raises(MetricTypeError, match="must be a CompositeMeasure"):
        words.parent = Words()  # type: ignore[assignment]


def test_failed_move_leaves_metric_where_it_was() -> None:
    mover = Words()
    home = CompositeMeasure(mover)
    crowded = CompositeMeasure(Words())
    with pytest.raises(MetricConfigError):
        mover.parent = crowded
    assert mover.parent is home and list(home.children) == [mover]


def test_children_snapshot_is_safe_to_mutate_under() -> None:
    a, b = Words(), CountsMeasure()
    composite = CompositeMeasure(a, b)
    for child in composite.children:
        composite.remove(child)
    assert list(composite.children) == []
