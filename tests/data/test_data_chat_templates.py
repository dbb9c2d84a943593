"""Real-world chat templates (specimens) render every bundled split, and refuse what they hide.

Each specimen in ``tests/fixtures/chat_templates/`` behaves like a template
tool-calling models ship (Hermes 3 / vLLM hermes, Mistral v0.3 as in vLLM's
example and Mistral's v11 tokenizers, Llama 3.1/3.2 and 3.3, Qwen2.5, Qwen3,
Qwen3-Coder/Qwen3.5, gpt-oss, Gemma 4), set on a copy of the demo tokenizer as
a user would. The bundled splits are rendered through each with
``--prompt-format native``: no error, the tools shown as JSON Schema, a system
prompt honoured or refused, and digests that do not depend on the day (a
template that writes today's date with no variable to pin it is refused
unless ``--template-date`` fixes its clock).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import dumps_line, loads
from sommelier_mlflow.data import (
    TestExample,
    format_examples,
    import_bfcl,
    read_test_split,
    tool_schemas,
)
from sommelier_mlflow.errors import ConfigError
from tests.support.chat_templates import REPO, SPECIMEN_NAMES, specimen_tokenizer
from tests.support.conversations import write_conversation_split

EXAMPLES = REPO / "examples"
#: A parameter type written the Python way, as JSON in a rendered prompt.
PYTHON_TYPE = re.compile(
    r'"type": ?"(?:(?:str|int|float|bool|list|dict|tuple|any)"|(?:List|Dict|Optional|Tuple)\[)'
)
#: The date every prompt rendered with date_string pinned shows.
PINNED = {"date_string": "26 Jul 2024"}
#: What each specimen needs to render the same prompt on every day.
KWARGS = {"llama31": PINNED}
#: A system prompt of one's own: Mistral v11's default one carries today's date.
SYSTEM_PROMPTS = {"mistral_v11": "You are a helpful assistant."}
#: Specimens whose every prompt writes today's date, with no variable to pin it (gpt-oss):
#: rendered on a fixed day (--template-date).
DATED = ("gpt_oss",)
TEMPLATE_DAY = "2024-07-26"
TEMPLATE_DATES = dict.fromkeys(DATED, TEMPLATE_DAY)
#: The types JSON Schema names; Qwen3-Coder's template writes each parameter's in <type>.
SCHEMA_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}
#: A TypeScript parameter (gpt-oss) typed with a Python name instead of JSON Schema's.
TS_PYTHON_TYPE = re.compile(r"^\w+\??: (?:str|int|float|bool|dict|tuple|list)\b", re.M)


@pytest.fixture(scope="module")
def specimens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("specimens")
    return {name: specimen_tokenizer(root / name, name) for name in SPECIMEN_NAMES}


def _without_prompts(path: Path, out: Path) -> list[TestExample]:
    """A formatted split's rows as unformatted ones, to render them again."""
    lines = []
    for line in path.read_bytes().splitlines():
        row = loads(line)
        for key in ("prompt_text", "prompt_sha256", "prompt_format"):
            row.pop(key, None)
        lines.append(dumps_line(row))
    out.write_bytes(b"".join(lines))
    return list(read_test_split(out).examples)


def _demo_examples() -> list[TestExample]:
    """The demo's raw rows, one per distinct tool list (every schema the demo offers)."""
    seen: set[str] = set()
    examples = []
    for line in (EXAMPLES / "demo" / "data" / "raw.jsonl").read_bytes().splitlines():
        row = loads(line)
        answers = loads(row["answers"])
        if row["tools"] in seen or len(answers) != 1:
            continue
        seen.add(row["tools"])
        examples.append(
            TestExample(
                row["example_id"], row["language"], row["query"], loads(row["tools"]), answers[0]
            )
        )
    return examples


@pytest.fixture(scope="module")
def splits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[TestExample]]:
    root = tmp_path_factory.mktemp("splits")
    bfcl = import_bfcl(EXAMPLES / "bfcl" / "data", root / "bfcl" / "split.jsonl")
    return {
        "demo": _demo_examples(),
        "native": _without_prompts(
            EXAMPLES / "native" / "data" / "test_split.jsonl", root / "native.jsonl"
        ),
        "calls": _without_prompts(
            EXAMPLES / "calls" / "data" / "test_split.jsonl", root / "calls.jsonl"
        ),
        "bfcl": list(read_test_split(bfcl.split_path, slice_by=("category",)).examples),
        "conversations": list(
            read_test_split(write_conversation_split(root / "conversations.jsonl")).examples
        ),
    }


def test_the_specimens_are_one_per_family_of_the_readme() -> None:
    assert SPECIMEN_NAMES == (
        "gemma4",
        "gpt_oss",
        "hermes",
        "llama31",
        "llama33",
        "mistral",
        "mistral_v11",
        "qwen25",
        "qwen3",
        "qwen3_coder",
    )


def _shows_json_schema_types(text: str) -> bool:
    """No parameter type in the prompt is written the Python way, in any notation.

    JSON (most templates), Qwen3-Coder's ``<type>`` elements, gpt-oss's TypeScript and
    Gemma 4's ``type:<|"|>STRING<|"|>`` (upper case, empty for a parameter of any type).
    """
    xml_types = re.findall(r"<type>(.*?)</type>", text)
    gemma_types = re.findall(r'type:<\|"\|>(.*?)<\|"\|>', text)
    return (
        not PYTHON_TYPE.search(text)
        and not TS_PYTHON_TYPE.search(text)
        and all(kind in SCHEMA_TYPES or kind.startswith("[") for kind in xml_types)
        and all(
            part.lower() in SCHEMA_TYPES for kind in gemma_types if kind for part in kind.split(",")
        )
    )


@pytest.mark.parametrize("split", ["demo", "native", "calls", "bfcl", "conversations"])
@pytest.mark.parametrize("name", SPECIMEN_NAMES)
def test_every_bundled_split_renders_with_tools_as_json_schema(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]], name: str, split: str
) -> None:
    examples = splits[split]
    if name in DATED:
        with pytest.raises(ConfigError, match=r"writes the date into the prompt") as info:
            format_examples(examples, specimens[name], prompt_format="native")
        assert info.value.exit_code == 2 and name in str(info.value)
        assert "else --template-date YYYY-MM-DD" in str(info.value)
    rendered = format_examples(
        examples,
        specimens[name],
        prompt_format="native",
        system_prompt=SYSTEM_PROMPTS.get(name),
        chat_template_kwargs=KWARGS.get(name),
        template_date=TEMPLATE_DATES.get(name),
    )
    assert len(rendered) == len(examples) > 0
    for example in rendered:
        text = example.prompt_text or ""
        assert example.query in text
        for message in example.messages or ():  # a history: every call and result is shown
            for call in message.get("tool_calls", []):
                assert call["function"]["name"] in text
            if message["role"] == "tool":  # as it is, or as a JSON string (Mistral)
                escaped = json.dumps(message["content"])[1:-1]
                assert message["content"] in text or escaped in text
        assert _shows_json_schema_types(text), (example.example_id, text)
        for tool in tool_schemas(example.tools):
            assert tool["function"]["name"] in text
            assert tool["function"]["parameters"]["type"] == "object"
    # The row keeps its own tools for scoring: only the rendering was converted.
    assert [example.tools for example in rendered] == [example.tools for example in examples]


def test_hermes_recurses_on_xlam_type_names_and_renders_json_schema(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]]
) -> None:
    # The reproduction: the tools as they were passed before (xlam's "str").
    hermes = specimens["hermes"]
    tool = {
        "name": "f",
        "description": "d",
        "parameters": {"city": {"description": "c", "type": "str"}},
    }
    raw = [
        {
            "type": "function",
            "function": {
                **tool,
                "parameters": {"type": "object", "properties": tool["parameters"]},
            },
        }
    ]
    messages = [{"role": "user", "content": "q"}]
    with pytest.raises(RecursionError):
        hermes.apply_chat_template(messages, tools=raw, tokenize=False, add_generation_prompt=True)
    text = hermes.apply_chat_template(
        messages, tools=tool_schemas([tool]), tokenize=False, add_generation_prompt=True
    )
    assert "f(city: str) - d" in text and '"type": "string"' in text


#: Every specimen that honours a system prompt beside tools (vLLM's Mistral one drops it; gpt-oss's
#: is refused for its date before the system prompt is looked at).
HONOURING = [name for name in SPECIMEN_NAMES if name not in ("mistral", *DATED)]


@pytest.mark.parametrize("name", HONOURING)
def test_a_system_prompt_is_honoured(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]], name: str
) -> None:
    [example] = format_examples(
        splits["native"][:1],
        specimens[name],
        prompt_format="native",
        system_prompt="Answer in French.",
        chat_template_kwargs=KWARGS.get(name),
    )
    assert "Answer in French." in (example.prompt_text or "")


def test_a_system_prompt_the_template_drops_is_refused_naming_the_tokenizer(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]]
) -> None:
    first = splits["native"][0]
    with pytest.raises(ConfigError, match=r"tokenizer '.*mistral' drops the system prompt") as info:
        format_examples(
            [first], specimens["mistral"], prompt_format="native", system_prompt="Be brief."
        )
    assert info.value.exit_code == 2
    assert repr(first.example_id) in str(info.value)


class _Clock:
    """The clock Hugging Face templates read (``strftime_now``), set to one day."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import transformers.utils.chat_template_utils as module

        self._monkeypatch = monkeypatch
        self._module = module

    def set(self, day: datetime) -> None:
        class _Day(datetime):
            @classmethod
            def now(cls, tz: tzinfo | None = None) -> _Day:
                return cls.fromtimestamp(day.timestamp(), tz)

        self._monkeypatch.setattr(self._module, "datetime", _Day)


def test_llama_digests_do_not_depend_on_the_day_once_the_date_is_pinned(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]], monkeypatch: pytest.MonkeyPatch
) -> None:
    llama, examples = specimens["llama31"], splits["native"][:3]
    clock = _Clock(monkeypatch)
    messages = [{"role": "user", "content": "q"}]
    texts = []
    for day in (datetime(2026, 12, 4, 12), datetime(2026, 12, 5, 12)):
        clock.set(day)
        texts.append(llama.apply_chat_template(messages, tokenize=False))
    assert texts[0] != texts[1]  # the specimen, like Llama's own, writes today's date
    with pytest.raises(ConfigError, match=r"writes the date into the prompt.*date_string") as info:
        format_examples(examples, llama, prompt_format="native")
    assert info.value.exit_code == 2 and "llama31" in str(info.value)
    digests = []
    for day in (datetime(2026, 12, 4, 12), datetime(2026, 12, 5, 12)):
        clock.set(day)
        rendered = format_examples(
            examples, llama, prompt_format="native", chat_template_kwargs=PINNED
        )
        digests.append([example.prompt_sha256 for example in rendered])
        assert all(example.chat_template_kwargs == PINNED for example in rendered)
    assert digests[0] == digests[1]


def test_qwen3_takes_enable_thinking_and_records_it(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]]
) -> None:
    qwen, examples = specimens["qwen3"], splits["native"][:2]
    thinking = format_examples(examples, qwen, prompt_format="native")
    direct = format_examples(
        examples, qwen, prompt_format="native", chat_template_kwargs='{"enable_thinking": false}'
    )
    assert all((e.prompt_text or "").endswith("<|im_start|>assistant\n") for e in thinking)
    assert all((e.prompt_text or "").endswith("<think>\n\n</think>\n\n") for e in direct)
    assert [e.chat_template_kwargs for e in direct] == [{"enable_thinking": False}] * 2
    assert all(e.to_json()["chat_template_kwargs"] == {"enable_thinking": False} for e in direct)
    assert all("chat_template_kwargs" not in e.to_json() for e in thinking)


@pytest.mark.parametrize("name", SPECIMEN_NAMES)
def test_digests_are_the_same_on_two_days(
    specimens: dict[str, Any],
    splits: dict[str, list[TestExample]],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    clock, digests = _Clock(monkeypatch), []
    for day in (datetime(2026, 12, 4, 12), datetime(2027, 1, 5, 12)):
        clock.set(day)
        rendered = format_examples(
            splits["native"][:2],
            specimens[name],
            prompt_format="native",
            system_prompt=SYSTEM_PROMPTS.get(name),
            chat_template_kwargs=KWARGS.get(name),
            template_date=TEMPLATE_DATES.get(name),
        )
        digests.append([example.prompt_sha256 for example in rendered])
        assert all(example.template_date == TEMPLATE_DATES.get(name) for example in rendered)
    assert digests[0] == digests[1]


def test_mistral_v11_writes_the_date_unless_given_a_system_prompt(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]]
) -> None:
    # Its default system prompt carries today's date; a system prompt of one's own replaces it.
    with pytest.raises(ConfigError, match=r"mistral_v11' writes the date into the prompt"):
        format_examples(splits["native"][:1], specimens["mistral_v11"], prompt_format="native")
    [example] = format_examples(
        splits["native"][:1],
        specimens["mistral_v11"],
        prompt_format="native",
        system_prompt="Be brief.",
    )
    text = example.prompt_text or ""
    assert "[SYSTEM_PROMPT]Be brief.[/SYSTEM_PROMPT]" in text
    assert text.index("[AVAILABLE_TOOLS]") < text.index("[INST]")
    # Or its default system prompt, on a fixed day: the same text every day, recorded.
    [dated] = format_examples(
        splits["native"][:1],
        specimens["mistral_v11"],
        prompt_format="native",
        template_date=TEMPLATE_DAY,
    )
    assert "2024-07-26" in (dated.prompt_text or "")
    assert dated.to_json()["template_date"] == TEMPLATE_DAY
    assert "template_date" not in example.to_json()  # none: the row keeps its bytes


def test_the_template_date_is_a_calendar_day(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]]
) -> None:
    for wrong in ("2024-02-30", "26 Jul 2024", "2024-7-26"):
        with pytest.raises(ConfigError, match=r"--template-date must be a calendar date") as info:
            format_examples(
                splits["native"][:1],
                specimens["gpt_oss"],
                prompt_format="native",
                template_date=wrong,
            )
        assert info.value.exit_code == 2


def test_gpt_oss_shows_instructions_and_typescript_tools_on_a_fixed_day(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # No variable pins gpt-oss's date: --template-date renders it on that day.
    [dated] = format_examples(
        splits["native"][:1],
        specimens["gpt_oss"],
        prompt_format="native",
        template_date=TEMPLATE_DAY,
    )
    assert "Current date: 2024-07-26" in (dated.prompt_text or "")
    # On one fixed day the template shows the system prompt as developer instructions and
    # the tools as TypeScript.
    _Clock(monkeypatch).set(datetime(2026, 12, 4, 12))
    example = splits["native"][0]
    text = specimens["gpt_oss"].apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": example.query}],
        tools=tool_schemas(example.tools),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert "Current date: 2026-12-04" in text
    assert "<|start|>developer<|message|># Instructions\n\nBe brief." in text
    assert "namespace functions {" in text and text.endswith("<|start|>assistant")
    assert not TS_PYTHON_TYPE.search(text) and ": string," in text
    for tool in tool_schemas(example.tools):
        assert f"type {tool['function']['name']} = (_: {{" in text


def test_qwen3_coder_opens_thinking_unless_disabled(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]]
) -> None:
    coder, examples = specimens["qwen3_coder"], splits["native"][:1]
    [thinking] = format_examples(examples, coder, prompt_format="native")
    [direct] = format_examples(
        examples, coder, prompt_format="native", chat_template_kwargs={"enable_thinking": False}
    )
    assert (thinking.prompt_text or "").endswith("<|im_start|>assistant\n<think>\n")
    assert (direct.prompt_text or "").endswith("<think>\n\n</think>\n\n")
    assert "<function=example_function_name>" in (thinking.prompt_text or "")


def test_gemma4_declares_tools_in_its_own_notation_and_thinks_on_request(
    specimens: dict[str, Any], splits: dict[str, list[TestExample]]
) -> None:
    gemma, examples = specimens["gemma4"], splits["native"][:1]
    [plain] = format_examples(examples, gemma, prompt_format="native")
    [thinking] = format_examples(
        examples, gemma, prompt_format="native", chat_template_kwargs={"enable_thinking": True}
    )
    text = plain.prompt_text or ""
    assert text.startswith("<s><|turn>system\n<|tool>declaration:")
    assert 'type:<|"|>OBJECT<|"|>' in text and text.endswith("<|turn>model\n")
    assert (thinking.prompt_text or "").startswith("<s><|turn>system\n<|think|>\n<|tool>")


#: The specimens written for issue 30's item 4, each of which renders tool calls and results.
WITH_TOOL_TURNS = ("gemma4", "gpt_oss", "llama33", "mistral_v11", "qwen25", "qwen3_coder")


@pytest.mark.parametrize("name", WITH_TOOL_TURNS)
def test_a_call_and_its_result_render_in_the_family_s_own_syntax(
    specimens: dict[str, Any], monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # A conversation split will replay earlier turns: the assistant's call and the tool's
    # answer must reach the prompt in the family's syntax, after the request.
    _Clock(monkeypatch).set(datetime(2026, 12, 4, 12))
    tool = {"name": "get_weather", "description": "d", "parameters": {"city": {"type": "str"}}}
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "get_weather", "content": "sunny"},
    ]
    text = specimens[name].apply_chat_template(
        messages, tools=tool_schemas([tool]), tokenize=False, add_generation_prompt=True
    )
    asked = text.index("Weather in Oslo?")
    assert asked < text.index("Oslo", asked + len("Weather in Oslo?")) < text.index("sunny")
    assert text.count("get_weather") >= 2 and "Be brief." in text
