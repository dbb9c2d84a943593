"""Every output-format decoder ends in a status for any text, never in an exception."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from hypothesis import given, settings

from sommelier_mlflow._gc import paused_gc
from sommelier_mlflow.toolcalls import CallsParseResult
from sommelier_mlflow.toolcalls._decode_deepseek_v31 import decode_deepseek_v31
from sommelier_mlflow.toolcalls._decode_functiongemma import decode_functiongemma
from sommelier_mlflow.toolcalls._decode_gemma4 import decode_gemma4
from sommelier_mlflow.toolcalls._decode_glm45 import decode_glm45
from sommelier_mlflow.toolcalls._decode_harmony import decode_harmony
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._decode_kimi_k2 import decode_kimi_k2
from sommelier_mlflow.toolcalls._decode_llama3 import decode_llama3_json
from sommelier_mlflow.toolcalls._decode_llama4 import decode_llama4_pythonic
from sommelier_mlflow.toolcalls._decode_mistral import decode_mistral
from sommelier_mlflow.toolcalls._decode_openai import decode_openai
from sommelier_mlflow.toolcalls._decode_phi4_mini import decode_phi4_mini_json
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from sommelier_mlflow.toolcalls._decode_qwen3_xml import decode_qwen3_xml
from sommelier_mlflow.toolcalls._decode_xlam import decode_xlam
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

# Issue 30's formats: section tokens, JSON lists, pythonic in code tokens.
KIMI = (
    "<|tool_calls_section_begin|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls_section_end|>",
)
DEEPSEEK = (  # U+FF5C for the bars, U+2581 for the spaces, as DeepSeek's tokenizer writes them
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
    "<\uff5ctool\u2581call\u2581end\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
)
SECTION_FORMATS: dict[str, tuple[Callable[[str], CallsParseResult], tuple[str, ...], str]] = {
    # decoder, its five tokens in writing order, and its head for a call named f
    "kimi_k2": (decode_kimi_k2, KIMI, "functions.f:0"),
    "deepseek_v31": (decode_deepseek_v31, DEEPSEEK, "f"),
}
NEW_DECODERS: list[Callable[[str], CallsParseResult]] = [
    decode_kimi_k2,
    decode_deepseek_v31,
    decode_phi4_mini_json,
    decode_llama4_pythonic,
    decode_xlam,
]
DECODERS += NEW_DECODERS


def one_call(fmt: str, arguments: str = '{"a": 1}') -> str:
    """One call to ``f`` written in ``fmt`` (one of issue 30's formats)."""
    if fmt in SECTION_FORMATS:
        _, (begin, call, sep, call_end, end), head = SECTION_FORMATS[fmt]
        return f"{begin}{call}{head}{sep}{arguments}{call_end}{end}"
    if fmt == "phi4_mini_json":
        return f'functools[{{"name": "f", "arguments": {arguments}}}]'
    if fmt == "llama4_pythonic":  # the arguments' JSON is a Python dict literal too
        value = "1" if arguments == '{"a": 1}' else arguments
        return f"<|python_start|>[f(a={value})]<|python_end|>"
    return f'[{{"name": "f", "arguments": {arguments}}}]'


def many_calls(fmt: str, count: int) -> str:
    """``count`` calls to ``f`` in one output of ``fmt``."""
    if fmt in SECTION_FORMATS:
        _, (begin, call, sep, call_end, end), head = SECTION_FORMATS[fmt]
        return begin + f'{call}{head}{sep}{{"a": 1}}{call_end}' * count + end
    if fmt == "llama4_pythonic":
        return "<|python_start|>[" + ", ".join(["f(a=1)"] * count) + "]<|python_end|>"
    prefix = "functools" if fmt == "phi4_mini_json" else ""
    return prefix + "[" + ", ".join(['{"name": "f", "arguments": {"a": 1}}'] * count) + "]"


NEW_FORMATS = {
    "kimi_k2": decode_kimi_k2,
    "deepseek_v31": decode_deepseek_v31,
    "phi4_mini_json": decode_phi4_mini_json,
    "llama4_pythonic": decode_llama4_pythonic,
    "xlam": decode_xlam,
}


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
        *(one_call(fmt, deep) for fmt in NEW_FORMATS),
        "functools" + deep,
        "<|python_start|>" + deep,
        "<|python_start|>[f(a=" + deep + ")]",
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


#: qwen3_xml, glm45, harmony, gemma4 and functiongemma, one call each, for the checks below.
CALL_FORMATS: dict[str, tuple[Callable[[str], CallsParseResult], str]] = {
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


@pytest.mark.parametrize("name", sorted(CALL_FORMATS))
def test_thousands_of_calls_are_read_in_order(name: str) -> None:
    decode, one = CALL_FORMATS[name]
    result = decode(one * 5_000)
    assert result.status == "ok"
    assert result.calls == (CITY_CALL,) * 5_000


@pytest.mark.parametrize("name", sorted(CALL_FORMATS))
def test_bad_input_ends_in_a_status(name: str) -> None:
    decode, one = CALL_FORMATS[name]
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


@pytest.mark.parametrize("name", sorted(CALL_FORMATS))
def test_decoding_is_linear_in_the_output(name: str) -> None:
    decode, one = CALL_FORMATS[name]
    # many calls, one unclosed block after a long run of calls, and deep nesting
    growth_ratios(lambda n: decode(one * n), (100, 1_000, 10_000), bound=30, repeats=3)
    half = one[: len(one) // 2]  # thousands of calls, then one left unclosed
    growth_ratios(lambda n: decode(one * n + half), (100, 1_000, 10_000), bound=30, repeats=3)
    if name in ("gemma4", "functiongemma"):  # the formats that read nesting themselves
        opener = one[: one.index("{") + 1] + "a:"
        growth_ratios(lambda n: decode(opener + "[" * n), (20_000, 200_000), bound=30, repeats=3)


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
        "mistral": ("mistral.v2", True, decode_mistral),
        "openai": ("openai.v1", False, decode_openai),
        "pythonic": ("pythonic.v1", False, decode_pythonic),
        "qwen3_xml": ("qwen3_xml.v1", True, decode_qwen3_xml),
        "glm45": ("glm45.v1", True, decode_glm45),
        "harmony": ("harmony.v1", True, decode_harmony),
        "gemma4": ("gemma4.v1", True, decode_gemma4),
        "functiongemma": ("functiongemma.v1", True, decode_functiongemma),
        "kimi_k2": ("kimi_k2.v1", True, decode_kimi_k2),
        "deepseek_v31": ("deepseek_v31.v1", True, decode_deepseek_v31),
        "phi4_mini_json": ("phi4_mini_json.v1", False, decode_phi4_mini_json),
        "llama4_pythonic": ("llama4_pythonic.v1", False, decode_llama4_pythonic),
        "xlam": ("xlam.v1", False, decode_xlam),
    }
    assert set(expected) | {"json"} <= set(output_format_names())
    for name, (version, special_tokens, decode) in expected.items():
        registered = output_format(name)
        assert (registered.version, registered.special_tokens) == (version, special_tokens)
        assert registered.decode is decode


# --- issue 30's bad input: every new decoder ends in a status, in time linear in the output ---


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_a_well_formed_call_reads_in_every_new_format(fmt: str) -> None:
    assert NEW_FORMATS[fmt](one_call(fmt)).calls == ({"name": "f", "arguments": {"a": 1}},)


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_thousands_of_calls_read_in_linear_time(fmt: str) -> None:
    decode = NEW_FORMATS[fmt]
    assert len(decode(many_calls(fmt, 5_000)).calls or ()) == 5_000
    # Linear work grows ~10x per step; a rescan per call would grow ~100x. The
    # collector is paused, as scoring pauses it: tens of thousands of new dicts
    # otherwise trigger collections whose cost is not the decoder's.
    with paused_gc():
        growth_ratios(
            # From 1,000 calls up: at 300, a run takes well under a millisecond and a
            # loaded machine's noise alone once made one step 30x.
            lambda n: decode(many_calls(fmt, n)),
            [1_000, 10_000],
            bound=30,
            repeats=5,
        )


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_broken_outputs_end_in_a_status(fmt: str) -> None:
    decode = NEW_FORMATS[fmt]
    text = one_call(fmt)
    tokens = SECTION_FORMATS[fmt][1] if fmt in SECTION_FORMATS else ()
    broken = [
        text[: len(text) // 2],  # an unclosed tag or list
        text.replace('"a"', '"a\x00"').replace("a=1", "a='\x00'"),  # a NUL byte
        text.replace('"a"', '"\ud800"').replace("a=1", "a='\ud800'"),  # a lone surrogate
        "\x00" * 1000 + text,
        text * 2 + "\ud800",
        *(token * 1000 for token in tokens),  # a token repeated, never closed
        *(text.replace(token, "") for token in tokens),  # each token missing in turn
    ]
    for item in broken:
        result = decode(item)
        assert result.status in ("ok", "no_json", "invalid_json", "invalid_shape")
        assert (result.calls is not None) == (result.status == "ok")


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_five_megabyte_outputs_are_read_in_linear_time(fmt: str) -> None:
    decode = NEW_FORMATS[fmt]
    call = one_call(fmt)
    prose = "The weather in Paris is mild. "
    # 5 MB of prose around a call, of unclosed openers, and of one argument string
    for make in (
        lambda n: prose * (n // len(prose)) + call,
        lambda n: call[: len(call) // 2] * (n // max(1, len(call) // 2)),
        lambda n: one_call(fmt, '{"a": "' + "x" * n + '"}'),
    ):
        assert decode(make(5_000_000)).status in ("ok", "no_json", "invalid_json", "invalid_shape")
        growth_ratios(lambda n, make=make: decode(make(n)), [50_000, 500_000], bound=30, repeats=3)


@pytest.mark.parametrize("fmt", NEW_FORMATS)
def test_nothing_in_an_output_is_ever_evaluated(fmt: str, tmp_path: object) -> None:
    import pathlib

    marker = pathlib.Path(str(tmp_path)) / "ran"
    payload = f"__import__('pathlib').Path({str(marker)!r}).touch()"
    texts_ = [
        one_call(fmt, '{"a": "' + payload.replace("'", "") + '"}'),
        f"<|python_start|>[f(a={payload})]<|python_end|>",
        f"[f(a={payload})]",
        payload,
    ]
    for text in texts_:
        NEW_FORMATS[fmt](text)
    assert not marker.exists()
