"""Per-comparison random streams derived from one base seed.

A report holds many bootstrap intervals (one delta per slice, one gap per
language and model). If they all drew from one shared generator, each interval
would depend on how many were computed before it, so adding a language or
reordering a loop would silently change every other number. Deriving a
separate seed per comparison label from a hash makes each interval a pure
function of ``(base_seed, label, data)``.
"""

from __future__ import annotations

import hashlib

from sommelier_mlflow.errors import ConfigError

__all__ = ["derive_seed"]

_SEED_BITS = 63


def derive_seed(base_seed: int, label: str) -> int:
    """Derive the seed of one comparison from the run's base seed.

    The seed is the first 64 bits of ``sha256(f"{base_seed}:{label}")`` with
    the lowest bit dropped, so it fits a signed 64-bit integer (MLflow params,
    JSON readers in other languages) and is non-negative (numpy seeds must be).

    Args:
        base_seed: The one seed the user controls for the whole run.
        label: A stable name of the comparison, e.g. ``"delta/overall"`` or
            ``"gap/adapter/fr"``; distinct labels give independent streams.

    Returns:
        An integer in ``[0, 2**63)``.

    Raises:
        ConfigError: If ``base_seed`` is not an integer or ``label`` is not a
            non-empty string.
    """
    if isinstance(base_seed, bool) or not isinstance(base_seed, int):
        raise ConfigError(
            f"base seed must be an integer, got {type(base_seed).__name__}; pass e.g. --seed 0"
        )
    if not isinstance(label, str) or not label:
        raise ConfigError("seed label must be a non-empty string naming the comparison")
    digest = hashlib.sha256(f"{base_seed}:{label}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> (64 - _SEED_BITS)
