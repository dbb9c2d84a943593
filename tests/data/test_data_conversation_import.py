"""prepare --input-format: conversations as teams ship them -> one example per assistant turn."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.cli import main
from sommelier_mlflow.data import (
    CONVERSATION_DROP_REASONS,
    input_format_names,
    prepare,
    read_test_split,
)
from sommelier_mlflow.errors import ConfigError, DataError
from tests.data.data_helpers import WriteLines
from tests.support.timing import growth_ratios

SOURCES = Path(__file__).resolve().parents[2] / "examples" / "conversations" / "sources"
SAMPLES = {
    "openai": "openai.jsonl",
    "hermes_fc": "hermes_fc.json",
    "sharegpt": "sharegpt.json",
    "toolace": "toolace.json",
    "glaive": "glaive.jsonl",
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
ROW_KEYS = {
    "schema_version",
    "example_id",
    "language",
    "source_example_id",
    "messages",
    "tools",
    "gold_calls",
    "conversation_id",
    "turn",
}


def sizes(test: int, train: int = 0, validation: int = 0) -> dict[str, int]:
    return {"train": train, "validation": validation, "test": test}


def rows_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    made: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id is not None:
        made["id"] = call_id
    return made


def weather_chat(conversation_id: str, city: str = "Oslo", **extra: Any) -> dict[str, Any]:
    """Two assistant turns: a call, then a text answer after the tool result."""
    return {
        "id": conversation_id,
        "messages": [
            {"role": "user", "content": f"Weather in {city}?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("get_weather", json.dumps({"city": city}), "c1")],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"temp_c": 5}'},
            {"role": "assistant", "content": f"It is 5 °C in {city}."},
        ],
        "tools": [WEATHER],
        **extra,
    }


def check_contract_row(row: dict[str, Any]) -> None:
    """The shared contract of a conversation row, checked on the JSON written."""
    assert set(row) == ROW_KEYS
    assert "query" not in row
    assert row["example_id"] == f"{row['conversation_id']}:{row['turn']}"
    assert isinstance(row["turn"], int) and row["turn"] >= 1
    assert isinstance(row["gold_calls"], list)
    offered = {tool["name"] for tool in row["tools"]}
    for gold in row["gold_calls"]:
        assert set(gold) == {"name", "arguments"} and gold["name"] in offered
        assert isinstance(gold["arguments"], dict)
    assert row["messages"] and row["messages"][-1]["role"] in ("user", "tool")
    assistant_turns = 0
    for message in row["messages"]:
        assert message["role"] in ("system", "user", "assistant", "tool")
        assert message["content"] is None or isinstance(message["content"], str)
        if message["role"] == "assistant":
            assistant_turns += 1
        for made in message.get("tool_calls", []):
            assert made["type"] == "function"
            assert isinstance(made["function"]["arguments"], dict)
    assert assistant_turns == row["turn"] - 1


def test_every_input_format_is_registered_and_has_a_sample() -> None:
    assert set(input_format_names()) >= {*SAMPLES, "xlam"}
    assert {path.name for path in SOURCES.iterdir()} == {*SAMPLES.values(), "README.md"}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_sample_source_imports(name: str, tmp_path: Path) -> None:
    conversations = 4 if name == "openai" else 3
    result = prepare(
        SOURCES / SAMPLES[name],
        tmp_path,
        seed=0,
        split_sizes=sizes(conversations),
        input_format=name,
    )
    rows = rows_of(result.split_paths["test"])
    summary = json.loads(result.drop_summary_path.read_text(encoding="utf-8"))
    for row in rows:
        check_contract_row(row)
    assert summary["input_format"] == name
    assert summary["counted_in"] == "assistant_turns"
    for language in summary["languages"]:  # examples + dropped turns = assistant turns
        dropped = sum(summary["dropped"][language].values())
        assert summary["kept"][language] + dropped == summary["read"][language]
    assert len(rows) == sum(summary["kept"].values()) > 0
    # every format has text turns after a tool result and a parallel-call turn
    assert any(not row["gold_calls"] and row["messages"][-1]["role"] == "tool" for row in rows)
    assert any(len(row["gold_calls"]) > 1 for row in rows) or name == "glaive"
    assert len({row["conversation_id"] for row in rows}) == conversations


EXPECTED_FIRST_CALLS = {
    "openai": {"name": "get_weather", "arguments": {"city": "Lyon"}},
    "hermes_fc": {"name": "get_weather", "arguments": {"city": "Porto"}},  # single quotes
    "sharegpt": {"name": "get_weather", "arguments": {"city": "Dublin"}},
    "toolace": {"name": "get_weather", "arguments": {"city": "Kyoto"}},  # [f(city="Kyoto")]
    "glaive": {"name": "get_weather", "arguments": {"city": "Cairo"}},  # '{...}' arguments
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_gold_calls_are_read_by_each_formats_rules(name: str, tmp_path: Path) -> None:
    result = prepare(
        SOURCES / SAMPLES[name], tmp_path, seed=0, split_sizes=sizes(3), input_format=name
    )
    rows = rows_of(result.split_paths["test"])
    first = next(row for row in rows if row["turn"] == 1 and row["gold_calls"])
    assert first["gold_calls"] == [EXPECTED_FIRST_CALLS[name]]


def test_openai_weight_zero_turn_is_history_not_an_example(tmp_path: Path) -> None:
    result = prepare(
        SOURCES / "openai.jsonl", tmp_path, seed=0, split_sizes=sizes(4), input_format="openai"
    )
    rows = {row["example_id"]: row for row in rows_of(result.split_paths["test"])}
    assert "oa-3:2" not in rows  # weight 0
    assert result.summary["dropped_total"]["weight_zero"] == 1
    later = rows["oa-3:3"]
    assert [m["content"] for m in later["messages"] if m["role"] == "assistant"][-1] == (
        "20 EUR is about 3240 JPY."
    )
    assert "weight" not in json.dumps(later["messages"])
    # TRL's shape: arguments as an object, the result named by the tool only
    assert later["messages"][1]["tool_calls"][0]["function"]["arguments"] == {
        "amount": 20,
        "base": "EUR",
        "quote": "JPY",
    }
    assert later["messages"][2] == {"role": "tool", "content": "3240", "name": "convert_currency"}
    assert rows["oa-4:1"]["language"] == "fr"


def test_splits_never_share_a_conversation_and_follow_the_seed(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    path = write_lines([weather_chat(f"c{index}", city=f"City{index}") for index in range(30)])
    first = prepare(
        path, tmp_path / "a", seed=3, split_sizes=sizes(8, 10, 6), input_format="openai"
    )
    again = prepare(
        path, tmp_path / "b", seed=3, split_sizes=sizes(8, 10, 6), input_format="openai"
    )
    other = prepare(
        path, tmp_path / "c", seed=4, split_sizes=sizes(8, 10, 6), input_format="openai"
    )
    owners: dict[str, str] = {}
    for split, file in first.split_paths.items():
        for row in rows_of(file):
            assert owners.setdefault(row["conversation_id"], split) == split
    assert len(owners) == 24
    assert first.summary["conversations"] == {
        "train": 10,
        "validation": 6,
        "test": 8,
        "unassigned": 6,
        "without_examples": 0,
    }
    assert first.summary["unassigned"] == {"en": 12}
    for split in first.split_paths:
        assert first.split_paths[split].read_bytes() == again.split_paths[split].read_bytes()
    assert first.split_paths["test"].read_bytes() != other.split_paths["test"].read_bytes()


def bad_conversations() -> list[dict[str, Any]]:
    """One conversation per problem, each with two assistant turns; see the expected counts."""
    good = weather_chat("good")
    out_of_order = weather_chat("order")
    out_of_order["messages"].insert(1, {"role": "system", "content": "late"})  # turn 1 on
    orphan = weather_chat("orphan")
    orphan["messages"][2]["tool_call_id"] = "nope"  # turn 2 on: turn 1 stays
    not_json = weather_chat("notjson")
    not_json["messages"][1]["tool_calls"][0]["function"]["arguments"] = "{city: Oslo}"
    unknown = weather_chat("unknown")
    unknown["messages"][1]["tool_calls"][0]["function"]["name"] = "get_time"
    empty = weather_chat("empty")
    empty["messages"][3]["content"] = ""  # turn 2 only
    reused = weather_chat("good", city="Rome")
    bad_tools = weather_chat("tools", tools=[{"type": "function", "function": {"name": 3}}])
    no_tools = weather_chat("notools", tools=[])
    parallel = weather_chat("parallel", parallel_tool_calls=False)
    parallel["messages"][1]["tool_calls"].append(call("get_weather", {"city": "Bergen"}, "c2"))
    unanswered = weather_chat("unanswered")  # two calls, one result: turn 2 on
    unanswered["messages"][1]["tool_calls"].append(call("get_weather", {"city": "Bergen"}, "c2"))
    no_text = weather_chat("notext")
    no_text["messages"][0]["content"] = None  # a user message without text: turn 1 on
    return [
        good,
        out_of_order,
        unanswered,
        no_text,
        orphan,
        not_json,
        unknown,
        empty,
        reused,
        bad_tools,
        no_tools,
        parallel,
        {"id": "nothing", "conversation": []},
        weather_chat("lang", language="not a language!"),
    ]


def test_drop_reasons_are_counted_in_assistant_turns(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    path = write_lines(bad_conversations())
    result = prepare(path, tmp_path, seed=0, split_sizes=sizes(4), input_format="openai")
    dropped = result.summary["dropped_total"]
    assert dropped == {
        "invalid_conversation": 0,  # a record without messages has no turns to count
        "invalid_language": 2,
        "duplicate_conversation_id": 2,
        "unreadable_tools": 2,
        "no_tools": 2,
        "roles_out_of_order": 2,
        "unreadable_call": 2 + 2,  # arguments not JSON; two calls against parallel_tool_calls
        "unknown_tool": 2,
        "empty_assistant_turn": 1,
        "missing_content": 2,
        "tool_result_without_call": 1,
        "call_without_result": 1,
        "weight_zero": 0,
    }
    assert list(dropped) == list(CONVERSATION_DROP_REASONS)
    rows = rows_of(result.split_paths["test"])
    kept = sorted(row["example_id"] for row in rows)
    assert kept == ["empty:1", "good:1", "good:2", "orphan:1", "unanswered:1"]
    assert result.summary["read"]["en"] == 26 == len(kept) + sum(dropped.values())
    assert result.summary["input"]["rows"] == 14
    assert result.summary["conversations"] == {
        "train": 0,
        "validation": 0,
        "test": 4,
        "unassigned": 0,
        "without_examples": 10,
    }


def test_strict_stops_at_the_first_drop_naming_file_line_and_message(
    write_lines: WriteLines, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_lines(bad_conversations())
    out = tmp_path / "out"
    code = main(
        [
            "prepare",
            "--raw-data",
            str(path),
            "--out",
            str(out),
            "--train-size",
            "0",
            "--validation-size",
            "0",
            "--test-size",
            "1",
            "--input-format",
            "openai",
            "--strict",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert f"{path}:2: messages[1]: roles_out_of_order" in err
    assert not out.exists()


def test_json_array_errors_name_the_elements_line(tmp_path: Path) -> None:
    chats = [weather_chat("a"), weather_chat("b")]
    chats[1]["messages"][1]["tool_calls"][0]["function"]["arguments"] = "not json"
    path = tmp_path / "chats.json"
    path.write_text(json.dumps(chats, indent=2), encoding="utf-8")
    line = path.read_text(encoding="utf-8").splitlines().index("  {", 2) + 1
    with pytest.raises(DataError, match=rf"chats\.json:{line}: messages\[1\]: unreadable_call"):
        prepare(
            path, tmp_path / "o", seed=0, split_sizes=sizes(1), input_format="openai", strict=True
        )


def test_a_json_array_holds_one_object_per_conversation(tmp_path: Path) -> None:
    path = tmp_path / "chats.json"
    path.write_text(json.dumps([weather_chat("a"), 7]), encoding="utf-8")
    with pytest.raises(DataError, match=r"chats\.json: array element 2 is a JSON int"):
        prepare(path, tmp_path / "o", seed=0, split_sizes=sizes(1), input_format="openai")


def test_strict_names_a_record_without_turns(write_lines: WriteLines, tmp_path: Path) -> None:
    path = write_lines([weather_chat("a"), {"id": "b", "conversation": []}])
    with pytest.raises(DataError, match=r":2: the record: invalid_conversation"):
        prepare(path, tmp_path, seed=0, split_sizes=sizes(1), input_format="openai", strict=True)


def test_toolace_tools_are_found_after_prose_with_a_stray_quote(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    system = (
        'Measure with the 12" ruler [if asked]. Here is a list of functions in JSON format '
        f"that you can invoke:\n{json.dumps([WEATHER['function']])}. Use [func(a=1)]."
    )
    turns = [
        {"from": "user", "value": "Weather in Oslo?"},
        {"from": "assistant", "value": "[get_weather(city='Oslo')]"},
    ]
    path = write_lines([{"system": system, "conversations": turns}])
    result = prepare(path, tmp_path, seed=0, split_sizes=sizes(1), input_format="toolace")
    (row,) = rows_of(result.split_paths["test"])
    assert [tool["name"] for tool in row["tools"]] == ["get_weather"]
    assert row["messages"][0] == {"role": "system", "content": system}


def test_toolace_tools_named_in_words_are_read(write_lines: WriteLines, tmp_path: Path) -> None:
    tools = [
        {"name": "Weather Forecast", "parameters": {"type": "object", "properties": {}}},
        {"name": "Weather", "parameters": {"type": "object", "properties": {}}},
    ]
    system = f"Here is a list of functions in JSON format that you can invoke:\n{json.dumps(tools)}"
    turns = [
        {"from": "user", "value": "Forecast for Oslo, and the weather in Rome?"},
        {
            "from": "assistant",
            "value": "[Weather Forecast(city='Oslo, Weather Forecast(x)'), Weather(city='Rome')]",
        },
        {"from": "tool", "value": '[{"temp_c": 5}, {"temp_c": 18}]'},
        {"from": "assistant", "value": "Oslo will be 5 °C; Rome is at 18 °C."},
        {"from": "user", "value": "And Bergen?"},
        {"from": "assistant", "value": "[Weather Forecast(from='Bergen')]"},
    ]
    path = write_lines([{"system": system, "conversations": turns}])
    result = prepare(path, tmp_path, seed=0, split_sizes=sizes(1), input_format="toolace")
    row, answer = rows_of(result.split_paths["test"])
    # one result per parallel call, split from ToolACE's one tool turn
    assert answer["messages"][-2:] == [
        {"role": "tool", "content": '{"temp_c":5}'},
        {"role": "tool", "content": '{"temp_c":18}'},
    ]
    assert row["gold_calls"] == [
        {"name": "Weather Forecast", "arguments": {"city": "Oslo, Weather Forecast(x)"}},
        {"name": "Weather", "arguments": {"city": "Rome"}},
    ]
    assert result.summary["dropped_total"]["unreadable_call"] == 1  # `from` is Python's


def hermes(value: str) -> dict[str, Any]:
    system = "Call tools. <tools></tools> <tools> [" + json.dumps(WEATHER) + "] </tools>"
    return {
        "conversations": [
            {"from": "system", "value": system},
            {"from": "human", "value": "Weather?"},
            {"from": "gpt", "value": value},
        ]
    }


def test_python_literal_call_text_is_never_evaluated(
    write_lines: WriteLines, tmp_path: Path
) -> None:
    marker = tmp_path / "evaluated"
    attack = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    path = write_lines(
        [
            hermes("<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Oslo'}}</tool_call>"),
            hermes(f"<tool_call>{attack}</tool_call>"),
            hermes("<tool_call>{'name': 'get_weather', 'arguments': " + attack + "}</tool_call>"),
            hermes("<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Oslo'}}"),
        ]
    )
    result = prepare(path, tmp_path / "o", seed=0, split_sizes=sizes(1), input_format="hermes_fc")
    assert not marker.exists()
    assert result.summary["dropped_total"]["unreadable_call"] == 3  # the last one: unclosed
    (row,) = rows_of(result.split_paths["test"])
    assert row["gold_calls"] == [{"name": "get_weather", "arguments": {"city": "Oslo"}}]


def test_conversation_formats_refuse_xlam_only_options(tmp_path: Path) -> None:
    source = SOURCES / "openai.jsonl"
    with pytest.raises(ConfigError, match="keep-multi-call"):
        prepare(source, tmp_path, seed=0, split_sizes=sizes(1), input_format="openai",
                keep_multi_call=True)  # fmt: skip
    with pytest.raises(ConfigError, match="--strict"):
        prepare(SOURCES.parent.parent / "demo" / "data" / "raw.jsonl", tmp_path, seed=0,
                split_sizes=sizes(1), strict=True)  # fmt: skip
    with pytest.raises(ConfigError, match=r"unknown input format 'nope'.*glaive"):
        prepare(source, tmp_path, seed=0, split_sizes=sizes(1), input_format="nope")
    assert not any(tmp_path.iterdir())


_PLUGIN = """
from sommelier_mlflow.data import SourceConversation, conversation_format, register_input_format

TOOL = {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def read(record):
    call = {"type": "function", "function": {"name": "get_weather", "arguments": record["a"]}}
    return SourceConversation(
        messages=[
            {"role": "user", "content": record["q"]},
            {"role": "assistant", "content": None, "tool_calls": [call]},
        ],
        labels=["q", "a"],
        tools=[TOOL],
    )


register_input_format(conversation_format("qa_pairs", "A question and its call.", read))
"""


def test_an_installed_plugin_format_is_loaded_by_its_entry_point(
    write_lines: WriteLines, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sommelier_mlflow._plugins import INPUT_FORMATS_GROUP
    from sommelier_mlflow.data._input_formats import _INPUT_FORMATS
    from tests.test_plugins import _install_plugin

    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.delitem(sys.modules, "toy_plugin_module", raising=False)
    monkeypatch.setattr(_INPUT_FORMATS, "_plugins_loaded", False)
    _install_plugin(root, _PLUGIN, "toy_plugin_module", INPUT_FORMATS_GROUP)
    path = write_lines([{"q": "Weather in Rome?", "a": {"city": "Rome"}}])
    try:
        result = prepare(path, tmp_path, seed=0, split_sizes=sizes(1), input_format="qa_pairs")
    finally:
        if "qa_pairs" in _INPUT_FORMATS._items:
            _INPUT_FORMATS.unregister("qa_pairs")
    (row,) = rows_of(result.split_paths["test"])
    assert row["gold_calls"] == [{"name": "get_weather", "arguments": {"city": "Rome"}}]
    assert row["example_id"] == "conversation-1:1"


def long_chat(turns: int) -> dict[str, Any]:
    """One conversation of ``turns`` call-and-result steps; all but the first turn weigh 0."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Check the weather often."}]
    for index in range(turns):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("get_weather", '{"city": "Oslo"}', f"c{index}")],
                **({"weight": 0} if index else {}),
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"c{index}", "content": "5"})
    return {"id": "long", "messages": messages, "tools": [WEATHER]}


def test_a_conversation_of_10000_turns_reads_in_linear_time(tmp_path: Path) -> None:
    files = {}
    for turns in (1_000, 10_000):
        files[turns] = tmp_path / f"long{turns}.jsonl"
        files[turns].write_text(json.dumps(long_chat(turns)) + "\n", encoding="utf-8")

    def run(turns: int) -> None:
        result = prepare(
            files[turns], tmp_path / "out", seed=0, split_sizes=sizes(1), input_format="openai"
        )
        assert result.summary["read"] == {"en": turns}
        assert result.summary["dropped_total"]["weight_zero"] == turns - 1

    growth_ratios(run, (1_000, 10_000), bound=30, repeats=2)


def test_a_10_mb_conversation_reads_in_linear_time(tmp_path: Path) -> None:
    files = {}
    for megabytes in (1, 10):
        chat = weather_chat("big")
        chat["messages"][2]["content"] = "x" * (megabytes * 1_000_000)
        files[megabytes] = tmp_path / f"big{megabytes}.jsonl"
        files[megabytes].write_text(json.dumps(chat) + "\n", encoding="utf-8")

    def run(megabytes: int) -> None:
        result = prepare(
            files[megabytes], tmp_path / "out", seed=0, split_sizes=sizes(1), input_format="openai"
        )
        assert result.summary["kept"] == {"en": 2}

    growth_ratios(run, (1, 10), bound=30, repeats=2)


def test_imported_rows_read_as_a_test_split(tmp_path: Path) -> None:
    result = prepare(
        SOURCES / "openai.jsonl", tmp_path, seed=0, split_sizes=sizes(4), input_format="openai"
    )
    split = read_test_split(result.split_paths["test"])
    examples = {example.example_id: example for example in split.examples}
    assert examples["oa-1:2"].turn == 2  # type: ignore[attr-defined]
    assert examples["oa-1:2"].conversation_id == "oa-1"  # type: ignore[attr-defined]
    assert examples["oa-1:1"].gold_calls == (
        {"name": "get_weather", "arguments": {"city": "Lyon"}},
    )
