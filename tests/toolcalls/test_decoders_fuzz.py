"""Every output-format decoder ends in a status for any text, never in an exception."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings

from sommelier_mlflow.toolcalls import CallsParseResult
from sommelier_mlflow.toolcalls._decode_hermes import decode_hermes
from sommelier_mlflow.toolcalls._decode_llama3 import decode_llama3_json
from sommelier_mlflow.toolcalls._decode_mistral import decode_mistral
from sommelier_mlflow.toolcalls._decode_openai import decode_openai
from sommelier_mlflow.toolcalls._decode_pythonic import decode_pythonic
from tests.support.decoder_texts import texts

DECODERS: list[Callable[[str], CallsParseResult]] = [
    decode_hermes,
    decode_llama3_json,
    decode_mistral,
    decode_openai,
    decode_pythonic,
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


def test_the_five_native_formats_are_registered_with_their_versions() -> None:
    from sommelier_mlflow.toolcalls import output_format, output_format_names

    expected = {
        "hermes": ("hermes.v1", True, decode_hermes),
        "llama3_json": ("llama3_json.v1", False, decode_llama3_json),
        "mistral": ("mistral.v1", True, decode_mistral),
        "openai": ("openai.v1", False, decode_openai),
        "pythonic": ("pythonic.v1", False, decode_pythonic),
    }
    assert set(expected) | {"json"} <= set(output_format_names())
    for name, (version, special_tokens, decode) in expected.items():
        registered = output_format(name)
        assert (registered.version, registered.special_tokens) == (version, special_tokens)
        assert registered.decode is decode
