"""The ``hf`` backend: greedy batched generation with transformers and an optional peft adapter.

torch, transformers and peft are imported inside the functions that need
them: importing :mod:`sommelier_mlflow.generation` must stay cheap and must
work on machines that only score existing generations.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import threading
import typing
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import Field

from sommelier_mlflow._redact import redact
from sommelier_mlflow.errors import ConfigError, DependencyError, InvariantViolationError
from sommelier_mlflow.generation._engines import shared_engine
from sommelier_mlflow.generation._identity import (
    LocalSources,
    adapter_digest,
    load_errors,
    load_pretrained,
)
from sommelier_mlflow.generation._prefix_cache import (
    PrefixCache,
    check_prefix_cacheable,
    pooled_states,
    prefilled_batch,
)
from sommelier_mlflow.generation._protocol import BackendRequest, Completion, check_generate_args
from sommelier_mlflow.generation._registry import BackendOptions, register_backend

__all__ = [
    "DTYPES",
    "HFGenerator",
    "greedy_generation_config",
    "greedy_completions",
    "model_context_length",
    "physical_cores",
    "HFOptions",
    "hf_backend",
]

DType = Literal["float32", "float64", "bfloat16", "float16"]
#: Accepted ``dtype`` names; anything else would be a silent precision change.
DTYPES: Final = typing.get_args(DType)

_ADAPTER_WEIGHTS: Final = "adapter_model.safetensors"
_ADAPTER_CONFIG: Final = "adapter_config.json"
# Hub ids look like ``name`` or ``org/name``; anything else that does not exist
# on disk is reported as a missing path rather than sent to the Hub.
_HUB_ID: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
#: Config fields that hold a model's context, by architecture (Llama/Qwen, GPT-2, Bloom, ...).
_CONTEXT_FIELDS: Final = (
    "max_position_embeddings",
    "n_positions",
    "max_sequence_length",
    "seq_length",
    "n_ctx",
)
#: A tokenizer that sets no ``model_max_length`` reports transformers' int(1e30).
_NO_TOKENIZER_LIMIT: Final = 10**12


def _offline_hint() -> str:
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return " (HF_HUB_OFFLINE is set, so it must already be in the local Hugging Face cache)"
    return ""


def _resolve_source(
    value: str | os.PathLike[str], revision: str | None, *, what: str, revision_option: str
) -> tuple[str, str | None, bool]:
    """Decide whether ``value`` is a local directory or a Hub id.

    Returns:
        ``(source, revision, is_local)``; local sources are absolute paths so
        that two arms naming the same directory differently still match.
    """
    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ConfigError(f"{revision_option} must be a non-empty string or None, got {revision!r}")
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{what} must be a Hub id or a local directory, got {value!r}")
    path = Path(text).expanduser()
    if path.exists():
        if not path.is_dir():
            raise DependencyError(
                f"{what} path {text!r} is a file; pass the directory that holds config and weights"
            )
        return str(path.resolve()), revision, True
    if isinstance(value, os.PathLike) or not _HUB_ID.fullmatch(text):
        raise DependencyError(
            f"{what} directory {text!r} does not exist; pass an existing local directory "
            "or a Hugging Face Hub id with a pinned revision"
        )
    if revision is None:
        raise ConfigError(
            f"{what} {text!r} is not a local directory, so it names a Hugging Face Hub repo, "
            f"whose revision must be pinned: pass {revision_option} (a commit hash) so that "
            "every run loads the very same files (or fix the path)"
        )
    return text, revision, False


def _import_stack(need_peft: bool) -> None:
    """Import the heavy dependencies, turning absence into an actionable error."""
    missing = []
    for module in ("torch", "transformers", *(("peft",) if need_peft else ())):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise DependencyError(
            f"generation needs {', '.join(missing)}: install it with "
            f"`pip install {' '.join(missing)}` (or `pip install sommelier-mlflow`)"
        )


def _dtype_keyword() -> str:
    """The from_pretrained dtype keyword: ``torch_dtype`` became ``dtype`` in 4.56."""
    import transformers
    from packaging.version import Version

    return "dtype" if Version(transformers.__version__) >= Version("4.56") else "torch_dtype"


def _check_adapter_dir(adapter: str | os.PathLike[str]) -> Path:
    path = Path(os.fspath(adapter)).expanduser()
    if not path.is_dir():
        raise DependencyError(
            f"adapter directory {os.fspath(adapter)!r} does not exist; pass the directory "
            "written by peft's save_pretrained"
        )
    if not (path / _ADAPTER_CONFIG).is_file():
        raise DependencyError(
            f"adapter directory {str(path)!r} has no {_ADAPTER_CONFIG}; pass the directory "
            "written by peft's save_pretrained"
        )
    if not (path / _ADAPTER_WEIGHTS).is_file():
        raise DependencyError(
            f"adapter directory {str(path)!r} has no {_ADAPTER_WEIGHTS}; only safetensors "
            "adapters are loaded (pickled .bin weights can run code): re-save the adapter with "
            "save_pretrained(..., safe_serialization=True)"
        )
    return path.resolve()


@dataclass(frozen=True)
class _EngineKey:
    """What an ``hf`` engine loads: backends with equal keys share one model and tokenizer.

    Everything that changes the loaded weights or how they compute is in it;
    the adapter is not (it is chosen per call), nor the Hub token (a secret,
    and the revision already pins the files).
    """

    model: str
    revision: str | None
    tokenizer: str
    tokenizer_revision: str | None
    device: str
    dtype: str
    trust_remote_code: bool
    backend: str = "hf"


class _HFEngine:
    """One loaded base model and its tokenizer, shared by the ``hf`` backends of every arm on it.

    Arms of one base differ only by their adapter, so the adapters are peft's
    named adapters on one ``PeftModel``, loaded once each. peft wraps the base
    model in place (it swaps LoRA layers into it), which is what the base arm
    must never see: once an adapter is loaded, the base arm generates under
    ``disable_adapter()``, where every LoRA layer returns its base layer's
    output, the very computation of the unwrapped model, and an adapter arm
    makes its own adapter the active one first. One lock makes choosing and
    generating a single step, so two arms in two threads cannot interleave.
    An adapter that fails to load may leave the base model half-wrapped: the
    engine is then *damaged*, refuses every further use, and is shared no more.
    """

    def __init__(
        self, model: Any, tokenizer: Any, revision: str | None, context: int | None, device: str
    ) -> None:
        self.model: Any = model
        self.tokenizer: Any = tokenizer
        self.revision = revision
        self.context_length = context
        self.device = device
        self.damaged: str | None = None
        self._peft: Any = None
        self._adapters: dict[tuple[str, str], str] = {}
        self._lock = threading.RLock()

    def __getstate__(self) -> dict[str, Any]:
        return {name: value for name, value in vars(self).items() if name != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._lock = threading.RLock()

    def _check(self) -> None:
        if self.damaged is not None:
            raise InvariantViolationError(
                f"the shared model was left unusable ({self.damaged}); load the backend again"
            )

    def attach(self, path: Path, sha256: str, token: str | None) -> str:
        """The peft name of the adapter at ``path``, loading it onto the model the first time.

        Raises:
            DependencyError: The adapter does not fit the model (the engine is then damaged).
        """
        from peft import PeftModel

        with self._lock:
            self._check()
            name = self._adapters.get((str(path), sha256))
            if name is not None:
                return name
            # The first keeps peft's default name, so a lone adapter loads exactly as before.
            name = f"adapter_{len(self._adapters)}" if self._adapters else "default"
            # peft raises RuntimeError for weights whose shapes do not fit the base model.
            errors: tuple[type[Exception], ...] = (*load_errors(), RuntimeError)
            try:
                with warnings.catch_warnings():
                    # peft 0.21 probes transformers' deprecated ``is_gradient_checkpointing``;
                    # the deprecation is theirs to fix and says nothing about this adapter.
                    warnings.filterwarnings(
                        "ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning
                    )
                    if self._peft is None:
                        self._peft = PeftModel.from_pretrained(
                            self.model,
                            str(path),
                            adapter_name=name,
                            is_trainable=False,
                            token=token,
                        )
                    else:
                        self._peft.load_adapter(
                            str(path), adapter_name=name, is_trainable=False, token=token
                        )
            except BaseException as exc:
                self.damaged = f"the adapter {str(path)!r} failed to load onto it"
                if not isinstance(exc, errors):
                    raise
                raise DependencyError(
                    f"could not load the adapter {str(path)!r} onto {self.model.name_or_path!r}: "
                    f"{redact(str(exc), secrets=[token])}; check that the adapter was trained "
                    "for this base model"
                ) from exc
            peft_model = self._peft
            peft_model.generation_config = greedy_generation_config(
                peft_model.generation_config, self.tokenizer
            )
            peft_model.to(self.device)
            peft_model.eval()
            self._adapters[(str(path), sha256)] = name
            return name

    @contextlib.contextmanager
    def selected(self, adapter: str | None) -> Iterator[Any]:
        """The model to generate with, ``adapter`` active (``None``: the base model alone)."""
        with self._lock:
            self._check()
            peft_model = self._peft
            if peft_model is None:
                yield self.model
            elif adapter is None:
                with peft_model.disable_adapter():
                    yield peft_model.get_base_model()
            else:
                if peft_model.active_adapter != adapter:
                    peft_model.set_adapter(adapter)
                yield peft_model

    def close(self) -> None:
        """Drop the model and tokenizer, returning accelerator memory before the next load."""
        with self._lock:
            self.damaged = "it was closed"
            self.model = self._peft = self.tokenizer = None
            self._adapters.clear()
        if self.device.startswith("cuda"):
            import gc

            import torch

            gc.collect()  # peft's wrappers hold cycles: free them before emptying the cache
            torch.cuda.empty_cache()


class HFGenerator(LocalSources):
    """A Hugging Face causal LM (plus optional LoRA/peft adapter) decoding greedily.

    The model is loaded when the generator is built, so a missing model,
    tokenizer, adapter or package fails before any output is written. It is
    loaded once per process for every generator open on the same model,
    tokenizer, device and dtype (:func:`shared_engine`): ``main``'s base and
    adapter arms run on one copy, each with its own adapter selected (the
    base with none, see :class:`_HFEngine`). :meth:`close` lets it go.

    Decoding is pure greedy (argmax, one beam): the model's own
    ``generation_config`` sampling defaults (temperature, top-p, repetition
    penalty, ...) are replaced by a clean config that keeps only its special
    token ids, because the decoding recorded with every generation must be
    the decoding that actually ran.
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        revision: str | None = None,
        tokenizer: str | os.PathLike[str] | None = None,
        tokenizer_revision: str | None = None,
        adapter: str | os.PathLike[str] | None = None,
        device: str | None = None,
        dtype: str | None = None,
        trust_remote_code: bool = False,
        hf_token: str | None = None,
        num_threads: int | None = None,
        keep_special_tokens: bool = False,
        min_new_tokens: int | None = None,
        prefix_cache_tokens: int | None = None,
    ) -> None:
        """Load tokenizer, model and adapter.

        Args:
            model: A local model directory or a Hugging Face Hub id.
            revision: Commit (or tag) of a Hub model; required for Hub ids,
                optional for local directories.
            tokenizer: Tokenizer directory or Hub id; defaults to ``model``.
            tokenizer_revision: Revision of a separately given Hub tokenizer;
                defaults to ``revision`` when ``tokenizer`` is not given.
            adapter: A peft adapter directory containing
                ``adapter_model.safetensors``.
            device: ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; defaults to CUDA
                when available, else CPU.
            dtype: One of :data:`DTYPES`; defaults to float32 on CPU and
                bfloat16 (float16 where unsupported) on CUDA.
            trust_remote_code: Passed to transformers; off unless asked for,
                since it runs code from the model repository.
            hf_token: Hub token for gated models; used for loading only and
                never stored in identities, fingerprints, reprs or errors.
            num_threads: If given, ``torch.set_num_threads`` (process-wide);
                small models on few CPU cores are often faster single-threaded.
            keep_special_tokens: Decode completions keeping special tokens (the
                output format's tags), still cut before end-of-sequence.
            min_new_tokens: If given, end-of-sequence is suppressed until that
                many tokens are generated (transformers' ``min_new_tokens``):
                with ``min_new_tokens == max_new_tokens`` every completion has
                exactly that length, which fixed-cost benchmarks need. It
                changes outputs, so it is part of the fingerprint.
            prefix_cache_tokens: If given, keep the attention states of up to
                this many prompt positions between calls and start each
                prompt from the longest prefix kept
                (:mod:`~sommelier_mlflow.generation._prefix_cache`): a
                multi-turn step then computes only what its conversation
                added. It can flip a near-tie greedy choice, so it is part of
                the fingerprint.

        Raises:
            ConfigError: Bad dtype, device, thread count or unpinned Hub revision.
            DependencyError: Missing package, model, tokenizer or adapter.
        """
        if dtype is not None and dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)} or None, got {dtype!r}")
        if num_threads is not None and (type(num_threads) is not int or num_threads <= 0):
            raise ConfigError(f"num_threads must be a positive integer, got {num_threads!r}")
        if type(trust_remote_code) is not bool:
            raise ConfigError(f"trust_remote_code must be a bool, got {trust_remote_code!r}")
        if min_new_tokens is not None and (type(min_new_tokens) is not int or min_new_tokens <= 0):
            raise ConfigError(f"min_new_tokens must be a positive integer, got {min_new_tokens!r}")
        self._min_new_tokens = min_new_tokens
        self._prefix_cache = (
            None if prefix_cache_tokens is None else PrefixCache(prefix_cache_tokens)
        )
        self._model_source, self._revision, model_local = _resolve_source(
            model, revision, what="model", revision_option="revision"
        )
        if tokenizer is None:
            self._tokenizer_source = self._model_source
            self._tokenizer_revision = self._revision
        else:
            self._tokenizer_source, self._tokenizer_revision, _ = _resolve_source(
                tokenizer,
                tokenizer_revision,
                what="tokenizer",
                revision_option="tokenizer_revision",
            )
        self._adapter_path = None if adapter is None else _check_adapter_dir(adapter)
        _import_stack(need_peft=self._adapter_path is not None)
        self._adapter_sha256 = (
            None if self._adapter_path is None else adapter_digest(self._adapter_path)
        )

        import torch

        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self._device, self._dtype_name = self._choose_device(device, dtype)
        self._trust_remote_code = trust_remote_code
        self._keep_special_tokens = keep_special_tokens
        key = _EngineKey(
            self._model_source,
            self._revision,
            self._tokenizer_source,
            self._tokenizer_revision,
            self._device,
            self._dtype_name,
            trust_remote_code,
        )
        # The token is passed down, never kept: nothing reachable from self holds it
        # (the registry keeps the engine, never its factory).
        self._lease = shared_engine(key, lambda: self._load_engine(model_local, hf_token))
        engine = self._lease.engine
        try:
            self._adapter_name = (
                None
                if self._adapter_path is None or self._adapter_sha256 is None
                else engine.attach(self._adapter_path, self._adapter_sha256, hf_token)
            )
        except BaseException:
            if engine.damaged:
                self._lease.retire()  # nobody else may load onto a half-wrapped model
            self._lease.close()
            raise
        if self._prefix_cache is not None:
            try:
                self._prefix_cache.keyword = check_prefix_cacheable(engine.model)
            except BaseException:
                self._lease.close()
                raise
        self._context_length = engine.context_length
        self._revision = engine.revision
        if tokenizer is None:
            self._tokenizer_revision = engine.revision

    def __repr__(self) -> str:
        return (
            f"HFGenerator(model={self._model_source!r}, revision={self._revision!r}, "
            f"adapter={None if self._adapter_path is None else str(self._adapter_path)!r}, "
            f"device={self._device!r}, dtype={self._dtype_name!r})"
        )

    # -- loading -----------------------------------------------------------------

    def _choose_device(self, device: str | None, dtype: str | None) -> tuple[str, str]:
        import torch

        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        try:
            parsed = torch.device(device)
        except (RuntimeError, TypeError) as exc:
            raise ConfigError(f"device {device!r} is not a torch device name") from exc
        if parsed.type == "cuda" and not torch.cuda.is_available():
            raise DependencyError(
                f"device {device!r} requested but CUDA is not available; pass device='cpu'"
            )
        if dtype is None:
            if parsed.type == "cuda":
                dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
            else:
                dtype = "float32"
        return str(parsed), dtype

    def _load_tokenizer(self, token: str | None) -> Any:
        tokenizer = self._pretrained_tokenizer(
            self._trust_remote_code,
            token,
            _offline_hint(),
            "pass an existing tokenizer directory or Hub id",
        )
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token is None:
                raise DependencyError(
                    f"tokenizer {self._tokenizer_source!r} has neither a pad nor an eos token, "
                    "so batches cannot be padded; pass a tokenizer that defines one"
                )
            tokenizer.pad_token = tokenizer.eos_token
        # Decoder-only models continue from the last position: pad on the left.
        tokenizer.padding_side = "left"
        return tokenizer

    def _load_engine(self, model_local: bool, token: str | None) -> _HFEngine:
        """Tokenizer and base model, once per engine key (see :func:`shared_engine`)."""
        import torch
        from transformers import AutoModelForCausalLM

        tokenizer = self._load_tokenizer(token)
        model = load_pretrained(
            AutoModelForCausalLM.from_pretrained,
            "model",
            self._model_source,
            self._revision,
            token,
            _offline_hint(),
            "pass an existing model directory or Hub id",
            trust_remote_code=self._trust_remote_code,
            **{_dtype_keyword(): getattr(torch, self._dtype_name)},
        )
        # A Hub revision such as a tag is recorded as the commit it resolved to.
        commit = getattr(model.config, "_commit_hash", None)
        context_length = model_context_length(model.config, tokenizer)
        resolved = self._revision if model_local or not isinstance(commit, str) else commit
        model.generation_config = greedy_generation_config(model.generation_config, tokenizer)
        model.to(self._device)
        model.eval()
        return _HFEngine(model, tokenizer, resolved, context_length, self._device)

    # -- identity ----------------------------------------------------------------

    def runtime_info(self) -> dict[str, str]:
        """Device, dtype and library versions: they change numerics, so they are recorded."""
        import torch
        import transformers

        info = {
            "device": self._device,
            "dtype": self._dtype_name,
            "torch": str(torch.__version__),
            "transformers": str(transformers.__version__),
        }
        if self._device == "cpu":
            # CPU kernels split reductions by thread count, which can flip a greedy argmax.
            info["cpu_threads"] = str(torch.get_num_threads())
        if self._adapter_path is not None:
            import peft

            info["peft"] = str(peft.__version__)
        return info

    def fingerprint(self) -> dict[str, Any]:
        """Everything that determines the outputs; used to guard resumed runs."""
        return {
            "backend": "transformers",
            "model_identity": self.model_identity().to_dict(),
            "adapter": self.adapter_info(),
            "runtime": self.runtime_info(),
            # Only when on: fingerprints of runs that drop them keep their bytes.
            **({"special_tokens": "kept"} if self._keep_special_tokens else {}),
            **({} if self._min_new_tokens is None else {"min_new_tokens": self._min_new_tokens}),
            **(
                {}
                if self._prefix_cache is None
                else {"prefix_cache_tokens": self._prefix_cache.capacity_tokens}
            ),
        }

    @property
    def tokenizer(self) -> Any:
        """The loaded tokenizer (left padding, pad token set)."""
        return self._lease.engine.tokenizer

    def context_length(self) -> int | None:
        """The model's context, from its config (see :func:`model_context_length`)."""
        return self._context_length

    # -- generation --------------------------------------------------------------

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Token count of each prompt exactly as :meth:`generate` will encode it."""
        if not prompts:
            return []
        encoded = self.tokenizer(list(prompts), add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        """Greedy-decode one batch; return only the new text of each prompt.

        Prompts are encoded without added special tokens because they are
        already rendered by the chat template (which adds BOS where the model
        wants it). Each completion is cut at its first end-of-sequence token.

        Raises:
            ConfigError: If ``max_new_tokens`` is not a positive integer, a
                prompt is not a string, or the batch does not fit in memory.
        """
        return [
            completion.text
            for completion in self.generate_details(prompts, max_new_tokens=max_new_tokens)
        ]

    def _generation_config(self, model: Any) -> Any:
        """The shared model's greedy config, with this backend's ``min_new_tokens`` if set.

        The engine is shared by backends whose options differ, so the floor is
        set on a copy for this backend's calls, never on the shared model.
        """
        if self._min_new_tokens is None:
            return model.generation_config
        config = copy.deepcopy(model.generation_config)
        config.min_new_tokens = self._min_new_tokens
        return config

    def generate_details(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[Completion]:
        """:meth:`generate`, with each completion's finish reason and token counts.

        ``finish_reason`` is ``"stop"`` when an end-of-sequence token ended the
        completion and ``"length"`` when ``max_new_tokens`` did (a truncated
        tool call is the usual cause of an ``invalid_json`` parse).

        Raises:
            ConfigError: As :meth:`generate`.
        """
        import torch

        engine = self._lease.engine
        try:
            with torch.inference_mode(), engine.selected(self._adapter_name) as model:
                return greedy_completions(
                    model,
                    engine.tokenizer,
                    prompts,
                    max_new_tokens=max_new_tokens,
                    generation_config=self._generation_config(model),
                    device=self._device,
                    keep_special_tokens=self._keep_special_tokens,
                    prefix_cache=self._prefix_cache,
                )
        except torch.cuda.OutOfMemoryError as exc:
            raise ConfigError(
                f"out of memory generating a batch of {len(prompts)} prompts on "
                f"{self._device}; lower the batch size or max_new_tokens"
            ) from exc

    def prefill(self, prompts: Sequence[str]) -> None:
        """Change the prefix cache as generating ``prompts`` as one batch would; generate nothing.

        A resumed run hands over each batch it skips (its outputs are already
        on disk), so that the cache holds what it held in an uninterrupted run
        and later batches compute the same numbers; without a cache, nothing.
        """
        pool = self._prefix_cache
        if pool is None:
            return
        import torch

        engine = self._lease.engine
        with torch.inference_mode(), engine.selected(self._adapter_name) as model:
            token_ids = cacheable_ids(engine.tokenizer, prompts)
            if token_ids is not None:
                pooled_states(model, pool, token_ids)

    # -- lifecycle ---------------------------------------------------------------

    def close(self) -> None:
        """Let go of the model; the shared engine closes with its last backend.

        Idempotent. The adapter stays loaded in the engine until it closes: a
        later arm on the same adapter reuses it, and the base arm runs with it
        disabled.
        """
        if self._prefix_cache is not None:
            self._prefix_cache.clear()
        self._lease.close()

    def __enter__(self) -> HFGenerator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def greedy_generation_config(original: Any, tokenizer: Any) -> Any:
    """A clean greedy ``GenerationConfig`` that keeps only ``original``'s special token ids.

    Published models ship sampling defaults (temperature, top-p, repetition
    penalty) in their generation config; the decoding recorded with every
    generation must be the decoding that ran, so none of them survives here.
    The tokenizer supplies the ids the model's config leaves out.
    """
    from transformers import GenerationConfig

    config_class: Any = GenerationConfig  # untyped constructor
    eos = getattr(original, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    bos = getattr(original, "bos_token_id", None)
    if bos is None:
        bos = tokenizer.bos_token_id
    return config_class(
        bos_token_id=bos,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
        do_sample=False,
        num_beams=1,
    )


def greedy_completions(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    generation_config: Any,
    device: Any,
    keep_special_tokens: bool = False,
    prefix_cache: PrefixCache | None = None,
) -> list[Completion]:
    """Greedy-decode one batch of rendered prompts; the one decoding loop of every local model.

    The ``hf`` backend and the training callback both call it, so a model
    being trained is decoded exactly as the same weights would be by
    ``evaluate``. The tokenizer must pad on the left; the caller chooses the
    grad mode (inference mode for a loaded model, ``no_grad`` during training).
    ``generation_config`` is a :func:`greedy_generation_config` (the model's
    own is left untouched). Each completion is cut at its first
    end-of-sequence token: the config's or the tokenizer's; special tokens are
    kept only when the output format needs them (:func:`decode_completion`).
    With a ``prefix_cache``, each prompt's states start from the longest prefix
    kept from earlier prompts and the batch decodes from them
    (:mod:`~sommelier_mlflow.generation._prefix_cache`).

    Raises:
        ConfigError: If ``max_new_tokens`` is not a positive integer or a
            prompt is not a string.
    """
    check_generate_args(prompts, max_new_tokens)
    if not prompts:
        return []
    call_config = copy.deepcopy(generation_config)
    call_config.max_new_tokens = max_new_tokens
    floor = getattr(call_config, "min_new_tokens", None)
    if floor is not None and floor > max_new_tokens:
        # Same outputs (no end-of-sequence at all), without transformers' "unfeasible" warning.
        call_config.min_new_tokens = max_new_tokens
    eos = call_config.eos_token_id
    eos_ids = {int(token) for token in ([eos] if isinstance(eos, int) else list(eos or []))}
    if tokenizer.eos_token_id is not None:
        eos_ids.add(int(tokenizer.eos_token_id))
    cached: dict[str, Any] = {}
    token_ids = None if prefix_cache is None else cacheable_ids(tokenizer, prompts)
    if prefix_cache is not None and token_ids is not None:
        input_ids, attention_mask, cached[prefix_cache.keyword] = prefilled_batch(
            model, prefix_cache, token_ids, tokenizer.pad_token_id, max_new_tokens
        )
    else:
        encoded = tokenizer(
            list(prompts), return_tensors="pt", padding=True, add_special_tokens=False
        )
        input_ids = encoded["input_ids"].to(device)
        attention_mask = encoded["attention_mask"].to(device)
    output = model.generate(
        input_ids=input_ids, attention_mask=attention_mask, generation_config=call_config, **cached
    )
    new_tokens = output[:, input_ids.shape[1] :].tolist()
    prompt_tokens = [int(n) for n in attention_mask.sum(dim=1).tolist()]
    completions = []
    for row, used in zip(new_tokens, prompt_tokens, strict=True):
        cut = next((i for i, tok in enumerate(row) if tok in eos_ids), None)
        kept = row if cut is None else row[:cut]
        completions.append(
            Completion(
                text=decode_completion(tokenizer, kept, keep_special_tokens),
                finish_reason="length" if cut is None else "stop",
                prompt_tokens=used,
                completion_tokens=len(kept),
            )
        )
    return completions


def cacheable_ids(tokenizer: Any, prompts: Sequence[str]) -> list[list[int]] | None:
    """The prompts' token ids if the prefix cache can take the batch, else ``None``.

    A prompt of one token has no states to keep before its last token; such a
    batch (rare: rendered prompts are long) is decoded without the cache.
    """
    token_ids: list[list[int]] = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    return token_ids if token_ids and min(map(len, token_ids)) > 1 else None


def decode_completion(tokenizer: Any, token_ids: Sequence[int], keep_special_tokens: bool) -> str:
    """The text of a completion's tokens, cut before its end-of-sequence token already.

    Special tokens are dropped unless the output format needs them: Hermes
    and Qwen write ``<tool_call>`` as a special token, and dropping it would
    turn every call into bare JSON the format refuses.
    """
    text: str = tokenizer.decode(
        list(token_ids),
        skip_special_tokens=not keep_special_tokens,
        clean_up_tokenization_spaces=False,
    )
    return text


def model_context_length(config: Any, tokenizer: Any) -> int | None:
    """Positions a causal LM attends over, from its config, else its tokenizer; ``None`` if unsaid.

    The config is the model's own statement (``max_position_embeddings`` for
    Llama, Qwen and most others, ``n_positions`` for GPT-2, ...; the text
    model's config in a multimodal one). A tokenizer's ``model_max_length``
    is used only when the config names none and the tokenizer set one
    (transformers reports 1e30 for "none").
    """
    text_config = config.get_text_config() if hasattr(config, "get_text_config") else config
    for name in _CONTEXT_FIELDS:
        value = getattr(text_config, name, None)
        if type(value) is int and value > 0:
            return value
    limit = getattr(tokenizer, "model_max_length", None)
    if type(limit) is int and 0 < limit < _NO_TOKENIZER_LIMIT:
        return limit
    return None


def _linux_physical_cores() -> int | None:
    """Distinct (package, core) pairs in /proc/cpuinfo; ``None`` where unavailable."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    cores: set[tuple[str, str]] = set()
    package = core = ""
    for line in [*text.splitlines(), ""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            package = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not key:
            if core:
                cores.add((package, core))
            package = core = ""
    return len(cores) or None


def physical_cores() -> int:
    """Physical CPU cores this process may use: the default ``--num-threads``.

    torch's own default is the physical core count of the whole machine; in a
    container or under ``taskset`` the affinity mask is the tighter bound, and
    hyper-threads rarely speed up small-model decoding.
    """
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    candidates = [n for n in (_linux_physical_cores(), allowed, os.cpu_count()) if n]
    return max(1, min(candidates)) if candidates else 1


class HFOptions(BackendOptions):
    """The ``hf`` backend's options: the precision, and a floor on completion length."""

    dtype: DType | None = Field(
        default=None,
        description="compute precision (default float32 on CPU, bfloat16 on CUDA); "
        "in float64 CPU kernel rounding is far too small to change a greedy choice",
    )

    min_new_tokens: int | None = Field(
        default=None,
        gt=0,
        description="suppress end-of-sequence until this many tokens are generated "
        "(equal to max_new_tokens: fixed-length outputs, for benchmarks)",
    )

    prefix_cache_tokens: int | None = Field(
        default=None,
        gt=0,
        description="keep the attention states of up to this many prompt positions between "
        "batches and start each prompt from the longest kept prefix (multi-turn steps, "
        "shared system prompts); off by default, since it can flip a near-tie greedy choice",
    )

    def job_identity(self) -> dict[str, object]:
        """Precision, a length floor and the prefix cache change outputs: they name the outputs."""
        identity: dict[str, object] = {} if self.dtype is None else {"dtype": self.dtype}
        if self.min_new_tokens is not None:
            identity["min_new_tokens"] = self.min_new_tokens
        if self.prefix_cache_tokens is not None:
            identity["prefix_cache_tokens"] = self.prefix_cache_tokens
        return identity


@register_backend("hf", options=HFOptions)
def hf_backend(request: BackendRequest, options: HFOptions) -> HFGenerator:
    """Transformers in this process, plus peft for the adapter (the default).

    The Hub token comes from ``HF_TOKEN``, if set.

    Raises:
        ConfigError: A bad setting.
        DependencyError: Missing package, model, tokenizer or adapter.
    """
    return HFGenerator(
        request.model,
        revision=request.revision or None,
        tokenizer=request.tokenizer or None,
        tokenizer_revision=request.tokenizer_revision or None,
        adapter=request.adapter or None,
        device=request.device,
        trust_remote_code=request.trust_remote_code,
        hf_token=os.environ.get("HF_TOKEN") or None,
        num_threads=request.num_threads,
        keep_special_tokens=request.keep_special_tokens,
        dtype=options.dtype,
        min_new_tokens=options.min_new_tokens,
        prefix_cache_tokens=options.prefix_cache_tokens,
    )
