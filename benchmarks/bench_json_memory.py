"""Peak memory of the strict reader's duplicate-key check on one long JSONL line.

Issue 23 #8: the check scanned strings with a regex whose alternation kept
backtracking state per character (about 125 bytes per input character: a
20 MB output took 2.6 GB). Each size runs in a fresh process, which reads one
``{"example_id", "raw_text"}`` line with ``loads(..., reject_duplicate_keys=True)``
and reports its peak RSS over the RSS before the call, per input byte.
Target: peak RSS under 10x the line.

    python benchmarks/bench_json_memory.py [MB ...]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_CHILD = """
import resource, sys
sys.path.insert(0, {repo!r})
import orjson
from sommelier_mlflow._json import loads
line = orjson.dumps({{"example_id": "a", "raw_text": "x" * {size}}})
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
loads(line, reject_duplicate_keys=True)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(line), (after - before) * 1024)
"""


def measure(megabytes: float) -> tuple[int, int]:
    """(line bytes, peak RSS growth in bytes) of one check in a fresh process."""
    size = int(megabytes * 1_000_000)
    code = _CHILD.format(repo=str(Path(__file__).resolve().parents[1]), size=size)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), int(out[1])


def main(argv: list[str]) -> None:
    sizes = [float(arg) for arg in argv] or [1.0, 5.0, 20.0]
    print(f"{'line MB':>8} {'peak growth MB':>15} {'x line':>7}")
    for megabytes in sizes:
        length, growth = measure(megabytes)
        print(f"{length / 1e6:>8.1f} {growth / 1e6:>15.1f} {growth / length:>7.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
