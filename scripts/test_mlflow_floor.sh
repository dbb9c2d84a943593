#!/usr/bin/env bash
# Run the MLflow integration tests (tracking, evaluator, scorers, traces,
# datasets, every `mlflow run` entry point; no real-server or browser tests)
# against the lowest MLflow that pyproject.toml declares, while scripts/test.sh
# runs the whole suite on the newest.
#
# .venv-mlflow-floor holds only `mlflow==<floor>` and what that release pins
# differently; everything else is read from .venv (a .pth file adds its
# site-packages after the floor venv's own), so it installs in a minute, not
# in the several that a second torch + transformers would take. Run
# scripts/setup.sh first. `--install-only` sets up the venv and runs nothing
# (.ci/run installs it while the main suite runs).
set -euo pipefail
cd "$(dirname "$0")/.."
floor=$(sed -n 's/^ *"mlflow>=\([0-9.]*\),.*/\1/p' pyproject.toml)
[ -n "$floor" ] || { echo "test_mlflow_floor: no mlflow>=X in pyproject.toml" >&2; exit 2; }
VENV=.venv-mlflow-floor
PYTHON="${PYTHON:-python3}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
site_of() { "$1" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"; }
echo "import site; site.addsitedir('$(site_of .venv/bin/python)')" \
  > "$(site_of "$VENV/bin/python")/zz_sommelier_base_venv.pth"
at_floor() {
  "$VENV/bin/python" -c "import importlib.metadata as m, sys; from packaging.version import Version
sys.exit(Version(m.version('mlflow')) != Version('$floor'))" 2>/dev/null
}
if ! at_floor; then
  # pip reports the newer packages it cannot remove from .venv; the floor's own win.
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install -q "mlflow==$floor" 2>&1 \
    | grep -v -e "^WARNING: Location" -e "outside environment" -e "No files were found" || true
  at_floor || { echo "test_mlflow_floor: could not install mlflow==$floor" >&2; exit 3; }
fi
echo "test_mlflow_floor: mlflow $floor"
[ "${1:-}" != "--install-only" ] || exit 0
export PATH="$PWD/$VENV/bin:$PATH" MLFLOW_DISABLE_TELEMETRY=true HF_HUB_OFFLINE=1
exec "$VENV/bin/python" -m pytest -q -n "${SOMMELIER_TEST_WORKERS:-2}" --dist loadgroup \
  -p no:cacheprovider tests/integration tests/cli/test_mlflow_entry_points.py \
  --ignore tests/integration/test_team_server.py --ignore tests/integration/test_traces_server.py "$@"
