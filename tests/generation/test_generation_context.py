"""Prompts past the model's context are refused before anything is generated (issue 29 #2).

They used to run anyway: transformers warned ("1102 > 1024 ... indexing errors")
and the run scored whatever came out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.data import Decoding, TestExample
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.generation import HFGenerator, check_context, run_generation
from sommelier_mlflow.generation._hf import model_context_length
from tests.generation.generation_helpers import TinyModels, load_tokenizer
from tests.support.tiny_models import build_tiny_llama

MAX_NEW_TOKENS = 8


def _lengths(tokenizer: Any, examples: list[TestExample]) -> list[int]:
    encoded = tokenizer([e.prompt_text for e in examples], add_special_tokens=False)
    return [len(ids) for ids in encoded["input_ids"]]


@pytest.fixture(scope="module")
def short(
    tiny: TinyModels, examples: list[TestExample], tmp_path_factory: pytest.TempPathFactory
) -> tuple[HFGenerator, list[str]]:
    """The tiny Llama declaring a context the two longest prompts do not fit, and their ids."""
    tokenizer = load_tokenizer(tiny.tokenizer_dir)
    lengths = _lengths(tokenizer, examples)
    ranked = sorted(lengths, reverse=True)
    assert ranked[1] > ranked[2], "the fixture needs two prompts longer than the rest"
    limit = ranked[2] + MAX_NEW_TOKENS  # the third-longest just fits
    folder = build_tiny_llama(
        tmp_path_factory.mktemp("short") / "model", tokenizer, max_position_embeddings=limit
    )
    overlong = [e.example_id for e, n in zip(examples, lengths, strict=True) if n > ranked[2]]
    return HFGenerator(folder), overlong


def test_the_hf_backend_reads_its_context_from_the_model_config(
    short: tuple[HFGenerator, list[str]], base_generator: HFGenerator
) -> None:
    generator, _ = short
    assert base_generator.context_length() == 2048
    assert generator.context_length() is not None and generator.context_length() < 2048


def test_a_run_with_a_prompt_past_the_context_is_refused_before_anything_is_written(
    short: tuple[HFGenerator, list[str]], examples: list[TestExample], tmp_path: Path
) -> None:
    generator, overlong = short
    out = tmp_path / "out"
    with pytest.raises(ConfigError) as info:
        run_generation(
            examples,
            generator,
            decoding=Decoding(max_new_tokens=MAX_NEW_TOKENS, batch_size=4),
            model_kind="base",
            out_dir=out,
            progress=False,
        )
    message = str(info.value)
    assert f"{len(overlong)} of {len(examples)} prompts" in message
    assert repr(overlong[0]) in message and "--skip-overlong" in message
    assert info.value.exit_code == 2
    assert not out.exists()


def test_the_check_names_exactly_the_prompts_that_do_not_fit(
    short: tuple[HFGenerator, list[str]], examples: list[TestExample]
) -> None:
    generator, overlong = short
    check = check_context(examples, generator, MAX_NEW_TOKENS)
    assert [example_id for example_id, _ in check.overlong] == overlong
    assert check.context_length == generator.context_length()
    # One token less of room and they all fit: the limit is prompt + new tokens, inclusive.
    assert check_context(examples, generator, MAX_NEW_TOKENS - 1).overlong == ()


def test_the_context_comes_from_the_architectures_field_or_else_the_tokenizer() -> None:
    from transformers import GPT2Config, LlamaConfig

    class Tokenizer:
        model_max_length = int(1e30)  # transformers' "not set"

    assert model_context_length(GPT2Config(n_positions=77), Tokenizer()) == 77
    assert model_context_length(LlamaConfig(max_position_embeddings=333), Tokenizer()) == 333

    class Bare:
        pass

    assert model_context_length(Bare(), Tokenizer()) is None
    Tokenizer.model_max_length = 512
    assert model_context_length(Bare(), Tokenizer()) == 512
