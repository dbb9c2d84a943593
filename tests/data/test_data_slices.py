from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sommelier_mlflow.data import (
    call_count_value,
    check_slice_fields,
    encode_slice_value,
    slice_field_names,
    slice_sections,
)
from sommelier_mlflow.data._slices import MAX_ENCODED_VALUE
from sommelier_mlflow.errors import ConfigError, InputError

# MLflow's metric-key alphabet (colon aside, which our F:V separator uses).
MLFLOW_KEY = re.compile(r"[A-Za-z0-9_\-./ ]*")


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("0", "0"),
        ("2+", "2.2b"),
        ("small talk", "small.20talk"),
        ("été", ".c3.a9t.c3.a9"),
        ("a.b", "a.2eb"),
        ("a/b:c", "a.2fb.3ac"),
        ("under_score-dash", "under_score-dash"),
    ],
)
def test_documented_examples(value: str, encoded: str) -> None:
    assert encode_slice_value(value) == encoded


def _decode(encoded: str) -> str:
    raw = bytearray()
    index = 0
    while index < len(encoded):
        if encoded[index] == ".":
            raw.append(int(encoded[index + 1 : index + 3], 16))
            index += 3
        else:
            raw += encoded[index].encode()
            index += 1
    return raw.decode("utf-8", "surrogatepass")


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_encoding_is_in_the_alphabet_and_reversible(value: str) -> None:
    encoded = encode_slice_value(value)
    assert MLFLOW_KEY.fullmatch(encoded)
    assert len(encoded) <= MAX_ENCODED_VALUE
    if ".." not in encoded:  # not shortened
        assert _decode(encoded) == value  # reversible, hence collision-free


def test_long_values_are_shortened_within_the_key_budget() -> None:
    long_a, long_b = "x" * 200 + "a", "x" * 200 + "b"
    sections = slice_sections([f"topic:{long_a}", f"topic:{long_b}"])
    assert len(set(sections.values())) == 2  # the value's hash tells them apart
    for section in sections.values():
        assert len(section) == len("topic:") + MAX_ENCODED_VALUE
        assert ".." in section  # a mark no full encoding contains


def test_two_slices_sharing_a_section_exit_2() -> None:
    # A lossy spelling (first character only) stands in for the astronomically rare
    # clash of two shortened values; the guard must refuse rather than merge them.
    with pytest.raises(InputError, match="same MLflow key section") as info:
        slice_sections(["topic:alpha", "topic:apple"], encode=lambda value: value[:1])
    assert info.value.exit_code == 2
    assert slice_sections(["topic:alpha", "topic:beta"], encode=lambda value: value[:1]) == {
        "topic:alpha": "topic:a",
        "topic:beta": "topic:b",
    }


def test_call_count_values() -> None:
    assert [call_count_value(n) for n in range(5)] == ["0", "1", "2+", "2+", "2+"]


def test_slice_by_means_the_same_fields_in_every_spelling() -> None:
    """``-P slice_by=a,b``, ``--slice-by a --slice-by b,c`` and the evaluator's list."""
    assert slice_field_names("topic, tier") == ["topic", "tier"]
    assert slice_field_names(["topic", "tier,lang ", ""]) == ["topic", "tier", "lang"]
    assert slice_field_names("") == [] and slice_field_names(()) == []
    with pytest.raises(ConfigError, match="names"):
        slice_field_names(["topic", 3])  # type: ignore[list-item]


def test_slice_fields() -> None:
    assert check_slice_fields([], scoring="single") == ()
    assert check_slice_fields(["language"], scoring="single") == ()
    assert check_slice_fields(["topic"], scoring="calls") == ("calls", "topic")
    assert check_slice_fields(["calls", "topic"], scoring="calls") == ("calls", "topic")
    for bad, message in [
        (["Topic"], "must match"),
        (["topic", "topic"], "twice"),
        (["overall"], "reserved"),
        (["query"], "reserved"),
        (["calls"], "only with --scoring calls"),
    ]:
        with pytest.raises(ConfigError, match=message):
            check_slice_fields(bad, scoring="single")
    with pytest.raises(ConfigError, match="not one string"):
        check_slice_fields("topic", scoring="single")
