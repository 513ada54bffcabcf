#!/usr/bin/env bash
# Rewrite constraints.txt from the current .venv after the test suite has passed in it.
# Usage: CARE_UNPINNED=1 bash scripts/setup.sh && .venv/bin/python -m pytest -q && bash scripts/freeze_constraints.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp constraints.txt.XXXXXX)
{
  echo "# Versions the test suite last passed with (CPU, Python 3.11), used by scripts/setup.sh as pip"
  echo "# constraints so a new release on PyPI cannot break a fresh set-up (transformers 5.24 requires a"
  echo "# peft release that did not exist yet). torch is left out: install the build you want first."
  echo "# Refresh: CARE_UNPINNED=1 bash scripts/setup.sh, run the tests, then bash scripts/freeze_constraints.sh."
  .venv/bin/python -m pip freeze --exclude-editable \
    | grep -viE '^(torch|nvidia-|triton|care-retrieval|pip|setuptools|wheel)[=@ ]'
} > "$tmp"
mv "$tmp" constraints.txt
echo "wrote constraints.txt ($(grep -vc '^#' constraints.txt) pins)"
