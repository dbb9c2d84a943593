"""Greedy generation: named backends behind one protocol, and a resumable runner.

Importing this package is cheap: torch, transformers and peft are imported
only when the ``hf`` backend is built. A backend is closed by whoever built it
(:func:`close_backend`); backends loading the same model share one engine
(:func:`shared_engine`). Importing it also registers the
built-in backends (``hf``, ``replay``, ``server``, ``vllm``), so :func:`create_backend` knows them
whichever module a caller reaches first.
"""

from __future__ import annotations

from sommelier_mlflow.generation._context import ContextCheck, check_context
from sommelier_mlflow.generation._engines import (
    EngineLease,
    keep_engines,
    open_engines,
    shared_engine,
)
from sommelier_mlflow.generation._hf import (
    DTYPES,
    HFGenerator,
    greedy_completions,
    greedy_generation_config,
    physical_cores,
)
from sommelier_mlflow.generation._identity import (
    adapter_digest,
    declared_adapter,
    declared_identity,
    load_tokenizer,
)
from sommelier_mlflow.generation._manifest import (
    MANIFEST_NAME,
    MANIFEST_SCHEMA,
    RecordedIdentity,
    find_recorded_identity,
)
from sommelier_mlflow.generation._multi_turn import (
    MULTI_TURN_JOURNAL_NAME,
    MULTI_TURN_LOOP,
    TRAJECTORIES_NAME,
    MultiTurnLoop,
    loop_decoding,
)
from sommelier_mlflow.generation._protocol import (
    BackendRequest,
    Completion,
    GenerationBackend,
    SupportsClose,
    SupportsCompletionDetails,
    SupportsContextLength,
    SupportsExampleKeys,
    SupportsFingerprint,
    SupportsPromptLengths,
    SupportsRunRecord,
    TextGenerator,
    close_backend,
)
from sommelier_mlflow.generation._registry import (
    BackendFactory,
    BackendOption,
    BackendOptions,
    BackendSpec,
    NoOptions,
    backend_names,
    backend_spec,
    create_backend,
    register_backend,
)
from sommelier_mlflow.generation._replay import ReplayGenerator, ReplayOptions
from sommelier_mlflow.generation._runner import GENERATIONS_DIR, run_generation
from sommelier_mlflow.generation._server import ServerGenerator, ServerOptions
from sommelier_mlflow.generation._timing import TIMING_NAME, read_example_seconds
from sommelier_mlflow.generation._transport import ServedModel, ServerTransport
from sommelier_mlflow.generation._vllm import VllmGenerator, VllmOptions

__all__ = [
    "BackendFactory",
    "BackendOption",
    "BackendOptions",
    "BackendRequest",
    "BackendSpec",
    "Completion",
    "ContextCheck",
    "DTYPES",
    "EngineLease",
    "GENERATIONS_DIR",
    "GenerationBackend",
    "HFGenerator",
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "MULTI_TURN_JOURNAL_NAME",
    "MULTI_TURN_LOOP",
    "MultiTurnLoop",
    "NoOptions",
    "RecordedIdentity",
    "ReplayGenerator",
    "ReplayOptions",
    "ServedModel",
    "ServerGenerator",
    "ServerOptions",
    "ServerTransport",
    "SupportsClose",
    "SupportsCompletionDetails",
    "SupportsContextLength",
    "SupportsExampleKeys",
    "SupportsFingerprint",
    "SupportsPromptLengths",
    "SupportsRunRecord",
    "TIMING_NAME",
    "TRAJECTORIES_NAME",
    "TextGenerator",
    "VllmGenerator",
    "VllmOptions",
    "adapter_digest",
    "backend_names",
    "backend_spec",
    "check_context",
    "close_backend",
    "create_backend",
    "declared_adapter",
    "declared_identity",
    "find_recorded_identity",
    "greedy_completions",
    "greedy_generation_config",
    "keep_engines",
    "load_tokenizer",
    "loop_decoding",
    "open_engines",
    "physical_cores",
    "read_example_seconds",
    "register_backend",
    "run_generation",
    "shared_engine",
]
