"""Session fixtures for generation tests: a tiny Llama, its tokenizer and a LoRA adapter.

They are built once per session from seeds (a few seconds on two cores) and
shared read-only; tests that need to alter files copy them first.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from sommelier_mlflow.data import TestExample
from sommelier_mlflow.generation import HFGenerator
from tests.generation.generation_helpers import TinyModels, corpus, make_examples
from tests.support.tiny_models import build_lora_adapter, build_tiny_llama, build_tokenizer


@pytest.fixture(autouse=True)
def _single_torch_thread() -> Iterator[None]:
    """Run each test's tiny models single-threaded, then restore torch's setting.

    On a busy two-core machine two OpenMP threads fighting over small kernels
    are several times slower than one; a fixed count also keeps numerics
    identical between the test process and the subprocesses it starts.
    Restoring after every test keeps the process-wide setting from leaking
    into other test packages.
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> TinyModels:
    root = tmp_path_factory.mktemp("tiny")
    tokenizer = build_tokenizer(root / "tokenizer", corpus())
    model_dir = build_tiny_llama(root / "model", tokenizer, seed=0)
    adapter_dir = build_lora_adapter(model_dir, root / "adapter", seed=1)
    return TinyModels(root, root / "tokenizer", model_dir, adapter_dir)


@pytest.fixture(scope="session")
def base_generator(tiny: TinyModels) -> HFGenerator:
    return HFGenerator(tiny.model_dir)


@pytest.fixture(scope="session")
def adapter_generator(tiny: TinyModels) -> HFGenerator:
    return HFGenerator(tiny.model_dir, adapter=tiny.adapter_dir)


@pytest.fixture(scope="session")
def tiny_tokenizer(base_generator: HFGenerator) -> Any:
    return base_generator.tokenizer


@pytest.fixture(scope="session")
def examples(tiny_tokenizer: Any) -> list[TestExample]:
    """40 examples: 20 English roots and their 20 German translations."""
    return make_examples(tiny_tokenizer, 20)
