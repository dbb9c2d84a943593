#!/usr/bin/env bash
# Create .venv and install sommelier-mlflow with its test tools into it.
# torch is installed first as the CPU build 2.13.0 when absent: a plain
# `pip install torch` would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
.venv/bin/python -m pip install -q -e ".[dev]"
