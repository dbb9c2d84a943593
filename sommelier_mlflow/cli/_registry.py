"""``--model`` / ``--adapter`` naming a Model Registry version, resolved before anything loads.

The registry version is downloaded once and the options are rewritten to the
local folders the backends load (the adapter is the version's ``peft/``
folder; its base is the model the flavor names, unless ``--model`` says
otherwise), so everything downstream (the resume folder, the digests, the
gate) treats it as the directories it is. What the folders were in the
registry is returned as run tags.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sommelier_mlflow.errors import ConfigError

__all__ = ["resolve_registry_options"]


def _download_root(args: argparse.Namespace) -> Path:
    from sommelier_mlflow.cli._options import DEFAULT_OUT

    return Path(getattr(args, "out", None) or DEFAULT_OUT) / "registry"


def resolve_registry_options(args: argparse.Namespace) -> dict[str, str]:
    """Rewrite registry URIs in ``args.model`` / ``args.adapter``; return the identity tags.

    Raises:
        ConfigError: A malformed URI, another flavor, or a version without the
            adapter that ``--adapter`` needs (exit 2).
        DependencyError: A URI (or alias) that does not resolve (exit 3).
    """
    from sommelier_mlflow.integration import is_registry_uri, resolve_registered_model

    tags: dict[str, str] = {}
    root = _download_root(args)
    if is_registry_uri(args.adapter):
        found = resolve_registered_model(args.adapter, root)
        if found.adapter_dir is None:
            raise ConfigError(
                f"{args.adapter} is version {found.version} of a transformers model without a "
                "PEFT adapter (no peft/ folder); evaluate it with --model, not --adapter"
            )
        args.adapter = str(found.adapter_dir)
        tags.update(found.tags("adapter"))
        if not args.model:
            if not found.base_model:
                raise ConfigError(
                    f"{found.uri} names no base model (source_model_name); pass --model"
                )
            args.model = found.base_model
            if not getattr(args, "revision", None):
                args.revision = found.base_revision or None
    if is_registry_uri(args.model):
        found = resolve_registered_model(args.model, root)
        tags.update(found.tags("model"))
        if found.adapter_dir is not None or found.model_dir is None:
            # A PEFT version (or one saved by reference) stands for the base it names.
            if not found.base_model:
                raise ConfigError(f"{found.uri} names no base model (source_model_name)")
            args.model = found.base_model
            args.revision = getattr(args, "revision", None) or found.base_revision or None
        else:
            args.model = str(found.model_dir)
            if found.tokenizer_dir is not None and not getattr(args, "tokenizer", None):
                args.tokenizer = str(found.tokenizer_dir)
    return tags
