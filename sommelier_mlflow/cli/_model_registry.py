"""``--model`` / ``--adapter`` naming a Model Registry version, resolved before anything loads.

The registry version is downloaded once and the options are rewritten to the
local folders the backends load (the adapter is the version's ``peft/``
folder; its base is the model the flavor names, unless ``--model`` says
otherwise), so everything downstream (the resume folder, the digests, the
gate) treats it as the directories it is. What the folders were in the
registry is returned as run tags, per role, so that each arm's run records
exactly the registry models it ran: a base arm the model, an adapter arm the
model and the adapter.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from sommelier_mlflow.errors import ConfigError

__all__ = ["RegistryTags", "resolve_registry_options"]


@dataclass(frozen=True)
class RegistryTags:
    """The ``sommelier.registry.<role>.*`` run tags of the options that named registry versions.

    Attributes:
        model: Tags of ``--model`` (empty when it was no ``models:/`` URI).
        adapter: Tags of ``--adapter`` (empty when it was no ``models:/`` URI).
    """

    model: dict[str, str] = field(default_factory=dict)
    adapter: dict[str, str] = field(default_factory=dict)

    def for_arm(self, kind: str) -> dict[str, str]:
        """The tags an arm's run carries: a base arm never ran the adapter."""
        return {**self.model, **self.adapter} if kind == "adapter" else dict(self.model)


def _download_root(args: argparse.Namespace) -> Path:
    from sommelier_mlflow.cli._options import DEFAULT_OUT

    return Path(getattr(args, "out", None) or DEFAULT_OUT) / "registry"


def resolve_registry_options(args: argparse.Namespace) -> RegistryTags:
    """Rewrite registry URIs in ``args.model`` / ``args.adapter``; return the identity tags.

    Raises:
        ConfigError: A malformed URI, another flavor, or a version without the
            adapter that ``--adapter`` needs (exit 2).
        DependencyError: A URI (or alias) that does not resolve (exit 3).
    """
    from sommelier_mlflow.integration import is_registry_uri, resolve_registered_model

    model_tags: dict[str, str] = {}
    adapter_tags: dict[str, str] = {}
    root = _download_root(args)
    if is_registry_uri(args.adapter):
        found = resolve_registered_model(args.adapter, root)
        if found.adapter_dir is None:
            raise ConfigError(
                f"{args.adapter} is version {found.version} of a transformers model without a "
                "PEFT adapter (no peft/ folder); evaluate it with --model, not --adapter"
            )
        args.adapter = str(found.adapter_dir)
        adapter_tags = found.tags("adapter")
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
        model_tags = found.tags("model")
        if found.adapter_dir is not None or found.model_dir is None:
            # The base it names is evaluated, not this version's model: no LoggedModel link.
            model_tags.pop("sommelier.registry.model.model_id", None)
            # A PEFT version (or one saved by reference) stands for the base it names.
            if not found.base_model:
                raise ConfigError(f"{found.uri} names no base model (source_model_name)")
            args.model = found.base_model
            args.revision = getattr(args, "revision", None) or found.base_revision or None
        else:
            args.model = str(found.model_dir)
            if found.tokenizer_dir is not None and not getattr(args, "tokenizer", None):
                args.tokenizer = str(found.tokenizer_dir)
    return RegistryTags(model=model_tags, adapter=adapter_tags)
