"""Session-wide test settings: no telemetry, no hub access, no GPU surprises.

Also the expensive fixtures several packages share, each started once per
test session: the offline demo's model and adapter, and a vLLM server.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# One torch thread per test process (the product's `--num-threads 0` honours it too):
# scripts/test.sh runs two pytest workers on CI's two cores, and a second thread per
# process only oversubscribes them, where OpenMP's spinning makes a tiny model decode
# several times slower. Tests that are about thread counts set theirs explicitly.
# Those (the cross-kernel demo test's two-thread runs) wait passively: a spinning
# OpenMP thread would burn the core the other worker needs.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each test file on one pytest-xdist worker, and every vLLM test on the same one.

    ``scripts/test.sh`` runs the suite on two workers with ``--dist loadgroup``.
    A file's module fixtures (a scored run, a tracking store, a finished
    ``mlflow run``) are then built once, and the vLLM server, a session fixture
    that takes a minute and gigabytes to start, is started by one worker only.
    """
    uses_vllm = {
        item.nodeid.split("::")[0]
        for item in items
        if "vllm_server" in getattr(item, "fixturenames", ())
    }
    for item in items:
        path = item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group("vllm" if path in uses_vllm else path))


@pytest.fixture(scope="session")
def demo_assets() -> Any:
    """The offline demo's committed base model and adapter (verified) and its prepared splits."""
    from tests.support.vllm_server import build_demo_assets

    return build_demo_assets()


@pytest.fixture(scope="session")
def vllm_server(tmp_path_factory: pytest.TempPathFactory, demo_assets: Any) -> Iterator[Any]:
    """A real vLLM server serving the demo base and its LoRA adapter, key-protected."""
    from tests.support.programs import require
    from tests.support.vllm_server import VllmServer, vllm_python

    python = vllm_python()
    require(python is not None, "the vLLM venv (`bash scripts/setup_vllm.sh` builds .venv-vllm)")
    assert python is not None
    root = tmp_path_factory.mktemp("vllm")
    server = VllmServer(
        python=python,
        base_dir=demo_assets.base_model_dir,
        adapter_dir=demo_assets.adapter_dir,
        log_path=root / "vllm.log",
        api_key="sk-vllm-planted-4f1c2e9a7b",
    )
    server.start()
    try:
        yield server
    finally:
        server.stop()
