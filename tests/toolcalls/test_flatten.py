from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.toolcalls import flatten_arguments
from sommelier_mlflow.toolcalls._flatten import count_matched_pairs, count_pairs


def test_spec_flattening_table() -> None:
    arguments = {
        "city": "Paris",
        "filters": {"max_price": 120, "tags": ["romantic", "quiet"]},
        "options": {},
    }
    assert flatten_arguments(arguments) == {
        "city": '"Paris"',
        "filters.max_price": "120",
        "filters.tags[0]": '"romantic"',
        "filters.tags[1]": '"quiet"',
        "options": "{}",
    }


def test_empty_arguments_is_one_root_pair() -> None:
    assert flatten_arguments({}) == {"<root>": "{}"}


def test_empty_list_is_a_leaf() -> None:
    assert flatten_arguments({"ids": []}) == {"ids": "[]"}


def test_key_order_never_matters_list_order_always_does() -> None:
    assert flatten_arguments({"a": 1, "b": 2}) == flatten_arguments({"b": 2, "a": 1})
    assert flatten_arguments({"l": [1, 2]}) != flatten_arguments({"l": [2, 1]})


@pytest.mark.parametrize(
    ("left", "right"),
    [(1, 1.0), (1, True), ("2", 2), (0, False), (None, "null")],
)
def test_values_with_different_canonical_spelling_differ(left: object, right: object) -> None:
    assert flatten_arguments({"x": left}) != flatten_arguments({"x": right})
    assert canonical_json(left) != canonical_json(right)


def test_special_keys_cannot_collide_with_nesting() -> None:
    dotted = flatten_arguments({"a.b": 1})
    nested = flatten_arguments({"a": {"b": 1}})
    assert dotted != nested
    assert flatten_arguments({"<root>": {}}) != flatten_arguments({})
    assert flatten_arguments({"x[0]": 1}) != flatten_arguments({"x": [1]})


def test_canonical_json_is_ascii_sorted_compact() -> None:
    assert canonical_json({"b": "é", "a": [1, {"d": None, "c": "😀"}]}) == (
        '{"a":[1,{"c":"\\ud83d\\ude00","d":null}],"b":"\\u00e9"}'
    )


def test_deep_values_get_the_same_canonical_spelling() -> None:
    import orjson

    from sommelier_mlflow._json import _dumps_deep

    shallow = {"b": [1, {"z": None, "a": "é", "n": 2.5}], "a": {}, "c": [], "t": True}
    assert _dumps_deep(shallow) == orjson.dumps(shallow, option=orjson.OPT_SORT_KEYS).decode()
    deep: object = ["leaf"]
    for level in range(600):
        deep = {"k": deep, "i": level} if level % 2 else [deep]
    text = canonical_json(deep)
    assert text.startswith('{"i":599,"k":[')
    assert orjson.loads(text) == deep
    assert len(flatten_arguments({"d": deep})) == 301


_JSON_LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from([0.0, -0.0, 1.0, 2.5])
    | st.sampled_from(["a", "b", "1", "", "a.b", "<root>"])
)
_JSON = st.recursive(
    _JSON_LEAVES,
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.sampled_from(["a", "b", "a.b", "0", "", "[0]"]), children, max_size=3),
    max_leaves=12,
)
_ARGUMENTS = st.dictionaries(st.sampled_from(["a", "b", "a.b", "x"]), _JSON, max_size=4)


@settings(max_examples=400, deadline=None)
@given(_ARGUMENTS, _ARGUMENTS)
def test_matched_pair_count_equals_the_flattened_definition(
    predicted: dict[str, Any], gold: dict[str, Any]
) -> None:
    gold_pairs = flatten_arguments(gold)
    expected = sum(
        1 for path, value in flatten_arguments(predicted).items() if gold_pairs.get(path) == value
    )
    assert count_matched_pairs(predicted, gold) == expected
    assert count_pairs(predicted) == len(flatten_arguments(predicted))


def test_matched_pairs_beyond_the_recursion_limit_fall_back_to_flattening() -> None:
    deep: Any = 1
    for _ in range(1500):
        deep = [deep]
    assert count_matched_pairs({"x": deep}, {"x": deep}) == 1
    assert count_pairs({"x": deep}) == 1
