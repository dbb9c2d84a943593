"""What the example tests share: two scored arms and their comparison, scripts run as users do.

The calls, native and BFCL example tests each score precomputed base and
adapter outputs with ``mlflow run -e score`` and compare the two runs with
``mlflow run -e compare``; only the split, the outputs and a few score
parameters differ. One copy of that path keeps the three in step. The demo
tests also share how a script is run from a checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.mlflow_run import PROJECT, mlflow_run


@dataclass(frozen=True)
class ComparedArms:
    """What the store holds afterwards: each arm's run data, the comparison's metrics and run id."""

    base: Any  # mlflow.entities.RunData
    adapter: Any  # mlflow.entities.RunData
    compared: dict[str, float]
    compare_run_id: str  # where its artifacts (the comparison report) are


def score_and_compare_precomputed_arms(
    uri: str,
    cwd: Path,
    *,
    test_split: Path,
    outputs_dir: Path,
    adapter: str,
    outputs: str = "outputs",
    **score_params: str,
) -> ComparedArms:
    """Score ``outputs_dir/<outputs>_{base,adapter}.jsonl`` on ``test_split`` and compare them.

    Three real ``mlflow run`` processes against the tracking store at ``uri``:
    ``score`` once per arm (the precomputed model, batch size 1, 200 resamples,
    plus ``score_params``; the adapter arm names ``adapter``), then ``compare``
    of the two runs. Each fails the calling test unless it succeeds.
    """
    from mlflow.tracking import MlflowClient

    run_ids = {
        kind: mlflow_run(
            uri,
            cwd,
            "score",
            test_split=str(test_split),
            precomputed=str(outputs_dir / f"{outputs}_{kind}.jsonl"),
            model_kind=kind,
            model="example/precomputed-model",
            batch_size="1",
            resamples="200",
            **score_params,
            **({"adapter": adapter} if kind == "adapter" else {}),
        )
        for kind in ("base", "adapter")
    }
    compare_id = mlflow_run(
        uri,
        cwd,
        "compare",
        base_run_id=run_ids["base"],
        adapter_run_id=run_ids["adapter"],
        resamples="200",
    )
    client = MlflowClient(tracking_uri=uri)
    return ComparedArms(
        base=client.get_run(run_ids["base"]).data,
        adapter=client.get_run(run_ids["adapter"]).data,
        compared=client.get_run(compare_id).data.metrics,
        compare_run_id=compare_id,
    )


def run_from_checkout(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``script`` with this Python as a user runs it from a checkout (repository on PYTHONPATH).

    Output is captured and the exit status left to the caller: the demo tests
    expect refusals (exit 3) as well as successes. Two minutes at most.
    """
    return subprocess.run(
        [sys.executable, str(script), *args],
        env={**os.environ, "PYTHONPATH": str(PROJECT)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
