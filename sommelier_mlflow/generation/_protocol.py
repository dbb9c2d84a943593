"""The backend-neutral interfaces that generation runs against.

Scoring and the resumable runner only ever see :class:`TextGenerator`, so a
Hugging Face model, an OpenAI-compatible server or a file of precomputed
outputs are interchangeable without touching either. Two optional protocols
let a generator opt into better batching (:class:`SupportsPromptLengths`) and
into resume safety checks (:class:`SupportsFingerprint`).

:class:`GenerationBackend` is what the command line builds by name (see
:mod:`sommelier_mlflow.generation._registry`): a text generator that also
says which model it is (for the comparison gate) and which tokenizer renders
its prompts (for formatting). :class:`BackendRequest` is the one set of
inputs every backend factory receives. :class:`SupportsClose` is the optional
lifecycle: whoever builds a backend closes it once (:func:`close_backend`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.errors import ConfigError
from sommelier_mlflow.generation._identity import declared_adapter, declared_identity

__all__ = [
    "check_generate_args",
    "TextGenerator",
    "SupportsPromptLengths",
    "SupportsFingerprint",
    "Completion",
    "SupportsCompletionDetails",
    "SupportsExampleKeys",
    "SupportsRunRecord",
    "SupportsContextLength",
    "SupportsClose",
    "SupportsPrefill",
    "close_backend",
    "GenerationBackend",
    "BackendRequest",
]


def check_generate_args(prompts: Sequence[str], max_new_tokens: int) -> None:
    """Refuse arguments no backend can honour, before any work or request starts.

    Raises:
        ConfigError: ``max_new_tokens`` is not a positive integer or a prompt is
            not a string.
    """
    if type(max_new_tokens) is not int or max_new_tokens <= 0:
        raise ConfigError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    for prompt in prompts:
        if not isinstance(prompt, str):
            raise ConfigError(f"prompts must be strings, got {type(prompt).__name__}")


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


@runtime_checkable
class SupportsPrefill(Protocol):
    """A generator whose outputs depend on the batches it has already run.

    The ``hf`` backend's prefix cache keeps earlier prompts' states, so a
    batch's numbers depend on what came before it. A resumed run hands such a
    generator every batch it skips (in the order an uninterrupted run would
    have generated them), so that it reaches the same state, and the batches
    it then generates come out as they would have.
    """

    def prefill(self, prompts: Sequence[str]) -> None:
        """Take in ``prompts`` as generating them as one batch would, generating nothing."""
        ...


@dataclass(frozen=True, slots=True)
class Completion:
    """One completion and what the backend knows about how it was produced.

    Only ``text`` enters the generation records (and so the scores); the rest
    is operational detail for throughput and truncation reporting, ``None``
    where a backend cannot tell.

    Attributes:
        text: The newly generated text, exactly what ``generate`` returns.
        finish_reason: ``"stop"`` (end of sequence), ``"length"`` (hit
            ``max_new_tokens``) or a backend's own reason.
        prompt_tokens: Tokens the prompt took, in the backend's tokenizer.
        completion_tokens: Tokens generated, end-of-sequence excluded.
    """

    text: str
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@runtime_checkable
class SupportsCompletionDetails(Protocol):
    """A generator that can report per-completion details alongside the text.

    The runner prefers this over ``generate`` when it exists; the texts must
    be the ones ``generate`` would return for the same batch.
    """

    def generate_details(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[Completion]:
        """Return one :class:`Completion` per prompt, in the same order."""
        ...


@runtime_checkable
class SupportsExampleKeys(Protocol):
    """A generator whose outputs belong to examples rather than to prompt texts.

    Completions produced elsewhere (``score --precomputed``) are rows keyed by
    ``example_id``, and two examples may share one prompt while their rows hold
    different texts (sampled outputs, a second attempt). The runner gives such a
    generator each prompt's ``example_id`` so that no row can answer for another.
    """

    def generate_for(
        self, example_ids: Sequence[str], prompts: Sequence[str], *, max_new_tokens: int
    ) -> list[str]:
        """Return the completion of each example, in the same order as ``example_ids``."""
        ...


@runtime_checkable
class SupportsRunRecord(Protocol):
    """A backend with more to record about a run than its completions.

    A served backend knows per-example ``finish_reason`` and token usage, the
    server's own identity and its throughput; the command line records them
    next to the generations (a JSONL file), as run params and as
    ``generation/...`` metrics. Local backends need not implement it.
    """

    def record_usage_to(self, path: str | os.PathLike[str]) -> None:
        """Append one JSON line per completed prompt to ``path`` from now on."""
        ...

    def run_metrics(self) -> dict[str, float]:
        """Throughput of what this process generated (empty when nothing was)."""
        ...

    def run_params(self) -> dict[str, object]:
        """Params describing how the outputs were produced; never a secret."""
        ...


@runtime_checkable
class SupportsContextLength(Protocol):
    """A generator that knows how many positions its model attends over.

    A prompt whose tokens plus ``max_new_tokens`` exceed it cannot be answered
    as asked: transformers only warns and decodes garbage past the last
    position, a server refuses the request. The runner measures every prompt
    with ``prompt_lengths`` (the same tokens the backend sends) and refuses,
    or the command line skips, those that do not fit, before any generation.
    """

    def context_length(self) -> int | None:
        """Positions for prompt and completion together; ``None`` when the model does not say."""
        ...


@runtime_checkable
class SupportsClose(Protocol):
    """A backend (or engine) holding something that must be let go: a model, a GPU, a client.

    Optional: a backend without ``close()`` is closed by being dropped. Whoever
    creates a backend closes it exactly once when done, also on error: the
    command line does for every arm (``evaluate``, ``main`` and its worker,
    ``score --precomputed``), as does the training callback. After ``close()``
    the backend may refuse to generate; an engine it shares with other
    backends (:func:`~sommelier_mlflow.generation.shared_engine`) closes with
    its last user.
    """

    def close(self) -> None:
        """Release what the backend holds; called once, when its user is done."""
        ...


def close_backend(backend: object) -> None:
    """Call ``backend.close()`` if it has one (a third-party backend may not)."""
    if isinstance(backend, SupportsClose):
        backend.close()


@runtime_checkable
class GenerationBackend(TextGenerator, SupportsFingerprint, Protocol):
    """A named generation backend: completions plus everything recorded about them.

    Beyond :meth:`generate` (required), ``prompt_lengths`` (optional, see
    :class:`SupportsPromptLengths`) and ``generate_details`` (optional, see
    :class:`SupportsCompletionDetails`), a backend answers three questions:

    * which model it is: :meth:`model_identity` and :meth:`adapter_info` are
      what the comparison gate holds equal (identity) or records per arm
      (adapter);
    * what determines its outputs: :meth:`fingerprint` guards resumed runs
      and is stored in ``generation_manifest.json``. It must contain
      ``"model_identity"`` (``model_identity().to_dict()``) and ``"adapter"``
      (``adapter_info()``) so that the generations can be re-scored later
      without the model; :func:`~sommelier_mlflow.generation.create_backend`
      checks this;
    * how prompts are rendered: :attr:`tokenizer` is the chat-template
      tokenizer that formats unformatted examples, or ``None`` when the
      backend cannot render (then the split must already carry its prompts).

    Its lifecycle is optional (:class:`SupportsClose`): a backend that holds
    a model or a connection defines ``close()``, and whoever built it calls
    :func:`close_backend` once done, on error too.
    """

    @property
    def tokenizer(self) -> Any:
        """The chat-template tokenizer used for formatting, or ``None``."""
        ...

    def model_identity(self) -> ModelIdentity:
        """Base model and tokenizer sources with their revisions."""
        ...

    def adapter_info(self) -> dict[str, str] | None:
        """``{"source", "sha256"}`` of the adapter in use, or ``None`` for a base model."""
        ...


@dataclass(frozen=True)
class BackendRequest:
    """What the user asked for, in the one shape every backend factory receives.

    The common fields mean the same for every backend; a backend uses those
    that apply and must refuse (``ConfigError``) a field it cannot honour
    rather than ignore it. Backend-specific settings travel in ``options``,
    checked against the backend's registered options model (unknown keys are
    refused) before its factory runs. Secrets never travel here: a
    backend reads them from the environment where it uses them, so a request
    can be printed or logged safely.

    Attributes:
        model: A local model directory or a Hub id (the base model).
        revision: Pinned revision of a Hub model.
        tokenizer: Tokenizer directory or Hub id; defaults to the model's.
        tokenizer_revision: Pinned revision of a separately given tokenizer.
        adapter: A peft adapter directory, or ``None`` for the base model.
        device: Accelerator to run on (``"cpu"``, ``"cuda:1"``...); local backends only.
        trust_remote_code: Whether code shipped with the model may run.
        num_threads: CPU threads for a local backend; ``None`` leaves the default.
        options: Backend-specific settings, by option name (strings from a
            command line are converted by the backend's options model).
        keep_special_tokens: Decode completions without dropping special
            tokens (the end-of-sequence text is still cut), because the output
            format's tags are special tokens of some tokenizers (Hermes'
            ``<tool_call>``).
    """

    model: str
    revision: str | None = None
    tokenizer: str | None = None
    tokenizer_revision: str | None = None
    adapter: str | None = None
    device: str | None = None
    trust_remote_code: bool = False
    num_threads: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    keep_special_tokens: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError(f"model must be a Hub id or a local directory, got {self.model!r}")
        if self.num_threads is not None and (
            type(self.num_threads) is not int or self.num_threads <= 0
        ):
            raise ConfigError(f"num_threads must be a positive integer, got {self.num_threads!r}")

    def declared_identity(self) -> ModelIdentity:
        """The identity as declared, for backends that do not load the model themselves."""
        return declared_identity(self.model, self.revision, self.tokenizer, self.tokenizer_revision)

    def declared_adapter(self) -> dict[str, str] | None:
        """The declared adapter directory's source and digest, or ``None``."""
        return declared_adapter(self.adapter)
