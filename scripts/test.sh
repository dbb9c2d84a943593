#!/usr/bin/env bash
# Set up .venv, then lint, type-check and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export MLFLOW_DISABLE_TELEMETRY=true HF_HUB_OFFLINE=1
ruff check .
mypy
python -m pytest "$@"
