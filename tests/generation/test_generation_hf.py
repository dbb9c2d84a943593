"""HFGenerator on a real tiny Llama with a real LoRA adapter (transformers + peft, CPU)."""

from __future__ import annotations

import logging
import pickle
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sommelier_mlflow._json import dumps_pretty, loads
from sommelier_mlflow.data import ModelIdentity, TestExample
from sommelier_mlflow.errors import ConfigError, DependencyError
from sommelier_mlflow.generation import HFGenerator, adapter_digest
from tests.generation.generation_helpers import TinyModels


@pytest.fixture
def transformers_warnings(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """Route transformers' own logger (normally not propagated) into caplog."""
    from transformers.utils import logging as hf_logging

    hf_logging.enable_propagation()
    caplog.set_level(logging.WARNING, logger="transformers")
    try:
        yield caplog
    finally:
        hf_logging.disable_propagation()


def test_base_generation_is_greedy_deterministic_and_returns_only_new_text(
    base_generator: HFGenerator,
    examples: list[TestExample],
    transformers_warnings: pytest.LogCaptureFixture,
) -> None:
    prompts = [example.prompt_text or "" for example in examples[:6]]
    first = base_generator.generate(prompts, max_new_tokens=12)
    second = base_generator.generate(prompts, max_new_tokens=12)
    assert first == second
    assert len(first) == 6
    assert all(isinstance(text, str) and text for text in first)
    # The prompt is never echoed back: the template's markers would show up.
    assert not any("<|assistant|>" in text or "Tools:" in text for text in first)
    # Prompts differ, so a real model gives different continuations for some of them.
    assert len(set(first)) > 1
    # A one-token budget yields the first token of the longer greedy continuation
    # (a lone partial UTF-8 byte decodes to U+FFFD on its own).
    one = base_generator.generate(prompts, max_new_tokens=1)
    assert all(
        long.startswith(short) or short == "\ufffd" for short, long in zip(one, first, strict=True)
    )
    assert all(len(short) < len(long) for short, long in zip(one, first, strict=True))
    # Generation left nothing for transformers to complain about (sampling flags etc.).
    assert [r.getMessage() for r in transformers_warnings.records] == []


def test_adapter_changes_outputs_and_is_identified_by_a_stable_digest(
    tiny: TinyModels,
    base_generator: HFGenerator,
    adapter_generator: HFGenerator,
    examples: list[TestExample],
) -> None:
    prompts = [example.prompt_text or "" for example in examples[:8]]
    base = base_generator.generate(prompts, max_new_tokens=10)
    adapted = adapter_generator.generate(prompts, max_new_tokens=10)
    assert sum(a != b for a, b in zip(base, adapted, strict=True)) >= 1

    info = adapter_generator.adapter_info()
    assert info is not None
    assert info == {
        "source": str(tiny.adapter_dir.resolve()),
        "sha256": adapter_digest(tiny.adapter_dir),
    }
    assert base_generator.adapter_info() is None
    # The identity is the base model's and the same for both arms.
    assert adapter_generator.model_identity() == base_generator.model_identity()
    assert base_generator.model_identity() == ModelIdentity(
        base_model=str(tiny.model_dir.resolve()),
        base_revision=None,
        tokenizer=str(tiny.model_dir.resolve()),
        tokenizer_revision=None,
    )
    assert adapter_generator.fingerprint()["adapter"] == info


def test_adapter_digest_covers_names_and_bytes(tiny: TinyModels, tmp_path: Path) -> None:
    copy = tmp_path / "adapter"
    shutil.copytree(tiny.adapter_dir, copy)
    original = adapter_digest(tiny.adapter_dir)
    assert adapter_digest(copy) == original  # location does not matter
    config = copy / "adapter_config.json"
    data = loads(config.read_bytes())
    data["lora_alpha"] = data["lora_alpha"] + 1
    config.write_bytes(dumps_pretty(data))
    changed = adapter_digest(copy)
    assert changed != original
    (copy / "notes.txt").write_text("", encoding="utf-8")
    assert adapter_digest(copy) not in {original, changed}


def test_generation_stops_at_an_end_of_sequence_token(
    tiny: TinyModels, base_generator: HFGenerator, examples: list[TestExample], tmp_path: Path
) -> None:
    prompt = examples[0].prompt_text or ""
    full = base_generator.generate([prompt], max_new_tokens=8)[0]
    first_token = base_generator.tokenizer(full, add_special_tokens=False)["input_ids"][1]
    # Same weights, but the second greedy token is declared end-of-sequence.
    variant = tmp_path / "model"
    shutil.copytree(tiny.model_dir, variant)
    config_path = variant / "generation_config.json"
    config = loads(config_path.read_bytes())
    config["eos_token_id"] = [*config["eos_token_id"], first_token]
    config_path.write_bytes(dumps_pretty(config))
    cut = HFGenerator(variant, num_threads=1).generate([prompt], max_new_tokens=8)[0]
    assert full.startswith(cut)
    assert len(cut) < len(full)
    assert (
        base_generator.tokenizer(cut, add_special_tokens=False)["input_ids"]
        == (base_generator.tokenizer(full, add_special_tokens=False)["input_ids"][:1])
    )
    (stopped,) = HFGenerator(variant, num_threads=1).generate_details([prompt], max_new_tokens=8)
    assert (stopped.text, stopped.finish_reason, stopped.completion_tokens) == (cut, "stop", 1)


def test_details_give_the_same_texts_with_finish_reasons_and_token_counts(
    base_generator: HFGenerator, examples: list[TestExample]
) -> None:
    prompts = [example.prompt_text or "" for example in examples[:4]]
    details = base_generator.generate_details(prompts, max_new_tokens=3)
    assert [d.text for d in details] == base_generator.generate(prompts, max_new_tokens=3)
    assert [d.prompt_tokens for d in details] == base_generator.prompt_lengths(prompts)
    for detail in details:
        assert detail.completion_tokens is not None and detail.completion_tokens <= 3
        # Without an end-of-sequence token the budget ended it.
        assert detail.finish_reason == ("stop" if detail.completion_tokens < 3 else "length")


def test_missing_model_directory_is_a_dependency_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-model"
    with pytest.raises(DependencyError, match=r"no-such-model.*does not exist"):
        HFGenerator(missing)
    with pytest.raises(DependencyError, match="does not exist"):
        HFGenerator(str(missing))
    assert DependencyError.exit_code == 3


def test_model_directory_without_weights_is_a_dependency_error(
    tiny: TinyModels, tmp_path: Path
) -> None:
    broken = tmp_path / "model"
    shutil.copytree(tiny.model_dir, broken)
    (broken / "model.safetensors").unlink()
    with pytest.raises(DependencyError, match="could not load the model") as info:
        HFGenerator(broken)
    assert info.value.__cause__ is not None


def test_adapter_without_safetensors_is_refused(tiny: TinyModels, tmp_path: Path) -> None:
    adapter = tmp_path / "adapter"
    shutil.copytree(tiny.adapter_dir, adapter)
    (adapter / "adapter_model.safetensors").rename(adapter / "adapter_model.bin")
    with pytest.raises(DependencyError, match=r"adapter_model\.safetensors.*safe_serialization"):
        HFGenerator(tiny.model_dir, adapter=adapter)
    with pytest.raises(DependencyError, match=r"adapter directory .* does not exist"):
        HFGenerator(tiny.model_dir, adapter=tmp_path / "nothing")
    (adapter / "adapter_config.json").unlink()
    with pytest.raises(DependencyError, match=r"adapter_config\.json"):
        HFGenerator(tiny.model_dir, adapter=adapter)


def test_hub_ids_need_a_pinned_revision_and_never_leak_the_token() -> None:
    with pytest.raises(ConfigError, match="revision"):
        HFGenerator("sommelier-test-org/not-a-real-model")
    secret = "hf_SeCrEt0123456789"
    # HF_HUB_OFFLINE=1 (tests/conftest.py): nothing is downloaded, the lookup fails locally.
    with pytest.raises(DependencyError, match="HF_HUB_OFFLINE") as info:
        HFGenerator("sommelier-test-org/not-a-real-model", revision="0" * 40, hf_token=secret)
    assert secret not in str(info.value)


def test_token_is_not_kept_in_anything_serialised(tiny: TinyModels) -> None:
    secret = "hf_SeCrEt0123456789"
    generator = HFGenerator(tiny.model_dir, adapter=tiny.adapter_dir, hf_token=secret)
    assert secret not in repr(generator)
    assert secret.encode() not in pickle.dumps(generator)  # not even kept privately
    assert secret not in str(generator.model_identity().to_dict())
    assert secret not in str(generator.fingerprint())
    assert generator.runtime_info()["dtype"] == "float32"
    assert generator.runtime_info()["device"] == "cpu"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dtype": "int8"}, "dtype"),
        ({"num_threads": 0}, "num_threads"),
        ({"revision": ""}, "revision"),
        ({"trust_remote_code": "yes"}, "trust_remote_code"),
    ],
)
def test_bad_options_are_config_errors(
    tiny: TinyModels, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        HFGenerator(tiny.model_dir, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("max_new_tokens", [0, -1, 1.5, True])
def test_generate_refuses_a_non_positive_token_budget(
    base_generator: HFGenerator, max_new_tokens: object
) -> None:
    with pytest.raises(ConfigError, match="max_new_tokens"):
        base_generator.generate(["x"], max_new_tokens=max_new_tokens)  # type: ignore[arg-type]


def test_tokenizer_can_come_from_elsewhere_and_must_exist(tiny: TinyModels, tmp_path: Path) -> None:
    generator = HFGenerator(tiny.model_dir, tokenizer=tiny.tokenizer_dir, num_threads=1)
    identity = generator.model_identity()
    assert identity.tokenizer == str(tiny.tokenizer_dir.resolve())
    assert identity.base_model == str(tiny.model_dir.resolve())
    with pytest.raises(DependencyError, match=r"tokenizer directory .* does not exist"):
        HFGenerator(tiny.model_dir, tokenizer=tmp_path / "missing-tokenizer")
    empty = tmp_path / "empty-tokenizer"
    empty.mkdir()
    with pytest.raises(DependencyError, match="could not load the tokenizer"):
        HFGenerator(tiny.model_dir, tokenizer=empty)


def test_missing_package_is_a_dependency_error_saying_what_to_install(
    tiny: TinyModels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "peft", None)  # makes `import peft` fail
    with pytest.raises(DependencyError, match="pip install peft"):
        HFGenerator(tiny.model_dir, adapter=tiny.adapter_dir)


def test_num_threads_is_applied_and_recorded(tiny: TinyModels) -> None:
    import torch

    generator = HFGenerator(tiny.model_dir, num_threads=2)
    assert torch.get_num_threads() == 2  # restored to 1 by the autouse fixture afterwards
    assert generator.runtime_info()["cpu_threads"] == "2"
