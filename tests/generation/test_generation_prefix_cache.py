"""The ``hf`` backend's prefix cache: what it keeps, and that it changes no completion."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sommelier_mlflow.data import Decoding
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.generation import (
    TRAJECTORIES_NAME,
    BackendRequest,
    HFGenerator,
    backend_spec,
    create_backend,
    run_generation,
)
from sommelier_mlflow.generation._prefix_cache import PrefixCache
from tests.generation.conftest import TinyModels
from tests.generation.generation_helpers import snapshot
from tests.generation.multi_turn_helpers import demo_tokenizer, play, question
from tests.generation.test_generation_multi_turn import _cut_inside_the_third_round

DEMO_MODEL = Path(__file__).resolve().parents[2] / "examples" / "demo" / "model"

#: A system prompt with tools, as every prompt of an evaluation starts.
SYSTEM = "System: you may call get_weather(city) and convert(amount, unit). Answer in JSON.\n"


def _ids(*tokens: int) -> np.ndarray:
    return np.asarray(tokens, dtype=np.int64)


def test_the_longest_kept_prefix_is_found_and_an_extension_replaces_what_it_covers() -> None:
    pool = PrefixCache(100)
    pool.keep(_ids(1, 2, 3), ["abc"])
    pool.keep(_ids(1, 2, 9, 9), ["ab99"])
    entry, length = pool.longest(_ids(1, 2, 3, 4))
    assert (entry is not None, length, entry.layers if entry else None) == (True, 3, ["abc"])
    entry, length = pool.longest(_ids(1, 2, 9, 7))
    assert (length, entry.layers if entry else None) == (3, ["ab99"])
    assert pool.longest(_ids(5, 1, 2)) == (None, 0)
    pool.keep(_ids(1, 2, 3, 4, 5), ["abc45"])  # covers (1, 2, 3), which goes
    assert pool.kept_tokens == 4 + 5
    assert pool.longest(_ids(1, 2, 3))[0].layers == ["abc45"]  # type: ignore[union-attr]


def test_past_the_capacity_the_least_recently_used_prompt_goes_first() -> None:
    pool = PrefixCache(10)
    pool.keep(_ids(1, 1, 1, 1), ["ones"])
    pool.keep(_ids(2, 2, 2, 2), ["twos"])
    pool.longest(_ids(1, 1))  # the ones are used again: the twos are now the stalest
    pool.keep(_ids(3, 3, 3, 3), ["threes"])
    assert pool.kept_tokens == 8
    assert pool.longest(_ids(2, 2))[1] == 0
    assert pool.longest(_ids(1, 1))[1] == 2
    pool.keep(_ids(*range(11)), ["too long"])  # longer than the whole capacity: not kept
    assert pool.longest(_ids(0, 1))[1] == 0
    pool.clear()
    assert pool.kept_tokens == 0


@pytest.mark.parametrize("capacity", [0, -5, 2.5, True])
def test_a_capacity_that_is_not_a_positive_integer_is_refused(capacity: Any) -> None:
    with pytest.raises(ConfigError, match="prefix_cache_tokens"):
        PrefixCache(capacity)


@pytest.fixture(scope="module")
def demo_arms() -> dict[str, tuple[HFGenerator, HFGenerator]]:
    """Per arm, the demo model in float64 without and with a prefix cache."""
    arms = {}
    for arm, adapter in (("base", None), ("adapter", DEMO_MODEL / "adapter")):
        plain = HFGenerator(DEMO_MODEL / "base_model", adapter=adapter, dtype="float64")
        cached = HFGenerator(
            DEMO_MODEL / "base_model", adapter=adapter, dtype="float64", prefix_cache_tokens=20_000
        )
        arms[arm] = (plain, cached)
    yield arms
    for plain, cached in arms.values():
        plain.close()
        cached.close()


@pytest.mark.parametrize("arm", ["base", "adapter"])
def test_completions_with_the_cache_equal_those_without_it(
    demo_arms: dict[str, tuple[HFGenerator, HFGenerator]], arm: str
) -> None:
    plain, cached = demo_arms[arm]
    first = [f"{SYSTEM}User: the weather in city number {i}?\nAssistant:" for i in range(5)]
    second = [
        f"{prompt} I will look.\nTool: sunny, {i} degrees\nAssistant:"
        for i, prompt in enumerate(first)
    ]
    third = [f"{SYSTEM}User: convert {i} euros\nAssistant:" for i in range(3)]
    # Batches of mixed lengths (padding), one prompt alone, prompts extending kept ones.
    for batch in (first, second[:1], second[1:], third + second[:2], ["a"]):
        assert cached.generate_details(batch, max_new_tokens=12) == plain.generate_details(
            batch, max_new_tokens=12
        )
    pool = cached._prefix_cache
    assert pool is not None
    # The system prompt was computed once, and each second prompt only past its first.
    assert pool.hits > 2 * pool.computed


def test_the_cache_names_the_outputs_and_is_dropped_on_close() -> None:
    spec = backend_spec("hf")
    options = spec.parse_options({"prefix_cache_tokens": "50000"})
    assert options.job_identity() == {"prefix_cache_tokens": 50_000}
    with pytest.raises(ConfigError, match="prefix_cache_tokens"):
        spec.parse_options({"prefix_cache_tokens": "0"})
    request = BackendRequest(
        model=str(DEMO_MODEL / "base_model"), options={"prefix_cache_tokens": 1000}
    )
    backend = create_backend("hf", request)
    assert backend.fingerprint()["prefix_cache_tokens"] == 1000
    assert "prefix_cache_tokens" not in HFGenerator(DEMO_MODEL / "base_model").fingerprint()
    backend.generate([SYSTEM + "User: hi\nAssistant:"], max_new_tokens=2)
    pool = backend._prefix_cache
    assert pool is not None and pool.kept_tokens > 0
    backend.close()
    assert pool.kept_tokens == 0


def test_a_sliding_window_model_is_refused_naming_the_option(
    tiny: TinyModels, tmp_path: Path
) -> None:
    from transformers import MistralConfig, MistralForCausalLM

    config = MistralConfig(
        vocab_size=512,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        sliding_window=16,
    )
    MistralForCausalLM(config).save_pretrained(tmp_path / "mistral")
    for item in tiny.tokenizer_dir.iterdir():
        shutil.copy(item, tmp_path / "mistral" / item.name)
    with pytest.raises(ConfigError, match=r"DynamicSlidingWindowLayer.*prefix_cache_tokens"):
        HFGenerator(tmp_path / "mistral", prefix_cache_tokens=1000)
    HFGenerator(tmp_path / "mistral").close()  # the model itself loads; only the cache is refused


def test_a_multi_turn_run_with_the_cache_plays_exactly_as_one_without(tmp_path: Path) -> None:
    tokenizer = demo_tokenizer()
    questions = [question(f"q{i}", turns=2) for i in range(3)]
    trajectories = {}
    for label, capacity in (("plain", None), ("cached", 100_000)):
        with HFGenerator(
            DEMO_MODEL / "base_model", dtype="float64", prefix_cache_tokens=capacity
        ) as model:
            paths = play(questions, model, tmp_path / label, tokenizer=tokenizer)
            trajectories[label] = (tmp_path / label / TRAJECTORIES_NAME).read_bytes()
            assert paths["en"].read_bytes().count(b"\n") == len(questions)
            if capacity is not None:
                pool = model._prefix_cache
                assert pool is not None and pool.hits > pool.computed
    assert trajectories["cached"] == trajectories["plain"]


def _pool_state(generator: HFGenerator) -> tuple[int, int, list[tuple[list[int], list[Any]]]]:
    """What a cache computed and holds: counts, then each kept prompt's ids and states."""
    pool = generator._prefix_cache
    assert pool is not None
    entries = [(entry.ids.tolist(), entry.layers) for entry in pool._entries]
    return pool.hits, pool.computed, entries


def _same_pool(one: HFGenerator, other: HFGenerator) -> None:
    import torch

    hits, computed, entries = _pool_state(one)
    assert (hits, computed) == _pool_state(other)[:2]
    other_entries = _pool_state(other)[2]
    assert [ids for ids, _ in entries] == [ids for ids, _ in other_entries]
    for (_, layers), (_, other_layers) in zip(entries, other_entries, strict=True):
        for (keys, values), (other_keys, other_values) in zip(layers, other_layers, strict=True):
            assert torch.equal(keys, other_keys) and torch.equal(values, other_values)


def _cached(model: Path) -> HFGenerator:
    return HFGenerator(model, dtype="float64", prefix_cache_tokens=1_000_000)


def test_a_resumed_run_ends_with_the_cache_an_uninterrupted_run_holds(
    tiny: TinyModels, examples: list[Any], tmp_path: Path
) -> None:
    decoding = Decoding(max_new_tokens=8, batch_size=4)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    with _cached(tiny.model_dir) as first:
        run_generation(
            examples, first, decoding=decoding, model_kind="base", out_dir=whole, progress=False
        )
        shutil.copytree(whole, cut)
        en = cut / "generations" / "en.jsonl"
        en.write_bytes(b"".join(en.read_bytes().splitlines(keepends=True)[:-3]))
        with _cached(tiny.model_dir) as second:
            run_generation(
                examples, second, decoding=decoding, model_kind="base", out_dir=cut, progress=False
            )
            assert snapshot(cut) == snapshot(whole)
            # The batches it skipped went through its cache, so it holds what the first does.
            _same_pool(first, second)


def test_a_resumed_multi_turn_run_ends_with_the_cache_an_uninterrupted_run_holds(
    tmp_path: Path,
) -> None:
    tokenizer = demo_tokenizer()
    questions = [question(f"q{i}", turns=4) for i in range(3)]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    with _cached(DEMO_MODEL / "base_model") as first:
        play(questions, first, whole, tokenizer=tokenizer)
        rounds = _cut_inside_the_third_round(whole, cut)
        assert max(rounds) >= 3
        with _cached(DEMO_MODEL / "base_model") as second:
            play(questions, second, cut, tokenizer=tokenizer)
            assert snapshot(cut) == snapshot(whole)
            _same_pool(first, second)


def test_a_batch_cache_that_outgrows_its_room_doubles_it_and_keeps_every_position() -> None:
    import torch

    from sommelier_mlflow.generation._prefix_cache import _preallocated_layer

    room = torch.zeros((1, 2, 3, 4))
    room[:, :, :2] = 1.0
    layer = _preallocated_layer()(room.clone(), room.clone(), 2)
    step = torch.full((1, 2, 5, 4), 2.0)  # 2 kept + 5 new > 3 positions of room
    keys, values = layer.update(step, step)
    assert keys.shape == values.shape == (1, 2, 7, 4)
    assert layer.get_seq_length() == 7
    assert torch.equal(keys[:, :, :2], torch.ones((1, 2, 2, 4)))
    assert torch.equal(keys[:, :, 2:], step)
