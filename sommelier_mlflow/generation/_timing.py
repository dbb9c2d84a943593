"""How long each generated batch took, beside the generations, never inside them.

A trace in MLflow's evaluation view shows a duration, and the experiment's
Overview charts those durations; a trace of 0 ms leaves the chart empty. The
runner therefore appends one line per generated batch to
``generation_timing.jsonl`` next to ``generation_manifest.json``: the batch's
example ids (every prompt the batch ran, in batch order) and the wall-clock
seconds the backend took for it.

The timing is kept out of ``generations/<slice>.jsonl`` on purpose: those
files are byte-identical across an interrupted and an uninterrupted run, across
``--parallel-arms`` and across machines, and no digest may depend on a clock.

An example's duration is its *share* of its batch: the batch's seconds
divided by the prompts in it, so the durations of an arm add up to its
generation time (all prompts of a batch run together; none of them alone
took that long). A resumed run appends lines for the batches it generated
again; the last line naming an example wins, which is the batch whose text was
kept. A torn last line (a killed process) is ignored and cut off before the
next append.

A multi-turn question (``_multi_turn.py``) is generated step by step, one
step per round, so its lines also carry the ``round`` the batch played. Its
duration is the sum of its shares over its rounds, so the arm's durations
still add up to its generation time; within one round the last line wins, as
above: a round a kill cut short is generated again whole on resume and
appended again, and only that second time counts. A round replayed from the
journal generates nothing and appends nothing, so it keeps the seconds its
first run recorded.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

from sommelier_mlflow._json import JSONDecodeError, dumps_line, loads, naming_path
from sommelier_mlflow.data import schema_version
from sommelier_mlflow.errors import DataError

__all__ = ["TIMING_NAME", "TIMING_SCHEMA", "TimingLog", "read_example_seconds"]

TIMING_NAME: Final = "generation_timing.jsonl"
TIMING_SCHEMA: Final = schema_version("generation_timing")
_DROP: Final = "delete it to log the traces without durations"


class TimingLog:
    """Appends one durable line per generated batch to ``folder/generation_timing.jsonl``."""

    def __init__(self, folder: Path) -> None:
        self._path = folder / TIMING_NAME
        self._handle: IO[bytes] | None = None

    def append(
        self, example_ids: Sequence[str], seconds: float, *, round_number: int | None = None
    ) -> None:
        """Record that the batch of ``example_ids`` took ``seconds``; flushed and fsynced.

        Args:
            example_ids: Every prompt the batch ran, in batch order.
            seconds: The backend's wall-clock time for the batch.
            round_number: The multi-turn round the batch played (its steps add
                up over rounds); ``None`` for single-turn batches.

        Raises:
            OSError: The write failed (a full disk), naming the timing file.
        """
        line: dict[str, Any] = {"schema_version": TIMING_SCHEMA, "example_ids": list(example_ids)}
        if round_number is not None:
            line["round"] = round_number
        with naming_path(self._path):
            if self._handle is None:
                self._handle = self._open()
            self._handle.write(dumps_line({**line, "seconds": max(0.0, float(seconds))}))
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def _open(self) -> IO[bytes]:
        handle = self._path.open("ab+")
        handle.seek(0)
        data = handle.read()
        if data and not data.endswith(b"\n"):  # a torn line: never glue the next one onto it
            handle.truncate(data.rfind(b"\n") + 1)
        handle.seek(0, os.SEEK_END)
        return handle

    def close(self) -> None:
        """Close the file (if a batch was recorded)."""
        handle, self._handle = self._handle, None
        if handle is not None:
            with naming_path(self._path):
                handle.close()


def _line(path: Path, number: int, line: bytes) -> tuple[list[str], float, int | None]:
    """One complete line's example ids, seconds and multi-turn round (if any), checked."""
    try:
        row: Any = loads(line)
    except JSONDecodeError as exc:
        raise DataError(f"not a JSON line ({exc}); {_DROP}", path=str(path), line=number) from exc
    ids: Any = row.get("example_ids") if isinstance(row, dict) else None
    seconds: Any = row.get("seconds") if isinstance(row, dict) else None
    round_number: Any = row.get("round") if isinstance(row, dict) else None
    if (
        not isinstance(row, dict)
        or row.get("schema_version") != TIMING_SCHEMA
        or not isinstance(ids, list)
        or not ids
        or not all(isinstance(item, str) for item in ids)
        or type(seconds) not in (int, float)
        or not math.isfinite(seconds)
        or seconds < 0
        or (round_number is not None and (type(round_number) is not int or round_number < 0))
    ):
        raise DataError(
            f"not a {TIMING_SCHEMA} line (example_ids: non-empty list of ids, seconds: a "
            f"number >= 0, round: absent or an integer >= 0); {_DROP}",
            path=str(path),
            line=number,
        )
    return ids, float(seconds), round_number


def read_example_seconds(folder: str | os.PathLike[str]) -> dict[str, float]:
    """Each generated example's share of its batch's seconds, from ``folder``'s timing file.

    A multi-turn question's seconds are its shares summed over the rounds it
    was generated in, the last line of each round counting (module docstring).

    Returns:
        ``example_id`` to seconds; empty when the folder has no timing file
        (generations made elsewhere, or before timing was recorded).

    Raises:
        DataError: A complete line that is not a timing record, naming file and line.
    """
    path = Path(folder) / TIMING_NAME
    if not path.is_file():
        return {}
    data = path.read_bytes()
    shares: dict[str, float] = {}
    steps: dict[tuple[str, int], float] = {}
    for number, line in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), start=1):
        ids, seconds, round_number = _line(path, number, line)
        if round_number is None:
            shares.update(dict.fromkeys(ids, seconds / len(ids)))
        else:
            steps.update(dict.fromkeys(((i, round_number) for i in ids), seconds / len(ids)))
    summed: dict[str, float] = {}
    for (example_id, _), share in sorted(steps.items()):  # rounds in order: a stable sum
        summed[example_id] = summed.get(example_id, 0.0) + share
    return shares | summed
