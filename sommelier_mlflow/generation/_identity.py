"""Digests and declared identities that every backend records the same way.

The comparison gate trusts a model identity only if every backend writes it
in one shape; keeping the adapter digest and the "declared by the user"
identity here means a new backend cannot invent its own variant.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Final

from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.errors import DependencyError

__all__ = ["adapter_digest", "declared_adapter", "declared_identity"]

_CHUNK: Final = 1 << 20


def adapter_digest(directory: str | os.PathLike[str]) -> str:
    """SHA-256 over every file of an adapter directory, names and bytes.

    Files are visited in sorted order of their ``/``-separated path relative to
    ``directory``; each contributes its path (UTF-8) and its content, each
    prefixed by its length as 8 big-endian bytes, so no two different
    directories can produce the same byte stream.

    Raises:
        DependencyError: If the directory does not exist.
    """
    root = Path(directory)
    if not root.is_dir():
        raise DependencyError(f"adapter directory {str(root)!r} does not exist")
    files = sorted(
        (path.relative_to(root).as_posix(), path) for path in root.rglob("*") if path.is_file()
    )
    digest = hashlib.sha256()
    for relative, path in files:
        name = relative.encode("utf-8")
        digest.update(len(name).to_bytes(8, "big"))
        digest.update(name)
        digest.update(path.stat().st_size.to_bytes(8, "big"))
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def declared_identity(
    model: str, revision: str | None, tokenizer: str | None, tokenizer_revision: str | None
) -> ModelIdentity:
    """The identity a user declares for outputs this process does not compute itself.

    The tokenizer defaults to the model's, at the model's revision, exactly as
    the ``hf`` backend resolves it, so a declared arm and a generated arm of
    the same model pass the gate.
    """
    return ModelIdentity(
        base_model=model,
        base_revision=revision or None,
        tokenizer=tokenizer or model,
        tokenizer_revision=tokenizer_revision or (None if tokenizer else revision or None),
    )


def declared_adapter(adapter: str | os.PathLike[str] | None) -> dict[str, str] | None:
    """``{"source", "sha256"}`` of a local adapter directory, or ``None`` without one.

    Raises:
        DependencyError: If the directory does not exist.
    """
    if adapter is None or not os.fspath(adapter):
        return None
    path = Path(adapter)
    if not path.is_dir():
        raise DependencyError(f"adapter directory {os.fspath(adapter)} does not exist")
    return {"source": str(path.resolve()), "sha256": adapter_digest(path)}
