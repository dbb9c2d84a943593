"""Fixtures shared by the data-layer tests: small files written exactly as given."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.data.data_helpers import WriteLines, encode


@pytest.fixture
def write_lines(tmp_path: Path) -> WriteLines:
    """Write items (dicts as JSON lines, strings/bytes verbatim) to a fresh file."""
    counter = iter(range(1_000_000))

    def write(items: Sequence[Any]) -> Path:
        path = tmp_path / f"file{next(counter)}.jsonl"
        path.write_bytes(b"".join(encode(item) for item in items))
        return path

    return write
