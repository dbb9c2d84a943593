"""Greedy generation through an OpenAI-compatible completions server.

A team that serves its base model and LoRA adapters with vLLM (or SGLang,
TGI, llama.cpp's server, a hosted API) evaluates them through this backend
instead of loading the model in-process. The product still renders every
prompt itself with the local tokenizer's chat template and sends that exact
text to ``/v1/completions``, so ``prompt_sha256`` and the comparison gate hold
exactly as for in-process generation.

Everything on the wire (deadlines, retries, JSON, the model list, ``/version``,
the key) is :class:`~sommelier_mlflow.generation._transport.ServerTransport`'s;
this module is the completions client: what it checks before the first prompt,
what it sends, how it reads the choices, and what it records.

``transformers`` is imported when a :class:`ServerGenerator` is built, never
at module import.
"""

from __future__ import annotations

import importlib.util
import math
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from pydantic import Field

from sommelier_mlflow._json import dumps_line, sha256_text
from sommelier_mlflow.errors import (
    ConfigError,
    DependencyError,
    InvariantViolationError,
)
from sommelier_mlflow.generation._hf import _resolve_source
from sommelier_mlflow.generation._identity import (
    SERVED_ADAPTER_DIGEST,
    SERVED_ADAPTER_PREFIX,
    LocalSources,
    adapter_digest,
)
from sommelier_mlflow.generation._protocol import BackendRequest, check_generate_args
from sommelier_mlflow.generation._registry import BackendOptions, register_backend
from sommelier_mlflow.generation._transport import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MAX_RETRIES,
    DEFAULT_REQUEST_TIMEOUT,
    ENV_NAME_PATTERN,
    ServerTransport,
    redact_url,
)

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_REQUEST_TIMEOUT",
    "redact_url",
    "DEFAULT_CONCURRENCY",
    "ServerOptions",
    "ServerStats",
    "ServerGenerator",
    "server_backend",
]

DEFAULT_CONCURRENCY: Final = 16


class ServerOptions(BackendOptions):
    """The ``server`` backend's options (``--backend-options KEY=VALUE``).

    The old flags ``--base-url``, ``--served-model``, ``--served-adapter``,
    ``--concurrency``, ``--request-timeout`` and ``--api-key-env`` (and the
    MLproject parameters of those names) set the same options.
    """

    base_url: str = Field(description="the API root, e.g. http://127.0.0.1:8000/v1")
    served_model: str = Field(min_length=1, description="the base model's name on the server")
    served_adapter: str | None = Field(
        None,
        min_length=1,
        description="the adapter's name on the server (vLLM --lora-modules NAME=DIR); "
        "adapter arm only",
    )
    concurrency: int = Field(DEFAULT_CONCURRENCY, gt=0, description="requests in flight")
    request_timeout: float = Field(
        DEFAULT_REQUEST_TIMEOUT,
        gt=0,
        allow_inf_nan=False,
        description="seconds one request may take in all (connect + read) before it is retried",
    )
    api_key_env: str = Field(
        DEFAULT_API_KEY_ENV,
        pattern=ENV_NAME_PATTERN,
        description="name of the environment variable holding the API key; its value is "
        "never an option and is redacted wherever it would be recorded",
    )
    max_retries: int = Field(
        DEFAULT_MAX_RETRIES,
        ge=0,
        description="retries of a request after a 429, a 5xx, a timeout or a broken answer",
    )
    min_tokens: int | None = Field(
        None,
        gt=0,
        description="ask the server to suppress end-of-sequence until this many tokens "
        "(vLLM's min_tokens; equal to max_new_tokens: fixed-length outputs, for benchmarks)",
    )

    def for_arm(self, kind: str) -> ServerOptions:
        """The served adapter answers the adapter arm only; the base arm asks the base."""
        return self if kind == "adapter" else self.model_copy(update={"served_adapter": None})

    def names_adapter(self) -> bool:
        """A served adapter makes the arm an adapter arm."""
        return self.served_adapter is not None

    def job_identity(self) -> dict[str, object]:
        """Which served model answers, and a length floor; URL, deadlines, concurrency do not."""
        identity: dict[str, object] = {
            "served_model": self.served_model,
            "served_adapter": self.served_adapter,
        }
        if self.min_tokens is not None:
            identity["min_tokens"] = self.min_tokens
        return identity


def _percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: always one of the measured values, never interpolated."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


@dataclass
class ServerStats:
    """What the server did for this process: requests, tokens, latencies, busy time.

    ``busy_s`` counts wall time inside :meth:`ServerGenerator.generate` only,
    so prompts/s and tokens/s describe generation, not loading or scoring.
    """

    requests: int = 0
    prompts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    busy_s: float = 0.0
    latencies_s: list[float] = field(default_factory=list)

    def metrics(self) -> dict[str, float]:
        """Throughput as MLflow metric values; empty when nothing was generated."""
        if self.prompts == 0 or self.busy_s <= 0.0:
            return {}
        return {
            "prompts_per_s": self.prompts / self.busy_s,
            "tokens_per_s": self.completion_tokens / self.busy_s,
            "latency_p50_s": _percentile(self.latencies_s, 50),
            "latency_p95_s": _percentile(self.latencies_s, 95),
            "requests": float(self.requests),
            "prompts": float(self.prompts),
            "completion_tokens": float(self.completion_tokens),
        }


@dataclass(frozen=True)
class _Answer:
    texts: list[str]
    finish_reasons: list[str | None]
    usage: dict[str, int] | None
    latency_s: float


class ServerGenerator(LocalSources):
    """Greedy completions from an OpenAI-compatible server.

    Construction checks everything that can be checked before the first
    prompt: the server answers, it lists the served model (and adapter), what
    it serves agrees with the declared base model, and the local tokenizer
    loads. A failure there is an error naming the URL, before any output.
    """

    def __init__(
        self,
        transport: ServerTransport,
        *,
        served_model: str,
        model: str,
        served_adapter: str | None = None,
        adapter: str | os.PathLike[str] | None = None,
        revision: str | None = None,
        tokenizer: str | None = None,
        tokenizer_revision: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        trust_remote_code: bool = False,
        usage_log: str | os.PathLike[str] | None = None,
        keep_special_tokens: bool = False,
        min_tokens: int | None = None,
    ) -> None:
        """Verify what the server serves, and load the local tokenizer.

        Args:
            transport: The connection to the server (URL, deadline, retries, key).
            served_model: The base model's name on the server.
            model: The declared base model (local directory or Hub id); its
                tokenizer renders the prompts, and the server's model must agree.
            served_adapter: The LoRA adapter's served name (vLLM
                ``--lora-modules NAME=DIR``); prompts go to it when given.
            adapter: The adapter's local directory, when you have it: its
                digest is recorded like the ``hf`` backend records it.
            revision: Hub revision of ``model`` (required for Hub ids).
            tokenizer: Tokenizer directory or Hub id; defaults to ``model``.
            tokenizer_revision: Revision of a separately given Hub tokenizer.
            concurrency: Most requests in flight at once.
            trust_remote_code: Passed to the tokenizer loader.
            usage_log: A JSONL file to which every completed request's
                per-prompt ``finish_reason`` and token usage are appended.
            keep_special_tokens: Ask the server not to drop special tokens from
                completions (``skip_special_tokens: false``), for output formats
                whose tags are special tokens.
            min_tokens: Ask the server to suppress end-of-sequence until this
                many tokens (vLLM's ``min_tokens``, capped at each call's
                ``max_new_tokens``): fixed-length outputs, for benchmarks.

        Raises:
            ConfigError: Bad options, or the server disagrees with the declared base.
            DependencyError: ``transformers`` missing, the server unreachable,
                the model or adapter not served, or the tokenizer missing.
        """
        for name, value in (("served_model", served_model), ("model", model)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"the server backend needs {name}=...; got {value!r}")
        if served_adapter is not None and (
            not isinstance(served_adapter, str) or not served_adapter.strip()
        ):
            raise ConfigError(f"served_adapter must be a non-empty name, got {served_adapter!r}")
        if type(concurrency) is not int or concurrency <= 0:
            raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
        if min_tokens is not None and (type(min_tokens) is not int or min_tokens <= 0):
            raise ConfigError(f"min_tokens must be a positive integer, got {min_tokens!r}")
        self._min_tokens = min_tokens
        self._transport = transport
        self._shown_url = transport.shown_url
        self._served_model = served_model
        self._served_adapter = served_adapter
        self._concurrency = concurrency
        self.stats = ServerStats()
        self._stats_lock = threading.Lock()
        self._usage_log = None if usage_log is None else Path(usage_log)
        # The server then sends the output format's special-token tags back too.
        self._extra_body: dict[str, Any] = {"add_special_tokens": False}
        if keep_special_tokens:
            self._extra_body["skip_special_tokens"] = False

        served = transport.list_models()
        self._base = transport.find_model(served, served_model, "served_model")
        self._adapter_entry = (
            None
            if served_adapter is None
            else transport.find_model(served, served_adapter, "served_adapter")
        )
        self._model_source, self._revision, local = _resolve_source(
            model, revision or None, what="model", revision_option="revision"
        )
        self._check_declared_base(local)
        self._check_adapter_parent()
        self._adapter_path, self._adapter_sha256 = _local_adapter(adapter, served_adapter)
        if tokenizer:
            self._tokenizer_source, self._tokenizer_revision, _ = _resolve_source(
                tokenizer,
                tokenizer_revision or None,
                what="tokenizer",
                revision_option="tokenizer_revision",
            )
        else:
            self._tokenizer_source, self._tokenizer_revision = self._model_source, self._revision
        self._tokenizer = self._load_tokenizer(trust_remote_code)
        self._server_version = transport.server_version()
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"ServerGenerator(base_url={self._shown_url!r}, served_model={self._served_model!r}, "
            f"served_adapter={self._served_adapter!r})"
        )

    # -- checks before the first prompt -------------------------------------------------

    def _check_declared_base(self, local: bool) -> None:
        """The served base must be the declared one, or the identity would be a lie."""
        names = {self._base.id, *([self._base.root] if self._base.root else [])}
        if self._model_source in names:
            return
        if local:
            for name in names:
                with_path = Path(name).expanduser()
                if with_path.is_dir() and with_path.resolve() == Path(self._model_source):
                    return
        raise ConfigError(
            f"the server at {self._shown_url} serves {self._base.id!r} (root "
            f"{self._base.root!r}), which is not the declared base model "
            f"{self._model_source!r}; declare the model the server loaded (model=...), "
            "or point base_url at the server that serves it"
        )

    def _check_adapter_parent(self) -> None:
        """The served adapter must sit on the served base, or its outputs are another model's."""
        entry = self._adapter_entry
        if entry is not None and entry.parent not in (None, self._base.id):
            raise ConfigError(
                f"the server at {self._shown_url} serves adapter {entry.id!r} on "
                f"{entry.parent!r}, not on served_model {self._base.id!r}; "
                "name the base the adapter was loaded onto"
            )

    def _load_tokenizer(self, trust_remote_code: bool) -> Any:
        if importlib.util.find_spec("transformers") is None:
            raise DependencyError(
                "the server backend renders prompts with the model's tokenizer and needs "
                "transformers: `pip install transformers`"
            )
        return self._pretrained_tokenizer(
            trust_remote_code,
            None,
            " that renders the prompts",
            "pass model= (or tokenizer=) as a local directory or a cached Hub id",
        )

    # -- identity ------------------------------------------------------------------

    def adapter_info(self) -> dict[str, str] | None:
        """``{"source", "sha256"}`` for the served adapter, or ``None`` for the base.

        ``source`` is the local directory when one was given (and ``sha256`` its
        digest, as for the ``hf`` backend); otherwise it names the served adapter
        and ``sha256`` says that its files could not be verified here.
        """
        if self._served_adapter is None:
            return None
        local = super().adapter_info()
        if local is not None:
            return local
        return {
            "source": f"{SERVED_ADAPTER_PREFIX}{self._served_adapter}",
            "sha256": SERVED_ADAPTER_DIGEST,
        }

    def server_info(self) -> dict[str, str | None]:
        """What the server reported about itself and the model that answers."""
        answering = self._adapter_entry or self._base
        return {
            "base_url": self._shown_url,
            "served_model": self._base.id,
            "served_model_root": self._base.root,
            "served_adapter": None if self._adapter_entry is None else self._adapter_entry.id,
            "served_adapter_root": answering.root if self._adapter_entry is not None else None,
            "server_version": self._server_version,
        }

    def fingerprint(self) -> dict[str, Any]:
        """Everything that determines the outputs; guards resumed runs.

        The URL is left out on purpose: the same server restarted on another
        port (or behind another proxy) produces the same outputs, and a resume
        after such a restart must be allowed.
        """
        info = self.server_info()
        info.pop("base_url")
        return {
            "backend": "server",
            "model_identity": self.model_identity().to_dict(),
            "adapter": self.adapter_info(),
            "server": info,
            **({"special_tokens": "kept"} if "skip_special_tokens" in self._extra_body else {}),
            # Only when set: fingerprints of runs without it keep their bytes.
            **({} if self._min_tokens is None else {"min_tokens": self._min_tokens}),
        }

    def context_length(self) -> int | None:
        """The context the server gives the answering model (vLLM's ``max_model_len``).

        The served adapter's entry first (the requests name it), else the
        base's; ``None`` when the server does not say, and then no prompt is
        refused here (the server itself still refuses one that does not fit).
        """
        answering = self._adapter_entry or self._base
        return answering.max_model_len or self._base.max_model_len

    @property
    def tokenizer(self) -> Any:
        """The local tokenizer whose chat template renders the prompts."""
        return self._tokenizer

    # -- what the run records --------------------------------------------------------

    def record_usage_to(self, path: str | os.PathLike[str]) -> None:
        """Append each answered prompt's ``finish_reason`` and usage to ``path`` (JSONL)."""
        self._usage_log = Path(path)

    def run_metrics(self) -> dict[str, float]:
        """Throughput of this process's requests (logged under ``generation/``)."""
        return self.stats.metrics()

    def run_params(self) -> dict[str, object]:
        """The server side of the arm's identity, for MLflow params (no key)."""
        params: dict[str, object] = {f"server.{k}": v for k, v in self.server_info().items()}
        params["server.concurrency"] = self._concurrency
        params["server.request_timeout"] = self._transport.timeout
        params["server.key_from_env"] = self._transport.api_key_env
        return params

    # -- generation ----------------------------------------------------------------

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Token count of each prompt with the local tokenizer (for batch planning)."""
        if not prompts:
            return []
        encoded = self._tokenizer(list(prompts), add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _complete(self, prompts: list[str], max_new_tokens: int) -> _Answer:
        body: dict[str, Any] = {
            "model": self._served_adapter or self._served_model,
            "prompt": prompts,
            "max_tokens": max_new_tokens,
            "temperature": 0.0,
            "n": 1,
            # The prompt is already rendered by the chat template, which adds
            # BOS where the model wants one; a second BOS changes the outputs.
            **self._extra_body,
            # The server refuses min_tokens above max_tokens; capped, it means "no stop at all".
            **(
                {}
                if self._min_tokens is None
                else {"min_tokens": min(self._min_tokens, max_new_tokens)}
            ),
        }
        started = time.perf_counter()
        plural = "" if len(prompts) == 1 else "s"
        response = self._transport.call(
            "POST", "/completions", f"complete {len(prompts)} prompt{plural}", body
        )
        latency = time.perf_counter() - started
        texts, reasons = self._read_choices(response.get("choices"), len(prompts))
        usage_obj = response.get("usage")
        usage = None
        if isinstance(usage_obj, dict):
            # Anything but a non-negative integer is an unknown count, not a number to add.
            usage = {
                key: value
                for key in ("prompt_tokens", "completion_tokens", "total_tokens")
                if type(value := usage_obj.get(key)) is int and value >= 0
            }
        return _Answer(texts, reasons, usage, latency)

    def _read_choices(self, choices: object, expected: int) -> tuple[list[str], list[str | None]]:
        """One text and finish reason per prompt, in prompt order, from an answer's choices.

        Raises:
            InvariantViolationError: Too few or many choices, a bad or repeated
                index, or a choice without text; nothing of the batch is kept.
        """
        if not isinstance(choices, list) or len(choices) != expected:
            found = len(choices) if isinstance(choices, list) else type(choices).__name__
            raise InvariantViolationError(
                f"the server at {self._shown_url} answered {expected} prompts with {found} "
                "choices (expected one each); nothing from this batch was kept"
            )
        texts: list[str | None] = [None] * expected
        reasons: list[str | None] = [None] * expected
        for position, choice in enumerate(choices):
            entry = choice if isinstance(choice, dict) else {}
            index = entry.get("index", position)
            text = entry.get("text")
            if type(index) is not int or not 0 <= index < expected or texts[index] is not None:
                raise InvariantViolationError(
                    f"the server at {self._shown_url} returned choice index {index!r} for a "
                    f"request of {expected} prompts; nothing from this batch was kept"
                )
            if not isinstance(text, str):
                raise InvariantViolationError(
                    f"the server at {self._shown_url} returned a choice without text (got "
                    f"{type(text).__name__}); nothing from this batch was kept"
                )
            texts[index] = text
            reason = entry.get("finish_reason")
            reasons[index] = reason if isinstance(reason, str) else None
        return [text for text in texts if text is not None], reasons

    def generate(self, prompts: Sequence[str], *, max_new_tokens: int) -> list[str]:
        """Greedy completions of one runner batch, spread over concurrent requests.

        The batch is cut into at most ``concurrency`` requests of consecutive
        prompts (several prompts per request, as the completions API allows);
        the answers are reassembled in prompt order.

        Raises:
            ConfigError: ``max_new_tokens`` not a positive integer, or a request
                refused for a reason a retry cannot fix.
            DependencyError: The server stayed down through every retry.
            InvariantViolationError: A malformed answer (wrong number of choices,
                a missing text); nothing of the batch is returned.
        """
        check_generate_args(prompts, max_new_tokens)
        if self._closed:
            raise InvariantViolationError(
                f"the server backend for {self._shown_url} was closed; build it again to generate"
            )
        if not prompts:
            return []
        size = math.ceil(len(prompts) / self._concurrency)
        chunks = [list(prompts[start : start + size]) for start in range(0, len(prompts), size)]
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=len(chunks)) as pool:
            futures = [pool.submit(self._complete, chunk, max_new_tokens) for chunk in chunks]
            try:
                answers = [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        busy = time.perf_counter() - started
        self._record(chunks, answers, busy)
        return [text for answer in answers for text in answer.texts]

    def close(self) -> None:
        """Send nothing more. Idempotent.

        There is no connection to shut: every request opens its own and closes
        it when answered (or abandoned at its deadline), and the thread pool of
        a batch ends with the batch. Closing stops a backend that is done from
        being used by mistake, and keeps this backend's lifecycle the one every
        backend has.
        """
        self._closed = True

    def _record(self, chunks: list[list[str]], answers: list[_Answer], busy: float) -> None:
        lines = []
        with self._stats_lock:
            self.stats.busy_s += busy
            for chunk, answer in zip(chunks, answers, strict=True):
                self.stats.requests += 1
                self.stats.prompts += len(chunk)
                self.stats.latencies_s.append(answer.latency_s)
                if answer.usage is not None:
                    self.stats.prompt_tokens += answer.usage.get("prompt_tokens", 0)
                    self.stats.completion_tokens += answer.usage.get("completion_tokens", 0)
                for prompt, reason in zip(chunk, answer.finish_reasons, strict=True):
                    lines.append(
                        dumps_line(
                            {
                                "prompt_sha256": sha256_text(prompt),
                                "finish_reason": reason,
                                "request_prompts": len(chunk),
                                "request_usage": answer.usage,
                                "request_latency_s": round(answer.latency_s, 6),
                            }
                        )
                    )
        if self._usage_log is not None:
            self._usage_log.parent.mkdir(parents=True, exist_ok=True)
            with self._usage_log.open("ab") as handle:
                handle.write(b"".join(lines))
                handle.flush()
                os.fsync(handle.fileno())


def _local_adapter(
    adapter: str | os.PathLike[str] | None, served_adapter: str | None
) -> tuple[Path | None, str | None]:
    """The local copy of the served adapter and its digest, or ``(None, None)`` without one.

    Raises:
        ConfigError: A local adapter without the name it is served under.
    """
    if adapter is None or not os.fspath(adapter):
        return None, None
    if served_adapter is None:
        raise ConfigError(
            "a local adapter directory was given but no served_adapter: name the adapter as "
            "the server serves it (vLLM --lora-modules NAME=DIR)"
        )
    path = Path(os.fspath(adapter)).expanduser().resolve()
    return path, adapter_digest(path)


@register_backend("server", options=ServerOptions)
def server_backend(request: BackendRequest, options: ServerOptions) -> ServerGenerator:
    """An OpenAI-compatible completions server (vLLM, SGLang, TGI, a hosted API).

    ``request.model`` is the declared base (its tokenizer renders the prompts).
    The arm is the adapter arm when ``served_adapter`` is given;
    ``request.adapter`` (a local copy of the served adapter) is optional and
    only adds its digest.

    Raises:
        ConfigError: Bad options, or a local-only setting (device) that a
            remote server cannot honour.
        DependencyError: The server is unreachable or does not serve the names.
    """
    if request.device:
        raise ConfigError(
            "device does not apply to the server backend: the server chose its own devices"
        )
    _local_adapter(request.adapter, options.served_adapter)  # refused before any request
    transport = ServerTransport(
        options.base_url,
        request_timeout=options.request_timeout,
        api_key_env=options.api_key_env,
        max_retries=options.max_retries,
    )
    return ServerGenerator(
        transport,
        served_model=options.served_model,
        served_adapter=options.served_adapter,
        concurrency=options.concurrency,
        model=request.model,
        revision=request.revision,
        adapter=request.adapter or None,
        tokenizer=request.tokenizer,
        tokenizer_revision=request.tokenizer_revision,
        trust_remote_code=request.trust_remote_code,
        keep_special_tokens=request.keep_special_tokens,
        min_tokens=options.min_tokens,
    )
