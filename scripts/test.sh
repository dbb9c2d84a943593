#!/usr/bin/env bash
# Set up .venv, then lint, type-check and run the whole test suite (timed by phase).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/phases.sh
phase "venv (.venv)" bash scripts/setup.sh
. .venv/bin/activate
export MLFLOW_DISABLE_TELEMETRY=true HF_HUB_OFFLINE=1
phase "lint (ruff)" ruff check .
phase "type check (mypy)" mypy
phase "tests (pytest)" python -m pytest "$@"
