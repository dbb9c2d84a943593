from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, TypeVar, Union

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow._json import canonical_json, loads
from sommelier_mlflow.metrics import JSONValue
from sommelier_mlflow.metrics._types import (
    contains_typevar,
    describe_type,
    is_json_value,
    is_serializable_type,
    matches_type,
    same_type,
)

T = TypeVar("T")


@pytest.mark.parametrize(
    "tp",
    [
        bool,
        int,
        float,
        str,
        None,
        type(None),
        list[int],
        dict[str, float],
        dict[str, list[dict[str, bool]]],
        int | None,
        Optional[str],  # noqa: UP045 - the typing spelling must be accepted too
        Union[int, str],  # noqa: UP007
        Literal["a", 1, True, None],
        Annotated[int, "meta"],
        JSONValue,
        dict[str, JSONValue],
    ],
)
def test_serialisable_types_are_accepted(tp: object) -> None:
    assert is_serializable_type(tp)


@pytest.mark.parametrize(
    "tp",
    [
        list,
        dict,
        tuple[int, int],
        set[int],
        dict[int, str],
        Any,
        bytes,
        complex,
        object,
        list[bytes],
        int | bytes,
        Literal[1.5],
    ],
)
def test_non_serialisable_types_are_refused(tp: object) -> None:
    assert not is_serializable_type(tp)


@pytest.mark.parametrize(
    ("value", "tp", "expected"),
    [
        (True, bool, True),
        (1, bool, False),
        (1, int, True),
        (True, int, False),
        (1.0, float, True),
        (1, float, False),
        (float("nan"), float, False),
        (float("inf"), float, False),
        ("x", str, True),
        (None, None, True),
        (None, int | None, True),
        ([1, 2], list[int], True),
        ([1, "2"], list[int], False),
        ((1, 2), list[int], False),
        ({"a": True}, dict[str, bool], True),
        ({1: True}, dict[str, bool], False),
        ({"a": 1}, dict[str, bool], False),
        ("a", Literal["a", "b"], True),
        ("c", Literal["a", "b"], False),
        (1, Literal[True], False),
        ({"a": [1, {"b": None}]}, JSONValue, True),
        ({"a": float("nan")}, JSONValue, False),
        ({"a": (1,)}, JSONValue, False),
        (5, Annotated[int, "meta"], True),
    ],
)
def test_matches_type_is_as_strict_as_canonical_json(
    value: object, tp: object, expected: bool
) -> None:
    assert matches_type(value, tp) is expected


def test_is_json_value_rejects_non_string_keys_and_objects() -> None:
    assert is_json_value({"a": [1, 2.5, None, "x", False]})
    assert not is_json_value({1: "a"})
    assert not is_json_value(object())


def test_same_type_normalises_spellings() -> None:
    assert same_type(Optional[int], int | None)  # noqa: UP045
    assert same_type(dict[str, Annotated[int, "x"]], dict[str, int])
    assert same_type(dict[str, T], dict[str, list[int]])
    assert same_type(Literal["a", "b"], Literal["b", "a"])
    assert not same_type(dict[str, int], dict[str, float])
    assert not same_type(dict[str, int], dict[str, int | None])
    assert not same_type(list[int], dict[str, int])


def test_contains_typevar_and_describe() -> None:
    assert contains_typevar(T)
    assert contains_typevar(dict[str, list[T]])
    assert not contains_typevar(dict[str, int])
    assert describe_type(int) == "int"
    assert describe_type(type(None)) == "None"
    assert describe_type(JSONValue) == "JSONValue"
    assert describe_type(dict[str, JSONValue]) == "dict[str, JSONValue]"


def test_json_value_marker_cannot_be_instantiated() -> None:
    with pytest.raises(TypeError):
        JSONValue()


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(_json_values)
def test_every_strict_json_value_matches_json_value_and_round_trips(value: object) -> None:
    assert is_json_value(value)
    assert matches_type(value, JSONValue)
    assert matches_type(value, dict[str, JSONValue]) is isinstance(value, dict)
    assert loads(canonical_json(value)) == value
