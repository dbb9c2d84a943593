from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data import (
    FORMATTED_EXAMPLE_V2_SCHEMA,
    PREPARED_EXAMPLE_V2_SCHEMA,
    TestExample,
    check_scoring_mode,
    read_test_split,
    write_test_split,
)
from sommelier_mlflow.errors import ConfigError, DataError, InputError, InvariantViolationError
from tests.data.data_helpers import SCHEMA_TOOL, WEATHER_CALL, WEATHER_TOOL, WriteLines, native_row

# --------------------------------------------------------------------------- helpers


def expect_data_error(path: Path, line: int | None, *fragments: str) -> Any:
    """Read ``path`` and check the DataError names the file, the line and the problem."""
    with pytest.raises(DataError) as info:
        read_test_split(path)
    message = str(info.value)
    where = f"{path}:{line}: " if line is not None else f"{path}: "
    assert message.startswith(where), message
    assert info.value.path == str(path)
    assert info.value.line == line
    assert info.value.exit_code == 2
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def translated(example_id: str, root: str, language: str = "fr", **extra: Any) -> dict[str, Any]:
    return native_row(
        example_id,
        language=language,
        source_example_id=root,
        query="Quel temps fait-il à Paris ?",
        **extra,
    )


def prepared_v2_row(example_id: str = "p-1", **overrides: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "schema_version": PREPARED_EXAMPLE_V2_SCHEMA,
        "example_id": example_id,
        "source_id": f"xlam:{example_id}",
        "language": "en",
        "source_example_id": None,
        "query": "What is the weather in Paris?",
        "tools": [WEATHER_TOOL],
        "gold_calls": [WEATHER_CALL],
        "split": "test",
        "query_sha256": "0" * 64,
        "source_revision": "abc123",
    }
    row.update(overrides)
    return row


def formatted_v2_row(example_id: str = "f-1", **overrides: Any) -> dict[str, Any]:
    system = "Answer with a JSON tool call.\n\nAvailable tools:\n" + canonical_json([WEATHER_TOOL])
    target = canonical_json([WEATHER_CALL])
    prompt = f"<sys>{system}</sys><user>Weather in Paris?</user><assistant>"
    row: dict[str, Any] = {
        "schema_version": FORMATTED_EXAMPLE_V2_SCHEMA,
        "example_id": example_id,
        "split": "test",
        "language": "en",
        "source_example_id": None,
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": target},
        ],
        "prompt_text": prompt,
        "target_text": target,
        "full_text": prompt + target,
        "prompt_sha256": sha256_text(prompt),
        "tokenizer_id": "org/model",
        "tokenizer_revision": "rev",
        "template_policy": "tokenizer_chat_template",
    }
    row.update(overrides)
    return row


# --------------------------------------------------------------------------- happy paths


def test_reads_native_rows_in_order_with_digest_and_defaults(write_lines: WriteLines) -> None:
    rows = [
        native_row("a"),
        native_row(
            "b",
            language="de",
            tools=[WEATHER_TOOL, SCHEMA_TOOL],
            gold_calls=None,
            gold_call={"name": "convert", "arguments": {"amount": 3, "to": "EUR"}},
        ),
        translated("a-fr", "a"),
    ]
    del rows[1]["gold_calls"]
    path = write_lines(rows)
    split = read_test_split(path)
    assert [e.example_id for e in split.examples] == ["a", "b", "a-fr"]
    assert split.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert split.path == str(path)
    assert split.languages == ("de", "en", "fr")
    first, second, third = split.examples
    assert first.language == "en" and first.source_example_id is None
    assert first.gold_call == WEATHER_CALL and first.prompt_text is None
    assert second.gold_call["name"] == "convert" and second.tools[1] == SCHEMA_TOOL
    assert third.source_example_id == "a"


def test_final_line_without_newline_is_accepted(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), canonical_json(native_row("b"))])
    assert [e.example_id for e in read_test_split(path).examples] == ["a", "b"]


def test_stored_prompt_is_kept(write_lines: WriteLines) -> None:
    prompt = "<user>What is the weather in Paris?</user>"
    path = write_lines([native_row(prompt_text=prompt, prompt_sha256=sha256_text(prompt))])
    (example,) = read_test_split(path).examples
    assert example.prompt_text == prompt
    assert example.prompt_sha256 == sha256_text(prompt)


def test_reads_prepared_v2_rows(write_lines: WriteLines) -> None:
    path = write_lines(
        [
            prepared_v2_row("root"),
            prepared_v2_row(
                "root-he", language="he", source_example_id="root", query="מזג האוויר בפריז?"
            ),
        ]
    )
    root, pair = read_test_split(path).examples
    assert root.query == "What is the weather in Paris?" and root.gold_call == WEATHER_CALL
    assert pair.language == "he" and pair.source_example_id == "root"
    assert pair.prompt_text is None


def test_reads_formatted_v2_rows_and_replays_their_prompt(write_lines: WriteLines) -> None:
    row = formatted_v2_row()
    path = write_lines([row])
    (example,) = read_test_split(path).examples
    assert example.query == "Weather in Paris?"
    assert example.tools == [WEATHER_TOOL]
    assert example.gold_call == WEATHER_CALL
    assert example.prompt_text == row["prompt_text"]
    assert example.prompt_sha256 == row["prompt_sha256"]


def test_write_then_read_round_trips(tmp_path: Path) -> None:
    examples = [
        TestExample("a", "en", "q one", [WEATHER_TOOL], WEATHER_CALL),
        TestExample("a-fr", "fr", "q un", [WEATHER_TOOL], WEATHER_CALL, source_example_id="a"),
        TestExample(
            "b",
            "en",
            "q two",
            [SCHEMA_TOOL],
            {"name": "convert", "arguments": {}},
            prompt_text="P",
            prompt_sha256=sha256_text("P"),
        ),
    ]
    path = write_test_split(tmp_path / "out" / "test.jsonl", examples)
    assert read_test_split(path).examples == tuple(examples)


def test_write_refuses_empty_and_duplicates(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="empty"):
        write_test_split(tmp_path / "t.jsonl", [])
    example = TestExample("a", "en", "q", [WEATHER_TOOL], WEATHER_CALL)
    with pytest.raises(DataError, match="duplicate example_id 'a'"):
        write_test_split(tmp_path / "t.jsonl", [example, example])
    assert not (tmp_path / "t.jsonl").exists()


# --------------------------------------------------------------------------- file-level errors


def test_malformed_json_line(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), '{"example_id": "b",}\n'])
    expect_data_error(path, 2, "not valid JSON")


def test_nan_is_not_json(write_lines: WriteLines) -> None:
    path = write_lines(['{"schema_version": "x", "v": NaN}\n'])
    expect_data_error(path, 1, "not valid JSON")


def test_non_object_line(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), [native_row("b")]])
    expect_data_error(path, 2, "JSON list", "one JSON object per line")


def test_blank_line_in_the_middle(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), "\n", native_row("b")])
    expect_data_error(path, 2, "blank line")


def test_extra_trailing_blank_line(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), "  \n"])
    expect_data_error(path, 2, "blank line")


def test_torn_final_line(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), canonical_json(native_row("b"))[:40]])
    expect_data_error(path, 2, "cut off", "truncated")


def test_empty_file(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([]), None, "empty")


def test_missing_file(tmp_path: Path) -> None:
    expect_data_error(tmp_path / "nope.jsonl", None, "not found")


# --------------------------------------------------------------------------- row-level errors


def test_missing_schema_version(write_lines: WriteLines) -> None:
    row = native_row("a")
    del row["schema_version"]
    expect_data_error(write_lines([row]), 1, "missing schema_version")


def test_unknown_schema_version(write_lines: WriteLines) -> None:
    row = native_row("a", schema_version="sommelier_mlflow.test_example.v2")
    expect_data_error(write_lines([native_row("z"), row]), 2, "unknown schema_version")


def test_missing_field(write_lines: WriteLines) -> None:
    row = native_row("a")
    del row["query"]
    expect_data_error(write_lines([row]), 1, "missing field 'query'")


def test_mistyped_field(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row("a", query=42)]), 1, "'query' must be a string")


def test_mistyped_example_id(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row(7)]), 1, "'example_id' must be a string")


def test_empty_query(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row("a", query="   ")]), 1, "'query' is empty")


def test_unknown_field(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row("a", gold="x")]), 1, "unknown field 'gold'")


def test_duplicate_example_id(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), native_row("b"), native_row("a")])
    expect_data_error(path, 3, "duplicate example_id 'a'", "line 1")


def expect_single_mode_refusal(path: Path, line: int, *fragments: str) -> None:
    """The file reads, but single-call scoring refuses it naming file, line and the fix."""
    split = read_test_split(path)
    check_scoring_mode(split, "calls")
    with pytest.raises(DataError) as info:
        check_scoring_mode(split, "single")
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: "), message
    assert info.value.exit_code == 2
    for fragment in (*fragments, "--scoring calls"):
        assert fragment in message, message


def test_gold_with_zero_calls(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), native_row("b", gold_calls=[])])
    assert read_test_split(path).examples[1].gold_calls == ()
    expect_single_mode_refusal(path, 2, "'b'", "no gold call (an abstention example)")


def test_gold_with_several_calls(write_lines: WriteLines) -> None:
    row = native_row("a", gold_calls=[WEATHER_CALL, WEATHER_CALL])
    path = write_lines([row])
    example = read_test_split(path).examples[0]
    assert example.gold_calls == (WEATHER_CALL, WEATHER_CALL)
    with pytest.raises(InputError, match="has 2 gold calls"):
        _ = example.gold_call
    expect_single_mode_refusal(path, 1, "'a'", "2 gold calls")


def test_every_gold_call_is_checked_against_the_tools(write_lines: WriteLines) -> None:
    row = native_row("a", gold_calls=[WEATHER_CALL, {"name": "get_time", "arguments": {}}])
    expect_data_error(write_lines([row]), 1, "not among the")


def test_single_mode_accepts_single_calls_and_unknown_modes_are_refused(
    write_lines: WriteLines,
) -> None:
    split = read_test_split(write_lines([native_row("a"), native_row("b")]))
    check_scoring_mode(split, "single")
    with pytest.raises(ConfigError, match="unknown scoring mode 'multi'"):
        check_scoring_mode(split, "multi")


def test_multi_call_rows_round_trip_through_the_writer(tmp_path: Path) -> None:
    examples = [
        TestExample("a", "en", "q", [WEATHER_TOOL], gold_calls=[WEATHER_CALL, WEATHER_CALL]),
        TestExample("b", "en", "q2", [WEATHER_TOOL], gold_calls=[]),
    ]
    path = write_test_split(tmp_path / "split.jsonl", examples)
    assert read_test_split(path).examples == tuple(examples)


def test_gold_calls_not_a_list(write_lines: WriteLines) -> None:
    row = native_row("a", gold_calls=WEATHER_CALL)
    expect_data_error(write_lines([row]), 1, "'gold_calls' must be a list")


def test_gold_call_wrong_shape(write_lines: WriteLines) -> None:
    call = {"name": "get_weather", "arguments": {"city": "Paris"}, "id": 1}
    expect_data_error(write_lines([native_row("a", gold_calls=[call])]), 1, "gold call must be")


def test_gold_call_arguments_as_string(write_lines: WriteLines) -> None:
    call = {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    expect_data_error(write_lines([native_row("a", gold_calls=[call])]), 1, "gold call must be")


def test_both_gold_forms(write_lines: WriteLines) -> None:
    row = native_row("a", gold_call=WEATHER_CALL)
    expect_data_error(write_lines([row]), 1, "exactly one of 'gold_calls'")


def test_no_gold(write_lines: WriteLines) -> None:
    row = native_row("a")
    del row["gold_calls"]
    expect_data_error(write_lines([row]), 1, "exactly one of 'gold_calls'")


def test_gold_names_a_tool_not_offered(write_lines: WriteLines) -> None:
    call = {"name": "get_time", "arguments": {}}
    expect_data_error(write_lines([native_row("a", gold_calls=[call])]), 1, "not among the")


def test_tools_not_a_list(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row("a", tools=WEATHER_TOOL)]), 1, "'tools' must be")


def test_tools_empty(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row("a", tools=[])]), 1, "'tools' is empty")


def test_tool_without_name(write_lines: WriteLines) -> None:
    tool = {"description": "x", "parameters": {}}
    row = native_row("a", tools=[WEATHER_TOOL, tool])
    expect_data_error(write_lines([row]), 1, "tools[1]", "'name'")


def test_tool_with_bad_parameters(write_lines: WriteLines) -> None:
    tool = {"name": "get_weather", "parameters": {"city": "str"}}
    expect_data_error(write_lines([native_row("a", tools=[tool])]), 1, "parameter 'city'")


def test_tool_with_bad_json_schema_properties(write_lines: WriteLines) -> None:
    tool = {"name": "get_weather", "parameters": {"type": "object", "properties": []}}
    expect_data_error(write_lines([native_row("a", tools=[tool])]), 1, "properties")


def test_duplicate_tool_names(write_lines: WriteLines) -> None:
    row = native_row("a", tools=[WEATHER_TOOL, WEATHER_TOOL])
    expect_data_error(write_lines([row]), 1, "offered twice")


def test_reserved_language(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row("a", language="overall")]), 1, "reserved")


def test_invalid_language(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([native_row("a", language="e n")]), 1, "not a usable")


def test_prompt_text_without_digest(write_lines: WriteLines) -> None:
    row = native_row("a", prompt_text="P")
    expect_data_error(write_lines([row]), 1, "together")


def test_malformed_prompt_digest(write_lines: WriteLines) -> None:
    row = native_row("a", prompt_text="P", prompt_sha256="ABC")
    expect_data_error(write_lines([row]), 1, "64 lowercase hex")


def test_prompt_digest_mismatch_is_an_invariant_violation(write_lines: WriteLines) -> None:
    row = native_row("a", prompt_text="P", prompt_sha256=sha256_text("Q"))
    path = write_lines([native_row("z"), row])
    with pytest.raises(InvariantViolationError) as info:
        read_test_split(path)
    assert str(info.value).startswith(f"{path}:2: ")
    assert info.value.exit_code == 5


# --------------------------------------------------------------------------- translated rows


def test_translated_row_without_its_root(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), translated("x-fr", "x")])
    expect_data_error(path, 2, "root 'x'", "not in this split")


def test_translated_row_whose_root_is_translated(write_lines: WriteLines) -> None:
    path = write_lines(
        [native_row("a"), translated("a-fr", "a"), translated("a-fr-de", "a-fr", "de")]
    )
    expect_data_error(path, 3, "itself a translation")


def test_translated_row_before_its_root_is_fine(write_lines: WriteLines) -> None:
    path = write_lines([translated("a-fr", "a"), native_row("a")])
    assert [e.example_id for e in read_test_split(path).examples] == ["a-fr", "a"]


def test_translated_row_in_its_roots_language(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), translated("a-2", "a", "en")])
    expect_data_error(path, 2, "same language")


def test_second_translation_same_language(write_lines: WriteLines) -> None:
    path = write_lines([native_row("a"), translated("a-fr", "a"), translated("a-fr2", "a")])
    expect_data_error(path, 3, "already has a 'fr' translation at line 2")


def test_translation_pointing_at_itself(write_lines: WriteLines) -> None:
    path = write_lines([translated("a", "a")])
    expect_data_error(path, 1, "itself")


# --------------------------------------------------------------------------- original pipeline rows


def test_prepared_v2_missing_field(write_lines: WriteLines) -> None:
    row = prepared_v2_row()
    del row["source_revision"]
    expect_data_error(write_lines([row]), 1, "missing field 'source_revision'")


def test_prepared_v2_bad_split(write_lines: WriteLines) -> None:
    expect_data_error(write_lines([prepared_v2_row(split="dev")]), 1, "'split'")


def test_prepared_v2_two_gold_calls(write_lines: WriteLines) -> None:
    row = prepared_v2_row(gold_calls=[WEATHER_CALL, WEATHER_CALL])
    expect_single_mode_refusal(write_lines([row]), 1, "2 gold calls")


def test_formatted_v2_without_tool_list(write_lines: WriteLines) -> None:
    row = formatted_v2_row()
    row["messages"][0]["content"] = "S"
    expect_data_error(write_lines([row]), 1, "cannot recover the tool list")


def test_formatted_v2_target_mismatch(write_lines: WriteLines) -> None:
    row = formatted_v2_row()
    row["messages"][2]["content"] = "{}"
    expect_data_error(write_lines([row]), 1, "assistant message differs")


def test_formatted_v2_bad_messages(write_lines: WriteLines) -> None:
    row = formatted_v2_row()
    row["messages"] = row["messages"][::-1]
    expect_data_error(write_lines([row]), 1, "messages[0]")


def test_formatted_v2_digest_mismatch(write_lines: WriteLines) -> None:
    path = write_lines([formatted_v2_row(prompt_sha256="0" * 64)])
    with pytest.raises(InvariantViolationError, match=f"^{path}:1: "):
        read_test_split(path)


def test_example_gold_forms() -> None:
    other = {"name": "get_weather", "arguments": {"city": "Oslo"}}
    multi = TestExample("a", "en", "q", [WEATHER_TOOL], gold_calls=[WEATHER_CALL, other])
    assert dataclasses.replace(multi, gold_call=other).gold_calls == (other,)
    assert dataclasses.replace(multi, query="q2").gold_calls == (WEATHER_CALL, other)
    with pytest.raises(InputError, match="give the gold answer"):
        TestExample("a", "en", "q", [WEATHER_TOOL])
    with pytest.raises(InputError, match="must be a list of calls"):
        TestExample("a", "en", "q", [WEATHER_TOOL], gold_calls=WEATHER_CALL)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="gold call must be"):
        TestExample("a", "en", "q", [WEATHER_TOOL], gold_calls=[WEATHER_CALL, {"name": "x"}])
