"""Decoding keeps an output format's special-token tags and still drops end-of-sequence."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sommelier_mlflow.generation._hf import decode_completion
from tests.support.tiny_models import EOS_TOKEN, build_tokenizer

CALL = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    built = build_tokenizer(tmp_path_factory.mktemp("tok"), [CALL, "weather in Paris"])
    built.add_special_tokens({"additional_special_tokens": ["<tool_call>", "</tool_call>"]})
    return built


def _completion(tokenizer: Any) -> list[int]:
    """``<tool_call>CALL</tool_call>`` as generated: the tags are single special tokens."""
    ids: list[int] = tokenizer.encode(
        f"<tool_call>{CALL}</tool_call>{EOS_TOKEN}", add_special_tokens=False
    )
    assert tokenizer.convert_tokens_to_ids("<tool_call>") in ids
    eos = tokenizer.convert_tokens_to_ids(EOS_TOKEN)
    return ids[: ids.index(eos)]  # the runner cuts at end-of-sequence before decoding


def test_tool_tags_survive_when_the_format_needs_them(tokenizer: Any) -> None:
    text = decode_completion(tokenizer, _completion(tokenizer), keep_special_tokens=True)
    assert text == f"<tool_call>{CALL}</tool_call>"


def test_without_the_need_special_tokens_are_dropped_as_before(tokenizer: Any) -> None:
    assert decode_completion(tokenizer, _completion(tokenizer), keep_special_tokens=False) == CALL
