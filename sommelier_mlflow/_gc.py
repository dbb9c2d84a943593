"""Pausing Python's cycle collector while a batch builds many small objects.

Parsing and scoring allocate a few dicts and lists per example and keep
most of them alive until the batch ends (parsed calls, comparisons, rows).
CPython's cycle collector is triggered by allocation counts, so on a batch
of 100,000 examples it runs thousands of times and its full passes walk
every live object: measured on ``benchmarks/bench_scoring.py``, that doubles
the time of parse + score at 100,000 records. Nothing a batch builds is
cyclic (JSON values and flat records), so reference counting frees it all,
and pausing the collector for the batch loses no memory; the collector is
resumed (if it was running) however the block ends, and catches up then.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["paused_gc"]


@contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block with cyclic garbage collection off; restore its state afterwards.

    Nested use is safe: only the outermost block that found the collector
    running turns it back on.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
