#!/usr/bin/env bash
# Set up .venv, then lint, type-check and run the whole test suite (timed by phase).
# `--fast` (first argument) leaves out the `slow` and `browser` tests: the ones that
# start servers, `mlflow run` projects or train, for a quick loop while changing code.
# CI runs everything. Other arguments go to pytest.
# The tests run on two pytest-xdist workers (much of their time is spent
# waiting on subprocesses and servers) and mypy, one CPU-bound process for
# about two minutes, alongside them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/phases.sh
lane=()
if [ "${1:-}" = "--fast" ]; then
  shift
  lane=(-m "not slow and not browser")
fi
phase "venv (.venv)" bash scripts/setup.sh
. .venv/bin/activate
export MLFLOW_DISABLE_TELEMETRY=true HF_HUB_OFFLINE=1
phase "lint (ruff)" ruff check .
mypy_log=$(mktemp "${TMPDIR:-/tmp}/mypy.XXXXXX")
phase "type check (mypy)" mypy > "$mypy_log" 2>&1 &
mypy_pid=$!
tests_status=0
# Two workers, each test file kept on one (tests/conftest.py groups them).
phase "tests (pytest)" python -m pytest -n "${SOMMELIER_TEST_WORKERS:-2}" --dist loadgroup "${lane[@]}" "$@" \
  || tests_status=$?
mypy_status=0
wait "$mypy_pid" || mypy_status=$?
echo "== mypy:"
cat "$mypy_log"
rm -f "$mypy_log"
[ "$mypy_status" -eq 0 ] || exit "$mypy_status"
exit "$tests_status"
