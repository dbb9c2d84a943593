"""The generation benchmark's wiring: every mode forces fixed-length outputs its own way.

The benchmark compares rates only if every completion is exactly
``--max-new-tokens`` long; each backend spells that option differently, and a
misspelt one would be refused only when the slow run builds the backend. These
tests parse each mode's option with its backend's own options class, so a
wrong name or value fails here, in a second, without a model.
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from sommelier_mlflow.generation import backend_spec
from tests.support.scripts import load_script
from tests.support.vllm_server import vllm_python

HAS_VLLM = importlib.util.find_spec("vllm") is not None
HAS_VLLM_VENV = vllm_python() is not None


def _bench() -> ModuleType:
    return load_script("benchmarks/bench_generation.py")


def test_the_modes_are_hf_batched_one_at_a_time_and_vllm_in_one_call() -> None:
    modes = _bench().default_modes(16, one_at_a_time_prompts=8)
    assert [(name, m.backend, m.batch_size, m.prompts) for name, m in modes.items()] == [
        ("hf batched", "hf", 16, None),
        ("hf one at a time", "hf", 1, 8),
        ("vllm", "vllm", None, None),  # every prompt in one call: the engine batches itself
        ("server", "server", None, None),
    ]
    # The precision hf computes in on a CPU: vLLM's auto would cast float32 to bfloat16.
    assert modes["vllm"].options == {"dtype": "float32"}


def test_a_bounded_context_goes_to_the_vllm_mode_only_and_parses_as_its_option() -> None:
    # A 128K-context shape (Llama-3.2-1B) needs 8 GiB of KV for one full-length request.
    modes = _bench().default_modes(16, vllm_max_model_len=4096)
    assert modes["vllm"].options == {"dtype": "float32", "max_model_len": "4096"}
    assert all(not m.options for name, m in modes.items() if name != "vllm")
    parsed = backend_spec("vllm").parse_options(dict(modes["vllm"].options))
    assert parsed.model_dump()["max_model_len"] == 4096


#: What a backend needs besides the floor to parse its options at all.
REQUIRED = {"server": {"base_url": "http://127.0.0.1:9/v1", "served_model": "base"}}


@pytest.mark.parametrize("backend", ["hf", "vllm", "server"])
def test_each_modes_fixed_length_option_is_its_backends_floor_on_new_tokens(backend: str) -> None:
    options = _bench().fixed_length_options(backend, 128)
    parsed = backend_spec(backend).parse_options({**REQUIRED.get(backend, {}), **options})
    floors = {name: value for name, value in parsed.model_dump().items() if value == 128}
    assert floors.keys() == options.keys() and len(floors) == 1
    # The floor changes the outputs, so it names the run's outputs, as hf's does.
    assert floors.items() <= parsed.job_identity().items()
    assert (
        not floors.keys()
        & backend_spec(backend).parse_options(REQUIRED.get(backend, {})).job_identity().keys()
    )


def test_a_backend_without_a_known_fixed_length_option_stops_the_benchmark() -> None:
    with pytest.raises(SystemExit, match="no fixed-length option known for backend 'other'"):
        _bench().fixed_length_options("other", 128)


def test_vllm_runs_only_where_it_is_installed_and_a_skip_is_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    kept = _bench().available_modes(_bench().default_modes(16))
    assert ("vllm" in kept) is HAS_VLLM
    assert ("server" in kept) is HAS_VLLM_VENV
    assert {"hf batched", "hf one at a time"} <= kept.keys()
    said = capsys.readouterr().err
    assert ("skipped mode 'vllm': vLLM is not installed" in said) is not HAS_VLLM
    assert ("skipped mode 'server': no .venv-vllm" in said) is not HAS_VLLM_VENV


def test_without_a_server_mode_no_server_is_started(tmp_path: Path) -> None:
    modes = {k: m for k, m in _bench().default_modes(16).items() if m.backend != "server"}
    with contextlib.ExitStack() as stack:
        same = _bench().served_modes(modes, tmp_path, tmp_path, 4, stack, tmp_path)
    assert same == modes and not list(tmp_path.iterdir())
