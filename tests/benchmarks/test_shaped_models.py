"""Benchmark models of real architectures: built offline, loaded by the product, fixed length.

One build of the Qwen2.5-0.5B shape cut to one layer (the real vocabulary,
widths and heads; bfloat16 to halve the write) is shared by the module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from sommelier_mlflow._json import loads
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.generation import BackendRequest, create_backend
from sommelier_mlflow.generation._hf import HFOptions
from tests.generation.generation_helpers import make_examples
from tests.support.scripts import load_script

NEW_TOKENS = 6


def _shapes() -> ModuleType:
    return load_script("benchmarks/shaped_models.py")


@pytest.fixture(autouse=True)
def _single_torch_thread() -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("shaped") / "qwen"
    _shapes().main(
        ["--shape", "qwen2.5-0.5b", "--out", str(out), "--layers", "1", "--dtype", "bfloat16"]
    )
    return out


def test_list_names_every_shape(capsys: pytest.CaptureFixture[str]) -> None:
    _shapes().main(["--list"])
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["qwen2.5-0.5b", "llama-3.2-1b", "qwen2.5-7b", "llama-3.1-8b"]


def test_built_directory_has_the_real_shape_and_a_rank_16_adapter(shaped: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    shape = _shapes().SHAPES["qwen2.5-0.5b"]
    config = AutoConfig.from_pretrained(shaped)
    assert config.model_type == "qwen2"
    assert (config.hidden_size, config.intermediate_size) == (896, 4864)
    assert (config.num_attention_heads, config.num_key_value_heads) == (14, 2)
    assert config.num_hidden_layers == 1  # the --layers override
    assert config.vocab_size == shape.vocab_size == 151936
    assert config.tie_word_embeddings is True
    assert len(AutoTokenizer.from_pretrained(shaped)) == 151936
    adapter = loads((shaped / "adapter" / "adapter_config.json").read_bytes())
    assert adapter["r"] == 16
    assert sorted(adapter["target_modules"]) == ["k_proj", "o_proj", "q_proj", "v_proj"]


def test_product_loads_both_arms_and_generates_exactly_n_tokens(shaped: Path) -> None:
    texts = {}
    for arm, adapter in (("base", None), ("adapter", str(shaped / "adapter"))):
        backend = create_backend(
            "hf",
            BackendRequest(
                model=str(shaped), adapter=adapter, options={"min_new_tokens": str(NEW_TOKENS)}
            ),
        )
        prompts = [e.prompt_text or "" for e in make_examples(backend.tokenizer, 2)]
        completions = backend.generate_details(prompts, max_new_tokens=NEW_TOKENS)  # type: ignore[attr-defined]
        assert [c.completion_tokens for c in completions] == [NEW_TOKENS] * len(prompts)
        assert {c.finish_reason for c in completions} == {"length"}
        assert backend.fingerprint()["min_new_tokens"] == NEW_TOKENS
        # A shorter call is cut at its own maximum, without transformers' length warning.
        short = backend.generate_details(prompts[:1], max_new_tokens=2)  # type: ignore[attr-defined]
        assert [c.completion_tokens for c in short] == [2]
        texts[arm] = [c.text for c in completions]
    assert texts["base"] != texts["adapter"]  # the random LoRA changes outputs


def test_min_new_tokens_names_the_run_and_is_checked() -> None:
    assert HFOptions(min_new_tokens=128).job_identity() == {"min_new_tokens": 128}
    assert HFOptions().job_identity() == {}
    with pytest.raises(ConfigError, match="min_new_tokens"):
        create_backend("hf", BackendRequest(model=".", options={"min_new_tokens": "0"}))
