"""The ``replay`` backend: completions produced elsewhere, looked up by prompt.

This is a real backend, not a test double: it lets outputs produced
elsewhere (another machine, a hosted API, an earlier run) go through the
same runner, records and scoring as live generation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.generation._protocol import BackendRequest
from sommelier_mlflow.generation._registry import register_backend

__all__ = ["ReplayGenerator"]

_OPTIONS: Final = frozenset({"outputs", "name"})


class ReplayGenerator:
    """Replays precomputed completions keyed by exact prompt text.

    ``max_new_tokens`` is accepted for interface compatibility and ignored,
    because the outputs were already produced under whatever limit the
    producer used. The model identity cannot be observed from outputs, so it
    is declared by whoever built them and recorded as declared.
    """

    def __init__(
        self,
        outputs: Mapping[str, str],
        *,
        name: str = "replay",
        identity: ModelIdentity | None = None,
        adapter: dict[str, str] | None = None,
    ) -> None:
        """Store a copy of ``prompt -> completion`` and the declared identity.

        Raises:
            ConfigError: If a key or value is not a string.
        """
        for prompt, completion in outputs.items():
            if not isinstance(prompt, str) or not isinstance(completion, str):
                raise ConfigError(
                    "replay outputs must map prompt text (str) to completion text (str); got "
                    f"{type(prompt).__name__} -> {type(completion).__name__}"
                )
        self._outputs = dict(outputs)
        self._name = name
        self._identity = identity
        self._adapter = None if adapter is None else dict(adapter)

    def __repr__(self) -> str:
        return f"ReplayGenerator(name={self._name!r}, prompts={len(self._outputs)})"

    @property
    def tokenizer(self) -> None:
        """No tokenizer: replayed prompts must already be in the split."""
        return None

    def model_identity(self) -> ModelIdentity:
        """The declared identity of the model that produced the outputs.

        Raises:
            ConfigError: If none was declared.
        """
        if self._identity is None:
            raise ConfigError(
                f"replay generator {self._name!r} has no declared model identity; pass the "
                "model (and revision/tokenizer) that produced the outputs"
            )
        return self._identity

    def adapter_info(self) -> dict[str, str] | None:
        """The declared adapter's source and digest, or ``None``."""
        return None if self._adapter is None else dict(self._adapter)

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        """Look every prompt up; a prompt with no stored output is an input error.

        Raises:
            InputError: If any prompt has no stored completion; the message
                gives its SHA-256 so the missing row can be found.
        """
        completions = []
        for prompt in prompts:
            try:
                completions.append(self._outputs[prompt])
            except KeyError:
                raise InputError(
                    f"replay generator {self._name!r} has no output for the prompt with "
                    f"sha256 {sha256_text(prompt)}; supply outputs for every prompt in the split"
                ) from None
        return completions

    def fingerprint(self) -> dict[str, Any]:
        """Identify the replayed outputs by a digest of the whole mapping."""
        return {
            "backend": "replay",
            "name": self._name,
            "outputs_sha256": sha256_text(canonical_json(self._outputs)),
            "model_identity": None if self._identity is None else self._identity.to_dict(),
            "adapter": self.adapter_info(),
        }


@register_backend("replay")
def replay_backend(request: BackendRequest) -> ReplayGenerator:
    """Build the replay backend from ``options["outputs"]`` (prompt text -> completion).

    Raises:
        ConfigError: No outputs were given, an unknown option, or a local-only
            setting (device, threads, remote code) that replaying cannot honour.
    """
    request.refuse_options("replay", _OPTIONS)
    outputs = request.options.get("outputs")
    if not isinstance(outputs, Mapping):
        raise ConfigError(
            "the replay backend re-plays completions produced elsewhere and needs them: "
            "use `sommelier-mlflow score --precomputed FILE` (rows of example_id and raw_text)"
        )
    if request.device is not None or request.trust_remote_code:
        raise ConfigError("the replay backend loads no model: drop --device/--trust-remote-code")
    name = request.options.get("name", "replay")
    if not isinstance(name, str):
        raise ConfigError(f"replay option 'name' must be a string, got {name!r}")
    return ReplayGenerator(
        outputs,
        name=name,
        identity=request.declared_identity(),
        adapter=request.declared_adapter(),
    )
