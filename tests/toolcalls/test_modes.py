"""Scoring modes and output formats as registered objects."""

from __future__ import annotations

import importlib

import pytest

from sommelier_mlflow.errors import ConfigError, DataError
from sommelier_mlflow.toolcalls import (
    CALLS_PARSER_VERSION,
    JSON_FORMAT,
    PARSER_VERSION,
    CallsParseResult,
    OutputFormat,
    ParseResult,
    output_format,
    output_format_names,
    scoring_mode,
    scoring_mode_names,
    single_call,
)

W = {"name": "get_weather", "arguments": {"city": "Paris"}}

#: Every built-in output format: its decoder (module, function), version, and
#: whether outputs must be decoded with special tokens kept.
BUILT_IN_FORMATS = {
    "deepseek_v31": ("_decode_deepseek_v31", "decode_deepseek_v31", "deepseek_v31.v1", True),
    "functiongemma": ("_decode_functiongemma", "decode_functiongemma", "functiongemma.v1", True),
    "gemma4": ("_decode_gemma4", "decode_gemma4", "gemma4.v1", True),
    "glm45": ("_decode_glm45", "decode_glm45", "glm45.v1", True),
    "harmony": ("_decode_harmony", "decode_harmony", "harmony.v1", True),
    "hermes": ("_decode_hermes", "decode_hermes", "hermes.v1", True),
    "kimi_k2": ("_decode_kimi_k2", "decode_kimi_k2", "kimi_k2.v1", True),
    "llama3_json": ("_decode_llama3", "decode_llama3_json", "llama3_json.v1", False),
    "llama4_pythonic": ("_decode_llama4", "decode_llama4_pythonic", "llama4_pythonic.v1", False),
    "mistral": ("_decode_mistral", "decode_mistral", "mistral.v2", True),
    "openai": ("_decode_openai", "decode_openai", "openai.v1", False),
    "phi4_mini_json": ("_decode_phi4_mini", "decode_phi4_mini_json", "phi4_mini_json.v1", False),
    "pythonic": ("_decode_pythonic", "decode_pythonic", "pythonic.v1", False),
    "qwen3_xml": ("_decode_qwen3_xml", "decode_qwen3_xml", "qwen3_xml.v1", True),
    "xlam": ("_decode_xlam", "decode_xlam", "xlam.v1", False),
}


@pytest.mark.parametrize("name", sorted(BUILT_IN_FORMATS))
def test_each_built_in_format_is_its_decoder_at_its_version(name: str) -> None:
    module, function, version, special_tokens = BUILT_IN_FORMATS[name]
    decode = getattr(importlib.import_module(f"sommelier_mlflow.toolcalls.{module}"), function)
    registered = output_format(name)
    assert (registered.decode, registered.version, registered.special_tokens) == (
        decode,
        version,
        special_tokens,
    )
    assert registered.variant_of == ("pythonic" if name == "llama4_pythonic" else None)


def _fixed(result: CallsParseResult) -> OutputFormat:
    return OutputFormat(
        "fixed", "always the same", decode=lambda _text, _tools: result, version="fixed.v1"
    )


def test_single_and_calls_are_two_registrations() -> None:
    assert {"calls", "single"} <= set(scoring_mode_names())
    single, calls = scoring_mode("single"), scoring_mode("calls")
    assert (single.parser_version, calls.parser_version) == (PARSER_VERSION, CALLS_PARSER_VERSION)
    assert single.mcnemar_metric() == "full_call_exact_match"
    assert calls.mcnemar_metric() == "call_set_exact_match"
    assert (single.default_slices, calls.default_slices) == ((), ("calls",))
    assert calls.derived_slices["calls"]([W, W, W]) == "2+"


def test_json_adds_nothing_to_the_parser_version_and_a_decoder_joins_it() -> None:
    json_format = output_format(JSON_FORMAT)
    assert scoring_mode("calls").full_parser_version(json_format) == CALLS_PARSER_VERSION
    fixed = _fixed(CallsParseResult("no_json"))
    assert scoring_mode("calls").full_parser_version(fixed) == f"{CALLS_PARSER_VERSION}+fixed.v1"


@pytest.mark.parametrize(
    ("decoded", "expected"),
    [
        (CallsParseResult("ok", (W,)), ParseResult("ok", W)),
        (CallsParseResult("no_json"), ParseResult("no_json")),
        (CallsParseResult("ok", ()), ParseResult("invalid_shape")),
        (CallsParseResult("ok", (W, W)), ParseResult("invalid_shape")),
        (CallsParseResult("invalid_json"), ParseResult("invalid_json")),
    ],
)
def test_single_mode_accepts_exactly_one_call_from_any_format(
    decoded: CallsParseResult, expected: ParseResult
) -> None:
    assert single_call(decoded) == expected
    assert scoring_mode("single").parse("ignored", _fixed(decoded), ()) == expected
    # The calls mode takes what the decoder found as it is.
    assert scoring_mode("calls").parse("ignored", _fixed(decoded), ()) == decoded


def test_unknown_names_are_exit_2_listing_the_registered_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown output format 'hermes2'; registered: .*json"):
        output_format("hermes2")
    with pytest.raises(
        ConfigError, match=r"unknown scoring mode 'multi'; registered: .*calls, single"
    ):
        scoring_mode("multi")
    assert JSON_FORMAT in output_format_names()


def test_a_decoder_needs_a_version_and_json_has_neither() -> None:
    with pytest.raises(ConfigError, match="needs a version"):
        OutputFormat("bad", "no version", decode=lambda _text, _tools: CallsParseResult("no_json"))
    with pytest.raises(ConfigError, match="without '\\+'"):
        OutputFormat("bad", "d", decode=lambda _t, _o: CallsParseResult("no_json"), version="a+b")
    assert output_format(JSON_FORMAT).decode is None


def test_a_variant_names_another_format() -> None:
    decode = _fixed(CallsParseResult("no_json")).decode
    for base in ("", "mine", 3):
        with pytest.raises(ConfigError, match="variant_of must name another format"):
            OutputFormat("mine", "d", decode=decode, version="mine.v1", variant_of=base)  # type: ignore[arg-type]
    assert OutputFormat("mine", "d", decode=decode, version="v", variant_of="json").variant_of


def test_each_mode_reads_and_checks_its_gold() -> None:
    assert scoring_mode("single").gold_calls([W], "gold") == (W,)
    with pytest.raises(DataError, match="list must hold exactly one call"):
        scoring_mode("single").gold_calls([W, W], "gold")
    assert scoring_mode("calls").gold_calls("[]", "gold") == ()
    assert scoring_mode("single").gold_problem(0) is not None
    assert scoring_mode("calls").gold_problem(0) is None


def test_the_built_in_formats_take_the_tools_and_the_one_argument_form_is_wrapped() -> None:
    for name in output_format_names():
        decode = output_format(name).decode
        assert decode is None or not hasattr(decode, "__wrapped__"), name  # no wrapper
    with pytest.warns(DeprecationWarning, match=r"'old': decode\(text\) is deprecated"):
        old = OutputFormat("old", "d", decode=lambda text: CallsParseResult("no_json"), version="o")
    assert old.decode is not None and old.decode("x", [{"name": "f"}]).status == "no_json"


class _Decoder:
    def __call__(self, text: str, tools: object) -> CallsParseResult:
        return CallsParseResult("ok", ()) if tools else CallsParseResult("no_json")


def test_a_two_argument_callable_is_taken_as_it_is() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fmt = OutputFormat("new", "d", decode=_Decoder(), version="n")
    assert scoring_mode("calls").parse("x", fmt, [{"name": "f"}]) == CallsParseResult("ok", ())
    assert scoring_mode("calls").parse("x", fmt, ()) == CallsParseResult("no_json")
