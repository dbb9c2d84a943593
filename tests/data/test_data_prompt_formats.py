"""Prompt formats: the product's own (default, digests unchanged) and the tokenizer's native one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import dumps_line, loads, sha256_text
from sommelier_mlflow.data import (
    TestExample,
    build_messages,
    check_prompt_formats,
    format_examples,
    prompt_format_names,
    read_chat_template_kwargs,
    read_test_split,
    tool_schemas,
    write_test_split,
)
from sommelier_mlflow.errors import ConfigError, DataError
from tests.data.data_helpers import SCHEMA_TOOL, WEATHER_CALL, WEATHER_TOOL
from tests.data.test_data_format import TEMPLATE, build_tokenizer

# Hermes-style: the tools as JSON inside <tools> in the system turn.
HERMES_TEMPLATE = (
    "{% if tools %}<|system|>\n<tools>{% for t in tools %}{{ t | tojson }}{% endfor %}</tools>"
    "<|end|>\n{% endif %}"
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@pytest.fixture(scope="module")
def hermes(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_tokenizer(tmp_path_factory.mktemp("hermes"), HERMES_TEMPLATE)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_tokenizer(tmp_path_factory.mktemp("plain"), TEMPLATE)


def _example(**overrides: Any) -> TestExample:
    fields: dict[str, Any] = {
        "example_id": "ex-1",
        "language": "en",
        "query": "weather in Paris?",
        "tools": [WEATHER_TOOL, SCHEMA_TOOL],
        "gold_call": WEATHER_CALL,
    }
    return TestExample(**(fields | overrides))


def test_both_formats_are_registered() -> None:
    assert {"native", "sommelier"} <= set(prompt_format_names())


def test_sommelier_is_the_default_and_its_prompt_is_unchanged(plain: Any) -> None:
    default = format_examples([_example()], plain)[0]
    named = format_examples([_example()], plain, prompt_format="sommelier")[0]
    expected = plain.apply_chat_template(
        build_messages(_example()), tokenize=False, add_generation_prompt=True
    )
    assert default.prompt_text == named.prompt_text == expected
    assert default.prompt_format == "sommelier"
    assert "prompt_format" not in default.to_json()  # default rows keep their bytes


def test_native_renders_the_tools_with_the_template_and_no_instruction(hermes: Any) -> None:
    [example] = format_examples([_example()], hermes, prompt_format="native")
    assert example.prompt_format == "native"
    text = example.prompt_text or ""
    assert text.startswith("<|system|>\n<tools>") and "exactly one" not in text
    assert "<|user|>\nweather in Paris?<|end|>\n<|assistant|>\n" in text
    assert example.prompt_sha256 == sha256_text(text)
    # A flat parameter map becomes a JSON Schema object with JSON Schema types;
    # a schema is kept as it is.
    schemas = tool_schemas([WEATHER_TOOL, SCHEMA_TOOL])
    assert schemas[0]["function"]["parameters"] == {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    }
    assert schemas[1] == {"type": "function", "function": SCHEMA_TOOL}


def test_native_takes_an_optional_system_prompt_sommelier_does_not(hermes: Any, plain: Any) -> None:
    [example] = format_examples(
        [_example()], hermes, prompt_format="native", system_prompt="Be brief."
    )
    assert "<|system|>\nBe brief.<|end|>" in (example.prompt_text or "")
    with pytest.raises(ConfigError, match="--system-prompt applies"):
        format_examples([_example()], plain, system_prompt="Be brief.")


def test_a_template_that_ignores_tools_is_refused_naming_the_tokenizer(plain: Any) -> None:
    with pytest.raises(ConfigError, match=r"tokenizer '.*plain.*' ignores `tools`") as info:
        format_examples([_example()], plain, prompt_format="native")
    assert info.value.exit_code == 2


def test_an_unknown_prompt_format_lists_the_registered_ones(plain: Any) -> None:
    with pytest.raises(ConfigError, match=r"unknown prompt format 'chatml'; registered: .*native"):
        format_examples([_example()], plain, prompt_format="chatml")


def test_a_split_rendered_in_one_format_is_refused_for_another(
    hermes: Any, plain: Any, tmp_path: Path
) -> None:
    native = format_examples([_example()], hermes, prompt_format="native")
    path = write_test_split(tmp_path / "native.jsonl", native)
    row = loads(path.read_bytes())
    assert row["prompt_format"] == "native"
    split = read_test_split(path)
    assert split.examples[0].prompt_format == "native"
    with pytest.raises(ConfigError, match="rendered with prompt_format 'native', not 'sommelier'"):
        format_examples(split.examples, plain)
    # Replayed in its own format it is kept byte for byte.
    assert format_examples(split.examples, plain, prompt_format="native") == list(split.examples)
    sommelier = write_test_split(tmp_path / "s.jsonl", format_examples([_example()], plain))
    with pytest.raises(ConfigError, match="prompt_format 'sommelier', not 'native'"):
        format_examples(read_test_split(sommelier).examples, hermes, prompt_format="native")
    # A row may not claim a format without a prompt.
    bare = dict(row)
    del bare["prompt_text"], bare["prompt_sha256"]
    (tmp_path / "bare.jsonl").write_bytes(dumps_line(bare))
    with pytest.raises(DataError, match="'prompt_format' names how 'prompt_text'"):
        read_test_split(tmp_path / "bare.jsonl")


# Templates that fail in each way the product names (the tokenizer, the example, the cause).
LOOPING_TEMPLATE = "{% macro deeper(n) %}{{ deeper(n + 1) }}{% endmacro %}{{ deeper(0) }}"
HUGE_TEMPLATE = "{% for i in range(60000) %}{{ messages[-1]['content'] }}{% endfor %}"
RANDOM_TEMPLATE = "{{ lipsum(1, html=False) }}{% for m in messages %}{{ m['content'] }}{% endfor %}"


@pytest.mark.parametrize(
    ("template", "cause"),
    [
        (LOOPING_TEMPLATE, "recursed without end on example 'ex-1' \\(RecursionError"),
        (HUGE_TEMPLATE, "rendered 1,020,000 characters for example 'ex-1', more than the"),
        (RANDOM_TEMPLATE, "renders example 'ex-1' differently each time it is called"),
    ],
)
def test_a_template_that_loops_overflows_or_varies_is_exit_2_naming_tokenizer_and_example(
    tmp_path: Path, template: str, cause: str
) -> None:
    tokenizer = build_tokenizer(tmp_path / "bad", template)
    with pytest.raises(ConfigError, match=rf"tokenizer '.*bad' {cause}") as info:
        format_examples([_example(query="x" * 17)], tokenizer)
    assert info.value.exit_code == 2


def test_chat_template_kwargs_reach_the_template_and_the_row(tmp_path: Path) -> None:
    tokenizer = build_tokenizer(
        tmp_path / "kw",
        "{{ greeting }}|{{ flag }}|{% for m in messages %}{{ m['content'] }}{% endfor %}",
    )
    [example] = format_examples(
        [_example()], tokenizer, chat_template_kwargs='{"greeting": "hi", "flag": false}'
    )
    assert (example.prompt_text or "").startswith("hi|False|")
    assert example.chat_template_kwargs == {"flag": False, "greeting": "hi"}
    path = write_test_split(tmp_path / "kw.jsonl", [example])
    [read] = read_test_split(path).examples
    assert read.chat_template_kwargs == {"flag": False, "greeting": "hi"}
    # Replayed with the same variables it is kept; with others, refused naming the field.
    assert format_examples(
        [read], tokenizer, chat_template_kwargs={"flag": False, "greeting": "hi"}
    ) == [read]
    with pytest.raises(ConfigError, match="rendered with chat_template_kwargs"):
        format_examples([read], tokenizer)
    with pytest.raises(ConfigError, match="rendered with chat_template_kwargs"):
        check_prompt_formats([read], "sommelier", {"flag": True, "greeting": "hi"})


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("{enable_thinking: false}", "is not JSON"),
        ("[1]", "must be a JSON object"),
        ('{"tools": []}', "may not set tools"),
        (
            '{"add_generation_prompt": false, "messages": []}',
            "may not set add_generation_prompt, messages",
        ),
        ('{"a": 1, "a": 2}', "is not JSON"),
    ],
)
def test_bad_chat_template_kwargs_are_exit_2(given: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        read_chat_template_kwargs(given)
    assert info.value.exit_code == 2
    assert read_chat_template_kwargs("") == read_chat_template_kwargs(None) == {}


def test_the_template_date_is_the_templates_clock_and_the_rows(tmp_path: Path) -> None:
    tokenizer = build_tokenizer(
        tmp_path / "day",
        "{{ strftime_now('%Y-%m-%d') }}|{% for m in messages %}{{ m['content'] }}{% endfor %}",
    )
    with pytest.raises(ConfigError, match=r"writes the date.*--template-date"):
        format_examples([_example()], tokenizer)
    [example] = format_examples([_example()], tokenizer, template_date="2024-07-26")
    assert (example.prompt_text or "").startswith("2024-07-26|")
    path = write_test_split(tmp_path / "day.jsonl", [example])
    assert loads(path.read_text().splitlines()[0])["template_date"] == "2024-07-26"
    [read] = read_test_split(path).examples
    assert read.template_date == "2024-07-26"
    # Replayed on the same day it is kept; on none or another day, refused naming the field.
    assert format_examples([read], tokenizer, template_date="2024-07-26") == [read]
    for other in (None, "2024-07-27"):
        with pytest.raises(ConfigError, match="rendered with template_date 2024-07-26"):
            format_examples([read], tokenizer, template_date=other)
    # A row whose day is not a date is refused naming the line.
    row = loads(path.read_text().splitlines()[0])
    row["template_date"] = "26 Jul 2024"
    path.write_bytes(dumps_line(row))
    with pytest.raises(DataError, match=r"day\.jsonl:1: .*--template-date must be a calendar"):
        read_test_split(path)
