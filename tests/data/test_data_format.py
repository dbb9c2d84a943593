from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json, loads, sha256_text
from sommelier_mlflow.data import (
    SYSTEM_INSTRUCTION,
    TestExample,
    build_messages,
    format_examples,
    read_test_split,
    render_target,
    write_test_split,
)
from sommelier_mlflow.errors import (
    ConfigError,
    DependencyError,
    InputError,
    InvariantViolationError,
)
from tests.data.data_helpers import SCHEMA_TOOL, WEATHER_CALL, WEATHER_TOOL

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
NO_SYSTEM_TEMPLATE = (
    "{% for m in messages %}{% if m['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}{{ m['content'] }}{% endfor %}"
)


def build_tokenizer(directory: Path, chat_template: str | None) -> Any:
    """Train a tiny word-level tokenizer, save it like a model repo, reload it via AutoTokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    core = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(special_tokens=["[UNK]", "<s>", "</s>"])
    core.train_from_iterator(["what is the weather in Paris", "call one tool"], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core, unk_token="[UNK]", bos_token="<s>", eos_token="</s>"
    )
    if chat_template is not None:
        fast.chat_template = chat_template
    fast.save_pretrained(directory)
    return AutoTokenizer.from_pretrained(directory)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_tokenizer(tmp_path_factory.mktemp("tok"), TEMPLATE)


@pytest.fixture(scope="module")
def plain_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_tokenizer(tmp_path_factory.mktemp("plain"), None)


def example(example_id: str = "a", **overrides: Any) -> TestExample:
    fields: dict[str, Any] = {
        "example_id": example_id,
        "language": "en",
        "query": "What is the weather in Paris?",
        "tools": [WEATHER_TOOL, SCHEMA_TOOL],
        "gold_call": WEATHER_CALL,
    }
    fields.update(overrides)
    return TestExample(**fields)


def test_messages_carry_instruction_canonical_tools_and_query() -> None:
    system, user = build_messages(example())
    assert system["role"] == "system" and user == {
        "role": "user",
        "content": "What is the weather in Paris?",
    }
    assert system["content"].startswith(SYSTEM_INSTRUCTION)
    tools_json = system["content"].rsplit("\n", 1)[1]
    assert tools_json == canonical_json([WEATHER_TOOL, SCHEMA_TOOL])
    assert loads(tools_json) == [WEATHER_TOOL, SCHEMA_TOOL]


def test_messages_do_not_depend_on_key_order() -> None:
    reordered = [dict(reversed(list(tool.items()))) for tool in (WEATHER_TOOL, SCHEMA_TOOL)]
    assert build_messages(example(tools=reordered)) == build_messages(example())


def test_instruction_asks_for_exactly_one_json_call() -> None:
    assert "exactly one" in SYSTEM_INSTRUCTION
    assert '{"name"' in SYSTEM_INSTRUCTION and '"arguments"' in SYSTEM_INSTRUCTION
    assert "nothing else" in SYSTEM_INSTRUCTION


def test_render_target_is_canonical_json() -> None:
    call = {"arguments": {"city": "Zürich", "days": 2}, "name": "get_weather"}
    expected = '{"arguments":{"city":"Z\\u00fcrich","days":2},"name":"get_weather"}'
    assert render_target(call) == expected


@pytest.mark.parametrize(
    "call",
    [{"name": "f"}, {"name": "", "arguments": {}}, {"name": "f", "arguments": [], "x": 1}],
)
def test_render_target_refuses_non_calls(call: dict[str, Any]) -> None:
    with pytest.raises(InputError):
        render_target(call)


def test_format_renders_with_the_chat_template(tokenizer: Any) -> None:
    (formatted,) = format_examples([example()], tokenizer)
    system, user = build_messages(example())
    expected = (
        f"<s><|system|>\n{system['content']}<|end|>\n"
        f"<|user|>\n{user['content']}<|end|>\n<|assistant|>\n"
    )
    assert formatted.prompt_text == expected
    assert formatted.prompt_sha256 == sha256_text(expected)
    assert replace(formatted, prompt_text=None, prompt_sha256=None) == example()


def test_formatted_split_round_trips_and_replays(tokenizer: Any, tmp_path: Path) -> None:
    formatted = format_examples([example("a"), example("b", query="Weather in Nice?")], tokenizer)
    path = write_test_split(tmp_path / "test.jsonl", formatted)
    reread = read_test_split(path).examples
    assert reread == tuple(formatted)
    assert format_examples(reread, tokenizer) == formatted


def test_stored_prompt_is_replayed_byte_for_byte(tokenizer: Any) -> None:
    stored = "  hand-made prompt\r\n<|assistant|>"
    row = example(prompt_text=stored, prompt_sha256=sha256_text(stored))
    (replayed,) = format_examples([row], tokenizer)
    assert replayed.prompt_text == stored and replayed is row


def test_replay_without_a_template_is_fine(plain_tokenizer: Any) -> None:
    row = example(prompt_text="P", prompt_sha256=sha256_text("P"))
    assert format_examples([row], plain_tokenizer) == [row]


def test_tampered_prompt_is_an_invariant_violation(tokenizer: Any) -> None:
    row = example(prompt_text="P", prompt_sha256=sha256_text("Q"))
    with pytest.raises(InvariantViolationError, match="'a'") as info:
        format_examples([row], tokenizer)
    assert info.value.exit_code == 5


def test_tokenizer_without_chat_template(plain_tokenizer: Any) -> None:
    assert not plain_tokenizer.chat_template
    with pytest.raises(DependencyError, match="no chat template") as info:
        format_examples([example()], plain_tokenizer)
    assert info.value.exit_code == 3


def test_template_that_refuses_a_system_message(tmp_path: Path) -> None:
    # The template's own words and the example, exit 2: the template is the user's input.
    strict = build_tokenizer(tmp_path, NO_SYSTEM_TEMPLATE)
    with pytest.raises(
        ConfigError,
        match=r"chat template of tokenizer '.*' failed on example 'a': "
        r"TemplateError: System role not supported",
    ) as info:
        format_examples([example()], strict)
    assert info.value.exit_code == 2


def test_data_package_does_not_import_heavy_dependencies() -> None:
    code = (
        "import sys, sommelier_mlflow.data; "
        "heavy = [m for m in ('transformers', 'torch', 'mlflow', 'peft') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(root), "PATH": ""},
    )
    assert result.returncode == 0, result.stdout + result.stderr
