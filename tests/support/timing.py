"""CPU-time growth checks: how a cost grows with its input, not how fast one machine is.

A test that an algorithm is linear (or of low degree) must pass on a loaded
CI machine and fail on the quadratic code it replaced. Wall-clock bounds do
neither well, so these helpers measure process CPU time (other processes on
the machine do not count), take the best of several runs (what is left is
the work itself), and compare sizes a factor of ten apart: linear work grows
about 10x per step, quadratic work 100x, so a bound in between separates them
with room for noise.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

__all__ = ["best_cpu_seconds", "growth_ratios"]


def best_cpu_seconds(run: Callable[[], object], repeats: int = 5) -> float:
    """The least process CPU time, in seconds, that ``run()`` took over ``repeats`` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def growth_ratios(
    run: Callable[[int], object],
    sizes: Sequence[int],
    *,
    bound: float,
    repeats: int = 5,
) -> list[float]:
    """Time ``run(size)`` for each size in turn; fail as soon as one step grows past ``bound``.

    Stopping at the first step that grows too fast keeps a test of a quadratic
    cost short: the next, larger size could run for minutes.

    Returns:
        The ratio of each size's best CPU time to the previous size's.

    Raises:
        AssertionError: A step's ratio is above ``bound``.
    """
    ratios: list[float] = []
    previous: tuple[int, float] | None = None
    for size in sizes:
        seconds = max(best_cpu_seconds(lambda size=size: run(size), repeats), 1e-6)
        if previous is not None:
            ratio = seconds / previous[1]
            assert ratio < bound, (
                f"CPU time grew {ratio:.1f}x from size {previous[0]:,} to {size:,} "
                f"(bound {bound}x; steps so far {[round(r, 1) for r in ratios]})"
            )
            ratios.append(ratio)
        previous = (size, seconds)
    return ratios
