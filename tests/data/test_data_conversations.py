"""Conversation rows: a held-out conversation, every assistant turn an example (issue 32).

The split in ``tests/support/conversations.py`` is read, written back,
rendered in both prompt formats and refused, with file, line and message
index, wherever a history cannot be trusted.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import loads, sha256_text
from sommelier_mlflow.data import (
    SYSTEM_INSTRUCTION,
    DatasetRef,
    TestExample,
    conversation_slice_values,
    conversation_text,
    dataset_records,
    format_examples,
    messages_problem,
    read_dataset_records,
    read_test_split,
    write_test_split,
)
from sommelier_mlflow.errors import DataError
from tests.data.data_helpers import WriteLines
from tests.support.conversations import TOOLS, conversation_rows, write_conversation_split
from tests.support.timing import growth_ratios


def _row(example_id: str) -> dict[str, Any]:
    return copy.deepcopy(
        next(row for row in conversation_rows() if row["example_id"] == example_id)
    )


def test_every_assistant_turn_is_read_as_an_example_of_its_conversation(tmp_path: Path) -> None:
    split = read_test_split(write_conversation_split(tmp_path / "split.jsonl"))
    by_id = split.by_id()
    assert len(split.examples) == 10
    later = by_id["c2-t2"]
    assert (later.conversation_id, later.turn) == ("c2", 2)
    assert later.messages is not None and [m["role"] for m in later.messages] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]
    assert later.gold_calls == (
        {"name": "book_hotel", "arguments": {"city": "Paris", "nights": 2}},
    )
    assert by_id["c1-t2"].gold_calls == ()  # a text answer after a tool result: abstention
    assert len(by_id["c3-t1"].gold_calls) == 2  # parallel calls
    # The query is only a label: the last user message.
    assert by_id["c4-t3"].query == "Und in München?" and by_id["c4-t3"].language == "de"


def test_a_conversation_split_written_back_reads_the_same(tmp_path: Path) -> None:
    source = write_conversation_split(tmp_path / "split.jsonl")
    examples = read_test_split(source).examples
    again = write_test_split(tmp_path / "again.jsonl", examples)
    assert read_test_split(again).examples == examples
    rows = [loads(line) for line in again.read_bytes().splitlines()]
    assert all("query" not in row and "messages" in row for row in rows)
    assert rows == [{**row, "source_example_id": None} for row in conversation_rows()]


def test_single_turn_rows_are_written_without_conversation_fields() -> None:
    row = TestExample(
        "q1", "en", "Weather in Oslo?", TOOLS, {"name": "get_weather", "arguments": {}}
    )
    assert list(row.to_json()) == [
        "schema_version",
        "example_id",
        "language",
        "source_example_id",
        "query",
        "tools",
        "gold_calls",
    ]


def _bad(row: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    row[key] = value
    return row


def _messages(example_id: str, edit: Any) -> dict[str, Any]:
    row = _row(example_id)
    edit(row["messages"])
    return row


BAD_ROWS = {
    "roles out of order": (
        _messages("c1-t2", lambda m: m.insert(0, {"role": "assistant", "content": "hi"})),
        r"messages\[0\] \(assistant\) is out of order",
    ),
    "tool answering no call": (
        _messages("c1-t2", lambda m: m[2].update(tool_call_id="nope")),
        r"messages\[2\] \(tool\) answers no tool call",
    ),
    "assistant with neither content nor calls": (
        _messages("c1-t2", lambda m: m[1].update(tool_calls=[])),
        r"messages\[1\] \(assistant\) has neither content nor tool calls",
    ),
    "arguments not an object": (
        _messages("c1-t2", lambda m: m[1]["tool_calls"][0]["function"].update(arguments="{}")),
        r"messages\[1\] \(assistant\) tool_calls\[0\] calls 'get_weather' with arguments that "
        r"are not a JSON object",
    ),
    "a call to a tool not offered": (
        _messages("c1-t2", lambda m: m[1]["tool_calls"][0]["function"].update(name="fly")),
        r"messages\[1\] .* calls tool 'fly', which the row does not offer",
    ),
    "a call without its result": (
        _messages("c1-t2", lambda m: m.pop()),
        r"messages\[1\] is a assistant message|messages\[1\]: 1 tool call",
    ),
    "both query and messages": (_bad(_row("c1-t1"), "query", "q"), r"exactly one of 'query'"),
    "neither query nor messages": (
        {k: v for k, v in _row("c1-t1").items() if k != "messages"},
        r"missing field 'query' \(a string\); a conversation row gives 'messages'",
    ),
    "turn that does not count the history": (
        _bad(_row("c2-t3"), "turn", 2),
        r"'turn' is 2 but the history holds 2 assistant message\(s\)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_ROWS))
def test_a_history_that_cannot_be_trusted_is_refused_naming_line_and_message(
    write_lines: WriteLines, case: str
) -> None:
    row, message = BAD_ROWS[case]
    path = write_lines([_row("c3-t1"), row])
    with pytest.raises(DataError, match=message) as info:
        read_test_split(path)
    assert info.value.exit_code == 2 and str(info.value).startswith(f"{path}:2: ")


def test_a_conversation_id_reused_by_a_row_with_other_tools_is_refused(
    write_lines: WriteLines,
) -> None:
    other = _row("c3-t1")
    other["example_id"], other["conversation_id"], other["tools"] = "x", "c1", TOOLS[:1]
    path = write_lines([_row("c1-t1"), other])
    with pytest.raises(DataError, match=r"conversation_id 'c1' is reused.*line 1") as info:
        read_test_split(path)
    assert info.value.line == 2


def _history(turns: int) -> list[dict[str, Any]]:
    """A user question, a call, its result and an answer per turn, then a last question."""
    messages: list[dict[str, Any]] = []
    for index in range(turns):
        messages += [
            {"role": "user", "content": f"q{index}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"id{index}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": {"city": "Oslo"}},
                    }
                ],
            },
            {"role": "tool", "content": "{}", "tool_call_id": f"id{index}"},
            {"role": "assistant", "content": f"a{index}"},
        ]
    return [*messages, {"role": "user", "content": "last"}]


def test_a_history_of_ten_thousand_turns_is_checked_in_linear_time() -> None:
    histories = {turns: _history(turns) for turns in (1_000, 10_000)}
    messages = histories[10_000]
    # CPU time grows ~10x per tenfold step when linear (a rescan per turn: ~100x).
    growth_ratios(
        lambda n: messages_problem(histories[n], TOOLS, 2 * n + 1), list(histories), bound=30
    )
    assert messages_problem(messages, TOOLS, 20_001) is None
    assert conversation_slice_values(messages) == (("after", "user"), ("turn", "2+"))
    # A user message right after a tool result skips the assistant's reading of it.
    assert messages_problem(messages[:3] + messages[-1:], TOOLS) == (
        "messages[3] (user) is out of order: it cannot follow a tool message"
    )


class _Echo:
    """A tokenizer whose template writes every message it is given, one per line."""

    chat_template = "echo"

    def apply_chat_template(self, conversation: list[dict[str, Any]], **kwargs: Any) -> str:
        lines = [f"{m['role']}|{m.get('content')}|{m.get('tool_calls')}" for m in conversation]
        return "\n".join([*lines, str(kwargs.get("tools", "")), "<gen>"])


def test_the_sommelier_format_writes_the_history_as_a_transcript(tmp_path: Path) -> None:
    examples = read_test_split(write_conversation_split(tmp_path / "split.jsonl")).by_id()
    first, later = format_examples([examples["c1-t1"], examples["c2-t2"]], _Echo())
    # A history of one user message renders exactly as the same single-turn query.
    single = TestExample("c1-t1", "en", "What's the weather in Oslo?", TOOLS, gold_calls=[])
    assert first.prompt_sha256 == format_examples([single], _Echo())[0].prompt_sha256
    assert later.messages is not None
    assert conversation_text(later.messages) == (
        "Conversation so far:\n\nSystem: You plan trips.\n\n"
        "User: Find me a flight to Paris, then book two nights there.\n\n"
        'Assistant calls: [{"arguments":{"destination":"Paris"},"name":"search_flights"}]\n\n'
        'Tool result (search_flights): {"flight": "AF123"}\n\n'
        "Reply with the next assistant turn."
    )
    assert later.prompt_text is not None and SYSTEM_INSTRUCTION in later.prompt_text


def test_native_renders_the_history_as_transformers_templates_take_it(tmp_path: Path) -> None:
    examples = read_test_split(write_conversation_split(tmp_path / "split.jsonl")).by_id()
    (rendered,) = format_examples(
        [examples["c2-t3"]], _Echo(), prompt_format="native", system_prompt="Be brief."
    )
    text = rendered.prompt_text or ""
    lines = text.splitlines()
    # The given system prompt comes first in the conversation's own system message.
    assert lines[0] == "system|Be brief."
    assert lines[2] == "You plan trips.|None"
    assert (
        "assistant|None|[{'id': 'f1', 'type': 'function', 'function': {'name': 'search_flights', "
        "'arguments': {'destination': 'Paris'}}}]" in lines
    )
    assert 'tool|{"booking": "H-9"}|None' in lines
    assert rendered.prompt_sha256 == sha256_text(text)  # the digest covers the whole prefix


def test_conversation_rows_go_through_evaluation_dataset_records_and_back(tmp_path: Path) -> None:
    examples = read_test_split(write_conversation_split(tmp_path / "split.jsonl")).examples
    records = [
        {"record_id": f"r-{index}", **record}
        for index, record in enumerate(dataset_records(examples, source="split.jsonl"))
    ]
    assert all("messages" in r["inputs"] and "query" not in r["inputs"] for r in records)
    ref = DatasetRef(name="conversations", dataset_id="d-" + "0" * 32, digest="0a1b2c3d")
    split = read_dataset_records(records, source="mlflow-dataset:conversations", dataset=ref)
    assert list(split.examples) == sorted(examples, key=lambda example: example.example_id)
