"""Atomic writes: readers see the old file or the whole new one, with normal permissions."""

from __future__ import annotations

from pathlib import Path


def test_atomic_writes_get_ordinary_file_permissions(tmp_path: Path) -> None:
    import os

    from sommelier_mlflow._json import atomic_write_json

    path = atomic_write_json(tmp_path / "report.json", {"a": 1})
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    assert os.stat(path).st_mode & 0o777 == os.stat(plain).st_mode & 0o777
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
