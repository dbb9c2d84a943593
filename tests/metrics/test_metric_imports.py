from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import sommelier_mlflow.metrics as metrics

ROOT = Path(__file__).resolve().parents[2]


def test_metrics_package_imports_no_heavy_dependency() -> None:
    probe = (
        "import sys\n"
        "import sommelier_mlflow.metrics as m\n"
        "m.CountsMetric(segments='tokens').evaluate('a b')\n"
        "heavy = [n for n in ('mlflow', 'torch', 'transformers', 'peft') if n in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip() == ""


def test_public_names_are_sorted_and_exported() -> None:
    assert metrics.__all__ == sorted(metrics.__all__)
    required = {
        "BaseMetric",
        "CompositeMetric",
        "CountsConfig",
        "CountsMetric",
        "EvaluationResult",
        "JsonFormatConfig",
        "JsonFormatMetric",
        "MetricSpec",
        "config_schema",
        "count_characters",
        "count_encodings",
        "count_tokens",
        "get_metric",
        "register_metric",
        "list_metrics",
    }
    assert required <= set(metrics.__all__)
    for name in metrics.__all__:
        assert getattr(metrics, name) is not None
