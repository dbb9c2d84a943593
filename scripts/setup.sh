#!/usr/bin/env bash
# Create .venv and install sommelier-mlflow with its test tools into it.
# torch is installed first as the CPU build 2.13.0 when absent: a plain
# `pip install torch` would pull a multi-GB CUDA build. A venv already set up
# from the same pyproject.toml (in the same place) is left as it is (the stamp records its digest),
# so running this again, or from scripts/test.sh after .ci/run, costs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
STAMP=.venv/.sommelier-setup
want=$( (cat pyproject.toml; pwd) | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] \
  && .venv/bin/python -c "import importlib.metadata as m; m.version('sommelier-mlflow')" 2>/dev/null; then
  echo "setup: .venv is up to date with pyproject.toml"
  exit 0
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
export PIP_DISABLE_PIP_VERSION_CHECK=1
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
  .venv/bin/python -m pip install -q "torch==2.13.0"
fi
.venv/bin/python -m pip install -q -e ".[dev]"
# BFCL's multi-turn classes (the execution loop and its tests) come from BFCL's own
# package, installed without its provider SDKs (docs/bfcl.md says why).
.venv/bin/python -m pip install -q --no-deps "bfcl-eval==2026.3.23"
echo "$want" > "$STAMP"
