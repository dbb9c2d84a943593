"""Writers for the files the readers accept, kept apart from the readers.

A writer must produce what :mod:`sommelier_mlflow.data._split_reader` reads back
without complaint, so it refuses up front what the reader would refuse later
(and writes atomically, so a failure never leaves half a file behind).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sommelier_mlflow._json import atomic_write_jsonl
from sommelier_mlflow.data._schemas import TestExample
from sommelier_mlflow.errors import DataError

__all__ = ["write_test_split"]


def write_test_split(path: str | os.PathLike[str], examples: Iterable[TestExample]) -> Path:
    """Atomically write examples as native test-split rows.

    Refuses an empty or id-duplicated list up front, because the reader
    would refuse the file afterwards and half the pipeline would have run.

    Raises:
        DataError: If there are no examples or an ``example_id`` repeats.
    """
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for example in examples:
        if example.example_id in seen:
            raise DataError(f"duplicate example_id {example.example_id!r}", path=os.fspath(path))
        seen.add(example.example_id)
        rows.append(example.to_json())
    if not rows:
        raise DataError("refusing to write an empty test split", path=os.fspath(path))
    return atomic_write_jsonl(path, rows)
