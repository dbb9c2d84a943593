"""The ``replay`` backend: completions produced elsewhere, looked up by example or prompt.

This is a real backend, not a test double: it lets outputs produced
elsewhere (another machine, a hosted API, an earlier run) go through the
same runner, records and scoring as live generation. ``score --precomputed``
keys the outputs by ``example_id``, because two examples may share a prompt
while their rows hold different texts; keying by prompt text is for callers
whose outputs are a pure function of the prompt (greedy replays, tests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.errors import ConfigError, InputError
from sommelier_mlflow.generation._protocol import BackendRequest
from sommelier_mlflow.generation._registry import BackendOptions, register_backend

__all__ = ["ReplayOptions", "ReplayGenerator"]

_KEYS: Final = ("prompt", "example_id")


class ReplayOptions(BackendOptions):
    """What the replay backend replays; ``score --precomputed`` fills it, not a command line.

    The outputs' keys and values are checked by :class:`ReplayGenerator`.
    """

    outputs: Mapping[Any, Any] | None = None
    name: str = "replay"
    keyed_by: Literal["prompt", "example_id"] = "prompt"


class ReplayGenerator:
    """Replays precomputed completions keyed by exact prompt text or by ``example_id``.

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
        keyed_by: Literal["prompt", "example_id"] = "prompt",
    ) -> None:
        """Store a copy of ``key -> completion`` and the declared identity.

        Raises:
            ConfigError: If a key or value is not a string, or ``keyed_by`` is
                neither ``"prompt"`` nor ``"example_id"``.
        """
        if keyed_by not in _KEYS:
            raise ConfigError(f"replay keyed_by must be 'prompt' or 'example_id', got {keyed_by!r}")
        for key, completion in outputs.items():
            if not isinstance(key, str) or not isinstance(completion, str):
                raise ConfigError(
                    f"replay outputs must map {keyed_by} (str) to completion text (str); got "
                    f"{type(key).__name__} -> {type(completion).__name__}"
                )
        self._outputs = dict(outputs)
        self._keyed_by = keyed_by
        self._name = name
        self._identity = identity
        self._adapter = None if adapter is None else dict(adapter)

    def __repr__(self) -> str:
        return (
            f"ReplayGenerator(name={self._name!r}, keyed_by={self._keyed_by!r}, "
            f"outputs={len(self._outputs)})"
        )

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
            ConfigError: If the outputs are keyed by ``example_id``: a prompt
                alone cannot say which example's row answers it.
            InputError: If any prompt has no stored completion; the message
                gives its SHA-256 so the missing row can be found.
        """
        if self._keyed_by == "example_id":
            raise ConfigError(
                f"replay generator {self._name!r} holds outputs by example_id; generate through "
                "run_generation, which passes each prompt's example (generate_for)"
            )
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

    def generate_for(
        self, example_ids: Sequence[str], prompts: Sequence[str], *, max_new_tokens: int
    ) -> list[str]:
        """Each example's own completion (or its prompt's, when keyed by prompt).

        Raises:
            InputError: If an example (or prompt) has no stored completion.
        """
        if self._keyed_by == "prompt":
            return self.generate(prompts, max_new_tokens=max_new_tokens)
        missing = [example_id for example_id in example_ids if example_id not in self._outputs]
        if missing:
            raise InputError(
                f"replay generator {self._name!r} has no output for example_id {missing[0]!r}; "
                "supply outputs for every example in the split"
            )
        return [self._outputs[example_id] for example_id in example_ids]

    def fingerprint(self) -> dict[str, Any]:
        """Identify the replayed outputs by a digest of the whole mapping and its key."""
        return {
            "backend": "replay",
            "name": self._name,
            "keyed_by": self._keyed_by,
            "outputs_sha256": sha256_text(canonical_json(self._outputs)),
            "model_identity": None if self._identity is None else self._identity.to_dict(),
            "adapter": self.adapter_info(),
        }


@register_backend("replay", options=ReplayOptions, listed=False)
def replay_backend(request: BackendRequest, options: ReplayOptions) -> ReplayGenerator:
    """Completions produced elsewhere, replayed (built by ``score --precomputed``).

    ``options.outputs`` maps a key to its completion; ``options.keyed_by`` says
    what the keys are: ``"prompt"`` (the default) or ``"example_id"``.

    Raises:
        ConfigError: No outputs were given, or a local-only setting (device,
            threads, remote code) that replaying cannot honour.
    """
    outputs = options.outputs
    if outputs is None:
        raise ConfigError(
            "the replay backend re-plays completions produced elsewhere and needs them: "
            "use `sommelier-mlflow score --precomputed FILE` (rows of example_id and raw_text)"
        )
    if request.device is not None or request.trust_remote_code:
        raise ConfigError("the replay backend loads no model: drop --device/--trust-remote-code")
    return ReplayGenerator(
        outputs,
        name=options.name,
        keyed_by=options.keyed_by,
        identity=request.declared_identity(),
        adapter=request.declared_adapter(),
    )
