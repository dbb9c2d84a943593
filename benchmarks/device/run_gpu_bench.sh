#!/usr/bin/env bash
# The GPU measurements of issue 34, item 4, and (with --multi-turn) of issue 33's batching
# target, in one command, on a machine with one NVIDIA GPU, PyTorch, transformers and peft,
# and no network:
#
#   bash benchmarks/device/run_gpu_bench.sh            # the 8B shape, 1,000 prompts, both arms
#   bash benchmarks/device/run_gpu_bench.sh --multi-turn       # BFCL multi-turn first, then that
#   bash benchmarks/device/run_gpu_bench.sh --multi-turn-only  # BFCL multi-turn alone
#   bash benchmarks/device/run_gpu_bench.sh --smoke    # CPU check: one-layer 0.5B shape, 4 prompts
#   bash benchmarks/device/run_gpu_bench.sh --smoke --multi-turn-only  # CPU check, 4 questions
#   bash benchmarks/device/run_gpu_bench.sh --shape qwen2.5-7b --batch-size 64
#
# 1. installs, from the folder of wheels carried beside this script (benchmarks/device/wheels,
#    or $SOMMELIER_WHEELS), only the packages of the generation path that the machine lacks
#    (benchmarks/device/README.md lists them and the `pip download` that fills the folder),
#    and for the multi-turn phase bfcl-eval (without its dependencies: dozens of provider
#    SDKs the simulated APIs never import) and mpmath;
# 2. installs this project without its dependencies (MLflow and the rest are not needed to
#    generate); where pip cannot (no setuptools), it runs from the source tree instead;
# 3. with --multi-turn or --multi-turn-only: bench_bfcl_multi_turn.py, 200 BFCL multi-turn
#    questions with the demo model on CUDA, batch 32 against one conversation at a time.
#    It runs first: it is the short phase, so its figures are written before the long one
#    starts and a time limit on the whole command cannot lose them;
# 4. unless --multi-turn-only: gpu_bench.py, which builds the shape and times both arms
#    (the other arguments pass through to it).
# With $OUT set (the device tool's output folder) each phase's log and JSON figures go there.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
WHEELS=${SOMMELIER_WHEELS:-$HERE/wheels}
PYTHON=${PYTHON:-python3}
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 MLFLOW_DISABLE_TELEMETRY=true
export TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1

single_turn=1 multi_turn=0 smoke=0 mt_questions=200
passed=()
while [ $# -gt 0 ]; do
    case "$1" in
        --multi-turn) multi_turn=1 ;;
        --multi-turn-only) multi_turn=1 single_turn=0 ;;
        --multi-turn-questions) mt_questions=$2; shift ;;
        --smoke) smoke=1; passed+=("$1") ;;
        *) passed+=("$1") ;;
    esac
    shift
done

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
# The multi-turn phase's own: installed without dependencies, so kept apart from the above.
missing_no_deps=""
if [ "$multi_turn" = 1 ]; then
    missing_no_deps=$("$PYTHON" - <<'PY'
import importlib.util
needed = {"bfcl_eval": "bfcl-eval==2026.3.23", "mpmath": "mpmath"}
print(" ".join(dist for module, dist in needed.items() if importlib.util.find_spec(module) is None))
PY
)
fi
for module in torch transformers peft tokenizers safetensors; do
    "$PYTHON" -c "import $module" 2>/dev/null || {
        echo "error: $module is not installed; this machine must already have it" >&2
        exit 3
    }
done
if [ -n "$missing$missing_no_deps" ]; then
    if [ ! -d "$WHEELS" ]; then
        echo "error: missing $missing $missing_no_deps and no wheel folder at $WHEELS;" \
             "fill it as benchmarks/device/README.md says" >&2
        exit 3
    fi
    echo "installing from $WHEELS: $missing $missing_no_deps"
    # shellcheck disable=SC2086  # one word per distribution
    [ -z "$missing" ] || "$PYTHON" -m pip install --quiet --no-index --find-links "$WHEELS" $missing
    # shellcheck disable=SC2086
    [ -z "$missing_no_deps" ] ||
        "$PYTHON" -m pip install --quiet --no-index --no-deps --find-links "$WHEELS" $missing_no_deps
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

# Runs one phase, its output also kept in $OUT/NAME.log when $OUT is set.
phase() {
    local name=$1
    shift
    echo "== $name: $*"
    if [ -n "${OUT:-}" ]; then
        "$@" 2>&1 | tee "$OUT/$name.log"
    else
        "$@"
    fi
}

if [ "$multi_turn" = 1 ]; then
    if [ "$smoke" = 1 ]; then
        mt=(--device cpu --questions 4 --batch-size 4 --max-new-tokens 4
            --prefix-cache-tokens 200000)
    else
        "$PYTHON" -c "import torch, sys; sys.exit(not torch.cuda.is_available())" || {
            echo "no CUDA device: the multi-turn phase needs one GPU (or pass --smoke)" >&2
            exit 3
        }
        # 8M positions bound the prefix cache at 16 GiB in bfloat16 (the demo model keeps
        # 4 layers x 2 x 4 KV heads x 32 dims x 2 bytes = 2 KiB a position): 200
        # conversations of up to 20,000 tokens need at most 4M, so nothing is evicted.
        mt=(--device cuda --questions "$mt_questions" --batch-size 32 --max-new-tokens 16
            --prefix-cache-tokens 8000000)
    fi
    mt+=(--skip-checker)  # the checker is CPU work, measured by the CPU runs
    [ -z "${OUT:-}" ] || mt+=(--json "$OUT/bfcl_multi_turn.json")
    phase bfcl_multi_turn "$PYTHON" "$REPO/benchmarks/bench_bfcl_multi_turn.py" "${mt[@]}"
fi
if [ "$single_turn" = 1 ]; then
    # (the empty-array form: bash before 4.4 calls an empty "${passed[@]}" unbound)
    phase gpu_bench "$PYTHON" "$HERE/gpu_bench.py" ${passed[@]+"${passed[@]}"}
fi
