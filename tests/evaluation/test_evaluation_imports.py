from __future__ import annotations

import subprocess
import sys

import sommelier_mlflow.evaluation as evaluation


def test_public_names_are_sorted_and_importable():
    assert list(evaluation.__all__) == sorted(evaluation.__all__)
    for name in evaluation.__all__:
        assert getattr(evaluation, name) is not None


def test_evaluation_imports_no_heavy_dependency():
    code = (
        "import sys, sommelier_mlflow.evaluation\n"
        "heavy = [m for m in ('mlflow', 'torch', 'transformers', 'peft') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == ""
