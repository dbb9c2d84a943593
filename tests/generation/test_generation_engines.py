"""Shared engines: one per key, closed once by the last user; the hf backend's model shared by arms.

The registry is exercised with plain objects (no model), then the ``hf``
backend with a real tiny Llama and a real LoRA adapter: two generators on one
model load it once, the base generator's outputs never change when the
adapter is loaded into the shared model, and an adapter that fails half-way
leaves nobody running on a half-wrapped model (issue 31 item 2b).
"""

from __future__ import annotations

import gc
import json
import shutil
import warnings
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow.data import ModelIdentity, TestExample
from sommelier_mlflow.errors import DependencyError, InvariantViolationError
from sommelier_mlflow.generation import (
    BackendRequest,
    HFGenerator,
    create_backend,
    greedy_completions,
    greedy_generation_config,
    keep_engines,
    open_engines,
    register_backend,
    shared_engine,
)
from tests.generation.generation_helpers import TinyModels, count_model_loads


class _Engine:
    """An engine that counts how often it was closed."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class _Factory:
    """Opens :class:`_Engine` objects and keeps every one it opened."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.opened: list[_Engine] = []

    def __call__(self) -> _Engine:
        self.opened.append(_Engine(self.key))
        return self.opened[-1]


def test_one_engine_per_key_closed_once_by_its_last_lease() -> None:
    first, other = _Factory("engines-a"), _Factory("engines-b")
    one = shared_engine(("test", "a"), first)
    two = shared_engine(("test", "a"), first)
    three = shared_engine(("test", "b"), other)
    assert len(first.opened) == len(other.opened) == 1
    assert one.engine is two.engine is first.opened[0]
    assert {("test", "a"), ("test", "b")} <= set(open_engines())

    one.close()
    one.close()  # idempotent: it does not release a second time
    assert first.opened[0].closed == 0 and ("test", "a") in open_engines()
    with pytest.raises(InvariantViolationError, match="after its lease was closed"):
        _ = one.engine
    two.close()
    three.close()
    assert first.opened[0].closed == other.opened[0].closed == 1
    assert ("test", "a") not in open_engines() and ("test", "b") not in open_engines()

    with shared_engine(("test", "a"), first) as again:  # a closed engine is never handed out
        assert again.engine is first.opened[1]
    assert [engine.closed for engine in first.opened] == [1, 1]


def test_keep_engines_bridges_users_that_never_overlap_and_closes_on_error() -> None:
    factory = _Factory("kept")
    with pytest.raises(RuntimeError, match="second arm"), keep_engines():
        with shared_engine(("test", "kept"), factory) as base:
            assert base.engine is factory.opened[0]
        assert factory.opened[0].closed == 0  # kept for the next user
        with shared_engine(("test", "kept"), factory):
            raise RuntimeError("the second arm failed")
    assert len(factory.opened) == 1 and factory.opened[0].closed == 1
    assert ("test", "kept") not in open_engines()


def test_a_failing_factory_registers_nothing() -> None:
    def broken() -> _Engine:
        raise DependencyError("no such model")

    with pytest.raises(DependencyError, match="no such model"):
        shared_engine(("test", "broken"), broken)
    assert ("test", "broken") not in open_engines()
    factory = _Factory("broken")
    with shared_engine(("test", "broken"), factory) as lease:
        assert lease.engine is factory.opened[0]
    assert factory.opened[0].closed == 1


def test_a_retired_engine_serves_its_users_until_they_close() -> None:
    factory = _Factory("retired")
    old = shared_engine(("test", "retired"), factory)
    old.retire()
    assert ("test", "retired") not in open_engines()
    with shared_engine(("test", "retired"), factory) as fresh:
        assert fresh.engine is factory.opened[1]
    assert old.engine is factory.opened[0] and factory.opened[0].closed == 0
    old.close()
    assert [engine.closed for engine in factory.opened] == [1, 1]


def test_a_forgotten_lease_pins_no_engine() -> None:
    factory = _Factory("forgotten")
    lease = shared_engine(("test", "forgotten"), factory)
    engine = weakref.ref(factory.opened[0])
    factory.opened.clear()
    del lease
    gc.collect()
    assert engine() is None  # freed with its last holder, as without sharing
    assert ("test", "forgotten") not in open_engines()


_REFUSED: list[int] = []


@register_backend("engines_refused")
class _RefusedBackend:
    """A backend whose fingerprint lacks its identity, so create_backend refuses it."""

    tokenizer = None

    def __init__(self, request: BackendRequest, options: object) -> None:
        self._identity = request.declared_identity()

    def model_identity(self) -> ModelIdentity:
        return self._identity

    def adapter_info(self) -> None:
        return None

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        return ["" for _ in prompts]

    def fingerprint(self) -> dict[str, Any]:
        return {"backend": "engines_refused"}

    def close(self) -> None:
        _REFUSED.append(1)


def test_create_backend_closes_a_backend_it_refuses() -> None:
    with pytest.raises(InvariantViolationError, match="fingerprint"):
        create_backend("engines_refused", BackendRequest(model="m", revision="r"))
    assert _REFUSED == [1]


# -- the hf backend on one shared model -------------------------------------------------


@pytest.fixture
def model_copy(tiny: TinyModels, tmp_path: Path) -> Path:
    """The tiny model in a folder of its own: an engine key no other test holds open."""
    return Path(shutil.copytree(tiny.model_dir, tmp_path / "model"))


@pytest.fixture
def model_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every base model transformers loads, by folder name, in order."""
    return count_model_loads(monkeypatch)


def _unshared_adapter_outputs(model_dir: Path, adapter_dir: Path, prompts: list[str]) -> list[str]:
    """The adapter's outputs with transformers and peft alone: a model of its own, as before."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with warnings.catch_warnings():
        # peft 0.21 probes transformers' deprecated ``is_gradient_checkpointing``.
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        model = PeftModel.from_pretrained(base, str(adapter_dir), is_trainable=False).eval()
    config = greedy_generation_config(base.generation_config, tokenizer)
    model.generation_config = config
    with torch.inference_mode():
        completions = greedy_completions(
            model, tokenizer, prompts, max_new_tokens=12, generation_config=config, device="cpu"
        )
    return [completion.text for completion in completions]


def test_two_arms_on_one_model_load_it_once_and_the_base_never_sees_the_adapter(
    tiny: TinyModels, model_copy: Path, model_loads: list[str], examples: list[TestExample]
) -> None:
    prompts = [example.prompt_text or "" for example in examples[:6]]
    already_open = set(open_engines())  # the session's generators on the original folder
    base = HFGenerator(model_copy)
    before = base.generate(prompts, max_new_tokens=12)
    adapter = HFGenerator(model_copy, adapter=tiny.adapter_dir)
    assert model_loads == ["model"]  # the adapter arm reused the base arm's model
    assert base.tokenizer is adapter.tokenizer

    tuned = adapter.generate(prompts, max_new_tokens=12)
    assert tuned != before  # the adapter is active for its own arm...
    assert base.generate(prompts, max_new_tokens=12) == before  # ...and never for the base
    assert tuned == _unshared_adapter_outputs(model_copy, tiny.adapter_dir, prompts)
    assert base.fingerprint()["adapter"] is None and "peft" not in base.runtime_info()

    adapter.close()
    adapter.close()
    assert len(set(open_engines()) - already_open) == 1  # the base still holds it
    assert base.generate(prompts, max_new_tokens=12) == before
    base.close()
    assert set(open_engines()) == already_open
    with pytest.raises(InvariantViolationError, match="closed"):
        base.generate(prompts, max_new_tokens=12)


def test_an_adapter_that_fails_half_way_is_not_shared_with_anyone(
    tiny: TinyModels,
    model_copy: Path,
    model_loads: list[str],
    examples: list[TestExample],
    tmp_path: Path,
) -> None:
    """Weights of the wrong rank fail after peft already wrapped the shared model.

    The base arm on that model refuses to go on rather than run a half-wrapped
    model, and the next generator loads a clean copy.
    """
    prompts = [example.prompt_text or "" for example in examples[:4]]
    wrong = Path(shutil.copytree(tiny.adapter_dir, tmp_path / "wrong_rank"))
    config = json.loads((wrong / "adapter_config.json").read_text())
    (wrong / "adapter_config.json").write_text(json.dumps({**config, "r": 8}))
    base = HFGenerator(model_copy)
    before = base.generate(prompts, max_new_tokens=12)
    with pytest.raises(DependencyError, match="trained for this base model"):
        HFGenerator(model_copy, adapter=wrong)
    with pytest.raises(InvariantViolationError, match="load the backend again"):
        base.generate(prompts, max_new_tokens=12)
    base.close()
    with HFGenerator(model_copy) as fresh:
        assert fresh.generate(prompts, max_new_tokens=12) == before
    assert model_loads == ["model", "model"]


def test_several_adapters_on_one_model_each_generate_what_they_generate_alone(
    tiny: TinyModels, model_copy: Path, model_loads: list[str], examples: list[TestExample]
) -> None:
    """A sweep of adapters on one base (a leaderboard): one load, each adapter chosen per call."""
    from tests.support.tiny_models import build_lora_adapter

    prompts = [example.prompt_text or "" for example in examples[:4]]
    second = build_lora_adapter(model_copy, model_copy.parent / "second", seed=2)
    model_loads.clear()  # building the adapter loaded the model once
    base = HFGenerator(model_copy)
    plain = base.generate(prompts, max_new_tokens=12)
    first_arm = HFGenerator(model_copy, adapter=tiny.adapter_dir)
    second_arm = HFGenerator(model_copy, adapter=second)
    again = HFGenerator(model_copy, adapter=tiny.adapter_dir)  # the same adapter: loaded once
    assert model_loads == ["model"]
    outputs = {
        "second": second_arm.generate(prompts, max_new_tokens=12),
        "first": first_arm.generate(prompts, max_new_tokens=12),
    }
    assert outputs["first"] != outputs["second"]
    assert again.generate(prompts, max_new_tokens=12) == outputs["first"]
    assert second_arm.generate(prompts, max_new_tokens=12) == outputs["second"]
    assert base.generate(prompts, max_new_tokens=12) == plain
    for generator in (base, first_arm, second_arm, again):
        generator.close()
    model_loads.clear()  # the references below load models of their own
    assert outputs["first"] == _unshared_adapter_outputs(model_copy, tiny.adapter_dir, prompts)
    assert outputs["second"] == _unshared_adapter_outputs(model_copy, second, prompts)
