"""Greedy generation: backends behind one protocol, and a resumable runner.

Importing this package is cheap: torch, transformers and peft are imported
only when an :class:`HFGenerator` is built.
"""

from __future__ import annotations

from sommelier_mlflow.generation._hf import DTYPES, HFGenerator, adapter_digest
from sommelier_mlflow.generation._protocol import (
    ReplayGenerator,
    SupportsFingerprint,
    SupportsPromptLengths,
    TextGenerator,
)
from sommelier_mlflow.generation._runner import (
    GENERATIONS_DIR,
    MANIFEST_NAME,
    MANIFEST_SCHEMA,
    run_generation,
)

__all__ = [
    "DTYPES",
    "GENERATIONS_DIR",
    "HFGenerator",
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "ReplayGenerator",
    "SupportsFingerprint",
    "SupportsPromptLengths",
    "TextGenerator",
    "adapter_digest",
    "run_generation",
]
