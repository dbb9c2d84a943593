#!/usr/bin/env bash
# The GPU measurement of issue 34, item 4, in one command, on a machine with one NVIDIA GPU,
# PyTorch, transformers and peft, and no network:
#
#   bash benchmarks/device/run_gpu_bench.sh            # the 8B shape, 1,000 prompts, both arms
#   bash benchmarks/device/run_gpu_bench.sh --smoke    # CPU check: one-layer 0.5B shape, 4 prompts
#   bash benchmarks/device/run_gpu_bench.sh --shape qwen2.5-7b --batch-size 64
#
# 1. installs, from the folder of wheels carried beside this script (benchmarks/device/wheels,
#    or $SOMMELIER_WHEELS), only the packages of the generation path that the machine lacks
#    (benchmarks/device/README.md lists them and the `pip download` that fills the folder);
# 2. installs this project without its dependencies (MLflow and the rest are not needed to
#    generate); where pip cannot (no setuptools), it runs from the source tree instead;
# 3. runs gpu_bench.py, which builds the shape and times both arms (arguments pass through).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WHEELS=${SOMMELIER_WHEELS:-$HERE/wheels}
PYTHON=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MLFLOW_DISABLE_TELEMETRY=true
export TOKENIZERS_PARALLELISM=false

# Import name -> distribution, for every third-party package the generation path imports
# besides torch, transformers, peft, tokenizers and safetensors (which the machine has).
missing=$("$PYTHON" - <<'PY'
import importlib.util
needed = {
    "pydantic": "pydantic", "pydantic_core": "pydantic-core",
    "annotated_types": "annotated-types", "typing_inspection": "typing-inspection",
    "typing_extensions": "typing-extensions", "orjson": "orjson", "numpy": "numpy",
    "jsonschema": "jsonschema", "jsonschema_specifications": "jsonschema-specifications",
    "referencing": "referencing", "rpds": "rpds-py", "attrs": "attrs",
}
print(" ".join(dist for module, dist in needed.items() if importlib.util.find_spec(module) is None))
PY
)
for module in torch transformers peft tokenizers safetensors; do
    "$PYTHON" -c "import $module" 2>/dev/null || {
        echo "error: $module is not installed; this machine must already have it" >&2
        exit 3
    }
done
if [ -n "$missing" ]; then
    if [ ! -d "$WHEELS" ]; then
        echo "error: missing $missing and no wheel folder at $WHEELS;" \
             "fill it as benchmarks/device/README.md says" >&2
        exit 3
    fi
    echo "installing from $WHEELS: $missing"
    # shellcheck disable=SC2086  # one word per distribution
    "$PYTHON" -m pip install --quiet --no-index --find-links "$WHEELS" $missing
fi
# Only where the project is not importable yet: a development venv keeps its own install.
if ! (cd / && "$PYTHON" -c "import sommelier_mlflow") 2>/dev/null; then
    if ! "$PYTHON" -m pip install --quiet --no-index --no-deps --no-build-isolation \
            -e "$REPO" >/dev/null 2>&1; then
        echo "pip could not install the project here (no setuptools?): running from $REPO"
        export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
    fi
fi
cd "$REPO"
exec "$PYTHON" "$HERE/gpu_bench.py" "$@"
