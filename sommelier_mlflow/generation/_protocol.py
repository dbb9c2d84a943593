"""The backend-neutral interface that generation runs against.

Scoring and the resumable runner only ever see :class:`TextGenerator`, so a
Hugging Face model, an OpenAI-compatible server or a file of precomputed
outputs are interchangeable without touching either. Two optional protocols
let a backend opt into better batching (:class:`SupportsPromptLengths`) and into
resume safety checks (:class:`SupportsFingerprint`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from sommelier_mlflow._json import canonical_json, sha256_text
from sommelier_mlflow.errors import ConfigError, InputError

__all__ = [
    "ReplayGenerator",
    "SupportsFingerprint",
    "SupportsPromptLengths",
    "TextGenerator",
]


@runtime_checkable
class TextGenerator(Protocol):
    """Anything that turns prompts into greedy completions.

    Implementations must be deterministic: the same prompts in the same batch
    give the same completions, one per prompt, in prompt order. Only the newly
    generated text is returned, never the prompt.
    """

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        """Return one greedy completion per prompt, in the same order."""
        ...


@runtime_checkable
class SupportsPromptLengths(Protocol):
    """A generator that can measure prompts in its own units (usually tokens).

    The runner sorts prompts by length to limit padding; a token count is a
    better proxy for padding than a character count when the backend has one.
    """

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Return the length of each prompt, in the same order."""
        ...


@runtime_checkable
class SupportsFingerprint(Protocol):
    """A generator that can say which model produced its outputs.

    The runner stores the fingerprint next to the generations and refuses to
    resume into a directory written by a different model or adapter, which
    would otherwise yield one file silently mixing two models' outputs.
    """

    def fingerprint(self) -> dict[str, Any]:
        """A JSON-serialisable description of everything that determines outputs."""
        ...


class ReplayGenerator:
    """Replays precomputed completions keyed by exact prompt text.

    This is a real backend, not a test double: it lets outputs produced
    elsewhere (another machine, a hosted API, an earlier run) go through the
    same runner, records and scoring as live generation. ``max_new_tokens`` is
    accepted for interface compatibility and ignored, because the outputs were
    already produced under whatever limit the producer used.
    """

    def __init__(self, outputs: Mapping[str, str], *, name: str = "replay") -> None:
        """Store a copy of ``prompt -> completion``.

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

    def __repr__(self) -> str:
        return f"ReplayGenerator(name={self._name!r}, prompts={len(self._outputs)})"

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
        }
