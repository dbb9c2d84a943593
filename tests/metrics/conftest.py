from __future__ import annotations

from collections.abc import Iterator

import pytest

from sommelier_mlflow.metrics import _catalog


@pytest.fixture(autouse=True)
def _restore_catalog() -> Iterator[None]:
    """Keep the process-wide catalog (and class names) as each test found them."""
    registry = dict(_catalog._registry)
    names = {cls: cls._metric_name for cls in registry.values()}
    yield
    _catalog._registry.clear()
    _catalog._registry.update(registry)
    for cls, name in names.items():
        cls._metric_name = name
