"""Backends by name: the registry, the protocol's identity duties, the manifest read-back."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from sommelier_mlflow._json import canonical_json
from sommelier_mlflow.data import Decoding, ModelIdentity, read_generations
from sommelier_mlflow.errors import ConfigError, DataError, InvariantViolationError
from sommelier_mlflow.generation import (
    MANIFEST_NAME,
    BackendRequest,
    GenerationBackend,
    HFGenerator,
    NoOptions,
    ReplayGenerator,
    backend_names,
    backend_spec,
    create_backend,
    find_recorded_identity,
    physical_cores,
    register_backend,
    run_generation,
)
from tests.generation.generation_helpers import TinyModels
from tests.support.examples import formatted_example

CALL = '{"name": "get_weather", "arguments": {"city": "Oslo"}}'


class UpperBackend:
    """A third-party style backend: answers every prompt with a fixed call."""

    def __init__(self, request: BackendRequest, *, honest: bool = True) -> None:
        self._identity = request.declared_identity()
        self._adapter = request.declared_adapter()
        self._honest = honest

    @property
    def tokenizer(self) -> None:
        return None

    def model_identity(self) -> ModelIdentity:
        return self._identity

    def adapter_info(self) -> dict[str, str] | None:
        return self._adapter

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        return [CALL if "Oslo" in prompt else prompt.upper() for prompt in prompts]

    def fingerprint(self) -> dict[str, Any]:
        if not self._honest:
            return {"backend": "dishonest"}
        return {
            "backend": "test_upper",
            "model_identity": self._identity.to_dict(),
            "adapter": self._adapter,
        }


@register_backend("test_upper")
def _upper(request: BackendRequest, options: NoOptions) -> UpperBackend:
    return UpperBackend(request)


@register_backend("test_dishonest")
def _dishonest(request: BackendRequest, options: NoOptions) -> UpperBackend:
    return UpperBackend(request, honest=False)


@register_backend("test_not_a_backend")
def _not_a_backend(request: BackendRequest, options: NoOptions) -> Any:
    return object()


def test_the_built_in_backends_are_registered_when_the_package_is_imported() -> None:
    assert {"hf", "replay"} <= set(backend_names())
    assert list(backend_names()) == sorted(backend_names())


def test_an_unknown_backend_is_a_config_error_listing_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"choose one of .*hf, server"):
        create_backend("vllm_typo", BackendRequest(model="m"))


@pytest.mark.parametrize("name", ["", "Hf", "1st", "with-dash", "with space"])
def test_malformed_backend_names_are_refused(name: str) -> None:
    with pytest.raises(ConfigError, match="backend name"):
        register_backend(name)


def test_a_taken_name_is_not_silently_replaced() -> None:
    with pytest.raises(ConfigError, match="already registered"):
        register_backend("hf")(_upper)
    register_backend("test_upper")(_upper)  # the same factory again is harmless


def test_a_registered_backend_runs_and_its_manifest_gives_the_identity_back(
    tmp_path: Path,
) -> None:
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights")
    request = BackendRequest(model="org/model", revision="abc", adapter=str(adapter))
    backend = create_backend("test_upper", request)
    assert isinstance(backend, GenerationBackend)
    examples = [
        formatted_example("e1", prompt="weather in Oslo"),
        formatted_example("e2", prompt="hello"),
    ]
    decoding = Decoding(max_new_tokens=4, batch_size=2, backend="test_upper")
    paths = run_generation(
        examples, backend, decoding=decoding, model_kind="adapter", out_dir=tmp_path / "out"
    )
    records = read_generations(paths["en"])
    assert [record.raw_text for record in records] == [CALL, "HELLO"]
    assert records[0].decoding["backend"] == "test_upper"
    recorded = find_recorded_identity(tmp_path / "out" / "generations")
    assert recorded is not None
    assert recorded.model_identity == ModelIdentity("org/model", "abc", "org/model", "abc")
    assert recorded.adapter == backend.adapter_info()
    assert recorded.adapter is not None and recorded.adapter["sha256"] != ""
    assert recorded.manifest_path == tmp_path / "out" / MANIFEST_NAME


def test_a_fingerprint_without_the_backend_identity_is_refused() -> None:
    with pytest.raises(InvariantViolationError, match="model_identity"):
        create_backend("test_dishonest", BackendRequest(model="m"))
    with pytest.raises(InvariantViolationError, match="GenerationBackend"):
        create_backend("test_not_a_backend", BackendRequest(model="m"))


def test_replay_backend_needs_outputs_and_refuses_what_it_cannot_honour() -> None:
    with pytest.raises(ConfigError, match="--precomputed"):
        create_backend("replay", BackendRequest(model="m"))
    with pytest.raises(ConfigError, match="base_url"):
        create_backend("replay", BackendRequest(model="m", options={"base_url": "x"}))
    with pytest.raises(ConfigError, match="--device"):
        create_backend("replay", BackendRequest(model="m", device="cpu", options={"outputs": {}}))
    replay = create_backend(
        "replay", BackendRequest(model="m", revision="r", options={"outputs": {"p": "o"}})
    )
    assert isinstance(replay, ReplayGenerator)
    assert replay.tokenizer is None
    assert replay.generate(["p"], max_new_tokens=1) == ["o"]
    assert replay.fingerprint()["model_identity"] == ModelIdentity("m", "r", "m", "r").to_dict()


def test_a_bare_replay_generator_has_no_identity_to_offer() -> None:
    with pytest.raises(ConfigError, match="declared model identity"):
        ReplayGenerator({"p": "o"}).model_identity()


def test_request_validates_its_common_fields() -> None:
    with pytest.raises(ConfigError, match="model"):
        BackendRequest(model=" ")
    with pytest.raises(ConfigError, match="num_threads"):
        BackendRequest(model="m", num_threads=0)


def test_hf_backend_is_built_from_a_request(tiny: TinyModels) -> None:
    request = BackendRequest(
        model=str(tiny.model_dir), adapter=str(tiny.adapter_dir), num_threads=1
    )
    backend = create_backend("hf", request)
    assert isinstance(backend, HFGenerator)
    assert backend.tokenizer is not None
    assert backend.fingerprint()["adapter"] == backend.adapter_info() is not None
    with pytest.raises(ConfigError, match="does not take the option"):
        create_backend("hf", BackendRequest(model=str(tiny.model_dir), options={"x": 1}))


def test_the_hf_dtype_option_sets_the_precision_and_names_the_outputs(tiny: TinyModels) -> None:
    request = BackendRequest(model=str(tiny.model_dir), options={"dtype": "float64"})
    backend = create_backend("hf", request)
    assert backend.runtime_info()["dtype"] == "float64"
    assert str(next(backend._lease.engine.model.parameters()).dtype) == "torch.float64"
    assert isinstance(backend.generate(["hello"], max_new_tokens=3)[0], str)
    spec = backend_spec("hf")
    assert spec.parse_options({"dtype": "float64"}).job_identity() == {"dtype": "float64"}
    assert spec.parse_options({}).job_identity() == {}
    with pytest.raises(ConfigError, match="dtype"):
        create_backend("hf", BackendRequest(model=str(tiny.model_dir), options={"dtype": "int8"}))


def test_a_manifest_without_an_identity_is_a_data_error(tmp_path: Path) -> None:
    assert find_recorded_identity(tmp_path / "generations") is None
    (tmp_path / "generations").mkdir()
    (tmp_path / MANIFEST_NAME).write_text(canonical_json({"generator": None}))
    with pytest.raises(DataError, match="model identity"):
        find_recorded_identity(tmp_path / "generations")


def test_physical_cores_is_a_usable_thread_count() -> None:
    cores = physical_cores()
    assert 1 <= cores <= (os.cpu_count() or 1)
