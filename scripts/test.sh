#!/usr/bin/env bash
# Set up .venv, then lint, type-check and run the whole test suite (timed by phase).
# The tests run on two pytest-xdist workers (much of their time is spent
# waiting on subprocesses and servers) and mypy, one CPU-bound process for
# about two minutes, alongside them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/phases.sh
phase "venv (.venv)" bash scripts/setup.sh
. .venv/bin/activate
export MLFLOW_DISABLE_TELEMETRY=true HF_HUB_OFFLINE=1
phase "lint (ruff)" ruff check .
mypy_log=$(mktemp "${TMPDIR:-/tmp}/mypy.XXXXXX")
phase "type check (mypy)" mypy > "$mypy_log" 2>&1 &
mypy_pid=$!
tests_status=0
# Two workers, each test file kept on one (tests/conftest.py groups them).
phase "tests (pytest)" python -m pytest -n "${SOMMELIER_TEST_WORKERS:-2}" --dist loadgroup "$@" \
  || tests_status=$?
mypy_status=0
wait "$mypy_pid" || mypy_status=$?
echo "== mypy:"
cat "$mypy_log"
rm -f "$mypy_log"
[ "$mypy_status" -eq 0 ] || exit "$mypy_status"
exit "$tests_status"
