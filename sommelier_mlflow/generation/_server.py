"""Greedy generation through an OpenAI-compatible completions server.

A team that serves its base model and LoRA adapters with vLLM (or SGLang,
TGI, llama.cpp's server, a hosted API) evaluates them through this backend
instead of loading the model in-process. The product still renders every
prompt itself with the local tokenizer's chat template and sends that exact
text to ``/v1/completions``, so ``prompt_sha256`` and the comparison gate hold
exactly as for in-process generation.

The API key is read from an environment variable whose *name* is configured;
its value is handed to the HTTP client and never stored in identities,
fingerprints, reprs, errors or files.

The ``openai`` and ``transformers`` packages are imported when a
:class:`ServerGenerator` is built, never at module import.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

from sommelier_mlflow._json import JSONDecodeError, dumps_line, loads, sha256_text
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
from sommelier_mlflow.generation._registry import register_backend

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_REQUEST_TIMEOUT",
    "SERVER_OPTIONS",
    "ServerGenerator",
    "ServerStats",
    "redact_url",
    "server_backend",
]

DEFAULT_CONCURRENCY: Final = 16
DEFAULT_REQUEST_TIMEOUT: Final = 300.0
DEFAULT_API_KEY_ENV: Final = "OPENAI_API_KEY"
#: Attempts per request before the server counts as down (1 + retries).
DEFAULT_MAX_RETRIES: Final = 4
_BACKOFF_FIRST_S: Final = 0.5
_BACKOFF_CAP_S: Final = 8.0
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# vLLM and most OpenAI-compatible servers accept any key when they were
# started without one; the OpenAI client refuses to run with none at all.
_NO_KEY: Final = "EMPTY"
_VERSION_TIMEOUT_S: Final = 10.0

#: The ``options`` keys the ``server`` backend takes (CLI ``--base-url`` ... and
#: the MLproject parameters of the same names).
SERVER_OPTIONS: Final = frozenset(
    {
        "base_url",
        "served_model",
        "served_adapter",
        "concurrency",
        "request_timeout",
        "api_key_env",
    }
)

_T = TypeVar("_T")


def redact_url(url: str) -> str:
    """``url`` without user-info (``user:password@``), safe to print and to log."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, f"***@{host}", parts.path, parts.query, parts.fragment))


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
class _Served:
    """One entry of ``/v1/models``."""

    id: str
    root: str | None
    parent: str | None


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
        base_url: str,
        *,
        served_model: str,
        model: str,
        served_adapter: str | None = None,
        adapter: str | os.PathLike[str] | None = None,
        revision: str | None = None,
        tokenizer: str | None = None,
        tokenizer_revision: str | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        api_key_env: str = DEFAULT_API_KEY_ENV,
        max_retries: int = DEFAULT_MAX_RETRIES,
        trust_remote_code: bool = False,
        usage_log: str | os.PathLike[str] | None = None,
        keep_special_tokens: bool = False,
    ) -> None:
        """Connect, verify what the server serves, and load the local tokenizer.

        Args:
            base_url: The API root as the OpenAI client takes it, e.g.
                ``http://127.0.0.1:8000/v1``.
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
            request_timeout: Seconds one request may take before it is retried.
            api_key_env: Name of the environment variable holding the API key.
            max_retries: Retries of a request after a 429, a 5xx, a timeout or
                a connection error, with exponential backoff.
            trust_remote_code: Passed to the tokenizer loader.
            usage_log: A JSONL file to which every completed request's
                per-prompt ``finish_reason`` and token usage are appended.
            keep_special_tokens: Ask the server not to drop special tokens from
                completions (``skip_special_tokens: false``), for output formats
                whose tags are special tokens.

        Raises:
            ConfigError: Bad options, or the server disagrees with the declared base.
            DependencyError: ``openai``/``transformers`` missing, the server
                unreachable, the model or adapter not served, or the tokenizer missing.
        """
        if not isinstance(base_url, str) or urlsplit(base_url).scheme not in ("http", "https"):
            raise ConfigError(
                f"base_url must be an http(s) URL such as http://127.0.0.1:8000/v1, got "
                f"{redact_url(str(base_url))!r}"
            )
        for name, value in (("served_model", served_model), ("model", model)):
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"the server backend needs {name}=...; got {value!r}")
        if served_adapter is not None and (
            not isinstance(served_adapter, str) or not served_adapter.strip()
        ):
            raise ConfigError(f"served_adapter must be a non-empty name, got {served_adapter!r}")
        if type(concurrency) is not int or concurrency <= 0:
            raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
        if isinstance(request_timeout, bool) or not (
            isinstance(request_timeout, (int, float)) and 0 < request_timeout < math.inf
        ):
            raise ConfigError(f"request_timeout must be a positive number, got {request_timeout!r}")
        if type(max_retries) is not int or max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if not isinstance(api_key_env, str) or not _ENV_NAME.fullmatch(api_key_env):
            raise ConfigError(
                f"api_key_env must name an environment variable (letters, digits, _), got "
                f"{api_key_env!r}; put the key itself in that variable, never on the command line"
            )
        try:
            import openai
        except ImportError as exc:
            raise DependencyError(
                "the server backend needs the openai package: `pip install openai`"
            ) from exc

        self._openai: Any = openai
        self._base_url = base_url.rstrip("/")
        self._shown_url = redact_url(self._base_url)
        self._served_model = served_model
        self._served_adapter = served_adapter
        self._concurrency = concurrency
        self._timeout = float(request_timeout)
        self._max_retries = max_retries
        self._api_key_env = api_key_env
        key = os.environ.get(api_key_env) or None
        # The key lives only inside the client (and in this closure for scrubbing
        # server messages); identities, reprs and errors never see it.
        self._scrub: Callable[[str], str] = (
            (lambda text: text.replace(key, "<redacted>")) if key else (lambda text: text)
        )
        self._client: Any = openai.OpenAI(
            base_url=self._base_url,
            api_key=key or _NO_KEY,
            timeout=self._timeout,
            max_retries=0,  # retries are ours: bounded, with backoff, and reported
        )
        self.stats = ServerStats()
        self._stats_lock = threading.Lock()
        self._usage_log = None if usage_log is None else Path(usage_log)
        # The server then sends the output format's special-token tags back too.
        self._extra_body: dict[str, Any] = {"add_special_tokens": False}
        if keep_special_tokens:
            self._extra_body["skip_special_tokens"] = False

        served = self._list_models()
        self._base = self._find(served, served_model, "served_model")
        self._adapter_entry = (
            None if served_adapter is None else self._find(served, served_adapter, "served_adapter")
        )
        self._model_source, self._revision, local = _resolve_source(
            model, revision or None, what="model", revision_option="revision"
        )
        self._check_declared_base(local)
        if self._adapter_entry is not None and self._adapter_entry.parent not in (
            None,
            self._base.id,
        ):
            raise ConfigError(
                f"the server at {self._shown_url} serves adapter {served_adapter!r} on "
                f"{self._adapter_entry.parent!r}, not on served_model {served_model!r}; "
                "name the base the adapter was loaded onto"
            )
        self._adapter_path: Path | None = None
        self._adapter_sha256: str | None = None
        if adapter is not None and os.fspath(adapter):
            if served_adapter is None:
                raise ConfigError(
                    "a local adapter directory was given but no served_adapter: name the "
                    "adapter as the server serves it (vLLM --lora-modules NAME=DIR)"
                )
            self._adapter_path = Path(os.fspath(adapter)).expanduser().resolve()
            self._adapter_sha256 = adapter_digest(self._adapter_path)
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
        self._server_version = self._read_version()

    def __repr__(self) -> str:
        return (
            f"ServerGenerator(base_url={self._shown_url!r}, served_model={self._served_model!r}, "
            f"served_adapter={self._served_adapter!r})"
        )

    # -- talking to the server -----------------------------------------------------

    def _retrying(self, what: str, call: Callable[[], _T]) -> _T:
        """Run ``call``; retry 429/5xx/timeouts/connection errors with backoff.

        Raises:
            DependencyError: The server stayed unreachable or overloaded (exit 3).
            ConfigError: The server refused the request for a reason a retry
                cannot fix (bad key, unknown model, prompt too long).
        """
        openai = self._openai
        attempt = 0
        while True:
            try:
                return call()
            except openai.APIStatusError as exc:
                status = int(exc.status_code)
                detail = self._scrub(str(exc))[:500]
                if status in (401, 403):
                    raise ConfigError(
                        f"the server at {self._shown_url} refused the API key ({status}) while "
                        f"trying to {what}: put a valid key in ${self._api_key_env}"
                    ) from None
                if status != 429 and status < 500:
                    raise ConfigError(
                        f"the server at {self._shown_url} rejected the request to {what} "
                        f"({status}): {detail}"
                    ) from None
                last = f"HTTP {status}"
            except openai.APIConnectionError as exc:
                kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "unreachable"
                last = f"{kind}: {self._scrub(str(exc))[:200]}"
            if attempt >= self._max_retries:
                raise DependencyError(
                    f"the server at {self._shown_url} did not answer the request to {what} after "
                    f"{attempt + 1} attempts (last: {last}); check that it is running, then "
                    "re-run the same command: what was generated so far is kept and resumed"
                ) from None
            time.sleep(min(_BACKOFF_CAP_S, _BACKOFF_FIRST_S * 2**attempt))
            attempt += 1

    def _list_models(self) -> dict[str, _Served]:
        page = self._retrying("list its models (/models)", lambda: self._client.models.list())
        served: dict[str, _Served] = {}
        for item in getattr(page, "data", None) or []:
            data = item.model_dump() if hasattr(item, "model_dump") else dict(item)
            model_id = data.get("id")
            if isinstance(model_id, str):
                root, parent = data.get("root"), data.get("parent")
                served[model_id] = _Served(
                    model_id,
                    root if isinstance(root, str) else None,
                    parent if isinstance(parent, str) else None,
                )
        return served

    def _find(self, served: dict[str, _Served], name: str, option: str) -> _Served:
        if name not in served:
            listed = ", ".join(sorted(served)) or "nothing"
            raise DependencyError(
                f"the server at {self._shown_url} does not serve {option} {name!r} (it lists: "
                f"{listed}); pass one of those names, or start the server with it"
            )
        return served[name]

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

    def _read_version(self) -> str | None:
        """The server's ``/version`` (vLLM, SGLang and TGI report one), else ``None``."""
        parts = urlsplit(self._base_url)
        path = re.sub(r"/v1$", "", parts.path)
        # User-info is dropped: urllib would not send it as basic auth anyway.
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        url = urlunsplit((parts.scheme, host, f"{path}/version", "", ""))
        try:
            with urllib.request.urlopen(url, timeout=_VERSION_TIMEOUT_S) as response:
                body = loads(response.read())
        except (OSError, urllib.error.URLError, JSONDecodeError, ValueError):
            return None
        version = body.get("version") if isinstance(body, dict) else None
        return version if isinstance(version, str) else None

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
        }

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
        params["server.request_timeout"] = self._timeout
        params["server.key_from_env"] = self._api_key_env
        return params

    # -- generation ----------------------------------------------------------------

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        """Token count of each prompt with the local tokenizer (for batch planning)."""
        if not prompts:
            return []
        encoded = self._tokenizer(list(prompts), add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _complete(self, prompts: list[str], max_new_tokens: int) -> _Answer:
        target = self._served_adapter or self._served_model

        def call() -> Any:
            return self._client.completions.create(
                model=target,
                prompt=prompts,
                max_tokens=max_new_tokens,
                temperature=0.0,
                n=1,
                # The prompt is already rendered by the chat template, which adds
                # BOS where the model wants one; a second BOS changes the outputs.
                extra_body=self._extra_body,
            )

        started = time.perf_counter()
        plural = "" if len(prompts) == 1 else "s"
        response = self._retrying(f"complete {len(prompts)} prompt{plural}", call)
        latency = time.perf_counter() - started
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or len(choices) != len(prompts):
            found = len(choices) if isinstance(choices, list) else type(choices).__name__
            raise InvariantViolationError(
                f"the server at {self._shown_url} answered {len(prompts)} prompts with {found} "
                "choices (expected one each); nothing from this batch was kept"
            )
        texts: list[str | None] = [None] * len(prompts)
        reasons: list[str | None] = [None] * len(prompts)
        for position, choice in enumerate(choices):
            index = getattr(choice, "index", position)
            text = getattr(choice, "text", None)
            if type(index) is not int or not 0 <= index < len(prompts) or texts[index] is not None:
                raise InvariantViolationError(
                    f"the server at {self._shown_url} returned choice index {index!r} for a "
                    f"request of {len(prompts)} prompts; nothing from this batch was kept"
                )
            if not isinstance(text, str):
                raise InvariantViolationError(
                    f"the server at {self._shown_url} returned a choice without text (got "
                    f"{type(text).__name__}); nothing from this batch was kept"
                )
            texts[index] = text
            reason = getattr(choice, "finish_reason", None)
            reasons[index] = reason if isinstance(reason, str) else None
        usage_obj = getattr(response, "usage", None)
        usage = None
        if usage_obj is not None:
            usage = {
                key: int(value)
                for key in ("prompt_tokens", "completion_tokens", "total_tokens")
                if isinstance(value := getattr(usage_obj, key, None), int)
            }
        return _Answer([t for t in texts if t is not None], reasons, usage, latency)

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


def _number(options: dict[str, Any], key: str, default: float, kind: type) -> Any:
    value = options.get(key)
    if value is None or value == "":
        return kind(default)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"{key} must be a number, got {value!r}") from None
        if kind is int and not number.is_integer():
            raise ConfigError(f"{key} must be a whole number, got {value!r}")
        return kind(number)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@register_backend("server")
def server_backend(request: BackendRequest) -> ServerGenerator:
    """Build the ``server`` backend: an OpenAI-compatible completions server.

    ``request.model`` is the declared base (its tokenizer renders the prompts);
    ``options`` carry :data:`SERVER_OPTIONS`. The arm is the adapter arm when
    ``served_adapter`` is given; ``request.adapter`` (a local copy of the
    served adapter) is optional and only adds its digest.

    Raises:
        ConfigError: Unknown or bad options, or a local-only setting (device,
            thread count) that a remote server cannot honour.
        DependencyError: The server is unreachable or does not serve the names.
    """
    request.refuse_options("server", SERVER_OPTIONS)
    if request.device:
        raise ConfigError(
            "device does not apply to the server backend: the server chose its own devices"
        )
    options = dict(request.options)
    served_adapter = options.get("served_adapter") or None
    if request.adapter and not served_adapter:
        raise ConfigError(
            "a local adapter directory was given but no served_adapter: name the adapter as "
            "the server serves it (vLLM --lora-modules NAME=DIR)"
        )
    return ServerGenerator(
        str(options.get("base_url") or ""),
        served_model=str(options.get("served_model") or ""),
        served_adapter=served_adapter,
        adapter=request.adapter or None,
        model=request.model,
        revision=request.revision,
        tokenizer=request.tokenizer,
        tokenizer_revision=request.tokenizer_revision,
        concurrency=_number(options, "concurrency", DEFAULT_CONCURRENCY, int),
        request_timeout=_number(options, "request_timeout", DEFAULT_REQUEST_TIMEOUT, float),
        api_key_env=str(options.get("api_key_env") or DEFAULT_API_KEY_ENV),
        trust_remote_code=request.trust_remote_code,
        keep_special_tokens=request.keep_special_tokens,
    )
