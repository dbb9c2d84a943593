"""Digests and declared identities that every backend records the same way.

The comparison gate trusts a model identity only if every backend writes it
in one shape; keeping the adapter digest and the "declared by the user"
identity here means a new backend cannot invent its own variant.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from sommelier_mlflow._redact import redact
from sommelier_mlflow.data import ModelIdentity
from sommelier_mlflow.errors import DependencyError

__all__ = [
    "adapter_digest",
    "LocalSources",
    "load_errors",
    "load_pretrained",
    "load_tokenizer",
    "declared_identity",
    "SERVED_ADAPTER_DIGEST",
    "SERVED_ADAPTER_PREFIX",
    "declared_adapter",
]

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


class LocalSources:
    """Identity methods of a backend that loads its tokenizer (and maybe an adapter) here.

    The ``hf`` and ``server`` backends record the model, tokenizer and local
    adapter in the same shape; sharing the methods keeps them from drifting.
    Subclasses set the attributes below in ``__init__``.
    """

    _model_source: str
    _revision: str | None
    _tokenizer_source: str
    _tokenizer_revision: str | None
    _adapter_path: Path | None
    _adapter_sha256: str | None

    def model_identity(self) -> ModelIdentity:
        """Base model and tokenizer sources with their revisions."""
        return ModelIdentity(
            base_model=self._model_source,
            base_revision=self._revision,
            tokenizer=self._tokenizer_source,
            tokenizer_revision=self._tokenizer_revision,
        )

    def adapter_info(self) -> dict[str, str] | None:
        """``{"source", "sha256"}`` of the local adapter directory, or ``None`` without one."""
        if self._adapter_path is None or self._adapter_sha256 is None:
            return None
        return {"source": str(self._adapter_path), "sha256": self._adapter_sha256}

    def _pretrained_tokenizer(
        self, trust_remote_code: bool, token: str | None, context: str, hint: str
    ) -> Any:
        """Load the tokenizer at its source and revision; a failure says which and what to do.

        ``context`` follows the revision in the message and ``hint`` ends it;
        the error text is scrubbed of ``token`` and any other secret.
        """
        from transformers import AutoTokenizer

        return load_pretrained(
            AutoTokenizer.from_pretrained,
            "tokenizer",
            self._tokenizer_source,
            self._tokenizer_revision,
            token,
            context,
            hint,
            trust_remote_code=trust_remote_code,
        )


def load_errors() -> tuple[type[Exception], ...]:
    """What a Hugging Face load raises for files that are missing, unreadable or damaged.

    A truncated or corrupt ``.safetensors`` file raises safetensors' own
    error, which derives from none of the built-in ones.
    """
    from safetensors import SafetensorError

    return (OSError, ValueError, KeyError, SafetensorError)


def load_pretrained(
    loader: Callable[..., Any],
    what: str,
    source: str,
    revision: str | None,
    token: str | None,
    context: str,
    hint: str,
    **options: Any,
) -> Any:
    """Call a Hugging Face ``from_pretrained`` for ``source`` at ``revision``.

    Every backend loads its model and tokenizer this way, so a failure reads
    the same for both: what could not be loaded, from where, ``context``, the
    cause scrubbed of the token and any other secret, and ``hint`` (what to do).

    Raises:
        DependencyError: If the loader fails.
    """
    try:
        return loader(source, revision=revision, token=token, **options)
    except load_errors() as exc:
        raise DependencyError(
            f"could not load the {what} {source!r} (revision {revision!r}){context}: "
            f"{redact(str(exc), secrets=[token])}; {hint}"
        ) from exc


def load_tokenizer(source: str, revision: str | None, *, trust_remote_code: bool = False) -> Any:
    """Load a tokenizer alone, to render prompts without a model (``format``).

    The Hub token comes from ``HF_TOKEN`` when set, as for the ``hf`` backend.

    Raises:
        DependencyError: If the tokenizer cannot be loaded.
    """
    from transformers import AutoTokenizer

    return load_pretrained(
        AutoTokenizer.from_pretrained,
        "tokenizer",
        source,
        revision,
        os.environ.get("HF_TOKEN") or None,
        "",
        "pass a tokenizer directory or hub id (and --tokenizer-revision) that exists",
        trust_remote_code=trust_remote_code,
    )


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


#: Recorded in place of a digest when the adapter's files are not here to hash.
SERVED_ADAPTER_DIGEST: Final = "unverified:served-elsewhere"
#: Prefix of the source of an adapter known only by the name it is served under.
SERVED_ADAPTER_PREFIX: Final = "served:"


def _looks_like_path(adapter: str) -> bool:
    return adapter.startswith((".", "~", os.sep)) or os.sep in adapter


def declared_adapter(adapter: str | os.PathLike[str] | None) -> dict[str, str] | None:
    """``{"source", "sha256"}`` of a declared adapter, or ``None`` without one.

    A local directory is identified by the digest of its files. Outputs made
    by a server (vLLM ``--lora-modules name=...``, a hosted endpoint) come from
    an adapter whose files may not be on this machine: a bare name (no path
    separator) that is no local directory is recorded as ``served:<name>`` with
    the digest marked unverified, so the report says what is known and no
    more. Anything that looks like a path must exist.

    Raises:
        DependencyError: ``adapter`` looks like a path but no directory is there.
    """
    if adapter is None or not os.fspath(adapter):
        return None
    text = os.fspath(adapter)
    path = Path(text).expanduser()
    if path.is_dir():
        return {"source": str(path.resolve()), "sha256": adapter_digest(path)}
    if _looks_like_path(text):
        raise DependencyError(
            f"adapter directory {text} does not exist: pass the adapter's directory, or the "
            "bare name it is served under when its outputs were produced elsewhere"
        )
    return {"source": f"{SERVED_ADAPTER_PREFIX}{text}", "sha256": SERVED_ADAPTER_DIGEST}
