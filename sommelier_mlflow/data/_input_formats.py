"""Input formats: the layouts ``prepare`` reads raw data in, one registered object each.

Teams hold their fine-tuning data in the layout their trainer reads (xlam
rows, OpenAI/TRL conversations, Hermes, ShareGPT, ToolACE, Glaive). Each
layout is one module that registers an :class:`InputFormat` here, so
``prepare --input-format NAME`` (MLproject ``input_format``) picks it by
name and another package adds its own through the entry-point group
``sommelier_mlflow.input_formats``. ``xlam`` is the default and keeps its
own path (``data/_prepare.py``); every other built-in reads conversations
and hands them to the one conversation pipeline (``data/_conversation_import.py``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from sommelier_mlflow._plugins import INPUT_FORMATS_GROUP, Registry

__all__ = [
    "DEFAULT_INPUT_FORMAT",
    "PrepareResult",
    "PrepareFunction",
    "InputFormat",
    "register_input_format",
    "input_format",
    "input_format_names",
]

DEFAULT_INPUT_FORMAT: Final = "xlam"


@dataclass(frozen=True, slots=True)
class PrepareResult:
    """What :func:`prepare` wrote.

    Attributes:
        split_paths: ``train``/``validation``/``test`` → the JSONL file written.
        drop_summary_path: The ``drop_summary.json`` written.
        splits: The examples of each split, in file order: ``TestExample``
            objects for ``xlam``, the written row dicts for a conversation format.
        summary: The drop summary's content.
    """

    split_paths: Mapping[str, Path]
    drop_summary_path: Path
    splits: Mapping[str, tuple[Any, ...]]
    summary: Mapping[str, Any]


class PrepareFunction(Protocol):
    """What an input format does: read ``raw_path``, write the splits and a drop summary."""

    def __call__(
        self,
        raw_path: str | os.PathLike[str],
        out_dir: str | os.PathLike[str],
        *,
        seed: int,
        split_sizes: Mapping[str, int],
        min_query_chars: int,
        max_query_chars: int,
        keep_multi_call: bool,
        strict: bool,
    ) -> PrepareResult: ...


@dataclass(frozen=True, slots=True)
class InputFormat:
    """One registered input format.

    Attributes:
        name: What ``--input-format`` takes.
        description: One sentence for ``--help`` and the docs.
        prepare: Reads a raw file and writes ``train``/``validation``/``test``
            JSONL and ``drop_summary.json`` (see :class:`PrepareFunction`).
        read: For a conversation format, its reader of one source record
            (``data/_conversation_import.py``'s ``ConversationReader``);
            ``None`` for a format with its own path (``xlam``).
    """

    name: str
    description: str
    prepare: PrepareFunction
    read: Any = None


_INPUT_FORMATS: Final[Registry[InputFormat]] = Registry(
    "input format", group=INPUT_FORMATS_GROUP, item_type=InputFormat
)


def register_input_format(fmt: InputFormat) -> InputFormat:
    """Register ``fmt`` under its name (a taken name is refused, ConfigError)."""
    return _INPUT_FORMATS.register(fmt.name, fmt)


def input_format(name: str) -> InputFormat:
    """The input format ``name`` (ConfigError, exit 2, listing the registered ones, if unknown)."""
    return _INPUT_FORMATS.get(name)


def input_format_names() -> tuple[str, ...]:
    """Every registered input format, plugins included, sorted."""
    return _INPUT_FORMATS.names()
