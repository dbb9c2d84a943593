"""Compare two existing arm runs (base and adapter) and log the comparison run.

Run: ``python examples/compare_runs.py BASE_RUN_ID ADAPTER_RUN_ID``. Both runs must hold a
``sommelier/evaluation_report.json`` (runs of the ``evaluate``, ``score`` or ``main`` entry
points). Exits 4 with the first differing field if the gate refuses the pair. This is the
same as ``mlflow run . -e compare -P base_run_id=... -P adapter_run_id=...``.
"""

from __future__ import annotations

import sys

from sommelier_mlflow.cli import main


def compare(base_run_id: str, adapter_run_id: str, *extra: str) -> int:
    return main(
        [
            "compare",
            "--base-run-id",
            base_run_id,
            "--adapter-run-id",
            adapter_run_id,
            "--mlflow",
            *extra,
        ]
    )


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(compare(sys.argv[1], sys.argv[2], *sys.argv[3:]))
