#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: a virtual environment in .venv with the
# CPU build of PyTorch (installed first, so no CUDA wheels are pulled) and the
# package with every extra, held to the versions in constraints.txt (the set the tests last
# passed with; CARE_UNPINNED=1 takes the newest releases instead).
# Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
VPY=.venv/bin/python
"$VPY" -m pip install -q --upgrade pip
if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
  "$VPY" -m pip install -q "torch==${CARE_TORCH_VERSION:-2.13.0}"
fi
PIN=(-c constraints.txt)
if [ "${CARE_UNPINNED:-0}" = "1" ]; then
  PIN=()
fi
"$VPY" -m pip install -q "${PIN[@]}" -e ".[all,dev]"
"$VPY" -c "import care, torch; print('care', care.__version__, '| torch', torch.__version__)"
