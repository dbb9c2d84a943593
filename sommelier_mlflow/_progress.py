"""One way to draw a progress bar, shared by generation, scoring and trace logging.

Long steps (generating thousands of completions, scoring tens of thousands,
writing traces) otherwise run silently for minutes. Every such step draws the
same tqdm bar on stderr with its rate and ETA, so the output looks the same
everywhere and stdout stays clean for reports. Whether a bar shows is the
caller's decision (the CLI: on a terminal, or anywhere with ``--progress``);
a disabled bar writes nothing, so CI logs stay quiet.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

__all__ = ["SCORING_PROGRESS_MIN", "progress_bar"]

#: Scoring draws a bar only above this many examples: smaller runs finish in
#: seconds, where a bar would flash and add noise.
SCORING_PROGRESS_MIN: Final = 10_000


@contextmanager
def progress_bar(
    total: int, desc: str, *, enabled: bool, unit: str = "ex", initial: int = 0
) -> Iterator[Any]:
    """A tqdm bar on stderr (rate and ETA) that is closed however the block ends.

    Args:
        total: Units of work in the whole step.
        desc: Short label of the step (e.g. ``score``).
        enabled: Draw the bar; when false, ``update`` calls are free no-ops.
        unit: Name of one unit of work, shown in the rate.
        initial: Units already done (a resumed step), so the ETA is honest.
    """
    from tqdm import tqdm

    bar = tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit=unit,
        file=sys.stderr,
        disable=not enabled,
        dynamic_ncols=True,
        smoothing=0.1,
    )
    try:
        yield bar
    finally:
        bar.close()
