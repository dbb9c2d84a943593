"""The generation manifest: what a generation run was, read back without its model.

The runner writes ``generation_manifest.json`` next to the generations; its
``generator`` entry is the backend's fingerprint, which every
:class:`~sommelier_mlflow.generation.GenerationBackend` fills with its model
identity and adapter. Reading that identity back lets ``score`` re-score the
generations later, on a machine without the model, and still pass the gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sommelier_mlflow._json import JSONDecodeError, loads
from sommelier_mlflow.data import ModelIdentity, schema_version
from sommelier_mlflow.errors import DataError

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "RecordedIdentity",
    "find_recorded_identity",
]

MANIFEST_NAME: Final = "generation_manifest.json"
MANIFEST_SCHEMA: Final = schema_version("generation_manifest")


@dataclass(frozen=True)
class RecordedIdentity:
    """The model identity and adapter a generation run recorded, and where."""

    model_identity: ModelIdentity
    adapter: dict[str, str] | None
    manifest_path: Path


def _read(manifest: Path) -> RecordedIdentity:
    try:
        data = loads(manifest.read_bytes())
        generator = data["generator"]
        identity = ModelIdentity(**generator["model_identity"])
        adapter = generator["adapter"]
    except (JSONDecodeError, KeyError, TypeError) as exc:
        raise DataError(
            f"cannot read the model identity from {manifest} ({exc!r}); pass the model "
            "(and revision/tokenizer/adapter) explicitly",
            path=str(manifest),
        ) from exc
    if adapter is not None and not (
        isinstance(adapter, dict) and all(isinstance(v, str) for v in adapter.values())
    ):
        raise DataError(f"{manifest}: generator.adapter is malformed", path=str(manifest))
    return RecordedIdentity(identity, adapter, manifest)


def find_recorded_identity(generations: str | Path) -> RecordedIdentity | None:
    """The identity recorded next to a generations folder or file, if any.

    Looks in the folder holding the generations and its parent (the runner
    puts the manifest beside ``generations/``).

    Raises:
        DataError: A manifest exists but does not hold a readable identity.
    """
    source = Path(generations)
    root = source if source.is_dir() else source.parent
    for folder in (root, root.parent):
        manifest = folder / MANIFEST_NAME
        if manifest.is_file():
            return _read(manifest)
    return None
