"""Every output-format decoder ends in a status for any text, never in an exception."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from hypothesis import given, settings

from sommelier_mlflow.toolcalls import CallsParseResult
from sommelier_mlflow.toolcalls._decode_functiongemma import decode_functiongemma
from sommelier_mlflow.toolcalls._decode_gemma4 import decode_gemma4
from sommelier_mlflow.toolcalls._decode_glm45 import decode_glm45
from sommelier_mlflow.toolcalls._decode_harmony import decode_harmony
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._decode_llama3 import decode_llama3_json
from sommelier_mlflow.toolcalls._decode_mistral import decode_mistral
from sommelier_mlflow.toolcalls._decode_openai import decode_openai
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from sommelier_mlflow.toolcalls._decode_qwen3_xml import decode_qwen3_xml
from tests.support.decoder_texts import TYPED_TOOLS, texts
from tests.support.timing import growth_ratios

DECODERS: list[Callable[[str], CallsParseResult]] = [
    decode_hermes,
    decode_llama3_json,
    decode_mistral,
    decode_openai,
    decode_pythonic,
    decode_qwen3_xml,
    decode_glm45,
    decode_harmony,
    decode_gemma4,
    decode_functiongemma,
    partial(decode_qwen3_xml, tools=TYPED_TOOLS),
    partial(decode_glm45, tools=TYPED_TOOLS),
]


@settings(max_examples=200, deadline=None)
@given(texts)
def test_no_decoder_raises_and_only_ok_carries_calls(text: str) -> None:
    for decode in DECODERS:
        result = decode(text)
        assert result.status in ("ok", "no_json", "invalid_json", "invalid_shape")
        assert (result.calls is not None) == (result.status == "ok")
        for call in result.calls or ():
            assert set(call) == {"name", "arguments"}
            assert isinstance(call["name"], str) and call["name"]
            assert isinstance(call["arguments"], dict)


def test_deep_nesting_never_crashes_any_decoder() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    wrapped = [
        deep,
        "{" * 100_000,
        f"<tool_call>{deep}</tool_call>",
        f"<|python_tag|>{deep}",
        f"[TOOL_CALLS]{deep}",
        f"[TOOL_CALLS]f[ARGS]{deep}",
        "[f(a=" + deep + ")]",
        "[f(a=" + "(" * 100_000 + ")]",
        '{"tool_calls": ' + deep + "}",
    ]
    for text in wrapped:
        for decode in DECODERS:
            assert decode(text).status in ("no_json", "invalid_json", "invalid_shape")


def test_deep_nesting_in_the_new_formats_ends_in_a_status() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    typed = [  # an array parameter: the deep value must read as JSON, and does not
        f"<tool_call><function=book><parameter=tags>{deep}</parameter></function></tool_call>",
        f"<tool_call>book<arg_key>tags</arg_key><arg_value>{deep}</arg_value></tool_call>",
    ]
    assert decode_qwen3_xml(typed[0], TYPED_TOOLS).status == "invalid_shape"
    assert decode_glm45(typed[1], TYPED_TOOLS).status == "invalid_shape"
    wrapped = [
        f"<tool_call><function=f><parameter=a>{deep}</parameter></function></tool_call>",
        f"<tool_call>f<arg_key>a</arg_key><arg_value>{deep}</arg_value></tool_call>",
        f"<|channel|>commentary to=functions.f<|message|>{deep}<|call|>",
        "<|tool_call>call:f{a:" + "[" * 100_000 + "]" * 100_000 + "}<tool_call|>",
        "<|tool_call>call:f{a:" + "[" * 100_000,
        "<start_function_call>call:f{" + "a:{" * 100_000,
        "<think>" * 100_000,
        "<|channel>" * 100_000 + "<channel|>",
    ]
    for text in typed + wrapped:
        for decode in DECODERS:
            result = decode(text)
            assert result.status in ("ok", "no_json", "invalid_json", "invalid_shape")
            assert (result.calls is not None) == (result.status == "ok")


#: The decoders of issue 30 with a call and its pieces, for the bad-input checks below.
NEW_FORMATS: dict[str, tuple[Callable[[str], CallsParseResult], str]] = {
    "qwen3_xml": (
        partial(decode_qwen3_xml, tools=TYPED_TOOLS),
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n",
    ),
    "glm45": (
        partial(decode_glm45, tools=TYPED_TOOLS),
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n",
    ),
    "harmony": (
        decode_harmony,
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city": "Paris", "days": 3}<|call|>',
    ),
    "gemma4": (
        decode_gemma4,
        '<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3}<tool_call|>',
    ),
    "functiongemma": (
        decode_functiongemma,
        "<start_function_call>call:get_weather{city:<escape>Paris<escape>,days:3}"
        "<end_function_call>",
    ),
}
CITY_CALL = {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}


@pytest.mark.parametrize("name", sorted(NEW_FORMATS))
def test_thousands_of_calls_are_read_in_order(name: str) -> None:
    decode, one = NEW_FORMATS[name]
    result = decode(one * 5_000)
    assert result.status == "ok"
    assert result.calls == (CITY_CALL,) * 5_000


@pytest.mark.parametrize("name", sorted(NEW_FORMATS))
def test_bad_input_ends_in_a_status(name: str) -> None:
    decode, one = NEW_FORMATS[name]
    cut = [one[:end] for end in range(1, len(one))]  # every unclosed prefix
    odd = [
        one.replace("Paris", "Pa\x00ris"),
        one.replace("Paris", "Pa\ud800ris"),
        "\x00" * 1000 + one,
        "\ud800" + one + "\udfff",
        "x" * 5_000_000 + one,  # a 5 MB output
        one * 2 + "{" * 1_000_000,
    ]
    for text in cut + odd:
        result = decode(text)
        assert result.status in ("ok", "no_json", "invalid_json", "invalid_shape")
        assert (result.calls is not None) == (result.status == "ok")
    # a NUL byte inside a string value is text, kept as written (JSON refuses it raw)
    nul = decode(one.replace("Paris", "Pa\x00ris"))
    if name == "harmony":
        assert nul.status == "invalid_json"
    else:
        assert nul.calls == (
            {"name": "get_weather", "arguments": {"city": "Pa\x00ris", "days": 3}},
        )


@pytest.mark.parametrize("name", sorted(NEW_FORMATS))
def test_decoding_is_linear_in_the_output(name: str) -> None:
    decode, one = NEW_FORMATS[name]
    # many calls, one unclosed block after a long run of calls, and deep nesting
    growth_ratios(lambda n: decode(one * n), (100, 1_000, 10_000), bound=30, repeats=2)
    half = one[: len(one) // 2]  # thousands of calls, then one left unclosed
    growth_ratios(lambda n: decode(one * n + half), (100, 1_000, 10_000), bound=30, repeats=2)
    if name in ("gemma4", "functiongemma"):  # the formats that read nesting themselves
        opener = one[: one.index("{") + 1] + "a:"
        growth_ratios(lambda n: decode(opener + "[" * n), (20_000, 200_000), bound=30, repeats=2)


def test_no_new_decoder_evaluates_text(tmp_path: Path) -> None:
    marker = tmp_path / "evaluated"
    code = f"__import__('pathlib').Path({str(marker)!r}).write_text('x')"
    texts_with_code = [
        f"<tool_call><function=f><parameter=a>{code}</parameter></function></tool_call>",
        f"<tool_call>f<arg_key>a</arg_key><arg_value>{code}</arg_value></tool_call>",
        f"<|channel|>commentary to=functions.f<|message|>{code}<|call|>",
        f"<|tool_call>call:f{{a:{code}}}<tool_call|>",
        f"<start_function_call>call:f{{a:{code}}}<end_function_call>",
    ]
    tools = [{"name": "f", "parameters": {"a": {"type": "dict"}}}]
    for text in texts_with_code:
        for decode in DECODERS:
            decode(text)
        decode_qwen3_xml(text, tools)
        decode_glm45(text, tools)
    assert not marker.exists()


def test_the_native_formats_are_registered_with_their_versions() -> None:
    from sommelier_mlflow.toolcalls import output_format, output_format_names

    expected = {
        "hermes": ("hermes.v1", True, decode_hermes),
        "llama3_json": ("llama3_json.v1", False, decode_llama3_json),
        "mistral": ("mistral.v1", True, decode_mistral),
        "openai": ("openai.v1", False, decode_openai),
        "pythonic": ("pythonic.v1", False, decode_pythonic),
        "qwen3_xml": ("qwen3_xml.v1", True, decode_qwen3_xml),
        "glm45": ("glm45.v1", True, decode_glm45),
        "harmony": ("harmony.v1", True, decode_harmony),
        "gemma4": ("gemma4.v1", True, decode_gemma4),
        "functiongemma": ("functiongemma.v1", True, decode_functiongemma),
    }
    assert set(expected) | {"json"} <= set(output_format_names())
    for name, (version, special_tokens, decode) in expected.items():
        registered = output_format(name)
        assert (registered.version, registered.special_tokens) == (version, special_tokens)
        assert registered.decode is decode
