"""What produced an arm's generations: its kind, model and tokenizer, and decoding.

The comparison gate compares exactly these between two arms, and every
generation record and report carries them; they describe how a run was made,
not a row of data, so they live apart from the row types. Like the rows they
are frozen dataclasses with validating constructors that refuse, never coerce.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from sommelier_mlflow._json import field_dict
from sommelier_mlflow.errors import ConfigError, InputError

__all__ = [
    "ModelKind",
    "MODEL_KINDS",
    "check_model_kind",
    "Decoding",
    "ModelIdentity",
]

ModelKind = Literal["base", "adapter"]
MODEL_KINDS: Final[tuple[ModelKind, ...]] = ("base", "adapter")


def check_model_kind(value: object, error: type[InputError] = InputError) -> ModelKind:
    """Return ``value`` as a :data:`ModelKind`, or raise ``error`` saying what is allowed.

    The one check of an arm's kind: configuration passes ``ConfigError``, file
    readers catch the ``InputError`` and add the file and line.
    """
    if value == "base" and isinstance(value, str):
        return "base"
    if value == "adapter" and isinstance(value, str):
        return "adapter"
    raise error(f"model_kind must be 'base' or 'adapter', got {value!r}")


@dataclass(frozen=True, slots=True)
class Decoding:
    """Greedy decoding settings, validated and never coerced.

    ``batch_size`` is part of the identity because batched and unbatched
    greedy decoding can differ numerically (padding), so base and adapter
    must have used the same one to be comparable. ``backend`` (the registered
    generation backend's name, such as ``hf``) is part of it for the same
    reason: two engines decoding "greedily" need not produce the same tokens.
    It is optional so that generations and reports written before backends
    had names still read and rewrite unchanged; it is recorded only when set.

    ``execution`` is set when completions were produced by an execution loop
    (BFCL's multi-turn questions): the loop's name, its step limit, the output
    format that decoded each step's calls and the version of the package whose
    classes ran them. Each of those changes what the model sees after its
    first step, so two arms are comparable only under the same loop; it too
    is recorded only when set.
    """

    max_new_tokens: int
    batch_size: int
    temperature: float = 0.0
    do_sample: bool = False
    backend: str | None = None
    execution: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if type(self.temperature) is not float or self.temperature != 0.0:
            raise ConfigError(
                f"decoding.temperature must be 0.0 (greedy decoding), got {self.temperature!r}"
            )
        if self.do_sample is not False:
            raise ConfigError(f"decoding.do_sample must be false, got {self.do_sample!r}")
        for name in ("max_new_tokens", "batch_size"):
            value = getattr(self, name)
            if type(value) is not int or value <= 0:
                raise ConfigError(f"decoding.{name} must be a positive integer, got {value!r}")
        if self.backend is not None and (
            not isinstance(self.backend, str) or not self.backend.strip()
        ):
            raise ConfigError(
                f"decoding.backend must be a backend name such as 'hf', got {self.backend!r}"
            )
        if self.execution is not None and (
            not isinstance(self.execution, Mapping)
            or not self.execution
            or not all(isinstance(key, str) for key in self.execution)
        ):
            raise ConfigError(
                "decoding.execution must be an object describing the execution loop "
                f"(name, step limit, ...), got {self.execution!r}"
            )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Decoding:
        """Validate a decoding mapping exactly as stored in records and reports."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"decoding must be an object, got {data!r}")
        expected = {"temperature", "do_sample", "max_new_tokens", "batch_size"}
        optional = {"backend", "execution"}
        if set(data) - optional != expected:
            missing = sorted(expected - set(data))
            extra = sorted(set(data) - expected - optional)
            raise ConfigError(f"decoding fields wrong: missing {missing}, unexpected {extra}")
        for name in sorted(optional & set(data)):
            if data[name] is None:
                raise ConfigError(f"decoding.{name} is recorded only when known; drop the null")
        return cls(
            max_new_tokens=data["max_new_tokens"],
            batch_size=data["batch_size"],
            temperature=data["temperature"],
            do_sample=data["do_sample"],
            backend=data.get("backend"),
            execution=data.get("execution"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The decoding dict recorded on every generation and in reports."""
        decoding: dict[str, Any] = {
            "temperature": self.temperature,
            "do_sample": self.do_sample,
            "max_new_tokens": self.max_new_tokens,
            "batch_size": self.batch_size,
        }
        if self.backend is not None:
            decoding["backend"] = self.backend
        if self.execution is not None:
            decoding["execution"] = dict(self.execution)
        return decoding


@dataclass(frozen=True, slots=True)
class ModelIdentity:
    """What must be identical between base and adapter arms: the base model and tokenizer.

    The adapter is deliberately not part of it: it is what the comparison
    is about, and is recorded per arm next to this identity.
    """

    base_model: str
    base_revision: str | None
    tokenizer: str
    tokenizer_revision: str | None

    def to_dict(self) -> dict[str, str | None]:
        """Serialise for reports and the comparison gate."""
        return field_dict(self)
