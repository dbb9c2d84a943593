"""The cycle collector is paused for a scoring batch and restored after it."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sommelier_mlflow._gc import paused_gc
from sommelier_mlflow.toolcalls import compute_metrics, parse_tool_call


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


def test_paused_inside_and_running_again_after() -> None:
    gc.enable()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_when_the_block_raises() -> None:
    gc.enable()
    with pytest.raises(ValueError), paused_gc():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    with paused_gc():
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_scoring_a_lazily_parsed_batch_runs_no_collection() -> None:
    gc.enable()
    seen: list[int] = []
    gold = {"name": "f", "arguments": {"a": [1, {"b": 2}], "c": "x"}}

    def records() -> Iterator[dict[str, Any]]:
        for index in range(5_000):
            # Each record allocates containers, enough to trigger collections if on.
            text = '{"name": "f", "arguments": {"a": [1, {"b": ' + str(index) + "}]}}"
            result = parse_tool_call(text)
            seen.append(int(gc.isenabled()))
            yield {"parse_status": result.status, "parsed_call": result.call, "gold_call": gold}

    collections: list[dict[str, Any]] = []
    scoring_thread = threading.get_ident()

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        # Only this thread's: a daemon thread left by an earlier test in the same worker
        # may call gc.collect() itself, which no pause can (or should) prevent.
        if phase == "start" and threading.get_ident() == scoring_thread:
            collections.append(info)

    gc.callbacks.append(on_gc)
    try:
        metrics = compute_metrics(records())
    finally:
        gc.callbacks.remove(on_gc)
    assert metrics["valid_json_rate"].numerator == 5_000
    assert metrics["function_name_accuracy"].numerator == 5_000
    assert seen == [0] * 5_000
    assert collections == []
    assert gc.isenabled()
